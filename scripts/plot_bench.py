#!/usr/bin/env python3
"""Draws Google Benchmark JSON results (minitrain bench, or a bench binary's --benchmark_out) as
markdown tables and SVG charts, with the Python standard library only: CI machines and users may
have no matplotlib, and an SVG drawn by hand is a few lines of text that any browser shows.

  python3 scripts/plot_bench.py bench-results/*.json [--out bench-results]

For each FILE.json it writes OUT/FILE.md (one row per benchmark: time and every user counter)
and, for the counters it knows, charts:
  FILE_gflops.svg   GFLOP/s against the square GEMM size, one line per backend (log x)
  FILE_gbps.svg     GB/s against bytes, one line per kernel, the copy as the roof (log-log)
  FILE_busbw.svg    all-reduce bus bandwidth against bytes (log-log)
  FILE_params.svg   optimizer parameters/s, one bar per benchmark
  FILE_samples.svg  training samples/s, one bar per benchmark
Every chart names the device and host from the JSON's context. All markdown also goes to stdout.
"""

import argparse
import json
import math
import os
import re
import sys
import tempfile
from xml.sax.saxutils import escape, quoteattr

# Keys Google Benchmark writes for every run; everything else numeric is a user counter.
STANDARD_KEYS = {
    "name", "family_index", "per_family_instance_index", "run_name", "run_type", "repetitions",
    "repetition_index", "threads", "iterations", "real_time", "cpu_time", "time_unit", "label",
    "error_occurred", "error_message", "aggregate_name", "aggregate_unit", "big_o", "rms",
    "complexity_n",
}
# Name components Google Benchmark appends to say how a run was timed; not part of the case.
TIMING_SUFFIX = re.compile(r"^(real_time|manual_time|process_time|(min_time|min_warmup_time|iterations|"
                           r"repeats|threads):.*)$")
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#bcbd22", "#7f7f7f", "#393b79", "#637939"]
UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
BYTE_SUFFIX = {"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "K": 1 << 10, "M": 1 << 20,
               "G": 1 << 30}


class BenchFileError(Exception):
    pass


# ---- reading ----------------------------------------------------------------------------------

def load(path):
    """(context, rows) of one JSON file; a row is {name, time_s, time, unit, counters, error}.
    With repetitions, the median aggregate stands for the case (else the mean)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise BenchFileError(f"cannot read '{path}': {e.strerror}")
    except json.JSONDecodeError as e:
        raise BenchFileError(f"'{path}' is not JSON ({e}); give Google Benchmark's --benchmark_out file")
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise BenchFileError(f"'{path}' has no \"benchmarks\" list; is it Google Benchmark JSON output?")
    runs = data["benchmarks"]
    aggregates = [b for b in runs if b.get("run_type") == "aggregate"]
    if aggregates:
        names = {b.get("aggregate_name") for b in aggregates}
        pick = "median" if "median" in names else "mean"
        runs = [b for b in aggregates if b.get("aggregate_name") == pick]
    rows = []
    for b in runs:
        name = clean_name(b.get("run_name") or b.get("name", "?"))
        counters = {k: v for k, v in b.items()
                    if k not in STANDARD_KEYS and isinstance(v, (int, float)) and not isinstance(v, bool)}
        unit = b.get("time_unit", "ns")
        time = b.get("real_time", 0.0)
        rows.append({"name": name, "time": time, "unit": unit, "time_s": time * UNIT_SECONDS.get(unit, 1e-9),
                     "counters": counters,
                     "error": b.get("error_message", "error") if b.get("error_occurred") else None})
    return data.get("context", {}), rows


def clean_name(name):
    return "/".join(p for p in name.split("/") if not TIMING_SUFFIX.match(p))


def device_line(context):
    """'device: cuda:0 NVIDIA H100; host: box (16 CPUs @ 3000 MHz)' from the JSON context."""
    parts = []
    for key in ("device", "gpu"):
        v = context.get(key)
        if isinstance(v, str) and v:
            parts.append(f"{key}: {v}")
            break
    host = context.get("host_name", "unknown host")
    cpus = context.get("num_cpus")
    mhz = context.get("mhz_per_cpu")
    detail = ", ".join(x for x in ([f"{cpus} CPUs" + (f" @ {mhz} MHz" if mhz else "")] if cpus else []))
    parts.append(f"host: {host}" + (f" ({detail})" if detail else ""))
    if context.get("library_build_type") == "debug":
        parts.append("Google Benchmark library built as debug")
    return "; ".join(parts)


# ---- markdown ---------------------------------------------------------------------------------

def human(v):
    """3 significant digits with an SI prefix: 1.23G, 456k, 0.0123."""
    if v == 0 or not math.isfinite(v):
        return str(v)
    a = abs(v)
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= scale:
            return f"{v / scale:.3g}{suffix}"
    return f"{v:.3g}"


def format_seconds(t):
    """4 significant digits in the unit that keeps the number below 1000: 212.4 us, 1.123 s."""
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if t >= scale:
            return f"{t / scale:.4g} {unit}"
    return f"{t / 1e-9:.4g} ns"


def format_counter(key, v):
    if key.startswith("pct") or key.endswith("%"):
        return f"{v:.1f}"
    if key == "bytes":
        return format_bytes(v)
    return human(v)


def markdown(title, context, rows):
    keys = []
    for r in rows:
        for k in r["counters"]:
            if k not in keys:
                keys.append(k)
    lines = [f"## {title}", "", device_line(context), "",
             "| " + " | ".join(["benchmark", "time"] + keys) + " |",
             "|---|---:|" + "---:|" * len(keys)]
    for r in rows:
        if r["error"] is not None:
            cells = [r["name"], "error: " + r["error"]] + [""] * len(keys)
        else:
            cells = [r["name"], format_seconds(r["time_s"])] + [
                format_counter(k, r["counters"][k]) if k in r["counters"] else "" for k in keys]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


# ---- series from benchmark names ---------------------------------------------------------------

def size_of(component):
    """The size a name component stands for: '1024', 'square_1024', '64KiB', 'n4096', '128x256x64'
    (geometric mean); None when it is not a size."""
    m = re.fullmatch(r"(?:[A-Za-z]+_?)?(\d+)(KiB|MiB|GiB|K|M|G|B)?", component)
    if m:
        return float(m.group(1)) * BYTE_SUFFIX[m.group(2) or ""]
    m = re.fullmatch(r"\d+(?:x\d+)+", component)
    if m:
        dims = [float(d) for d in component.split("x")]
        return math.prod(dims) ** (1.0 / len(dims))
    return None


def split_series(rows, counter, x_counter=None, x_pattern=None):
    """{series: [(x, y)]}: x from the counter `x_counter` when a row has it, else the first name
    component that is a size (matching `x_pattern` when given); the series is the rest of the name,
    without the first component when every charted row shares it."""
    points = []
    for r in rows:
        if r["error"] is not None or counter not in r["counters"]:
            continue
        parts = r["name"].split("/")
        x, rest = None, []
        for p in parts:
            if x is None and (x_pattern is None or re.fullmatch(x_pattern, p)) and size_of(p) is not None:
                x = size_of(p)
            else:
                rest.append(p)
        if x_counter and x_counter in r["counters"]:
            x = float(r["counters"][x_counter])
        if x is None or x <= 0:
            continue
        points.append((rest, x, float(r["counters"][counter])))
    if points and all(len(rest) > 1 and rest[0] == points[0][0][0] for rest, _, _ in points):
        points = [(rest[1:], x, y) for rest, x, y in points]
    series = {}
    for rest, x, y in points:
        series.setdefault("/".join(rest) or "all", []).append((x, y))
    for pts in series.values():
        pts.sort()
    return series


# ---- SVG ---------------------------------------------------------------------------------------

def nice_step(span, ticks=5):
    raw = span / ticks
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def log_ticks(lo, hi):
    """Powers of 2 over a short range (GEMM sizes), powers of 10 over a long one (bytes)."""
    base = 2 if hi / lo <= 2 ** 16 else 10
    first = math.floor(math.log(lo, base) + 1e-9)
    last = math.ceil(math.log(hi, base) - 1e-9)
    ticks = [base ** e for e in range(first, last + 1)]
    while len(ticks) > 12:
        ticks = ticks[::2]
    return ticks


def format_bytes(v):
    for scale, suffix in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if v >= scale:
            return f"{v / scale:g} {suffix}"
    return f"{v:g} B"


class Chart:
    """An SVG canvas with a plot area, axes and a legend on the right."""
    W, H, LEFT, RIGHT, TOP, BOTTOM = 900, 520, 90, 230, 70, 60

    def __init__(self, title, subtitle, height=None):
        self.H = height or self.H
        self.parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.W}" height="{self.H}" '
            f'viewBox="0 0 {self.W} {self.H}" font-family="sans-serif" font-size="12">',
            f'<rect width="{self.W}" height="{self.H}" fill="white"/>',
            self.text(self.W / 2, 24, title, size=16, anchor="middle", weight="bold"),
            self.text(self.W / 2, 44, subtitle, size=11, anchor="middle", fill="#555"),
        ]
        self.x0, self.x1 = self.LEFT, self.W - self.RIGHT
        self.y0, self.y1 = self.H - self.BOTTOM, self.TOP

    @staticmethod
    def text(x, y, s, size=12, anchor="start", fill="#000", weight="normal", rotate=None):
        transform = f' transform="rotate({rotate} {x:.1f} {y:.1f})"' if rotate is not None else ""
        return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" fill="{fill}" '
                f'font-weight="{weight}"{transform}>{escape(s)}</text>')

    def add(self, element):
        self.parts.append(element)

    def legend(self, entries):
        """entries: [(label, colour, dashed)]"""
        x, y = self.x1 + 20, self.y1 + 10
        for i, (label, colour, dashed) in enumerate(entries):
            yy = y + 18 * i
            dash = ' stroke-dasharray="6 4"' if dashed else ""
            self.add(f'<line x1="{x}" y1="{yy}" x2="{x + 24}" y2="{yy}" stroke="{colour}" stroke-width="2.5"{dash}/>')
            self.add(self.text(x + 30, yy + 4, label, size=11))

    def svg(self):
        return "\n".join(self.parts + ["</svg>"]) + "\n"


def line_chart(title, subtitle, xlabel, ylabel, series, logy=False, roof=None, x_format=None):
    """Lines of (x, y) on log x; `roof` names the series drawn dashed as the ceiling."""
    xs = [x for pts in series.values() for x, _ in pts]
    ys = [y for pts in series.values() for _, y in pts if y > 0 or not logy]
    c = Chart(title, subtitle)
    xlo, xhi = min(xs), max(xs)
    if xlo == xhi:
        xlo, xhi = xlo / 2, xhi * 2
    xticks = log_ticks(xlo, xhi)
    xlo, xhi = min(xlo, xticks[0]), max(xhi, xticks[-1])
    if logy:
        ylo, yhi = min(ys), max(ys)
        if ylo == yhi:
            ylo, yhi = ylo / 2, yhi * 2
        yticks = [10.0 ** e for e in range(math.floor(math.log10(ylo)), math.ceil(math.log10(yhi)) + 1)]
        ylo, yhi = yticks[0], yticks[-1]
        fy = lambda v: c.y0 - (math.log10(v) - math.log10(ylo)) / (math.log10(yhi) - math.log10(ylo)) * (c.y0 - c.y1)
    else:
        ylo, yhi = 0.0, max(ys) if ys and max(ys) > 0 else 1.0
        step = nice_step(yhi)
        yhi = math.ceil(yhi / step) * step
        yticks = [i * step for i in range(int(round(yhi / step)) + 1)]
        fy = lambda v: c.y0 - (v - ylo) / (yhi - ylo) * (c.y0 - c.y1)
    fx = lambda v: c.x0 + (math.log(v) - math.log(xlo)) / (math.log(xhi) - math.log(xlo)) * (c.x1 - c.x0)
    x_format = x_format or (lambda v: f"{v:g}")

    for t in xticks:
        c.add(f'<line x1="{fx(t):.1f}" y1="{c.y0}" x2="{fx(t):.1f}" y2="{c.y1}" stroke="#e5e5e5"/>')
        c.add(c.text(fx(t), c.y0 + 16, x_format(t), size=11, anchor="middle"))
    for t in yticks:
        c.add(f'<line x1="{c.x0}" y1="{fy(t):.1f}" x2="{c.x1}" y2="{fy(t):.1f}" stroke="#e5e5e5"/>')
        c.add(c.text(c.x0 - 6, fy(t) + 4, human(t), size=11, anchor="end"))
    c.add(f'<rect x="{c.x0}" y="{c.y1}" width="{c.x1 - c.x0}" height="{c.y0 - c.y1}" fill="none" stroke="#000"/>')
    c.add(c.text((c.x0 + c.x1) / 2, c.H - 18, xlabel + " (log scale)", anchor="middle"))
    c.add(c.text(22, (c.y0 + c.y1) / 2, ylabel + (" (log scale)" if logy else ""), anchor="middle", rotate=-90))

    entries = []
    for i, (name, pts) in enumerate(sorted(series.items(), key=lambda kv: (kv[0] != roof, kv[0]))):
        colour = "#000" if name == roof else PALETTE[i % len(PALETTE)]
        pts = [(x, y) for x, y in pts if y > 0 or not logy]
        if not pts:
            continue
        dash = ' stroke-dasharray="6 4"' if name == roof else ""
        path = " ".join(f"{fx(x):.1f},{fy(y):.1f}" for x, y in pts)
        c.add(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}>'
              f'<title>{escape(name)}</title></polyline>')
        for x, y in pts:
            c.add(f'<circle cx="{fx(x):.1f}" cy="{fy(y):.1f}" r="3" fill="{colour}"/>')
        entries.append((name + (" (roof)" if name == roof else ""), colour, name == roof))
    c.legend(entries)
    return c.svg()


def bar_chart(title, subtitle, xlabel, bars):
    """Horizontal bars, one per (label, value), on a linear axis from 0."""
    n = len(bars)
    c = Chart(title, subtitle, height=Chart.TOP + Chart.BOTTOM + 20 * n + 10)
    c.x0 = 20 + 7 * max(len(label) for label, _ in bars)  # room for the labels (about 7 px a character)
    c.x1 = c.W - 40
    vmax = max(v for _, v in bars) or 1.0
    step = nice_step(vmax)
    vmax = math.ceil(vmax / step) * step
    fx = lambda v: c.x0 + v / vmax * (c.x1 - c.x0)
    for i in range(int(round(vmax / step)) + 1):
        t = i * step
        c.add(f'<line x1="{fx(t):.1f}" y1="{c.y1}" x2="{fx(t):.1f}" y2="{c.y0}" stroke="#e5e5e5"/>')
        c.add(c.text(fx(t), c.y0 + 16, human(t), size=11, anchor="middle"))
    for i, (label, v) in enumerate(bars):
        y = c.y1 + 5 + 20 * i
        c.add(f'<rect x="{c.x0}" y="{y}" width="{max(fx(v) - c.x0, 0.5):.1f}" height="14" '
              f'fill="{PALETTE[0]}"><title>{escape(label)}: {human(v)}</title></rect>')
        c.add(c.text(c.x0 - 6, y + 11, label, size=11, anchor="end"))
        c.add(c.text(fx(v) + 4, y + 11, human(v), size=10, fill="#333"))
    c.add(f'<line x1="{c.x0}" y1="{c.y0}" x2="{c.x1}" y2="{c.y0}" stroke="#000"/>')
    c.add(f'<line x1="{c.x0}" y1="{c.y1}" x2="{c.x0}" y2="{c.y0}" stroke="#000"/>')
    c.add(c.text((c.x0 + c.x1) / 2, c.H - 18, xlabel, anchor="middle"))
    return c.svg()


def charts(stem, context, rows):
    """{file name: svg text} for the counters this file has."""
    sub = device_line(context)
    out = {}
    gemm = split_series(rows, "GFLOP/s", x_pattern=r"(?:square_)?\d+(?:x\d+)*")
    if gemm:
        out[f"{stem}_gflops.svg"] = line_chart(f"{stem}: GEMM throughput by size", sub,
                                               "matrix size m = n = k", "GFLOP/s", gemm)
    for counter in ("GB/s", "bytes_per_second"):
        mem = split_series(rows, counter, x_counter="bytes")
        if mem:
            scale = 1e-9 if counter == "bytes_per_second" else 1.0
            mem = {k: [(x, y * scale) for x, y in v] for k, v in mem.items()}
            roof = next((k for k in sorted(mem) if "copy" in k.lower()), None)
            out[f"{stem}_gbps.svg"] = line_chart(f"{stem}: memory bandwidth by size", sub, "buffer size", "GB/s",
                                                 mem, logy=True, roof=roof, x_format=format_bytes)
            break
    busbw = split_series(rows, "busbw_GBps", x_counter="bytes")
    if busbw:
        out[f"{stem}_busbw.svg"] = line_chart(f"{stem}: all-reduce bus bandwidth", sub, "bytes per rank",
                                              "busbw GB/s", busbw, logy=True, x_format=format_bytes)
    for counter, suffix, label in (("params/s", "params", "parameters updated per second"),
                                   ("samples/s", "samples", "training samples per second")):
        bars = [(r["name"], float(r["counters"][counter])) for r in rows
                if r["error"] is None and counter in r["counters"]]
        if bars:
            out[f"{stem}_{suffix}.svg"] = bar_chart(f"{stem}: {counter}", sub, label, bars)
    return out


# ---- output ------------------------------------------------------------------------------------

def write_atomically(path, text):
    """A reader sees the old file or the whole new one, never half of it."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", metavar="FILE.json", help="Google Benchmark JSON output")
    p.add_argument("--out", default="bench-results", help="output directory (default bench-results)")
    args = p.parse_args(argv)
    try:
        loaded = [(path, *load(path)) for path in args.files]
    except BenchFileError as e:
        print(f"plot_bench: {e}", file=sys.stderr)
        return 2
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        print(f"plot_bench: cannot create the output directory '{args.out}': {e.strerror}; choose another with --out",
              file=sys.stderr)
        return 2
    written = []
    for path, context, rows in loaded:
        stem = os.path.splitext(os.path.basename(path))[0]
        md = markdown(stem, context, rows)
        print(md)
        target = os.path.join(args.out, stem + ".md")
        write_atomically(target, md)
        written.append(target)
        for name, svg in charts(stem, context, rows).items():
            target = os.path.join(args.out, name)
            write_atomically(target, svg)
            written.append(target)
    print("wrote: " + " ".join(written), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
