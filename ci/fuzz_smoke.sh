#!/usr/bin/env bash
# fuzz_smoke.sh [--build-only] [--unit] — the clang sanitizer build in build-fuzz/ (ASan + UBSan + libFuzzer's
# instrumentation): builds the libFuzzer targets and runs the fixed-seed smoke fuzzing (ctest label `fuzz`: one
# run per CPU kernel, the parser target, the feedback A/B test).
#   ci/fuzz_smoke.sh               build + ctest -L fuzz          (about 6 minutes on 2 cores: 7 smoke runs of
#                                  60 s with -j2, the feedback A/B test on a sanitizer-free build in build-fuzz-ab/)
#   ci/fuzz_smoke.sh --unit        also builds the unit tests in the same tree and runs them first (ctest -L unit,
#                                  under ASan + UBSan): ci/test.sh's sanitizer step, one sanitizer build for both
#   ci/fuzz_smoke.sh --build-only  build only (then: ./build/harness/attncheck fuzz --kernel paper --time 120)
# Sanitizers: $ATTNCHECK_FUZZ_SANITIZE (default address,undefined; "none" for fast campaign builds).
# Where clang++ or libFuzzer is missing it says so and exits 0, or 3 with --unit (ci/test.sh then runs the unit
# tests under gcc's sanitizers instead). ATTNCHECK_FUZZ_SMOKE=0 skips the fuzzing (the unit tests still run).
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=0 unit=0
for a in "$@"; do
  case "$a" in
    --build-only) build_only=1 ;;
    --unit) unit=1 ;;
    *) echo "fuzz_smoke: unknown option $a (--build-only, --unit)" >&2; exit 2 ;;
  esac
done
skip() {  # skip <why>: no libFuzzer build possible here
  echo "fuzz_smoke: $1: fuzz smoke skipped"
  [ $unit = 1 ] && exit 3
  exit 0
}
if [ "${ATTNCHECK_FUZZ_SMOKE:-1}" = 0 ] && [ $unit = 0 ]; then
  echo "fuzz_smoke: skipped (ATTNCHECK_FUZZ_SMOKE=0)"
  exit 0
fi
command -v clang++ >/dev/null 2>&1 || skip "clang++ not found"
san=${ATTNCHECK_FUZZ_SANITIZE:-address,undefined}
flags="-fsanitize=fuzzer-no-link -fno-omit-frame-pointer -gline-tables-only"  # line tables: symbolised traces, less compile time
[ "$san" != none ] && flags="$flags -fsanitize=$san -fno-sanitize-recover=undefined"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTNCHECK_CUDA=OFF \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" >/dev/null
grep -q 'ATTNCHECK_LIBFUZZER_LINKS:INTERNAL=1' build-fuzz/CMakeCache.txt ||
  skip "clang cannot link -fsanitize=fuzzer (install libclang-rt-14-dev)"
targets=(attncheck_fuzz_kernel attncheck_fuzz_parser)
[ $unit = 1 ] && targets+=(unit_tests)
cmake --build build-fuzz --target "${targets[@]}" -j "${ATTNCHECK_JOBS:-$(nproc)}"
[ $build_only = 1 ] && exit 0
if [ $unit = 1 ]; then
  (cd build-fuzz && ctest --output-on-failure -j "$(nproc)" -L unit --timeout 900)
  # The checkout's build/harness/attncheck finds this libFuzzer build from any directory (beside its own build
  # folder): `attncheck fuzz` looked in the current directory's build-fuzz/ only.
  # ATTNCHECK_FUZZER unset: it would be found first, and the step would test nothing.
  if [ -x build/harness/attncheck ]; then
    root=$PWD away=$(mktemp -d)
    st=0  # set -e: the subshell's failure is read here, not the end of the script
    (cd "$away" && env -u ATTNCHECK_FUZZER "$root/build/harness/attncheck" fuzz --kernel oracle --property finite \
       --time 1 --findings findings >log 2>&1) || st=$?
    if [ $st != 0 ]; then
      cat "$away/log"
      if grep -q 'no libFuzzer build' "$away/log"; then
        echo "fuzz_smoke: attncheck fuzz run from another directory did not find build-fuzz/"
      else
        echo "fuzz_smoke: attncheck fuzz run from another directory exited $st"
      fi
      rm -rf "$away"; exit 1
    fi
    if grep -q 'no seed corpus' "$away/log"; then
      cat "$away/log"; echo "fuzz_smoke: attncheck fuzz run from another directory found no seeds"
      rm -rf "$away"; exit 1
    fi
    rm -rf "$away"
  fi
fi
if [ "${ATTNCHECK_FUZZ_SMOKE:-1}" = 0 ]; then
  echo "fuzz_smoke: fuzzing skipped (ATTNCHECK_FUZZ_SMOKE=0)"
  exit 0
fi
start=$(date +%s)
# The feedback A/B (ctest fuzz_feedback_ab) counts executions to a planted defect; the sanitizers find nothing there
# that the smoke runs do not, and under ASan+UBSan its 32 (or, when the first 16 seeds per arm show no win, 64) runs
# took most of the fuzzing time (629 s of a 1,173 s CI at fe2b568). It runs on a sanitizer-free libFuzzer build of
# the kernel target instead (build-fuzz-ab/, the fuzz target alone), several times faster per execution; its
# verdict is still a pure function of that binary (feedback_ab.sh).
if [ "$san" != none ]; then
  ab_flags="-fsanitize=fuzzer-no-link -gline-tables-only"
  CC=clang CXX=clang++ cmake -S . -B build-fuzz-ab -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTNCHECK_CUDA=OFF \
    -DCMAKE_C_FLAGS="$ab_flags" -DCMAKE_CXX_FLAGS="$ab_flags" >/dev/null
  cmake --build build-fuzz-ab --target attncheck_fuzz_kernel -j "${ATTNCHECK_JOBS:-$(nproc)}"
  export ATTNCHECK_AB_FUZZER=$PWD/build-fuzz-ab/harness/fuzz/attncheck_fuzz_kernel
  echo "fuzz_smoke: sanitizer-free A/B build in $(( $(date +%s) - start )) s"
fi
(cd build-fuzz && ctest --output-on-failure -j "$(nproc)" -L fuzz --timeout 600)
echo "fuzz_smoke: passed in $(( $(date +%s) - start )) s"
