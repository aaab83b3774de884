#!/usr/bin/env python3
"""Draws Google Benchmark JSON results (minitrain bench, or a bench binary's --benchmark_out) as
markdown tables and matplotlib charts (PNG and SVG).

  python3 scripts/plot_bench.py bench-results/*.json [--out bench-results] [--format png,svg]

For each FILE.json it writes OUT/FILE.md (one row per benchmark: time and every user counter)
and, for the counters it knows, charts, each as FILE_KIND.png and FILE_KIND.svg (--format picks):
  FILE_gflops   GFLOP/s against the square GEMM size, one line per backend (log x); cuBLAS
                (OpenBLAS on a CPU run) dashed black as the reference, cuBLAS TF32 dash-dotted
  FILE_gbps     GB/s against bytes, one line per kernel, the copy dashed black as the reference
                roof (log-log)
  FILE_busbw    all-reduce bus bandwidth against bytes (log-log)
  FILE_params   optimizer parameters/s, one bar per benchmark
  FILE_samples  training samples/s, one bar per benchmark
Every chart names the device and host from the JSON's context. All markdown also goes to stdout.
The SVGs keep their text as <text> (svg.fonttype none), so it can be searched.

Exit status: 0 when everything was written; 2 when an input is not readable benchmark JSON (the
message names the file) or OUT cannot be created; 3 when matplotlib is missing: the markdown
tables are still written and printed, and the script says once what to install (on Debian,
sudo apt-get install python3-matplotlib; elsewhere, pip install matplotlib).
"""

import argparse
import json
import math
import os
import re
import sys
import tempfile

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
UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
BYTE_SUFFIX = {"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "K": 1 << 10, "M": 1 << 20,
               "G": 1 << 30}
NEEDS = ("plot_bench: the charts need matplotlib (the markdown tables are written): on Debian, sudo apt-get "
         "install python3-matplotlib (scripts/setup.sh installs it); elsewhere, pip install matplotlib")
FORMATS = ("png", "svg")


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


# ---- charts (matplotlib) -----------------------------------------------------------------------

def log_ticks(lo, hi, binary=False):
    """Powers of 2 for bytes and over a short range (GEMM sizes), else powers of 10; at most 12."""
    base = 2 if binary or hi / lo <= 2 ** 16 else 10
    first = math.floor(math.log(lo, base) + 1e-9)
    last = math.ceil(math.log(hi, base) - 1e-9)
    ticks = [base ** e for e in range(first, last + 1)]
    while len(ticks) > 12:
        ticks = ticks[::2]
    return base, ticks


def format_bytes(v):
    for scale, suffix in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if v >= scale:
            return f"{v / scale:g} {suffix}"
    return f"{v:g} B"


# How the references are drawn, in the order they are met: black, dashed, then dash-dotted.
REFERENCE_STYLES = [("#000000", (0, (6, 3))), ("#444444", (0, (6, 2, 1.5, 2))), ("#000000", (0, (1.5, 2)))]


def new_figure(plt, title, subtitle, height=5.2):
    fig, ax = plt.subplots(figsize=(9.5, height))
    # The title a fixed distance above the device line, whatever the figure's height.
    ax.set_title(subtitle, fontsize=9, color="#444444", pad=6)
    ax.annotate(title, xy=(0.5, 1.0), xycoords="axes fraction", xytext=(0, 24), textcoords="offset points",
                ha="center", va="bottom", fontsize=14, fontweight="bold")
    return fig, ax


def line_chart(plt, title, subtitle, xlabel, ylabel, series, logy=False, references=None, x_format=None):
    """Lines of (x, y) on log x; `references` maps a series to its legend note ('reference'), and
    those are drawn in black, dashed, first in the legend."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator
    references = references or {}
    fig, ax = new_figure(plt, title, subtitle)
    xs = [x for pts in series.values() for x, _ in pts]
    xlo, xhi = min(xs), max(xs)
    if xlo == xhi:
        xlo, xhi = xlo / 2, xhi * 2
    base, xticks = log_ticks(xlo, xhi, binary=x_format is format_bytes)
    ax.set_xscale("log", base=base)
    ax.xaxis.set_major_locator(FixedLocator(xticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: (x_format or (lambda t: f"{t:g}"))(v)))
    ax.set_xlim(min(xlo, xticks[0]) / (base ** 0.15), max(xhi, xticks[-1]) * (base ** 0.15))
    colours = [c for c in plt.rcParams["axes.prop_cycle"].by_key()["color"]]
    order = sorted(series, key=lambda k: (k not in references, list(references).index(k) if k in references else 0, k))
    plain = 0
    for name in order:
        pts = [(x, y) for x, y in series[name] if y > 0 or not logy]
        if not pts:
            continue
        px, py = [x for x, _ in pts], [y for _, y in pts]
        if name in references:
            colour, dash = REFERENCE_STYLES[list(references).index(name) % len(REFERENCE_STYLES)]
            ax.plot(px, py, color=colour, linestyle=dash, linewidth=2.2, marker="s", markersize=4,
                    label=f"{name} ({references[name]})", zorder=3)
        else:
            ax.plot(px, py, color=colours[plain % len(colours)], linewidth=1.8, marker="o", markersize=4.5,
                    label=name, zorder=2)
            plain += 1
    ys = [y for pts in series.values() for _, y in pts if y > 0]
    if logy:
        ax.set_yscale("log")
        # 1-2-5 ticks over a few decades (one labelled tick a decade is too few to read off)
        decades = math.log10(max(ys) / min(ys)) if ys else 0
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if decades <= 3 else (1.0,)))
        ax.yaxis.set_minor_formatter(NullFormatter())
    else:
        ax.set_ylim(bottom=0, top=(max(ys) if ys else 1.0) * 1.06)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: human(v) if v else "0"))
    ax.set_xlabel(xlabel + " (log scale)")
    ax.set_ylabel(ylabel + (" (log scale)" if logy else ""))
    ax.grid(True, which="major", alpha=0.35)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=9, frameon=False)
    return fig


def bar_chart(plt, title, subtitle, xlabel, bars):
    """Horizontal bars, one per (label, value), first on top, on a linear axis from 0."""
    from matplotlib.ticker import FuncFormatter
    fig, ax = new_figure(plt, title, subtitle, height=1.9 + 0.42 * len(bars))
    labels = [label for label, _ in bars]
    values = [v for _, v in bars]
    ax.barh(range(len(bars)), values, height=0.62, color="#1f77b4")
    ax.set_yticks(range(len(bars)))
    ax.set_yticklabels(labels, fontsize=9)
    ax.invert_yaxis()
    vmax = max(values) if values and max(values) > 0 else 1.0
    ax.set_xlim(0, vmax * 1.15)  # room for the value written after each bar
    for i, v in enumerate(values):
        ax.text(v + vmax * 0.01, i, human(v), va="center", fontsize=8.5, color="#333333")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: human(v) if v else "0"))
    ax.set_xlabel(xlabel)
    ax.grid(True, axis="x", alpha=0.35)
    ax.set_axisbelow(True)
    return fig


def gemm_references(series):
    """cuBLAS is the reference of a GPU run (cuBLAS TF32 that of the tensor-core variants),
    OpenBLAS that of a CPU run: the backends pct_of_ref is measured against."""
    parts = {name: name.split("/") for name in series}
    refs = {}
    for name in sorted(series):
        if "cublas" in parts[name]:
            refs[name] = "reference"
    for name in sorted(series):
        if "cublas_tf32" in parts[name]:
            refs[name] = "TF32 reference"
    if not any("cublas" in p for p in parts.values()):
        for name in sorted(series):
            if "openblas" in parts[name]:
                refs[name] = "reference"
    return refs


def charts(plt, stem, context, rows):
    """{chart name (no extension): matplotlib figure} for the counters this file has."""
    sub = device_line(context)
    out = {}
    gemm = split_series(rows, "GFLOP/s", x_pattern=r"(?:square_)?\d+(?:x\d+)*")
    if gemm:
        out[f"{stem}_gflops"] = line_chart(plt, f"{stem}: GEMM throughput by size", sub,
                                           "matrix size m = n = k", "GFLOP/s", gemm,
                                           references=gemm_references(gemm))
    for counter in ("GB/s", "bytes_per_second"):
        mem = split_series(rows, counter, x_counter="bytes")
        if mem:
            scale = 1e-9 if counter == "bytes_per_second" else 1.0
            mem = {k: [(x, y * scale) for x, y in v] for k, v in mem.items()}
            roof = next((k for k in sorted(mem) if "copy" in k.lower()), None)
            out[f"{stem}_gbps"] = line_chart(plt, f"{stem}: memory bandwidth by size", sub, "buffer size", "GB/s",
                                             mem, logy=True, references={roof: "reference: roof"} if roof else None,
                                             x_format=format_bytes)
            break
    busbw = split_series(rows, "busbw_GBps", x_counter="bytes")
    if busbw:
        out[f"{stem}_busbw"] = line_chart(plt, f"{stem}: all-reduce bus bandwidth", sub, "bytes per rank",
                                          "bus bandwidth GB/s", busbw, logy=True, x_format=format_bytes)
    for counter, suffix, label in (("params/s", "params", "parameters updated per second"),
                                   ("samples/s", "samples", "training samples per second")):
        bars = [(r["name"], float(r["counters"][counter])) for r in rows
                if r["error"] is None and counter in r["counters"]]
        if bars:
            out[f"{stem}_{suffix}"] = bar_chart(plt, f"{stem}: {counter}", sub, label, bars)
    return out


# ---- output ------------------------------------------------------------------------------------

def new_file_mode():
    """What open() would give a new file (0666 less the umask): mkstemp's temporaries are 0600."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_atomically(path, text):
    """A reader sees the old file or the whole new one, never half of it."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=directory)
    try:
        os.chmod(tmp, new_file_mode())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def save_atomically(fig, path, fmt):
    """savefig to a temporary beside `path`, then rename: a picture appears whole or not at all."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        os.chmod(tmp, new_file_mode())
        # No date in the SVG and fixed ids (svg.hashsalt): the same input draws the same file.
        fig.savefig(tmp, format=fmt, dpi=120, bbox_inches="tight", facecolor="white",
                    metadata={"Date": None} if fmt == "svg" else None)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def import_pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed), or None when it is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    plt.rcParams["svg.fonttype"] = "none"  # text stays <text>, searchable, not glyph paths
    plt.rcParams["svg.hashsalt"] = "minitrain"
    if "text.parse_math" in plt.rcParams:
        plt.rcParams["text.parse_math"] = False  # a '$' in a benchmark name is just a '$'
    return plt


def parse_formats(text):
    formats = [f.strip().lower().lstrip(".") for f in text.split(",") if f.strip()]
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise argparse.ArgumentTypeError(f"'{text}': give png, svg or png,svg")
    return list(dict.fromkeys(formats))


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", metavar="FILE.json", help="Google Benchmark JSON output")
    p.add_argument("--out", default="bench-results", help="output directory (default bench-results)")
    p.add_argument("--format", default="png,svg", type=parse_formats,
                   help="chart formats, comma-separated (default png,svg)")
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
    plt = import_pyplot()
    if plt is not None:
        for path, context, rows in loaded:
            stem = os.path.splitext(os.path.basename(path))[0]
            for name, fig in charts(plt, stem, context, rows).items():
                for fmt in args.format:
                    target = os.path.join(args.out, f"{name}.{fmt}")
                    save_atomically(fig, target, fmt)
                    written.append(target)
                plt.close(fig)
    print("wrote: " + " ".join(written), file=sys.stderr)
    if plt is None:
        print(NEEDS, file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
