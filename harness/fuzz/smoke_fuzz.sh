#!/usr/bin/env bash
# smoke_fuzz.sh — one fixed-seed smoke fuzz run (ctest label `fuzz`, registered by CMakeLists.txt).
#   smoke_fuzz.sh <fuzzer> <kernel|-> <seconds> <bias|nobias|any> <seed dir> <work dir>
# Copies the seeds into <work dir>/corpus (the committed seeds are never modified), fuzzes for <seconds>
# with -seed=1 in keep-going mode (ATTNCHECK_FUZZ_CONTINUE=1: findings are written to <work dir>/findings
# and counted, fuzzing goes on). Always required: the run reaches its time limit with exit 0 — no crash,
# sanitizer report, uncaught exception, timeout or OOM. Then `bias`: a finding of the `unbiased` property
# was written (the paper's kernel: the smoke run must rediscover its bias); `nobias`: none was (the fix and
# the null controls); `any`: findings of any kind are reported, not judged. Every finding is listed.
set -uo pipefail
fuzzer=$1 kernel=$2 seconds=$3 expect=$4 seeds=$5 work=$6
rm -rf "$work" && mkdir -p "$work/corpus" "$work/findings"
cp "$seeds"/* "$work/corpus/" 2>/dev/null || true
[ "$kernel" != "-" ] && export ATTNCHECK_FUZZ_KERNEL=$kernel
export ATTNCHECK_FUZZ_FINDINGS=$work/findings ATTNCHECK_FUZZ_QUIET=1 ATTNCHECK_FUZZ_CONTINUE=1
"$fuzzer" "$work/corpus" -max_total_time="$seconds" -seed=1 -print_final_stats=1 -artifact_prefix="$work/" \
  -close_fd_mask=1 >"$work/log" 2>&1
rc=$?
execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/log" | grep -o '[0-9]*$' | tail -1)
rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$work/log" | grep -o '[0-9]*$' | tail -1)
nfind=$(find "$work/findings" -name '*.json' | wc -l)
echo "smoke_fuzz: kernel=$kernel rc=$rc execs=${execs:-?} exec/s=${rate:-?} findings=$nfind"
grep -m3 'FINDING\|ERROR\|SUMMARY' "$work/log"
nbias=$(find "$work/findings" -name '*-unbiased-*.json' | wc -l)
find "$work/findings" -name '*.json' -printf '  finding: %f\n' | sort
if [ "$rc" -ne 0 ]; then
  echo "smoke_fuzz: the fuzzer stopped with exit $rc (crash, sanitizer report, timeout or OOM)"
  grep -m20 -A20 'ERROR\|runtime error\|deadly' "$work/log"; exit 1
fi
case $expect in
  any) exit 0 ;;
  bias)
    [ "$nbias" -ge 1 ] && exit 0
    echo "smoke_fuzz: expected the fuzzer to find the bias (property unbiased)"; exit 1 ;;
  nobias)
    [ "$nbias" -eq 0 ] && exit 0
    echo "smoke_fuzz: the fuzzer found a bias where none is expected"; exit 1 ;;
esac
echo "smoke_fuzz: bad expectation '$expect'"; exit 2
