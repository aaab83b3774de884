#!/usr/bin/env bash
# ctest cases of the GPU run kit (docs/gpu_kit.md), run without a GPU:
#   gpu_kit_check.sh pack SRC BUILD BUNDLE   scripts/gpu_bundle.sh packs BUILD (no build) into BUNDLE,
#                                            under 60 MiB
#   gpu_kit_check.sh libs SRC BUNDLE WORK    every ELF of BUNDLE resolves its libraries inside it or
#                                            from the allowed system set; a copy without its
#                                            OpenBLAS is refused, naming the Debian file it fell to
#   gpu_kit_check.sh nogpu SRC BUNDLE OUT    BUNDLE/gpu_check.sh writes its summary with every GPU
#                                            stage "no GPU" and exits 0 (exit 77, skipped, on a
#                                            machine with a GPU: there it runs for minutes); with a
#                                            fake nvidia-smi on a too-old driver it fails every stage
set -uo pipefail
mode=$1 src=$2
fail() {
  echo "FAILED: $*"
  exit 1
}
case "$mode" in
  pack)
    build=$3 bundle=$4
    s=$(date +%s)
    rm -rf "$bundle"  # an earlier, interrupted run's leftovers
    "$src/scripts/gpu_bundle.sh" --from-build "$build" --no-build "$bundle" || fail "gpu_bundle.sh exit $?"
    [ -f "$bundle/payload.tar.xz" ] && [ -x "$bundle/gpu_check.sh" ] && [ -f "$bundle/gpu_tests.tsv" ] ||
      fail "the bundle lacks payload.tar.xz, gpu_check.sh or gpu_tests.tsv"
    kib=$(du -sk "$bundle" | cut -f1)
    ((kib <= 60 * 1024)) || fail "$bundle is $((kib / 1024)) MiB, over 60"
    grep -qv '^#' "$bundle/gpu_tests.tsv" || fail "no test program in gpu_tests.tsv"
    ! grep -q "$build" "$bundle/gpu_tests.tsv" || fail "gpu_tests.tsv names the build folder: it would not move"
    echo "packed in $(($(date +%s) - s)) s: $((kib / 1024)) MiB"
    ;;
  libs)
    bundle=$3 work=$4
    "$src/scripts/check_bundle_libs.sh" "$bundle" || fail "check_bundle_libs.sh refused the bundle"
    # The check must catch a library that falls back to this machine's copy.
    rm -rf "$work"
    mkdir -p "$work"
    tar -C "$work" -xJf "$bundle/payload.tar.xz"
    ls "$work"/lib/libopenblas* >/dev/null 2>&1 || fail "the bundle carries no OpenBLAS"
    rm -f "$work"/lib/libopenblas*
    out=$("$src/scripts/check_bundle_libs.sh" "$work" 2>&1)
    rc=$?
    echo "$out" | tail -3
    ((rc == 1)) || fail "check_bundle_libs.sh exit $rc on a bundle without OpenBLAS (expected 1)"
    grep -q 'libopenblas.* resolves outside the bundle, to /' <<<"$out" ||
      fail "check_bundle_libs.sh did not name the OpenBLAS that resolved outside the bundle"
    rm -rf "$work"
    ;;
  nogpu)
    bundle=$3 out=$4
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
      echo "SKIPPED: this machine has a GPU, where gpu_check.sh runs every stage for minutes"
      exit 77
    fi
    rm -rf "$out"
    "$bundle/gpu_check.sh" "$out"
    rc=$?
    ((rc == 0)) || fail "gpu_check.sh exit $rc without a GPU (expected 0)"
    [ -f "$out/summary.md" ] && [ -f "$out/check.json" ] || fail "no summary.md or check.json in $out"
    n=$(find "$out" -type f | wc -l)
    ((n <= 8)) || fail "$n files in $out, more than 8"
    grep -q '^| info | passed |' "$out/summary.md" || fail "stage info did not pass"
    for stage in tests sanitizer bench ncu train; do
      grep -q "^| $stage | no GPU | 0 | no " "$out/summary.md" || fail "stage $stage does not say no GPU"
    done
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["ok"] and len(d["stages"]) == 6' \
      "$out/check.json" || fail "check.json is not ok with six stages"
    # A GPU whose driver is older than the bundle's CUDA runtime is a failure, not "no GPU": a fake
    # nvidia-smi lists an H100 on a CUDA 11.8 driver.
    fake=$out.fake-smi
    mkdir -p "$fake"
    cat >"$fake/nvidia-smi" <<'SMI'
#!/bin/sh
case "$1" in
  -L) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)" ;;
  --query-gpu=*) echo "NVIDIA H100 80GB HBM3, 520.61.05, 81559 MiB, 1980 MHz" ;;
  *) echo "| NVIDIA-SMI 520.61.05    Driver Version: 520.61.05    CUDA Version: 11.8     |" ;;
esac
SMI
    chmod +x "$fake/nvidia-smi"
    PATH="$fake:$PATH" "$bundle/gpu_check.sh" "$out.old-driver" >/dev/null
    rc=$?
    ((rc == 1)) || fail "gpu_check.sh exit $rc with a driver older than the bundle's runtime (expected 1)"
    for stage in info tests sanitizer bench ncu train; do
      grep -q "^| $stage | failed | .*the driver supports CUDA 11.8, the bundle's runtime is CUDA" \
        "$out.old-driver/summary.md" || fail "stage $stage does not fail naming the old driver"
    done
    rm -rf "$fake" "$out.old-driver"
    ;;
  *) fail "unknown mode $mode" ;;
esac
echo "gpu_kit_check.sh $mode: OK"
