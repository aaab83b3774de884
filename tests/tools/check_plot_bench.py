#!/usr/bin/env python3
"""Runs scripts/plot_bench.py on the fixtures of tests/fixtures/bench/ and checks what it wrote:
the markdown rows (values known from make_bench_fixtures.py; with repetitions, the median's);
that every expected chart is there as a PNG (the 8-byte signature, a real size) and as an SVG
(well-formed XML with an <svg> root whose <text> names the series, the reference, the axes and the
device, and whose reference line is dashed black); that --format svg writes SVGs only; that
without matplotlib the tables are still written and printed and the script exits 3 saying once
what to install; and that a file that is not benchmark JSON is refused with exit 2 and its name.

  check_plot_bench.py PLOT_SCRIPT FIXTURE_DIR WORK_DIR

plot_bench.py runs under the first of $MINITRAIN_PYTHON, this interpreter and /usr/bin/python3
that can import matplotlib. When none can, the checks that need no matplotlib still run, and (if
they pass) the script prints "SKIP: no Python with matplotlib", which CMake reports as skipped."""
import os
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from matplotlib_python import pick_python  # noqa: E402
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
NAMES = ["gemm", "memory", "optimizer", "train-step"]
ROWS = {
    "gemm": ["| gemm/square_1024/naive | 800 us | 2.68k | 5.0 |",
             "| gemm/square_4096/cublas | 2.5 ms | 55k | 100.0 |",
             "| gemm/mlp_b256_w512_fwd_xWt/cublas | 5 us | 26.8 | 100.0 |",
             "| benchmark | time | GFLOP/s | pct_of_ref |"],
    "memory": ["| memory/add_vec4/4KiB | 27.31 ns | 150 | 50.0 | 4 KiB |",
               "| memory/copy/262144KiB | 89.48 us | 3k | 100.0 | 256 MiB |"],
    # the median of 1, 4, 2 ms and of 6, 4, 4.5 ms, not the mean or a single repetition
    "optimizer": ["| optimizer/adam/fused | 2 ms | 500M |", "| optimizer/adam/per_tensor | 4.5 ms | 222M |"],
    "train-step": ["| benchmark | time | loss | params | samples/s |", "| train_step/sgd/w64/b64 | "],
}
# chart -> (texts its SVG must hold, whether it has a reference line)
CHARTS = {
    "gemm_gflops": (["cublas (reference)", "naive", "warptile", "GFLOP/s", "matrix size m = n = k (log scale)",
                     "1024", "gemm: GEMM throughput by size", "gpu: NVIDIA H100 80GB HBM3; host: gpu-box"], True),
    "memory_gbps": (["copy (reference: roof)", "add_vec4", "GB/s (log scale)", "buffer size (log scale)", "256 MiB",
                     "memory: memory bandwidth by size", "gpu: NVIDIA H100 80GB HBM3; host: gpu-box"], True),
    "optimizer_params": (["optimizer/adam/fused", "optimizer/adam/per_tensor", "parameters updated per second",
                          "500M", "device: cpu; host: laptop"], False),
    "train-step_samples": (["train_step/sgd/w64/b64", "train_step/adam/w256/b64", "training samples per second",
                            "host: vm"], False),
}
NEEDS = "pip install matplotlib"
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond




def run(python, script, args):
    return subprocess.run([python, script] + args, capture_output=True, text=True)


def run_without_matplotlib(script, args):
    """plot_bench.py under this interpreter with `import matplotlib` made to fail, whether or not it is installed."""
    boot = ("import runpy, sys; sys.modules['matplotlib'] = None; sys.argv = sys.argv[1:]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")
    return subprocess.run([sys.executable, "-c", boot, script] + args, capture_output=True, text=True)


def read_markdown(out):
    return {n: open(os.path.join(out, n + ".md"), encoding="utf-8").read()
            for n in NAMES if os.path.exists(os.path.join(out, n + ".md"))}


def check_markdown(md, where):
    check(set(md) == set(NAMES), f"{where}: markdown files written: {sorted(md)}, want {NAMES}")
    for n, want in ROWS.items():
        for row in want:
            check(row in md.get(n, ""), f"{where}: {n}.md lacks the row {row!r}:\n{md.get(n, '')}")
    check(md.get("optimizer", "").count("| optimizer/") == 2, f"{where}: optimizer.md: one row per case")
    check("gpu: NVIDIA H100 80GB HBM3; host: gpu-box (16 CPUs @ 3000 MHz)" in md.get("gemm", ""),
          f"{where}: gemm.md does not name the device and host")


def check_png(path):
    data = open(path, "rb").read()
    if not check(data[:8] == PNG_SIGNATURE, f"{path}: no PNG signature (starts {data[:8]!r})"):
        return
    check(len(data) > 10000, f"{path}: {len(data)} bytes, too small for a chart")
    width, height = struct.unpack(">II", data[16:24])  # IHDR, the first chunk
    check(width >= 600 and height >= 250, f"{path}: {width}x{height} pixels, too small to read")


def check_svg(path, want, reference):
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        check(False, f"{path} is not well-formed XML: {e}")
        return
    if not check(root.tag == SVG + "svg", f"{path}: root is {root.tag}, not svg"):
        return
    texts = ["".join(t.itertext()) for t in root.iter(SVG + "text")]
    check(texts, f"{path}: no <text> elements (svg.fonttype is not 'none': text drawn as paths)")
    for w in want:
        check(any(w in t for t in texts), f"{path} has no text with {w!r}: {texts}")
    if reference:
        styles = [(e.get("style") or "").replace(" ", "") for e in root.iter(SVG + "path")]
        check(any("stroke:#000000" in s and "stroke-dasharray" in s for s in styles),
              f"{path}: no dashed black line (the reference)")


def main(script, fixtures, work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    inputs = [os.path.join(fixtures, n + ".json") for n in NAMES]

    # Without matplotlib: the tables still, written and printed; exit 3 saying once what to install.
    bare = os.path.join(work, "no_matplotlib")
    r = run_without_matplotlib(script, inputs + ["--out", bare])
    check(r.returncode == 3, f"without matplotlib: exit {r.returncode}, want 3: {r.stderr}")
    check(r.stderr.count(NEEDS) == 1 and "python3-matplotlib" in r.stderr,
          f"without matplotlib: stderr should say once what to install: {r.stderr!r}")
    check_markdown(read_markdown(bare) if os.path.isdir(bare) else {}, "without matplotlib")
    check(ROWS["memory"][0] in r.stdout, f"without matplotlib: the tables are not printed: {r.stdout!r}")
    if os.path.isdir(bare):
        pictures = [f for f in os.listdir(bare) if not f.endswith(".md")]
        check(not pictures, f"without matplotlib: wrote {pictures}")

    # Bad input: exit 2 naming the file (before matplotlib is looked for).
    bad = os.path.join(work, "not_bench.json")
    with open(bad, "w") as f:
        f.write("{ this is not json")
    for python_run in (lambda a: run(sys.executable, script, a), lambda a: run_without_matplotlib(script, a)):
        r = python_run([bad, "--out", os.path.join(work, "bad")])
        check(r.returncode == 2 and "not_bench.json' is not JSON" in r.stderr,
              f"bad input: exit {r.returncode}, stderr {r.stderr!r}")
        r = python_run([os.path.join(work, "missing.json"), "--out", os.path.join(work, "bad")])
        check(r.returncode == 2 and "cannot read" in r.stderr and "missing.json" in r.stderr,
              f"missing input: exit {r.returncode}, stderr {r.stderr!r}")

    python = pick_python()
    if python is None:
        for f in failures:
            print("FAIL: " + f)
        if failures:
            print(f"{len(failures)} failure(s)")
            return 1
        print("SKIP: no Python with matplotlib (tried $MINITRAIN_PYTHON, " + sys.executable +
              ", /usr/bin/python3); the charts are untested, the tables without matplotlib passed")
        return 0
    print(f"charts drawn by {python}")

    out = os.path.join(work, "out")
    r = run(python, script, inputs + ["--out", out])
    check(r.returncode == 0, f"plot_bench exited {r.returncode}: {r.stderr}")
    check(NEEDS not in r.stderr, f"asks for matplotlib though {python} has it: {r.stderr}")
    check_markdown(read_markdown(out) if os.path.isdir(out) else {}, "with matplotlib")
    written = sorted(os.listdir(out)) if os.path.isdir(out) else []
    for name, (want, reference) in CHARTS.items():
        for ext in ("png", "svg"):
            check(f"{name}.{ext}" in written, f"no {name}.{ext} in {written}")
        if f"{name}.png" in written:
            check_png(os.path.join(out, name + ".png"))
        if f"{name}.svg" in written:
            check_svg(os.path.join(out, name + ".svg"), want, reference)
    pictures = sorted(f for f in written if not f.endswith(".md"))
    check(pictures == sorted(f"{n}.{e}" for n in CHARTS for e in ("png", "svg")),
          f"charts written {pictures}, want {sorted(CHARTS)} as .png and .svg (and no temporaries)")

    # --format svg: SVGs only.
    svg_only = os.path.join(work, "svg_only")
    r = run(python, script, [inputs[0], "--out", svg_only, "--format", "svg"])
    written = sorted(os.listdir(svg_only)) if os.path.isdir(svg_only) else []
    check(r.returncode == 0 and written == ["gemm.md", "gemm_gflops.svg"],
          f"--format svg: exit {r.returncode}, wrote {written}: {r.stderr}")

    for f in failures:
        print("FAIL: " + f)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:4]))
