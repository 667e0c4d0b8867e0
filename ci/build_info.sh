#!/usr/bin/env bash
# build_info.sh BUILD_DIR — one line naming what the GPU binaries in BUILD_DIR were built with (CUDA toolkit,
# architectures, cuDNN headers), from its CMake cache. gpu.sh's report gives it for a build folder; gpu_bundle.sh
# writes it to the bundle's BUILD_INFO (a bundle has no CMake cache, and travels to a host whose toolkit may differ).
set -euo pipefail
shopt -s nullglob
dir=$1
cache="$dir/CMakeCache.txt"
[ -f "$cache" ] || { echo "built with: unknown (no $cache)"; exit 0; }
get() { sed -n "s/^$1:[A-Z]*=//p" "$cache" | head -1; }
# The CMake that configured this build names its folder (an older one's may be left beside it).
version="$(get CMAKE_CACHE_MAJOR_VERSION).$(get CMAKE_CACHE_MINOR_VERSION).$(get CMAKE_CACHE_PATCH_VERSION)"
cuda=$(sed -n 's/^set(CMAKE_CUDA_COMPILER_VERSION "\(.*\)")$/\1/p' \
         "$dir/CMakeFiles/$version/CMakeCUDACompiler.cmake" 2>/dev/null || true)
inc=$(get ATTNCHECK_CUDNN_INCLUDE_DIR)
cudnn=
if [ -n "$inc" ] && [ -f "$inc/cudnn_version.h" ]; then
  cudnn=$(awk '/#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) /{v = v (v == "" ? "" : ".") $3} END {print v}' \
            "$inc/cudnn_version.h")
fi
echo "built with: CUDA ${cuda:-unknown (no CUDA compiler in this build)}," \
  "architectures $(get CMAKE_CUDA_ARCHITECTURES), cuDNN headers ${cudnn:-none}"
