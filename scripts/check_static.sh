#!/usr/bin/env bash
# The static build (Note [static build] in CMakeLists.txt) as its user sees it: build/static's
# minitrain and examples/regression_mlp are not dynamic executables, run with an empty
# environment from a folder of their own, train, and give the same weights as the dynamic cpu
# build of the same tree (same code and OpenBLAS kernels: the bits must agree). Prints their
# stripped sizes.
#   usage: scripts/check_static.sh   (build/static and build/cpu built: scripts/setup.sh static cpu)
set -euo pipefail
cd "$(dirname "$0")/.."
for b in build/static/tools/minitrain build/static/examples/regression_mlp build/cpu/tools/minitrain; do
  [ -x "$b" ] || { echo "check_static: no $b; run scripts/setup.sh static cpu" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for b in minitrain regression_mlp; do
  src=build/static/tools/$b
  [ $b = regression_mlp ] && src=build/static/examples/$b
  strip -o "$work/$b" "$src"
  if ldd "$work/$b" >/dev/null 2>&1; then
    echo "check_static: $src is a dynamic executable:" >&2; ldd "$work/$b" >&2; exit 1
  fi
  echo "[static] $b: $(($(stat -c %s "$work/$b") / 1024)) KiB stripped, not a dynamic executable"
done
# An empty environment: no PATH, no HOME, no LD_LIBRARY_PATH; the data is the built-in synthetic set.
(cd "$work" && env -i ./minitrain train --steps 50 --seed 3 --save static.safetensors >run.log 2>&1) ||
  { cat "$work/run.log" >&2; echo "check_static: the static minitrain failed under env -i" >&2; exit 1; }
(cd "$work" && env -i ./regression_mlp cpu 2 >example.log 2>&1) ||
  { cat "$work/example.log" >&2; echo "check_static: the static example failed under env -i" >&2; exit 1; }
build/cpu/tools/minitrain train --steps 50 --seed 3 --save "$work/dynamic.safetensors" >/dev/null 2>&1
cmp "$work/static.safetensors" "$work/dynamic.safetensors" ||
  { echo "check_static: the static and dynamic builds saved different weights" >&2; exit 1; }
echo "[static] env -i minitrain train and regression_mlp ran; weights equal the dynamic build's"
