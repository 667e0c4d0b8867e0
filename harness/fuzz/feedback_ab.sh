#!/usr/bin/env bash
# feedback_ab.sh — does error-guided feedback reach a deep failure faster than coverage alone? (ctest fuzz_feedback_ab)
#   feedback_ab.sh <fuzzer> <seed dir> <work dir> [seeds (default 16)] [runs cap (default 20000)]
# The test-only `planted` kernel (planted_kernel.h) is fa2 with an error ladder: each of K = 9 independent input
# features present (a tied maximum, large scores, masked keys, long rows, odd head dim, an odd instance seed,
# batch 2, odd n_q, a logit scale below the default) moves O by one more error level; only all 9 at once fail. The levels are visible to the error-guided counters, not to
# code coverage (the planted code is not instrumented). For each libFuzzer seed 1..N the same binary runs with
# the extra counters on and off (ATTNCHECK_FUZZ_FEEDBACK=1/0) from the committed seeds, bounded by -runs=<cap>;
# the score is the execution at which the defect was reached (the cap when it was not). Passes when feedback
# needs fewer executions in total AND finds the defect in at least as many seeds. Prints every number.
# What it shows: a ladder that error buckets can see is climbed faster with them. It is a planted ladder by
# construction, not evidence about the depth of the real kernels' bugs.
# Deterministic per seed where address randomisation can be turned off: libFuzzer gets -seed, one process, no time
# limits, the seeds in a fixed order, -reload=0 and -use_cmp=0, and runs under `setarch -R`. Three things made
# the same seed part before (session 9, runs of one seed diffed line by line): trace-cmp records compared values,
# some of them heap addresses, whose bytes the CMP mutations then write into inputs (ASLR on: runs parted at
# execution ~2,800; ASLR off: the work folder's path length still moved the heap, and seeds 1-3 gave other
# results in another folder); libFuzzer's default -reload=1 re-reads the corpus folder once a second, which runs
# inputs at wall-clock moments (ASLR off, CMP on: runs parted at ~6,000 and ~12,700 executions); and, with ASLR on
# and CMP off, 2 of 32 runs still parted, one of them already on the seed corpus (one PC more; cause not found,
# valgrind finds no uninitialised read on the seeds in the gcc build). With all
# three off, two full A/B runs in folders of different path lengths, side by side, gave the same 32 numbers. CMP
# guidance is a third signal besides coverage and the error counters, so leaving it out of both arms keeps the
# comparison to what it claims. Where `setarch -R` is refused (some container seccomp profiles) the runs are not
# deterministic, and the verdict is a sample: when the first N seeds per arm do not show the win, the next N run
# too and the verdict is taken on all 2N (one 16-seed draw measured 9/16 vs 8/16 found where others gave 14/16 vs
# 5/16). Measured margins are in README.md.
set -uo pipefail
fuzzer=$1 seeds=$2 work=$3 n=${4:-16} cap=${5:-20000}
# ATTNCHECK_AB_FUZZER: another libFuzzer build of the same target (ci/fuzz_smoke.sh passes a sanitizer-free one)
if [ -n "${ATTNCHECK_AB_FUZZER:-}" ]; then fuzzer=$ATTNCHECK_AB_FUZZER; fi
echo "feedback_ab: fuzzer $fuzzer"
export ATTNCHECK_FUZZ_KERNEL=planted ATTNCHECK_FUZZ_PLANTED_BASE=${ATTNCHECK_FUZZ_PLANTED_BASE:-fa2}
export ATTNCHECK_FUZZ_PLANTED_FEATURES=${ATTNCHECK_FUZZ_PLANTED_FEATURES:-9} ATTNCHECK_FUZZ_QUIET=1
# Only the observed error matters here: the properties would only slow both arms down equally.
export ATTNCHECK_FUZZ_PROPERTIES=${ATTNCHECK_FUZZ_PROPERTIES:-none}
first=${ATTNCHECK_AB_FIRST_SEED:-1}
seed_list=$(find "$seeds" -maxdepth 1 -type f | LC_ALL=C sort | paste -sd, -)
norand=()
if setarch -R true 2>/dev/null; then norand=(setarch -R); else echo "feedback_ab: setarch -R refused here: runs are not deterministic"; fi
# ATTNCHECK_AB_ARMS / ATTNCHECK_AB_ON: which ATTNCHECK_FUZZ_FEEDBACK values run, which one must win over 0.
declare -A total found
for fb in ${ATTNCHECK_AB_ARMS:-1 0}; do total[$fb]=0 found[$fb]=0; done
on=${ATTNCHECK_AB_ON:-1}
run_one() {  # run_one FB SEED: one run in its own folder; its log says where (or whether) the defect was reached
  local dir=$work/fb$1-seed$2 start
  rm -rf "$dir" && mkdir -p "$dir/corpus" "$dir/findings"
  start=$(date +%s%N)
  # The seeds go in by -seed_inputs in sorted order, not as a directory: libFuzzer orders its initial corpus
  # by size only, so equal-sized files would start in the directory's (unspecified) listing order and the
  # same -seed could give a different run.
  ATTNCHECK_FUZZ_FEEDBACK=$1 ATTNCHECK_FUZZ_FINDINGS=$dir/findings \
    "${norand[@]}" "$fuzzer" "$dir/corpus" -seed_inputs="$seed_list" -seed="$2" -runs="$cap" -reload=0 -use_cmp=0 \
    -artifact_prefix="$dir/" \
    >"$dir/log" 2>&1
  local ns=$(( $(date +%s%N) - start ))  # shell arithmetic: bc is not on a minimal Debian
  printf '%d.%03d\n' $((ns / 1000000000)) $((ns / 1000000 % 1000)) >"$dir/seconds"
}
# The runs are independent and bounded by executions, not time, so they run $ATTNCHECK_AB_JOBS at a time (default:
# the CPU count) and give the same numbers as one at a time; the results are read back in arm and seed order.
jobs=${ATTNCHECK_AB_JOBS:-$(nproc)}
run_seeds() {  # run_seeds FIRST COUNT: both arms over seeds FIRST..FIRST+COUNT-1, added to total[] and found[]
  local running=0 fb s dir at secs
  for fb in ${ATTNCHECK_AB_ARMS:-1 0}; do
    for s in $(seq "$1" $(($1 + $2 - 1))); do
      run_one "$fb" "$s" &
      running=$((running + 1))
      if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
    done
  done
  wait
  for fb in ${ATTNCHECK_AB_ARMS:-1 0}; do
    for s in $(seq "$1" $(($1 + $2 - 1))); do
      dir=$work/fb$fb-seed$s
      secs=$(cat "$dir/seconds")
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
      rm -rf "$dir/corpus"  # keep the log, not the grown corpus
    done
  done
}
verdict() {  # verdict SEEDS_PER_ARM: prints the totals; status 0 when feedback won
  echo "feedback_ab: with feedback=$on ${found[$on]}/$1 found, ${total[$on]} executions in total;" \
       "without ${found[0]}/$1 found, ${total[0]} executions in total (cap $cap per run)"
  [ "${total[$on]}" -lt "${total[0]}" ] && [ "${found[$on]}" -ge "${found[0]}" ] && [ "${found[$on]}" -ge 1 ]
}
run_seeds "$first" "$n"
if verdict "$n"; then echo "feedback_ab: PASS"; exit 0; fi
echo "feedback_ab: no win on $n seeds per arm; the next $n run too (a draw of $n seeds is a sample: see above)"
run_seeds $((first + n)) "$n"
if verdict $((2 * n)); then echo "feedback_ab: PASS (on $((2 * n)) seeds per arm)"; exit 0; fi
echo "feedback_ab: FAIL (feedback did not reach the planted defect faster)"; exit 1
