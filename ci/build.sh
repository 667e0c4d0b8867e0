#!/usr/bin/env bash
# build.sh [build-dir] [build-type] — configure and build attncheck with Ninja.
#   ci/build.sh                 -> build/       Release
#   ci/build.sh build-asan Asan -> build-asan/  ASan + UBSan (gcc; ci/test.sh uses it only without clang)
# Extra CMake arguments come from $ATTNCHECK_CMAKE_ARGS (e.g. -DATTNCHECK_CUDA=OFF); $ATTNCHECK_TARGET builds
# one target only (unit_tests under ASan).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
type=${2:-Release}
jobs=${ATTNCHECK_JOBS:-$(nproc)}
# shellcheck disable=SC2086
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="$type" ${ATTNCHECK_CMAKE_ARGS:-} >/dev/null
cmake --build "$dir" -j "$jobs" ${ATTNCHECK_TARGET:+--target "$ATTNCHECK_TARGET"}
