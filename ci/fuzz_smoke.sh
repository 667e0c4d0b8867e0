#!/usr/bin/env bash
# fuzz_smoke.sh [--build-only] — build the libFuzzer targets with clang in build-fuzz/ and run the fixed-seed
# smoke fuzzing (ctest label `fuzz`: one run per CPU kernel, the parser target, the feedback A/B test).
# ci/test.sh calls it after the gcc test run. Sanitizers: $ATTNCHECK_FUZZ_SANITIZE (default address,undefined;
# "none" for fast campaign builds). Skips (exit 0, with a message) when clang++ or libFuzzer is missing.
#   ci/fuzz_smoke.sh               build + ctest -L fuzz          (about 6 minutes on 2 cores: 7 smoke runs of
#                                  60 s with -j2, the feedback A/B test)
#   ci/fuzz_smoke.sh --build-only  build only (then: ./build/harness/attncheck fuzz --kernel paper --time 120)
# ATTNCHECK_FUZZ_SMOKE=0 skips everything (the clang build costs ~5-10 minutes on 2 cores when cold).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${ATTNCHECK_FUZZ_SMOKE:-1}" = 0 ]; then
  echo "fuzz_smoke: skipped (ATTNCHECK_FUZZ_SMOKE=0)"
  exit 0
fi
if ! command -v clang++ >/dev/null 2>&1; then
  echo "fuzz_smoke: clang++ not found: libFuzzer targets skipped"
  exit 0
fi
san=${ATTNCHECK_FUZZ_SANITIZE:-address,undefined}
flags="-fsanitize=fuzzer-no-link -fno-omit-frame-pointer -g"
[ "$san" != none ] && flags="$flags -fsanitize=$san -fno-sanitize-recover=undefined"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTNCHECK_CUDA=OFF \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" >/dev/null
if ! grep -q 'ATTNCHECK_LIBFUZZER_LINKS:INTERNAL=1' build-fuzz/CMakeCache.txt; then
  echo "fuzz_smoke: clang cannot link -fsanitize=fuzzer (install libclang-rt-14-dev): fuzz smoke skipped"
  exit 0
fi
cmake --build build-fuzz --target attncheck_fuzz_kernel attncheck_fuzz_parser -j "${ATTNCHECK_JOBS:-$(nproc)}"
[ "${1:-}" = --build-only ] && exit 0
start=$(date +%s)
(cd build-fuzz && ctest --output-on-failure -j "$(nproc)" -L fuzz --timeout 600)
echo "fuzz_smoke: passed in $(( $(date +%s) - start )) s"
