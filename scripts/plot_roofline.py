#!/usr/bin/env python3
"""The roofline of `minitrain bench gemm --counters --json FILE` (docs/emulator_counters.md): the
device profile's FP32 and DRAM roofs, a point per ladder rung. Everything on it is MODELLED from
the emulated GPU's exact counters, not measured, and the title says so.

    plot_roofline.py --out roofline.png FILE.json

A hierarchical roofline (Nsight Compute's, with a DRAM and an L1 level), two points per rung: its
arithmetic intensity over the distinct bytes it touches (the DRAM roof's lower bound of traffic,
the same for every rung, so those points sit together) at the DRAM model's GFLOP/s, and over the
bytes its requests move through L1 and shared memory (global sectors x 32 + shared wavefronts x
128: what coalescing and tiling change) at the GFLOP/s of the model that also charges those bytes
at the L1 roof (one 128-byte wavefront per SM per clock). JSON from before the L1 level (no
`l1_intensity`) gets L1 points at FLOP per global byte moved and no L1 roof.
`minitrain plot --roofline FILE` runs this.
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
    l1_bw = float(prof.get("l1_bytes_per_s", 0))

    def l1_x(r):
        return r["l1_intensity"] if "l1_intensity" in r else r["flops"] / max(r["bytes_moved"], 1)

    xs = [r["flops"] / max(r["distinct_bytes"], 1) for r in rungs] + [l1_x(r) for r in rungs]
    lo, hi = min(xs + [peak / bw]) / 4, max(xs + [peak / bw]) * 4
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(grid, [min(peak, x * bw) / 1e9 for x in grid], color="black", lw=1.5,
            label=f"roof: {peak / 1e12:.1f} TFLOP/s FP32, {bw / 1e12:.2f} TB/s DRAM")
    if l1_bw > 0:
        ax.plot(grid, [min(peak, x * l1_bw) / 1e9 for x in grid], color="tab:red", lw=1, ls="--",
                label=f"L1 roof: {l1_bw / 1e12:.1f} TB/s (128 B per SM per clock, modelled)")
    for r in rungs:
        y = r["modelled_gflops"]
        x_dram = r["flops"] / max(r["distinct_bytes"], 1)
        x_l1, y_l1 = l1_x(r), r.get("modelled_l1_gflops", y)
        ax.scatter([x_dram], [y], marker="o", s=18, color="tab:blue")
        ax.scatter([x_l1], [y_l1], marker="x", s=30, color="tab:red")
        ax.annotate(escape(r["rung"]), (x_l1, y_l1), fontsize=7, rotation=30,
                    xytext=(3, 3), textcoords="offset points")
    ax.scatter([], [], marker="o", color="tab:blue", label="FLOP per distinct byte (DRAM lower bound)")
    ax.scatter([], [], marker="x", color="tab:red",
               label="FLOP per L1 byte (sectors x 32 + shared wavefronts x 128), L1-level model")
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
