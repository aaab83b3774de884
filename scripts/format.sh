#!/usr/bin/env bash
# Formats the C++ and CUDA sources with clang-format and the repository's .clang-format.
#
#   scripts/format.sh           rewrite every tracked source in place
#   scripts/format.sh --check   change nothing; list the files that differ and exit 1 if any
#
# Debian's clang-format (14 on Debian 12; scripts/setup.sh installs it). Other major versions may
# break lines differently, so the check names the version it ran.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v clang-format >/dev/null 2>&1; then
  echo "format.sh: clang-format is not installed (Debian: apt install clang-format)" >&2
  exit 2
fi
# The tracked sources; outside a git checkout (a release tarball) the same files by name.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | grep -v '^tests/fuzz/corpus/')
else
  mapfile -t files < <(find . -path ./build -prune -o -path ./tests/fuzz/corpus -prune -o \
    \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -type f -print | sort)
fi
case "${1:-}" in
  --check)
    differ=()
    for f in "${files[@]}"; do
      clang-format --style=file "$f" | cmp -s - "$f" || differ+=("$f")
    done
    if ((${#differ[@]})); then
      echo "format.sh: ${#differ[@]} file(s) differ from $(clang-format --version | head -1); run scripts/format.sh:" >&2
      printf '  %s\n' "${differ[@]}" >&2
      exit 1
    fi
    echo "format.sh: ${#files[@]} files formatted as .clang-format says"
    ;;
  "") clang-format --style=file -i "${files[@]}" ;;
  *) echo "format.sh: unknown argument '$1' (expected --check or nothing)" >&2; exit 2 ;;
esac
