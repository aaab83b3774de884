#!/usr/bin/env python3
"""The roofline of `minitrain bench gemm --counters --json FILE` (docs/emulator_counters.md): the
device profile's FP32, DRAM, L2 and L1 roofs, points per ladder rung. Everything on it is MODELLED from
the emulated GPU's exact counters, not measured, and the title says so.

    plot_roofline.py --out roofline.png FILE.json

A hierarchical roofline, as Nsight Compute draws one, with DRAM, L2 and L1 levels: three points
per rung at the same height, the GFLOP/s of the model that charges every level (the longest of
compute, DRAM, L2 and L1), at the rung's arithmetic intensity over the bytes of each level: the
distinct bytes it touches (the DRAM roof's lower bound of traffic, the same for every rung, so
those points sit together), the bytes its loads and stores ask of L2 (each block's distinct load
sectors, or every sector where its reuse does not fit L1, plus the stores), and the bytes its
requests move through L1 and shared memory (global sectors x 32 + shared wavefronts x 128: what
coalescing and tiling change). A rung's point that touches its level's roof names its bound. The
L2 roof is the profile's L2 bytes per clock at the boost clock (published for A100 only, assumed
for the others), the L1 roof one 128-byte wavefront per SM per clock. JSON from before the L2
level (no `l2_intensity`) gets the older picture: DRAM points at the DRAM model's GFLOP/s and L1
points at the L1-level model's (or at FLOP per global byte moved, with no L1 roof, before that).
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
    l2_bw = float(prof.get("l2_bytes_per_s", 0))
    levels = all("l2_intensity" in r and "modelled_levels_gflops" in r for r in rungs)

    def l1_x(r):
        return r["l1_intensity"] if "l1_intensity" in r else r["flops"] / max(r["bytes_moved"], 1)

    xs = [r["flops"] / max(r["distinct_bytes"], 1) for r in rungs] + [l1_x(r) for r in rungs]
    if levels:
        xs += [r["l2_intensity"] for r in rungs if r["l2_intensity"] > 0]
    lo, hi = min(xs + [peak / bw]) / 4, max(xs + [peak / bw]) * 4
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(grid, [min(peak, x * bw) / 1e9 for x in grid], color="black", lw=1.5,
            label=f"roof: {peak / 1e12:.1f} TFLOP/s FP32, {bw / 1e12:.2f} TB/s DRAM")
    if levels and l2_bw > 0:
        assumed = "published" if prof.get("l2_bandwidth_published") else "assumed"
        ax.plot(grid, [min(peak, x * l2_bw) / 1e9 for x in grid], color="tab:green", lw=1, ls="-.",
                label=f"L2 roof: {l2_bw / 1e12:.1f} TB/s (bytes per clock {assumed}, modelled)")
    if l1_bw > 0:
        ax.plot(grid, [min(peak, x * l1_bw) / 1e9 for x in grid], color="tab:red", lw=1, ls="--",
                label=f"L1 roof: {l1_bw / 1e12:.1f} TB/s (128 B per SM per clock, modelled)")
    for r in rungs:
        y = r["modelled_levels_gflops"] if levels else r["modelled_gflops"]
        x_dram = r["flops"] / max(r["distinct_bytes"], 1)
        x_l1, y_l1 = l1_x(r), y if levels else r.get("modelled_l1_gflops", y)
        ax.scatter([x_dram], [y], marker="o", s=18, color="tab:blue")
        if levels and r["l2_intensity"] > 0:
            ax.scatter([r["l2_intensity"]], [y], marker="^", s=22, color="tab:green")
        ax.scatter([x_l1], [y_l1], marker="x", s=30, color="tab:red")
        label = f"{r['rung']} ({r['levels_bound']})" if levels else r["rung"]
        ax.annotate(escape(label), (x_l1, y_l1), fontsize=7, rotation=30,
                    xytext=(3, 3), textcoords="offset points")
    ax.scatter([], [], marker="o", color="tab:blue", label="FLOP per distinct byte (DRAM lower bound)")
    if levels:
        ax.scatter([], [], marker="^", color="tab:green",
                   label="FLOP per L2 byte (block-distinct load sectors + stores)")
    ax.scatter([], [], marker="x", color="tab:red",
               label="FLOP per L1 byte (sectors x 32 + shared wavefronts x 128)"
               + ("" if levels else ", L1-level model"))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s (MODELLED" + (": the longest level" if levels else "") + ")")
    m, n, k = doc.get("shape", ["?", "?", "?"])
    ax.set_title(escape(f"GEMM {m}x{n}x{k} on the {prof.get('name', prof.get('key'))} profile\n"
                        "MODELLED from the emulated GPU's exact counters, not measured"), fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(True, which="both", lw=0.3)
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
