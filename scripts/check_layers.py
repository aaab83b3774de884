#!/usr/bin/env python3
"""The layering of DESIGN.md, checked on the includes: a folder includes only itself and the
folders below it (docs/layout.md's diagram), so that no arrow points back up and no two layers
form a circle. Linking checks some of this, a header-only include nothing; this checks all.

  scripts/check_layers.py [ROOT]    exit 1 and one line per include that points up or sideways
"""

import os
import re
import subprocess
import sys

# Each layer and the layers it may include (besides itself). optim/ and data/ stand side by side
# above nn/: neither includes the other. cuda_emu/ is the emulated GPUs' runtime (core/ and the
# info command name it).
BELOW = {
    "core": {"cuda_emu"},
    "kernels": {"core"},
    "nn": {"kernels", "core"},
    "optim": {"nn", "kernels", "core"},
    "data": {"nn", "kernels", "core"},
    "parallel": {"optim", "data", "nn", "kernels", "core"},
    "train": {"parallel", "optim", "data", "nn", "kernels", "core"},
    "infer": {"train", "parallel", "optim", "data", "nn", "kernels", "core"},
    "tools": {"infer", "train", "parallel", "optim", "data", "nn", "kernels", "core", "cuda_emu"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_]+)/', re.M)


def sources(root):
    """The tracked sources of the layers; outside a git checkout (a release tarball) the files."""
    p = subprocess.run(["git", "-C", root, "ls-files", "--", *[f"{d}/" for d in BELOW]],
                       capture_output=True, text=True)
    if p.returncode == 0 and p.stdout.strip():
        names = p.stdout.split()
    else:
        names = [os.path.relpath(os.path.join(dirpath, f), root)
                 for d in BELOW for dirpath, _, fs in os.walk(os.path.join(root, d)) for f in fs]
    return sorted(f for f in names if f.endswith((".h", ".cpp", ".cu", ".cuh")))


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    bad = []
    files = sources(root)
    for path in files:
        layer = path.split("/", 1)[0]
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for m in INCLUDE.finditer(text):
            target = m.group(1)
            if target == layer or target not in BELOW and target != "cuda_emu":
                continue  # its own folder, or not a layer (a third-party header)
            if target not in BELOW[layer]:
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{path}:{line}: {layer}/ includes {target}/, which is not below it "
                           f"(it may include {', '.join(sorted(BELOW[layer])) or 'nothing'})")
    for b in bad:
        print(b)
    if not files:
        print("check_layers.py: no sources found (not a git checkout?)")
        return 1
    print(f"check_layers.py: {len(files)} files, {len(bad)} include(s) pointing up or sideways")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
