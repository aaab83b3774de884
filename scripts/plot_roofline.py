#!/usr/bin/env python3
"""The roofline of `minitrain bench gemm --counters --json FILE` (docs/emulator_counters.md): the
device profile's FP32 and DRAM roofs, a point per ladder rung. Everything on it is MODELLED from
the emulated GPU's exact counters, not measured, and the title says so.

    plot_roofline.py --out roofline.png FILE.json

Two points per rung: its arithmetic intensity over the distinct bytes it touches (the DRAM roof's
lower bound of traffic, the same for every rung, so those points sit together) and over the bytes
its memory requests move through L1 (sectors x 32: what coalescing and tiling change), both at the
modelled GFLOP/s. `minitrain plot --roofline FILE` runs this.
"""
import argparse
import json
import sys


def escape(text):
    return str(text).replace("$", r"\$")  # matplotlib reads $...$ as mathtext


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="roofline.png")
    ap.add_argument("file")
    a = ap.parse_args()
    try:
        with open(a.file) as f:
            doc = json.load(f)
        prof, rungs = doc["profile"], doc["rungs"]
        peak, bw = float(prof["fp32_flops"]), float(prof["dram_bytes_per_s"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"plot_roofline.py: {a.file} is not the JSON of minitrain bench gemm --counters --json: {e}")
    if not rungs:
        sys.exit(f"plot_roofline.py: {a.file} has no rungs")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5))
    xs = [r["flops"] / max(r["distinct_bytes"], 1) for r in rungs] + \
         [r["flops"] / max(r["bytes_moved"], 1) for r in rungs]
    lo, hi = min(xs + [peak / bw]) / 4, max(xs + [peak / bw]) * 4
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(grid, [min(peak, x * bw) / 1e9 for x in grid], color="black", lw=1.5,
            label=f"roof: {peak / 1e12:.1f} TFLOP/s FP32, {bw / 1e12:.2f} TB/s DRAM")
    for r in rungs:
        y = r["modelled_gflops"]
        x_dram = r["flops"] / max(r["distinct_bytes"], 1)
        x_l1 = r["flops"] / max(r["bytes_moved"], 1)
        ax.scatter([x_dram], [y], marker="o", s=18, color="tab:blue")
        ax.scatter([x_l1], [y], marker="x", s=30, color="tab:red")
        ax.annotate(escape(r["rung"]), (x_l1, y), fontsize=7, rotation=30,
                    xytext=(3, 3), textcoords="offset points")
    ax.scatter([], [], marker="o", color="tab:blue", label="FLOP per distinct byte (DRAM lower bound)")
    ax.scatter([], [], marker="x", color="tab:red", label="FLOP per byte moved through L1 (sectors x 32)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s (MODELLED)")
    m, n, k = doc.get("shape", ["?", "?", "?"])
    ax.set_title(escape(f"GEMM {m}x{n}x{k} on the {prof.get('name', prof.get('key'))} profile\n"
                        "MODELLED from the emulated GPU's exact counters, not measured"), fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, which="both", lw=0.3)
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
