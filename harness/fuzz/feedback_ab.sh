#!/usr/bin/env bash
# feedback_ab.sh — does error-guided feedback reach a deep numerical failure faster? (ctest fuzz_feedback_ab)
#   feedback_ab.sh <fuzzer> <seed dir> <work dir> [seeds (default 8)] [runs cap (default 5000)]
# The test-only `planted` kernel (kernel_target.h) is fa2, except that it crashes once its own O error
# reaches ATTNCHECK_FUZZ_PLANTED_ULP ulps — an error level the seeds do not reach, so the fuzzer has to
# climb to it. For each libFuzzer seed 1..N the same binary runs with the extra counters on and off
# (ATTNCHECK_FUZZ_FEEDBACK=1/0), bounded by -runs=<cap>; the score is the execution at which the defect was
# reached (the cap when it was not). Passes when feedback needs fewer executions in total AND finds the
# defect in at least as many seeds. Prints every number (the report quotes them).
set -uo pipefail
fuzzer=$1 seeds=$2 work=$3 n=${4:-8} cap=${5:-5000}
export ATTNCHECK_FUZZ_KERNEL=planted ATTNCHECK_FUZZ_PLANTED_BASE=${ATTNCHECK_FUZZ_PLANTED_BASE:-fa2}
export ATTNCHECK_FUZZ_PLANTED_ULP=${ATTNCHECK_FUZZ_PLANTED_ULP:-16} ATTNCHECK_FUZZ_QUIET=1
# Only the per-instance part matters here: the bias batch would only slow both arms down equally.
export ATTNCHECK_FUZZ_PROPERTIES=${ATTNCHECK_FUZZ_PROPERTIES:-none}
# ATTNCHECK_AB_ARMS / ATTNCHECK_AB_ON: which ATTNCHECK_FUZZ_FEEDBACK values run, which one must win over 0.
declare -A total found
for fb in ${ATTNCHECK_AB_ARMS:-1 0}; do
  total[$fb]=0 found[$fb]=0
  for s in $(seq 1 "$n"); do
    dir=$work/fb$fb-seed$s
    rm -rf "$dir" && mkdir -p "$dir/corpus" "$dir/findings"
    cp "$seeds"/* "$dir/corpus/"
    start=$(date +%s.%N)
    ATTNCHECK_FUZZ_FEEDBACK=$fb ATTNCHECK_FUZZ_FINDINGS=$dir/findings \
      "$fuzzer" "$dir/corpus" -seed="$s" -runs="$cap" -artifact_prefix="$dir/" >"$dir/log" 2>&1
    secs=$(echo "$(date +%s.%N) - $start" | bc)
    at=$(grep -o 'planted defect reached at execution [0-9]*' "$dir/log" | grep -o '[0-9]*$' | head -1)
    if [ -z "$at" ] && grep -q 'ERROR: \|runtime error' "$dir/log"; then
      echo "feedback_ab: the fuzzer crashed for another reason (see $dir/log):"; grep -m5 'ERROR: \|runtime error' "$dir/log"
      exit 1
    fi
    if [ -n "$at" ]; then
      found[$fb]=$(( found[$fb] + 1 ))
    else
      at=$cap
    fi
    total[$fb]=$(( total[$fb] + at ))
    echo "feedback=$fb seed=$s executions_to_defect=$at$([ "$at" = "$cap" ] && echo " (cap: not reached)") seconds=$secs"
  done
done
on=${ATTNCHECK_AB_ON:-1}
echo "feedback_ab: with feedback=$on ${found[$on]}/$n found, ${total[$on]} executions in total;" \
     "without ${found[0]}/$n found, ${total[0]} executions in total (cap $cap per run)"
on=${ATTNCHECK_AB_ON:-1}
if [ "${total[$on]}" -lt "${total[0]}" ] && [ "${found[$on]}" -ge "${found[0]}" ] && [ "${found[$on]}" -ge 1 ]; then
  echo "feedback_ab: PASS"; exit 0
fi
echo "feedback_ab: FAIL (feedback did not reach the planted defect faster)"; exit 1
