#!/usr/bin/env bash
# bundle_libs.sh LIBDIR PROGRAM... — copies into LIBDIR the shared libraries the programs load that come from Debian
# packages a bare GPU host may not have (fmt, benchmark, ...); the driver, the CUDA runtime, cuDNN and glibc/libstdc++
# stay the host's. Used by ci/gpu_bundle.sh and kernels/cuda/mutants/build.sh (run with LD_LIBRARY_PATH=LIBDIR).
set -euo pipefail
dir=$1
shift
mkdir -p "$dir"
ldd "$@" 2>/dev/null | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux|libdl|libpthread|librt|libcuda|libcudart|libcudnn|libnvrtc)[.-]' |
  while read -r lib; do cp -L "$lib" "$dir/"; done
