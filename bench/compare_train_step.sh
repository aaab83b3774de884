#!/usr/bin/env bash
# CPU training step, minitrain vs PyTorch, same models, same threads, same machine, one run:
# for each case (optimizer, batch, width) runs BUILD_DIR/bench/minitrain_train_step_bench (median of
# repetitions, JSON) and then bench/torch_train_step.py (median of repeats) back to back, so both
# sides of a ratio see the same machine conditions, and prints minitrain time / torch time as a
# markdown table (below 1 = minitrain faster).
#
# torch is timed as installed (its default optimizer loop and foreach=True) and again with
# OMP_WAIT_POLICY=PASSIVE: Debian's torch runs GEMMs on OpenBLAS's own pthread pool while its
# OpenMP threads spin-wait for the next parallel region, and on 2 cores the two pools fight (the
# passive setting is 1.5-4x faster here). The ratio is against the fastest of the four.
#
# On a shared machine other processes distort both sides (OpenMP threads that lose their core
# stall the whole step). Before each case the script waits until the CPUs are idle; after it, it
# computes how much CPU other processes took while the case ran (from /proc/stat minus this
# script's children) and reruns the case, up to 3 times, when that exceeds 5% of the machine. The
# table shows the share that remained ("others").
#
#   bench/compare_train_step.sh [BUILD_DIR (default build/release)] [THREADS (default 2)] [REPS (default 5)]
#   PYTHON=/usr/bin/python3 (a Python with torch); CASES="sgd/w64/b256 ..." to run a subset;
#   MAX_WAIT_S=1200 (total time to wait for idle CPUs)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-build/release}"
threads="${2:-2}"
reps="${3:-5}"
python="${PYTHON:-/usr/bin/python3}"
max_wait="${MAX_WAIT_S:-1200}"
bench="$build/bench/minitrain_train_step_bench"
die() { echo "compare_train_step: $*" >&2; exit 1; }
[[ -x "$bench" ]] || die "no $bench; build minitrain_train_step_bench first"
"$python" -c "import torch" 2>/dev/null || die "$python has no torch (set PYTHON)"
[[ -x /usr/bin/time ]] || die "needs /usr/bin/time (apt-get install time)"
if [[ -z "${CASES:-}" ]]; then
  CASES=""
  for opt in sgd adam; do for b in 256 64; do for w in 64 128 256 512 1024; do
    CASES+="$opt/w$w/b$b "
  done; done; done
fi

ncpu="$(nproc)"
tck="$(getconf CLK_TCK)"
busy_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9; exit}' /proc/stat; }
now() { date +%s.%N; }
# Waits (within the MAX_WAIT_S budget) until the CPUs were < 10% busy over 2 seconds.
waited=0
wait_for_idle() {
  while :; do
    local b0 b1
    b0="$(busy_ticks)"; sleep 2; b1="$(busy_ticks)"
    if awk -v d=$((b1 - b0)) -v t="$tck" -v n="$ncpu" 'BEGIN{exit !(d / t / (2 * n) < 0.10)}'; then
      return 0
    fi
    if (( waited >= max_wait )); then
      echo "  CPUs still busy after waiting ${max_wait}s in all; measuring anyway" >&2
      return 0
    fi
    sleep 10; waited=$((waited + 12))
  done
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "machine: $ncpu cores, load average $(cut -d' ' -f1-3 /proc/loadavg) before;" \
  "$threads threads" >&2
i=0
for c in $CASES; do
  i=$((i + 1))
  for attempt in 1 2 3; do
    wait_for_idle
    b0="$(busy_ticks)"; t0="$(now)"
    OMP_NUM_THREADS="$threads" /usr/bin/time -f "%U %S" -o "$tmp/cpu_mt" \
      "$bench" --threads="$threads" --benchmark_filter="^train_step/$c/" \
      --benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true \
      --benchmark_out="$tmp/mt_$i.json" --benchmark_out_format=json >/dev/null 2>"$tmp/mt_$i.log" \
      || { cat "$tmp/mt_$i.log" >&2; exit 1; }
    /usr/bin/time -f "%U %S" -o "$tmp/cpu_torch" \
      "$python" "$here/torch_train_step.py" --threads "$threads" --repeats "$reps" --cases "$c" \
      --json "$tmp/torch_$i.json" >/dev/null
    OMP_WAIT_POLICY=PASSIVE /usr/bin/time -f "%U %S" -o "$tmp/cpu_torchp" \
      "$python" "$here/torch_train_step.py" --threads "$threads" --repeats "$reps" --cases "$c" \
      --json "$tmp/torchp_$i.json" >/dev/null
    b1="$(busy_ticks)"; t1="$(now)"
    others="$(cat "$tmp/cpu_mt" "$tmp/cpu_torch" "$tmp/cpu_torchp" |
      awk -v d=$((b1 - b0)) -v t="$tck" -v n="$ncpu" -v w="$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b - a}')" \
      '{ours += $1 + $2} END{o = (d / t - ours) / (w * n); printf "%.3f", (o < 0 ? 0 : o)}')"
    echo "[$i] $c: others took $(awk -v o="$others" 'BEGIN{printf "%.0f", 100 * o}')% of the CPUs" >&2
    echo "$c $others" > "$tmp/others_$i"
    awk -v o="$others" 'BEGIN{exit !(o <= 0.05)}' && break
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

"$python" - "$tmp" <<'PY'
import glob, json, os, sys
unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
mt_s, th_s, others, meta = {}, {}, {}, {}
d = sys.argv[1]
for path in glob.glob(os.path.join(d, "mt_*.json")):
    for b in json.load(open(path))["benchmarks"]:
        # the median of the repetitions; the run itself when there is one repetition
        if b.get("aggregate_name") == "median" or b.get("run_type") == "iteration":
            case = b["run_name"].split("train_step/", 1)[1].replace("/real_time", "")
            mt_s[case] = b["real_time"] * unit[b["time_unit"]]
for prefix, tag in (("torch_", ""), ("torchp_", "passive ")):
    for path in glob.glob(os.path.join(d, prefix + "*.json")):
        meta = json.load(open(path))
        for case, r in meta["seconds_per_step"].items():
            th_s.setdefault(case, {}).update({tag + k: v for k, v in r.items()})
for path in glob.glob(os.path.join(d, "others_*")):
    case, share = open(path).read().split()
    others[case] = float(share)
print(f"torch {meta['torch_version']}, {meta['threads']} threads; medians per step. torch as "
      "installed = default optimizer, default OpenMP wait policy; torch best = fastest of "
      "{default, foreach} x {default, OMP_WAIT_POLICY=PASSIVE}\n")
print("| optimizer | batch | width | minitrain (us) | torch as installed (us) | torch best (us) "
      "| torch best is | minitrain / torch as installed | minitrain / torch best | others |")
print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|")
order = lambda c: (["sgd", "adam"].index(c.split("/")[0]), -int(c.split("/")[2][1:]),
                   int(c.split("/")[1][1:]))
for case in sorted(th_s, key=order):
    if case not in mt_s:
        continue
    opt, w, b = case.split("/")
    t = th_s[case]
    best = min(t, key=t.get)
    m = mt_s[case]
    print(f"| {opt} | {b[1:]} | {w[1:]} | {m * 1e6:.1f} | {t['default'] * 1e6:.1f} "
          f"| {t[best] * 1e6:.1f} | {best} | {m / t['default']:.2f} | {m / t[best]:.2f} "
          f"| {100 * others.get(case, 0):.0f}% |")
PY
