#!/usr/bin/env bash
# Builds (or takes from an existing CUDA build) everything a GPU run needs and packs it into DIR, a
# folder that runs on a bare CUDA machine (no apt, no network): docs/gpu_kit.md.
#
#   scripts/gpu_bundle.sh DIR                        configure the gpu-bundle preset (sm_90 only),
#                                                    build what the kit runs, pack it into DIR
#   scripts/gpu_bundle.sh --from-build BUILD DIR     pack an existing CUDA build (e.g. build/release,
#                                                    sm_80;90) instead, building its missing targets
#   scripts/gpu_bundle.sh --from-build BUILD --no-build DIR
#                                                    pack only what BUILD already has (CI's check)
#
# DIR gets payload.tar.xz, which gpu_check.sh unpacks into a temporary folder (a few seconds):
#   bin/       minitrain, the test programs that have gpu-labelled cases, the bench programs; RUNPATH
#              $ORIGIN/../lib, stripped
#   lib/       every shared library they need that a bare CUDA image lacks (ldd: all but glibc's,
#              libstdc++, libgcc_s and the NVIDIA ones), RUNPATH $ORIGIN, stripped
# Unpacked these are several times the 60 MiB a lent machine's carry allows (OpenBLAS alone is
# 36 MiB: kernels for every x86 CPU); xz packs them to about a seventh. --unpacked also leaves bin/
# and lib/ in DIR (for a look; they do not count in the size, and must not be carried).
#   gpu_tests.tsv        one line per test program: program, gtest filter, number of gpu cases, and
#                        the gpu entries it cannot run here (mpiexec / cmake -P ones), from
#                        `ctest -N -L gpu --show-only=json-v1`: no absolute paths, so DIR can move
#   gpu_check.sh, fill_ladder_table.py, torch_train_step.py, gemm_ladder_README.md, BUNDLE.json
#   fixtures/            tests/fixtures (0.5 MiB), which the test programs find through
#                        MINITRAIN_TEST_DATA_DIR (tests/support/test_util.h: test_data_dir())
# The vendor libraries (cuBLAS, cuDNN, NCCL, NVML) are not packed: minitrain opens them at run time
# (core/vendor/vendor_library.cpp) and gpu_check.sh points the loader at the machine's copies.
# Exits 1 when DIR ends up over 60 MiB or a library cannot be resolved.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
log() { printf '[gpu_bundle] %s\n' "$*"; }
die() {
  printf 'gpu_bundle.sh: %s\n' "$*" >&2
  exit 1
}

build="" no_build=0 dir="" unpacked=0
while (($#)); do
  case "$1" in
    --from-build) build=${2:?--from-build needs a build folder}; shift 2 ;;
    --no-build) no_build=1; shift ;;
    --unpacked) unpacked=1; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    -*) die "unknown option '$1' (expected --from-build BUILD, --no-build, --unpacked)" ;;
    *) [ -z "$dir" ] || die "one DIR only ('$dir', then '$1')"; dir=$1; shift ;;
  esac
done
[ -n "$dir" ] || die "usage: scripts/gpu_bundle.sh [--from-build BUILD [--no-build]] DIR"
# DIR is replaced: only an empty folder or an earlier bundle, never a folder of something else.
if [ -d "$dir" ] && [ -n "$(ls -A "$dir")" ] && [ ! -f "$dir/BUNDLE.json" ]; then
  die "$dir exists, is not empty and is not a bundle (no BUNDLE.json): give a new or empty folder"
fi
((no_build == 0)) || [ -n "$build" ] || die "--no-build needs --from-build BUILD"
command -v patchelf >/dev/null || die "patchelf is missing (scripts/setup.sh --deps-only installs it)"
start=$(date +%s)

# ---- configure and build ------------------------------------------------------------------------
if [ -z "$build" ]; then
  build=$src/build/gpu-bundle
  if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  fi
  command -v nvcc >/dev/null || die "no nvcc: the bundle is a CUDA build (sm_90)"
  nvml=()
  if nvml_dir=$("$src/scripts/nvml_header.sh" nvcc); then nvml=("-DNVML_INCLUDE_DIR=$nvml_dir"); fi
  log "configuring preset gpu-bundle (sm_90) in $build"
  (cd "$src" && cmake --preset gpu-bundle "${nvml[@]}" >/dev/null)
fi
build=$(cd "$build" && pwd)
[ -f "$build/CMakeCache.txt" ] || die "$build is not a configured build folder"
grep -q '^CMAKE_CUDA_COMPILER:.*nvcc' "$build/CMakeCache.txt" ||
  die "$build is not a CUDA build (no CMAKE_CUDA_COMPILER in its cache): use the release or gpu-bundle preset on a machine with nvcc"
grep -q '^MINITRAIN_CUDA_EMULATOR:BOOL=ON' "$build/CMakeCache.txt" &&
  die "$build is an emulated-GPU build: its kernels run on CPU threads"
archs=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build/CMakeCache.txt")
case ";$archs;" in
  *";90;"* | *";90-real;"* | *";90a;"* | *";90-virtual;"*) ;;
  *) die "$build compiles CUDA for '$archs', which has no sm_90 (H100/H200)" ;;
esac

# What the kit runs: the command, every bench program, every GoogleTest program (those without gpu
# cases are dropped below).
mapfile -t targets < <(ninja -C "$build" -t targets all 2>/dev/null |
  sed -n 's/^\(minitrain\(_[a-z0-9_]*\(_tests\|_bench\)\)\?\): phony$/\1/p' | sort -u)
((${#targets[@]})) || die "no minitrain targets in $build (not a Ninja build?)"
if ((no_build == 0)); then
  log "building ${#targets[@]} targets in $build"
  cmake --build "$build" --parallel "$(nproc)" --target "${targets[@]}"
fi

# ---- the gpu test list ----------------------------------------------------------------------------
# ctest's JSON has this machine's absolute paths; the list keeps program names and filters only.
tests_json=$(mktemp)
trap 'rm -f "$tests_json"' EXIT
ctest --test-dir "$build" -N -L gpu --show-only=json-v1 >"$tests_json"
rm -rf "$dir"
mkdir -p "$dir/bin" "$dir/lib"
dir=$(cd "$dir" && pwd)
python3 - "$tests_json" "$build" "$dir/gpu_tests.tsv" "$dir/bin/.programs" <<'EOF'
import json, os, sys
tests, build, tsv, programs = sys.argv[1:]
by_program, not_runnable = {}, []
for t in json.load(open(tests))["tests"]:
    cmd = t["command"]
    exe = cmd[0]
    if exe.startswith(build + "/") and any(a.startswith("--gtest_filter=") for a in cmd[1:]):
        by_program.setdefault(os.path.basename(exe), []).append(t["name"])
    else:  # mpiexec or a cmake -P script: needs Open MPI's launcher or the source tree
        not_runnable.append(t["name"] + " (" + os.path.basename(exe) + ")")
# Note [gpu label]'s markers: the same filter gtest_discover_tests selects the gpu cases with.
gpu_filter = "Cuda*:*/Cuda*:*Cuda.*:*/cuda*"
with open(tsv, "w") as f:
    f.write("# program\tgtest_filter\tgpu_cases\n")
    for p in sorted(by_program):
        f.write(f"{p}\t{gpu_filter}\t{len(by_program[p])}\n")
    for n in not_runnable:
        f.write(f"#not-bundled\t{n}\tneeds mpiexec or the source tree's cmake scripts\n")
with open(programs, "w") as f:
    f.write("\n".join(sorted(by_program)) + "\n")
EOF
mapfile -t test_programs <"$dir/bin/.programs"
rm -f "$dir/bin/.programs"

# ---- executables --------------------------------------------------------------------------------
find_exe() { find "$build" -type f -name "$1" -perm -u+x -not -path '*/CMakeFiles/*' | head -1; }
exes=()
for t in "${targets[@]}"; do
  case "$t" in
    *_tests) printf '%s\n' "${test_programs[@]}" | grep -qx "$t" || continue ;;
  esac
  f=$(find_exe "$t")
  if [ -z "$f" ]; then
    ((no_build)) && { log "not built, left out: $t"; continue; }
    die "built $t but cannot find it in $build"
  fi
  cp "$f" "$dir/bin/"
  exes+=("$dir/bin/$t")
done

# A program --no-build found unbuilt leaves the list too, so that gpu_check.sh runs what it has.
awk -F'\t' -v bin="$dir/bin" '/^#/ || system("test -x \"" bin "/" $1 "\"") == 0' "$dir/gpu_tests.tsv" \
  >"$dir/gpu_tests.tsv.new" && mv "$dir/gpu_tests.tsv.new" "$dir/gpu_tests.tsv"

# ---- libraries: what ldd resolves, minus the allowed system set ----------------------------------
# scripts/check_bundle_libs.sh checks the result with the same allowed set.
allowed='^(linux-vdso|ld-linux[-a-z0-9_]*|libc|libm|libdl|libpthread|librt|libutil|libresolv|libanl|libmvec|libstdc\+\+|libgcc_s|libcuda|libnvidia-[a-z0-9-]*)\.so'
declare -A copied=()
copy_deps() {  # ELF: copy every non-allowed library it resolves into lib/ (recursively via ldd)
  local line name path
  while read -r line; do
    name=$(awk '{print $1}' <<<"$line")
    path=$(awk '$2 == "=>" {print $3}' <<<"$line")
    [[ "$name" =~ $allowed ]] && continue
    [ -n "$path" ] && [ "$path" != "not" ] || continue
    [[ "$line" == *"not found"* ]] && die "$1 needs $name, which ldd cannot find here"
    [ -n "${copied[$name]:-}" ] && continue
    copied[$name]=1
    cp -L "$path" "$dir/lib/$name"
    chmod u+w "$dir/lib/$name"
  done < <(ldd "$1" | grep '=>')
}
for e in "${exes[@]}"; do copy_deps "$e"; done
for e in "${exes[@]}"; do
  strip --strip-unneeded "$e"
  patchelf --set-rpath '$ORIGIN/../lib' --force-rpath "$e"
done
for l in "$dir"/lib/*.so*; do
  [ -e "$l" ] || continue
  strip --strip-unneeded "$l"
  patchelf --set-rpath '$ORIGIN' --force-rpath "$l"
done

# ---- pack ------------------------------------------------------------------------------------------
raw_kib=$(du -sk "$dir/bin" "$dir/lib" | awk '{s += $1} END {print s}')
n_libs=$(ls "$dir/lib" | wc -l)
log "packing $((raw_kib / 1024)) MiB of executables and libraries with xz"
tar -C "$dir" -cf - bin lib | xz -T0 -6 >"$dir/payload.tar.xz"
((unpacked)) || rm -rf "$dir/bin" "$dir/lib"

# ---- scripts, data --------------------------------------------------------------------------------
cp "$src/scripts/gpu_check.sh" "$src/scripts/fill_ladder_table.py" "$src/bench/torch_train_step.py" "$dir/"
cp "$src/kernels/gemm/gemm_ladder/README.md" "$dir/gemm_ladder_README.md"
# The test programs read tests/fixtures where MINITRAIN_TEST_DATA_DIR points (gpu_check.sh sets it).
cp -r "$src/tests/fixtures" "$dir/fixtures"
chmod +x "$dir/gpu_check.sh"
size_kib=$(du -sk --exclude=bin --exclude=lib "$dir" | cut -f1)
cuda_version=$(sed -n 's/^set(CMAKE_CUDA_COMPILER_VERSION "\(.*\)")$/\1/p' "$build"/CMakeFiles/*/CMakeCUDACompiler.cmake | head -1)
python3 - "$dir/BUNDLE.json" "$cuda_version" "$archs" "$size_kib" "$raw_kib" \
  "$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)" "${#exes[@]}" "$n_libs" <<'EOF'
import json, sys
out, cuda, archs, kib, raw, commit, exes, libs = sys.argv[1:]
json.dump({"cuda_compiler_version": cuda, "cuda_architectures": archs, "size_kib": int(kib),
           "unpacked_kib": int(raw), "commit": commit, "executables": int(exes),
           "libraries": int(libs)}, open(out, "w"), indent=1)
EOF
log "$dir: ${#exes[@]} executables, $n_libs libraries, $((size_kib / 1024)) MiB ($((raw_kib / 1024)) MiB unpacked), CUDA $cuda_version for $archs, $(($(date +%s) - start)) s"
((size_kib <= 60 * 1024)) || die "$dir is $((size_kib / 1024)) MiB, over the 60 MiB a lent machine's carry allows"
