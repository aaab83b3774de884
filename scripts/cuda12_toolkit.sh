#!/usr/bin/env bash
# Assembles a CUDA 12.4 toolkit in DIR (DIR/bin/nvcc, DIR/include, DIR/lib64, DIR/nvvm) so that CI
# can prove the tree compiles against CUDA 12 as well as 13, without NVIDIA's installer.
#   usage: scripts/cuda12_toolkit.sh DIR        (idempotent: a finished DIR is left as it is)
#
# Where each part comes from, all pinned:
#  - PyPI's NVIDIA wheels: ptxas, libnvvm, libdevice and the crt/ headers (nvidia-cuda-nvcc-cu12),
#    the runtime (headers, libcudart.so.12), CCCL, cuBLAS/cuBLASLt, cuDNN and NCCL (headers + .so).
#  - Debian's nvidia-cuda-toolkit 12.4.131 package (trixie, non-free; downloaded with apt-get into a
#    private apt state and unpacked, never installed): nvcc, cicc, cudafe++, fatbinary, nvlink,
#    bin2c and crt/link.stub. No CUDA 12 wheel on PyPI has these (nvidia-cuda-nvcc-cu12 12.0.76
#    to 12.9.86 carry only ptxas, libnvvm and libdevice), and nvcc cannot compile a .cu without them.
# The wheels ship only libX.so.N; the libX.so links the linker looks for are made here. cuDNN's
# engine libraries (about 900 MB, loaded by libcudnn at run time) are left out: linking needs
# libcudnn.so.9 only.
set -euo pipefail

dir=${1:?usage: scripts/cuda12_toolkit.sh DIR}
log() { printf '[cuda12] %s\n' "$*"; }

# One coherent CUDA 12.4 set (the one PyTorch's cu124 builds pin for cuDNN, NCCL and cuBLAS).
wheels=(
  nvidia-cuda-nvcc-cu12==12.4.131
  nvidia-cuda-runtime-cu12==12.4.127
  nvidia-cuda-cccl-cu12==12.4.127.post1
  nvidia-cublas-cu12==12.4.5.8
  nvidia-cudnn-cu12==9.1.0.70
  nvidia-nccl-cu12==2.21.5
)
deb_package=nvidia-cuda-toolkit
deb_version=12.4.131~12.4.1-2
deb_suite="trixie non-free"  # on the Debian archive this machine's apt already uses (below)

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
stamp=$dir/.minitrain-cuda12
want="layout 2: ${wheels[*]} $deb_package=$deb_version"
if [ -x "$dir/bin/nvcc" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  log "toolkit already assembled in $dir ($want); nothing to do"
  exit 0
fi
start=$SECONDS
cache=$dir/.download
mkdir -p "$cache/wheels" "$cache/apt/lists/partial" "$cache/apt/archives/partial"

python3 -m pip --version >/dev/null 2>&1 || { echo "cuda12_toolkit: needs pip (python3 -m pip); on Debian: apt-get install python3-pip" >&2; exit 1; }

# ---- 1. the wheels (pip skips files already downloaded) ----------------------------------------
log "downloading wheels: ${wheels[*]}"
python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$cache/wheels" "${wheels[@]}"

# ---- 2. the compiler driver from Debian's package, with a private apt state ----------------------
if ! compgen -G "$cache/${deb_package}_*.deb" >/dev/null; then
  # The archive's address is the one the system's own sources give for its Debian release, so
  # that this script names no mirror of its own.
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  archive=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 2>/dev/null |
            awk -v c="$codename" '$2 == c { print $1; exit }')
  if [ -z "$archive" ]; then
    apt-get update -qq
    archive=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 2>/dev/null |
              awk -v c="$codename" '$2 == c { print $1; exit }')
  fi
  [ -n "$archive" ] || { echo "cuda12_toolkit: found no Debian archive for '$codename' in apt's sources" >&2; exit 1; }
  log "downloading $deb_package=$deb_version from $archive $deb_suite"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $archive $deb_suite" > "$cache/apt/sources.list"
  apt_opts=(-o "Dir::Etc::SourceList=$cache/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
            -o "Dir::State::Lists=$cache/apt/lists" -o "Dir::Cache=$cache/apt"
            -o APT::Sandbox::User=root -qq)
  apt-get "${apt_opts[@]}" update
  (cd "$cache" && apt-get "${apt_opts[@]}" download "$deb_package=$deb_version")
fi
deb=$(compgen -G "$cache/${deb_package}_*.deb" | head -n1)

# ---- 3. the toolkit layout NVIDIA's installer gives: targets/x86_64-linux/{include,lib} ---------
target=$dir/targets/x86_64-linux
rm -rf "${dir:?}/bin" "${dir:?}/nvvm" "$target" "${dir:?}/include" "${dir:?}/lib64" "$stamp"
mkdir -p "$dir/bin/crt" "$dir/nvvm/bin" "$target/include" "$target/lib"
ln -s targets/x86_64-linux/include "$dir/include"
ln -s targets/x86_64-linux/lib "$dir/lib64"

log "unpacking the wheels"
python3 - "$dir" "$cache/wheels"/*.whl <<'PY'
# nvidia/<pkg>/include -> include, nvidia/<pkg>/lib -> lib64, nvidia/cuda_nvcc/{bin,nvvm} -> {bin,nvvm};
# file modes kept (ptxas must stay executable); cuDNN: libcudnn.so.9 only.
import os, sys, zipfile
root, wheel_paths = sys.argv[1], sys.argv[2:]
dest = {"include": "targets/x86_64-linux/include", "lib": "targets/x86_64-linux/lib",
        "bin": "bin", "nvvm": "nvvm"}
for path in wheel_paths:
    count = 0
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            parts = info.filename.split("/")
            if len(parts) < 4 or parts[0] != "nvidia" or parts[2] not in dest or info.is_dir():
                continue
            if parts[-1] == "__init__.py" or "__pycache__" in parts:
                continue
            if parts[1] == "cudnn" and parts[2] == "lib" and parts[-1] != "libcudnn.so.9":
                continue
            out = os.path.join(root, dest[parts[2]], *parts[3:])
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with z.open(info) as src, open(out, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
            mode = (info.external_attr >> 16) & 0o777
            os.chmod(out, mode or 0o644)
            count += 1
    print(f"[cuda12]   {os.path.basename(path)}: {count} files")
PY

log "unpacking nvcc, cicc, cudafe++, fatbinary, nvlink from $(basename "$deb")"
debx=$cache/deb
rm -rf "$debx"
mkdir -p "$debx"
dpkg-deb -x "$deb" "$debx"
for tool in cudafe++ fatbinary nvlink bin2c; do cp "$debx/usr/bin/$tool" "$dir/bin/"; done
cp "$debx/usr/lib/nvidia-cuda-toolkit/bin/nvcc" "$dir/bin/"
cp "$debx/usr/lib/nvidia-cuda-toolkit/bin/crt/"*.stub "$dir/bin/crt/"
cp "$debx/usr/lib/nvidia-cuda-toolkit/bin/cicc" "$dir/nvvm/bin/"
rm -rf "$debx"

# nvcc.profile as NVIDIA's 12.x installer writes it (Debian's points at /usr/lib instead).
cat > "$dir/bin/nvcc.profile" <<'EOF'

TOP              = $(_HERE_)/..

NVVMIR_LIBRARY_DIR = $(TOP)/$(_NVVM_BRANCH_)/libdevice

LD_LIBRARY_PATH += $(TOP)/lib:
PATH            += $(TOP)/$(_NVVM_BRANCH_)/bin:$(_HERE_):

INCLUDES        +=  "-I$(TOP)/$(_TARGET_DIR_)/include" $(_SPACE_)

LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/$(_TARGET_DIR_)/lib$(_TARGET_SIZE_)/stubs" "-L$(TOP)/$(_TARGET_DIR_)/lib$(_TARGET_SIZE_)"

CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
EOF

# libX.so -> libX.so.N: what -lX and CMake's find_library look for.
for lib in "$target/lib"/lib*.so.*; do
  name=$(basename "$lib")
  ln -sfn "$name" "$target/lib/${name%%.so.*}.so"
done
# No wheel has the static runtime, yet CMake's CUDA compiler check always links it
# (CMakeDetermineCompilerABI forces CMAKE_CUDA_RUNTIME_LIBRARY=Static); when that check fails, CMake
# knows none of nvcc's implicit include directories and passes -isystem /usr/include, which breaks
# every .cu. So: libcudart_static.a is a linker script naming the shared libcudart.so.12, and
# libcudadevrt.a an empty archive. A build with CMAKE_CUDA_RUNTIME_LIBRARY=Shared (as
# scripts/check_cuda12.sh configures) never links either.
printf 'INPUT(libcudart.so.12)\n' > "$target/lib/libcudart_static.a"
printf '!<arch>\n' > "$target/lib/libcudadevrt.a"
log "made libX.so links, libcudart_static.a (-> libcudart.so.12) and an empty libcudadevrt.a"
echo "$want" > "$stamp"
rm -rf "$cache"  # pip's own cache keeps the wheels; $stamp says the work is done
log "assembled in $dir in $((SECONDS - start)) s ($(du -sh "$dir" | cut -f1)): $("$dir/bin/nvcc" --version | tail -n2 | head -n1)"
