#!/usr/bin/env bash
# test.sh — README command (2): install, build, run every test (Release), then the unit tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer and the fixed-seed smoke fuzzing. Exits non-zero on any failure.
# Results are counted by ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
bash ci/install_deps.sh
bash ci/build.sh build Release
(cd build && ctest --output-on-failure -j "$(nproc)" --timeout 900)
echo "test.sh: Release build and tests done at $(( $(date +%s) - start )) s"
# ---- sanitizers and fuzzing (harness/fuzz/, ci/fuzz_smoke.sh) -----------------------------------------------
# One clang build in build-fuzz/ (ASan + UBSan + libFuzzer instrumentation, -DATTNCHECK_CUDA=OFF: host
# sanitizers cannot see device code) serves both: the unit tests (ctest -L unit; the property and corpus suites
# ran in Release above) and the real libFuzzer targets' smoke fuzzing (ctest -L fuzz, about 6 minutes). The
# default build above uses gcc, where the fuzz targets are replay programs (ctest -L corpus replays the seeds).
# Without clang/libFuzzer (exit 3) the unit tests run under gcc's ASan + UBSan in build-asan/ instead.
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
rc=0
bash ci/fuzz_smoke.sh --unit || rc=$?
if [ $rc = 3 ]; then
  ATTNCHECK_CMAKE_ARGS="-DATTNCHECK_CUDA=OFF ${ATTNCHECK_CMAKE_ARGS:-}" ATTNCHECK_TARGET=unit_tests \
    bash ci/build.sh build-asan Asan
  (cd build-asan && ctest --output-on-failure -j "$(nproc)" -L unit --timeout 900)
elif [ $rc != 0 ]; then
  exit $rc
fi
echo "test.sh: all tests passed in $(( $(date +%s) - start )) s"
