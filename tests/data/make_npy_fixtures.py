#!/usr/bin/env python3
"""Regenerates the .npy fixtures read by tests/core/npy_test.cpp, written by real NumPy.

Run from anywhere with a Python that has NumPy (e.g. /usr/bin/python3 tests/data/make_npy_fixtures.py).
The values are arange-based so the test computes them instead of storing them; keep the two in sync.
"""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def save(name, array, version=None):
    path = os.path.join(HERE, name)
    if version is None:
        np.save(path, array)  # np.save picks version 1.0, as minitrain's writer does
    else:
        with open(path, "wb") as f:
            np.lib.format.write_array(f, array, version=version)


# value i - 2.5, row-major: -2.5 -1.5 -0.5 / 0.5 1.5 2.5
save("f32_2x3.npy", (np.arange(6) - 2.5).astype(np.float32).reshape(2, 3))
# value i / 4
save("f64_5.npy", np.arange(5, dtype=np.float64) / 4)
save("f32_scalar.npy", np.array(3.25, dtype=np.float32))
save("f32_empty_0x3.npy", np.zeros((0, 3), dtype=np.float32))
# big-endian, value i + 0.5: a reader that forgets to swap bytes sees garbage
save("f32_be_3x2.npy", (np.arange(6) + 0.5).astype(">f4").reshape(3, 2))
save("f64_be_4.npy", (np.arange(4) - 1.25).astype(">f8"))
# value i * 2, explicit header versions
save("f32_v2_4.npy", np.arange(4, dtype=np.float32) * 2, version=(2, 0))
save("f32_v3_4.npy", np.arange(4, dtype=np.float32) * 2, version=(3, 0))
# rejected with advice
save("f32_fortran_2x3.npy", np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
save("i64_4.npy", np.arange(4, dtype=np.int64))
