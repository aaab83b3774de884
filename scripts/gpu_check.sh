#!/usr/bin/env bash
# The GPU run kit's check (docs/gpu_kit.md): run from a bundle made by scripts/gpu_bundle.sh, on a
# lent GPU machine, in at most 8 minutes on an H100. Writes at most 8 files into OUT and prints
# OUT/summary.md.
#
#   DIR/gpu_check.sh [OUT]        (OUT defaults to ./gpu-results)
#
# Stages, each under its own `timeout`; a failure in one does not stop the others:
#   1 info       minitrain info, nvidia-smi, driver and runtime versions          -> check.json
#   2 tests      every gpu-labelled GoogleTest case, MINITRAIN_REQUIRE_GPU=1        -> check.json
#   3 sanitizer  compute-sanitizer memcheck, racecheck, synccheck on the kernel
#                test programs' gpu cases                                        -> check.json
#   4 bench      minitrain bench gemm (ladder vs cuBLAS at 4096^3 fp32/tf32/bf16)
#                and memory (memory-bound kernels vs device copy)                 -> gemm.json, memory.json
#   5 ncu        each ladder rung at 256^3 under Nsight Compute                   -> ncu.json
#   6 train      train_step/cuda vs PyTorch on the same GPU, fp32 and bf16         -> train_step.json
# Without a GPU (no nvidia-smi, or no device listed) stages 2-6 record "no GPU: <reason>"; stage 1
# still records what it can. A GPU whose driver is older than the bundle's CUDA runtime fails every
# stage with that reason (rebuild the bundle with an older toolkit).
# Exit status: 0 when every stage passed or had no GPU; 1 when a stage failed or timed out;
# 2 on a usage error.
set -uo pipefail
kit=$(cd "$(dirname "$0")" && pwd)
out=${1:-gpu-results}
case "$out" in -h | --help) sed -n '2,22p' "$0"; exit 0 ;; esac
(($# <= 1)) || { echo "usage: gpu_check.sh [OUT]" >&2; exit 2; }
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
t_start=$(date +%s)
# The executables and libraries travel packed (scripts/gpu_bundle.sh): unpack them here, keeping
# bin/ and lib/ side by side for their RUNPATH $ORIGIN/../lib.
if [ -f "$kit/payload.tar.xz" ]; then
  if ! tar -C "$work" -xJf "$kit/payload.tar.xz" 2>"$work/unpack.err"; then
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
      "$kit/payload.tar.xz" "$work" || { cat "$work/unpack.err" >&2; echo "gpu_check.sh: cannot unpack $kit/payload.tar.xz" >&2; exit 1; }
  fi
  bin=$work/bin
else
  bin=$kit/bin
fi
[ -x "$bin/minitrain" ] || { echo "gpu_check.sh: no minitrain in $bin: not a bundle of scripts/gpu_bundle.sh" >&2; exit 2; }
export MINITRAIN_BENCH_DIR=$bin
# Per-stage limits in seconds (sum 465 s, under 8 minutes; an H100 should need far less than each).
T_INFO=${T_INFO:-30} T_TESTS=${T_TESTS:-150} T_SAN=${T_SAN:-90} T_BENCH=${T_BENCH:-80}
T_NCU=${T_NCU:-40} T_TRAIN=${T_TRAIN:-75}
# PyTorch's side of stage 6: five of the CPU comparison's MLP cases (bench/compare_train_step.sh),
# smallest and largest width; minitrain runs all twenty train_step/cuda cases (a second in all).
TRAIN_CASES=${TRAIN_CASES:-sgd/w64/b256,sgd/w1024/b256,adam/w64/b256,adam/w1024/b256,adam/w1024/b64}

# ---- where the vendor libraries are ----------------------------------------------------------------
# core/vendor/vendor_library.cpp dlopens libcublas.so.N, libcublasLt.so.N, libcudnn.so.N,
# libnccl.so.N by soname (LD_LIBRARY_PATH, the executable's RUNPATH, the loader cache), then in the
# folders CMake found them in on the build machine. A lent machine has them as PyPI nvidia-* wheels
# in Python's site-packages (nvidia/cublas/lib, nvidia/cudnn/lib, nvidia/nccl/lib, nvidia/cu13/lib):
# put every such lib folder on LD_LIBRARY_PATH. NVML (libnvidia-ml.so.1) comes with the driver.
vendor_dirs=""
for py in python3 python; do
  command -v "$py" >/dev/null 2>&1 || continue
  while IFS= read -r d; do
    [ -d "$d/nvidia" ] || continue
    while IFS= read -r libdir; do vendor_dirs="${vendor_dirs:+$vendor_dirs:}$libdir"; done < <(
      find "$d/nvidia" -maxdepth 3 -type d -name lib 2>/dev/null | sort)
  done < <("$py" -c 'import site, sys; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null)
  break
done
[ -n "$vendor_dirs" ] && export LD_LIBRARY_PATH="$vendor_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# ---- results ----------------------------------------------------------------------------------------
# Each stage appends "name<TAB>status<TAB>seconds<TAB>detail" to $work/stages.tsv; status is passed,
# failed, timeout or "no GPU".
record() {
  local status=$2
  [ "$status" = "no GPU" ] && [ -n "${unusable:-}" ] && status=failed
  printf '%s\t%s\t%s\t%s\n' "$1" "$status" "$3" "$4" >>"$work/stages.tsv"
  echo "[gpu_check] stage $1: $status ($3 s) $4"
}
# run_limited SECONDS LOG CMD...: the command's status, 124 when it ran out of time.
run_limited() {
  local limit=$1 logf=$2
  shift 2
  timeout --kill-after=5 "$limit" "$@" >>"$logf" 2>&1
}

# ---- is there a GPU? ------------------------------------------------------------------------------
no_gpu=""
if ! command -v nvidia-smi >/dev/null 2>&1; then
  no_gpu="no nvidia-smi on PATH (no NVIDIA driver)"
elif ! timeout 20 nvidia-smi -L >"$work/smi_l.txt" 2>&1 || ! grep -q '^GPU ' "$work/smi_l.txt"; then
  no_gpu="nvidia-smi lists no GPU: $(head -1 "$work/smi_l.txt")"
fi

# A GPU the bundle cannot use (a driver older than its runtime) is a failure, never "no GPU": a run
# on a GPU machine that tested nothing must not look green.
unusable=""

# ---- stage 1: info ----------------------------------------------------------------------------------
s=$(date +%s)
: >"$work/info.log"
run_limited "$T_INFO" "$work/info.log" "$bin/minitrain" info
info_rc=$?
smi=""
if [ -z "$no_gpu" ]; then
  smi=$(timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1)
  timeout 20 nvidia-smi >>"$work/info.log" 2>&1
  # The bundle's CUDA runtime needs a driver at least as new as its major version.
  driver_cuda=$(timeout 20 nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -1)
  bundle_cuda=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cuda_compiler_version"])' "$kit/BUNDLE.json" 2>/dev/null)
  if [ -n "$driver_cuda" ] && [ -n "$bundle_cuda" ] && [ "${driver_cuda%%.*}" -lt "${bundle_cuda%%.*}" ]; then
    unusable="the driver supports CUDA $driver_cuda, the bundle's runtime is CUDA $bundle_cuda: rebuild the bundle with a CUDA ${driver_cuda%%.*} toolkit"
  fi
fi
detail="minitrain info exit $info_rc ($(grep -E '^(CUDA runtime|GPUs:)' "$work/info.log" | cut -c1-240 | tr '\n' ' ')); nvidia-smi: ${smi:-$no_gpu}"
if ((info_rc == 124)); then st=timeout; elif ((info_rc != 0)); then st=failed; else st=passed; fi
[ -n "$unusable" ] && { st=failed; detail+="; $unusable"; }
record info "$st" $(($(date +%s) - s)) "$detail"
# Stages 2-6 see the unusable GPU as no GPU to run on, and record it as failed (below, in record).
[ -n "$unusable" ] && no_gpu=$unusable

# ---- stage 2: the gpu-labelled tests --------------------------------------------------------------
s=$(date +%s)
if [ -n "$no_gpu" ]; then
  record tests "no GPU" 0 "$no_gpu"
else
  : >"$work/tests.log"
  st=passed expected=0 exits=""
  while IFS=$'\t' read -r program filter cases; do
    [[ "$program" == \#* ]] && continue
    left=$((T_TESTS - ($(date +%s) - s)))
    ((left > 5)) || { st=timeout; echo "$program: no time left" >>"$work/tests.log"; continue; }
    (cd "$work" && MINITRAIN_REQUIRE_GPU=1 MINITRAIN_TEST_LABEL=gpu MINITRAIN_TEST_DATA_DIR="$kit/fixtures" \
      run_limited "$left" "$work/tests.log" "$bin/$program" "--gtest_filter=$filter" \
      "--gtest_output=json:$work/gtest_$program.json")
    rc=$?
    expected=$((expected + cases))
    ((rc != 0)) && exits+=" $program=$rc"
    ((rc == 124)) && st=timeout
    ((rc != 0 && rc != 124)) && [ "$st" = passed ] && st=failed
  done <"$kit/gpu_tests.tsv"
  counts=$(python3 - "$work" <<'EOF'
import glob, json, sys
ran = passed = failed = skipped = 0
reasons = {}
for f in glob.glob(sys.argv[1] + "/gtest_*.json"):
    for suite in json.load(open(f)).get("testsuites", []):
        for t in suite.get("testsuite", []):
            ran += 1
            if t.get("failures"):
                failed += 1
            elif t.get("result") == "SKIPPED":
                skipped += 1
            else:
                passed += 1
# gtest's JSON has no skip message: the reason is the line after "file:line: Skipped" in the log.
lines = open(sys.argv[1] + "/tests.log", errors="replace").read().splitlines()
for i, line in enumerate(lines[:-1]):
    if line.endswith(": Skipped"):
        msg = lines[i + 1][:120]
        reasons[msg] = reasons.get(msg, 0) + 1
print(f"ran {ran}, passed {passed}, failed {failed}, skipped {skipped}"
      + ("; skips: " + "; ".join(f"{n}x {m}" for m, n in reasons.items()) if reasons else ""))
EOF
)
  [ "$st" = passed ] && [[ "$counts" != *"failed 0"* ]] && st=failed
  record tests "$st" $(($(date +%s) - s)) "$counts (of $expected listed)${exits:+; non-zero exits:$exits}"
fi

# ---- stage 3: compute-sanitizer ---------------------------------------------------------------------
# The kernel files are exercised by the gpu cases of these three programs (every kernels/*.cu has a
# CUDA instance there); the filter drops the ladder's 1024+ shapes to keep racecheck in time.
s=$(date +%s)
if [ -n "$no_gpu" ]; then
  record sanitizer "no GPU" 0 "$no_gpu"
elif ! command -v compute-sanitizer >/dev/null 2>&1; then
  record sanitizer failed 0 "no compute-sanitizer on PATH"
else
  : >"$work/sanitizer.log"
  st=passed detail=""
  for tool in memcheck racecheck synccheck; do
    for program in minitrain_kernels_tests minitrain_gemm_ladder_tests minitrain_fused_kernels_tests; do
      [ -x "$bin/$program" ] || continue
      left=$(((T_SAN - ($(date +%s) - s)) / 2))
      ((left > 3)) || { st=timeout; detail+=" $tool/$program: no time left;"; continue; }
      echo "== $tool $program" >>"$work/sanitizer.log"
      (cd "$work" && MINITRAIN_TEST_DATA_DIR="$kit/fixtures" run_limited "$left" "$work/sanitizer.log" compute-sanitizer --tool "$tool" \
        --error-exitcode 3 "$bin/$program" "--gtest_filter=${SANITIZER_FILTER:-*/cuda*:Cuda*:*Cuda.*:-*1024*:*2048*:*4096*}")
      rc=$?
      case $rc in
        0) detail+=" $tool/$program: clean;" ;;
        124) st=timeout; detail+=" $tool/$program: timed out;" ;;
        *) st=failed; detail+=" $tool/$program: exit $rc;" ;;
      esac
    done
  done
  record sanitizer "$st" $(($(date +%s) - s)) "$detail"
fi

# ---- stage 4: benchmarks ------------------------------------------------------------------------------
s=$(date +%s)
if [ -n "$no_gpu" ]; then
  record bench "no GPU" 0 "$no_gpu"
else
  : >"$work/bench.log"
  run_limited $((T_BENCH * 2 / 3)) "$work/bench.log" "$bin/minitrain" bench gemm --out "$work/bench" \
    --filter 'gemm/square_4096/' --quick
  rc_g=$?
  run_limited $((T_BENCH / 3)) "$work/bench.log" "$bin/minitrain" bench memory --out "$work/bench" --quick
  rc_m=$?
  cp "$work/bench/gemm.json" "$out/gemm.json" 2>/dev/null
  cp "$work/bench/memory.json" "$out/memory.json" 2>/dev/null
  st=passed
  ((rc_g == 124 || rc_m == 124)) && st=timeout
  ((rc_g != 0 && rc_g != 124 || rc_m != 0 && rc_m != 124)) && st=failed
  table=""
  [ -f "$out/gemm.json" ] && table=$(python3 "$kit/fill_ladder_table.py" "$out/gemm.json" "$kit/gemm_ladder_README.md" --print 2>&1 | tail -12)
  record bench "$st" $(($(date +%s) - s)) "gemm exit $rc_g, memory exit $rc_m"
  printf '%s\n' "$table" >"$work/ladder_table.md"
fi

# ---- stage 5: ncu ---------------------------------------------------------------------------------------
metrics=l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,smsp__thread_inst_executed_per_inst_executed.ratio,sm__warps_active.avg.pct_of_peak_sustained_active
s=$(date +%s)
if [ -n "$no_gpu" ]; then
  record ncu "no GPU" 0 "$no_gpu"
elif ! command -v ncu >/dev/null 2>&1; then
  record ncu failed 0 "no ncu on PATH"
else
  # The first launch of every kernel the 256^3 gemm cases run (each rung, cuBLAS's own): --kernel-id
  # context:stream:name:invocation, here "any context, any stream, any name (regex .), invocation 1"
  # (ncu's own syntax; not yet tried on a GPU: if it profiles one kernel only, the summary's count
  # of kernels says so).
  run_limited "$T_NCU" "$work/ncu.csv" ncu --csv --metrics "$metrics" --kernel-id ::regex:.:1 \
    "$bin/minitrain_gemm_bench" --device=cuda --benchmark_filter='gemm/square_256/' \
    --benchmark_min_time=0.001s
  rc=$?
  python3 - "$work/ncu.csv" "$out/ncu.json" "$metrics" <<'EOF'
import csv, json, sys
src, dst, metrics = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
rows = [l for l in open(src, errors="replace") if l.startswith('"')]
kernels = {}
for r in csv.DictReader(rows):
    name = r.get("Kernel Name", "?")
    kernels.setdefault(name, {})[r.get("Metric Name", "?")] = r.get("Metric Value")
json.dump({"shape": "256x256x256 (gemm/square_256 of minitrain_gemm_bench)", "metrics": metrics,
           "ncu": kernels,
           # Slot for the emulator's counters of the same launches (another issue's work): filled
           # by that work, never here.
           "emulator_counts": None}, open(dst, "w"), indent=1)
print(len(kernels))
EOF
  n=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["ncu"]))' "$out/ncu.json" 2>/dev/null || echo 0)
  if ((rc == 124)); then st=timeout; elif ((rc != 0)) || ((n == 0)); then st=failed; else st=passed; fi
  record ncu "$st" $(($(date +%s) - s)) "ncu exit $rc, $n kernels measured"
fi

# ---- stage 6: the training step against PyTorch -------------------------------------------------------
s=$(date +%s)
if [ -n "$no_gpu" ]; then
  record train "no GPU" 0 "$no_gpu"
else
  : >"$work/train.log"
  run_limited $((T_TRAIN / 3)) "$work/train.log" "$bin/minitrain_train_step_bench" \
    --benchmark_filter='train_step/cuda/' --benchmark_min_time=0.05s \
    --benchmark_out="$work/train_minitrain.json" --benchmark_out_format=json
  rc_mt=$?
  rc_t=0
  for dtype in fp32 bf16; do
    run_limited $((T_TRAIN / 3)) "$work/train.log" python3 "$kit/torch_train_step.py" --device cuda \
      --dtype "$dtype" --repeats 3 --cases "$TRAIN_CASES" --json "$work/train_torch_$dtype.json"
    r=$?
    ((r != 0)) && rc_t=$r
  done
  python3 - "$work" "$out/train_step.json" <<'EOF'
import json, os, sys
w, dst = sys.argv[1:]
def load(n):
    p = os.path.join(w, n)
    return json.load(open(p)) if os.path.exists(p) else None
json.dump({"minitrain": load("train_minitrain.json"), "torch_fp32": load("train_torch_fp32.json"),
           "torch_bf16": load("train_torch_bf16.json")}, open(dst, "w"), indent=1)
EOF
  if ((rc_mt == 124 || rc_t == 124)); then st=timeout; elif ((rc_mt != 0 || rc_t != 0)); then st=failed; else st=passed; fi
  record train "$st" $(($(date +%s) - s)) "minitrain exit $rc_mt, torch exit $rc_t"
fi

# ---- summary ------------------------------------------------------------------------------------------
total=$(($(date +%s) - t_start))
python3 - "$work" "$out" "$total" "${vendor_dirs:-none}" <<'EOF'
import json, os, sys
work, out, total, vendor = sys.argv[1:]
stages = []
for line in open(os.path.join(work, "stages.tsv")):
    name, status, seconds, detail = line.rstrip("\n").split("\t", 3)
    stages.append({"stage": name, "status": status, "seconds": int(seconds), "detail": detail})
def tail(n, k=40):
    p = os.path.join(work, n)
    return open(p, errors="replace").read().splitlines()[-k:] if os.path.exists(p) else []
ok = all(s["status"] in ("passed", "no GPU") for s in stages)
json.dump({"ok": ok, "seconds": int(total), "vendor_library_dirs": vendor, "stages": stages,
           "logs": {n: tail(n + ".log") for n in ("info", "tests", "sanitizer", "bench", "train")}},
          open(os.path.join(out, "check.json"), "w"), indent=1)
md = ["# gpu_check summary", "", f"{total} s in all (unpacking included); vendor library folders: {vendor}", "",
      "| stage | status | s | detail |", "|---|---|---|---|"]
md += [f"| {s['stage']} | {s['status']} | {s['seconds']} | {s['detail'].replace('|', '/')} |"
       for s in stages]
lt = os.path.join(work, "ladder_table.md")
if os.path.exists(lt) and open(lt).read().strip():
    md += ["", "## GEMM ladder at 4096^3", "", open(lt).read().strip()]
md += ["", "Overall: " + ("OK (every stage passed or had no GPU)" if ok else "FAILED")]
open(os.path.join(out, "summary.md"), "w").write("\n".join(md) + "\n")
EOF
cat "$out/summary.md"
python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["ok"] else 1)' "$out/check.json"
