#!/usr/bin/env bash
# test.sh — README command (2): install, build, run every test (Release), then the unit tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer. Exits non-zero on any failure. Results are counted by ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
bash ci/install_deps.sh
bash ci/build.sh build Release
(cd build && ctest --output-on-failure -j "$(nproc)" --timeout 900)
# The sanitizer build covers the unit tests (property and corpus suites run Release above); the CUDA
# kernels are not rebuilt there (-DATTNCHECK_CUDA=OFF): host sanitizers cannot see device code.
ATTNCHECK_CMAKE_ARGS="-DATTNCHECK_CUDA=OFF ${ATTNCHECK_CMAKE_ARGS:-}" ATTNCHECK_TARGET=unit_tests bash ci/build.sh build-asan Asan
(cd build-asan && UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j "$(nproc)" -L unit --timeout 900)
# ---- fuzzing (harness/fuzz/, ci/fuzz_smoke.sh) -------------------------------------------------------------
# The default build above uses gcc, where the fuzz targets are replay programs (ctest -L corpus replays the
# seeds). This builds the real libFuzzer targets with clang + ASan/UBSan in build-fuzz/ and runs the
# fixed-seed smoke fuzzing (ctest -L fuzz, about 3 minutes); it skips with a message when clang/libFuzzer
# is missing.
bash ci/fuzz_smoke.sh
echo "test.sh: all tests passed in $(( $(date +%s) - start )) s"
