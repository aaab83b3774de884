#!/usr/bin/env python3
"""Writes the known reproducers of issue 12 into regressions/<target>/ (run from anywhere).

Each file is an input that crashed, overflowed or exhausted memory in a reader; the fuzz_X.regression
ctests run every one on each CI run, so a fix that regresses shows up by name. Reproducers the
fuzzers find later are saved next to these by hand (copy the crash-* file, give it a name that says
what goes wrong) and need no entry here.
"""
import json
import pathlib
import struct

HERE = pathlib.Path(__file__).resolve().parent / "regressions"


def npy(header: str) -> bytes:
    """A .npy 1.0 file with `header` as its dict (no data: every case fails in the header)."""
    text = header.encode("latin-1") + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text


def safetensors(header: str, data: bytes = b"") -> bytes:
    text = header.encode()
    return struct.pack("<Q", len(text)) + text + data


def write(target: str, name: str, content: bytes) -> None:
    d = HERE / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(content)


# ---- npy ----
# Each '[' is one level of HeaderParser::parse_sequence recursion: 15,000 of them overflow the stack.
depth = 15_000
write("npy", "shape_nested_15000_brackets.npy",
      npy("{'descr': '<f4', 'fortran_order': False, 'shape': " + "[" * depth + "]" * depth + ", }"))
# numpy_type_name turns the size digits into bits with atoi(size) * 8: 2^28 * 8 overflows int
# (UBSan: signed integer overflow); 2^62 is the spelling, out of atoi's range altogether.
write("npy", "descr_size_times_8_overflows_f268435456.npy",
      npy("{'descr': '<f268435456', 'fortran_order': False, 'shape': (1,), }"))
write("npy", "descr_size_out_of_int_range_f4611686018427387904.npy",
      npy("{'descr': '<f4611686018427387904', 'fortran_order': False, 'shape': (1,), }"))
# Shapes whose element count does not fit in int64: directly, and with a 0 extent after the
# overflow (0 elements in all, but a running product 2^62 * 4 wraps on the way).
write("npy", "shape_product_overflows_int64.npy",
      npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }"))
write("npy", "shape_product_overflows_int64_before_zero.npy",
      npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4, 0), }"))

# ---- safetensors ----
# nlohmann's parser is iterative, but dump() (used to quote a bad value in the error message)
# recurses once per level: 100,000 nested arrays as a tensor's description overflow the stack.
depth = 100_000
write("safetensors", "entry_nested_100000_arrays.safetensors",
      safetensors('{"w": ' + "[" * depth + "]" * depth + "}"))
write("safetensors", "metadata_nested_100000_arrays.safetensors",
      safetensors('{"__metadata__": ' + "[" * depth + "]" * depth + "}"))
# Shapes whose element count does not fit in int64 (see the npy cases).
write("safetensors", "shape_product_overflows_int64.safetensors",
      safetensors(json.dumps({"w": {"dtype": "F32", "shape": [4611686018427387904, 4],
                                    "data_offsets": [0, 0]}})))
write("safetensors", "shape_product_overflows_int64_before_zero.safetensors",
      safetensors(json.dumps({"w": {"dtype": "F32", "shape": [4611686018427387904, 4, 0],
                                    "data_offsets": [0, 0]}})))

# ---- csv (first line: the target columns, see fuzz_csv.cpp) ----
# The reader sizes its buffers as (newlines in the file) x (columns): one data row of C columns
# followed by N blank lines asks for 4*C*N bytes. The case (a million blank lines, 74.5
# GiB) is too big for git; 8,100 columns and 40,000 blank lines (85 KB) ask for 1.2 GiB, over
# the fuzzers' -malloc_limit_mb=1024, so this smaller file trips the same bug.
alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+*/=()[]{}<>.:;!?@#$%&^~|`'\\"
names = [a + b for a in alphabet for b in alphabet][:8_100]
names[-1] = "y"
write("csv", "one_row_then_40000_blank_lines_8100_columns.csv",
      ("y\n" + ",".join(names) + "\n" + ",".join(["0"] * len(names)) + "\n" + "\n" * 40_000).encode())

# ---- config ----
# Both spellings of one key: the reader accepted both and the last silently won.
write("config", "batch_size_given_twice.toml", b"batch-size = 8\nbatch_size = 16\n")
