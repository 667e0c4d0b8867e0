#!/usr/bin/env bash
# gpu_bundle.sh — builds the GPU binaries on this machine (it has the CUDA toolkit, maybe no GPU; the Debian
# packages come from ci/install_deps.sh) and packs them, with the shared libraries a bare GPU host lacks, into one
# folder that ci/gpu.sh runs from there:
#   bash ci/gpu_bundle.sh [BUNDLE]          default BUNDLE = gpu-run (ignored by git)
#   # copy the working tree + BUNDLE to the GPU host, then there:
#   ATTNCHECK_GPU_SKIP_BUILD=1 ATTNCHECK_GPU_BUILD=gpu-run bash ci/gpu.sh
# Builds: build-gpu (g++, CUDA sm_90) and, where clang has libFuzzer, build-fuzz-gpu (the fuzz target with the
# CUDA kernels linked in). ATTNCHECK_CUDA_ARCH overrides 90. Binaries are stripped (the bundle travels).
# Libraries: whatever ldd resolves outside the CUDA driver/toolkit and glibc/libstdc++ (fmt, benchmark, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=${1:-gpu-run}
arch=${ATTNCHECK_CUDA_ARCH:-90}
bash ci/install_deps.sh  # a fresh machine has none of the Debian packages (Eigen, RapidCheck, ...) CMake needs
ATTNCHECK_CMAKE_ARGS="-DATTNCHECK_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=$arch ${ATTNCHECK_CMAKE_ARGS:-}" \
  bash ci/build.sh build-gpu Release
fuzz_bin=
if [ -e "$(clang -print-file-name=libclang_rt.fuzzer-x86_64.a 2>/dev/null)" ]; then
  cmake -S . -B build-fuzz-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DATTNCHECK_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    -DCMAKE_CUDA_HOST_COMPILER=g++ >/dev/null
  cmake --build build-fuzz-gpu -j"$(nproc)" --target attncheck_fuzz_kernel
  fuzz_bin=build-fuzz-gpu/harness/fuzz/attncheck_fuzz_kernel
fi

rm -rf "$bundle"
mkdir -p "$bundle/kernels/cuda" "$bundle/harness/fuzz" "$bundle/lib"
for b in bench_attention bench_forward_many cuda_kernels_test cudnn_test mma_probe_test device_check_test; do
  [ -x "build-gpu/kernels/cuda/$b" ] && install -s "build-gpu/kernels/cuda/$b" "$bundle/kernels/cuda/$b"
done
install -s build-gpu/harness/attncheck "$bundle/harness/attncheck"
[ -n "$fuzz_bin" ] && install -s "$fuzz_bin" "$bundle/harness/fuzz/attncheck_fuzz_kernel"
bash ci/build_info.sh build-gpu >"$bundle/BUILD_INFO"  # quoted in gpu.sh's report
# Shared libraries from Debian packages the GPU host may not have (the driver, CUDA runtime and libc stay theirs).
mapfile -t programs < <(find "$bundle" -type f -perm -u+x)
bash ci/bundle_libs.sh "$bundle/lib" "${programs[@]}"
echo "gpu_bundle.sh: $(du -sh "$bundle" | cut -f1) in $bundle ($(ls "$bundle/lib" | tr '\n' ' '))"
