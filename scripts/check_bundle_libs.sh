#!/usr/bin/env bash
# Checks that a GPU bundle (scripts/gpu_bundle.sh) needs nothing from this machine but the allowed
# system set: for every ELF file in DIR, `ldd` run with an empty environment (no LD_LIBRARY_PATH)
# must resolve each library either to a file inside DIR or to glibc's libraries, libstdc++,
# libgcc_s or the dynamic loader, which every CUDA image has. A library that resolves to
# /usr/lib/x86_64-linux-gnu/libopenblas.so.0 (say) is a failure: the lent machine has no such file.
# The NVIDIA driver's libcuda/libnvidia-* are allowed too (the static CUDA runtime opens libcuda at
# run time; nothing links it). Prints one line per offending library; exits 1 if there is any.
#   scripts/check_bundle_libs.sh DIR
set -euo pipefail
dir=${1:?usage: scripts/check_bundle_libs.sh DIR}
dir=$(cd "$dir" && pwd)
# A packed bundle: check its payload as gpu_check.sh unpacks it (bin/ and lib/ side by side).
if [ -f "$dir/payload.tar.xz" ]; then
  unpacked=$(mktemp -d)
  trap 'rm -rf "$unpacked"' EXIT
  tar -C "$unpacked" -xJf "$dir/payload.tar.xz"
  dir=$unpacked
fi
allowed='^(linux-vdso|ld-linux[-a-z0-9_]*|libc|libm|libdl|libpthread|librt|libutil|libresolv|libanl|libmvec|libstdc\+\+|libgcc_s|libcuda|libnvidia-[a-z0-9-]*)\.so'
elves=0 bad=0
while IFS= read -r -d '' f; do
  head -c 4 "$f" | grep -q $'^\x7fELF' || continue
  elves=$((elves + 1))
  while IFS= read -r line; do
    name=$(awk '{print $1}' <<<"$line")
    [[ "$name" =~ $allowed ]] && continue
    if [[ "$line" == *"not found"* ]]; then
      echo "$f: $name not found"
      bad=$((bad + 1))
      continue
    fi
    path=$(awk '$2 == "=>" {print $3}' <<<"$line")
    [ -n "$path" ] || continue
    case "$(readlink -f "$path")" in
      "$dir"/*) ;;
      *)
        echo "$f: $name resolves outside the bundle, to $path"
        bad=$((bad + 1))
        ;;
    esac
  done < <(env -i /usr/bin/ldd "$f" 2>&1 | grep -E '=>|not found')
done < <(find "$dir" -type f -print0)
((elves > 0)) || { echo "check_bundle_libs.sh: no ELF file in $dir"; exit 1; }
if ((bad)); then
  echo "check_bundle_libs.sh: $bad libraries of $elves ELF files in $dir resolve outside it"
  exit 1
fi
echo "check_bundle_libs.sh: $elves ELF files in $dir resolve every library inside it or from the allowed system set"
