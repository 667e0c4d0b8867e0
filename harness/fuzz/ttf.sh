#!/usr/bin/env bash
# ttf.sh — time to the first finding per kernel, with and without error-guided feedback (README "Measurements").
#   ttf.sh <fuzzer> <seed dir> <work dir> [kernels (default "paper paper-fixed fa2")] [seeds (default 3)] [limit s (120)]
# For each kernel, libFuzzer seed 1..N and ATTNCHECK_FUZZ_FEEDBACK=1/0, fuzzes from an EMPTY corpus and from the
# committed seeds (-seed_inputs, sorted) until the first finding (the target writes it and aborts) or the time
# limit; prints seconds, executions and the property that failed. Properties: ATTNCHECK_FUZZ_PROPERTIES (default
# all). Measurements, not a test: wall-clock time depends on the machine; pin it with taskset for one core.
set -uo pipefail
fuzzer=$1 seeds=$2 work=$3 kernels=${4:-paper paper-fixed fa2} n=${5:-3} limit=${6:-120}
seed_list=$(find "$seeds" -maxdepth 1 -type f | LC_ALL=C sort | paste -sd, -)
export ATTNCHECK_FUZZ_QUIET=1
for k in $kernels; do
  for start in empty seeds; do
    for fb in 1 0; do
      for s in $(seq 1 "$n"); do
        dir=$work/$k-$start-fb$fb-s$s
        rm -rf "$dir" && mkdir -p "$dir/corpus" "$dir/findings"
        extra=()
        [ "$start" = seeds ] && extra=(-seed_inputs="$seed_list")
        t0=$(date +%s.%N)
        ATTNCHECK_FUZZ_KERNEL=$k ATTNCHECK_FUZZ_FEEDBACK=$fb ATTNCHECK_FUZZ_FINDINGS=$dir/findings \
          "$fuzzer" "$dir/corpus" "${extra[@]}" -seed="$s" -max_total_time="$limit" -print_final_stats=1 \
          -artifact_prefix="$dir/" >"$dir/log" 2>&1
        secs=$(echo "$(date +%s.%N) - $t0" | bc)
        execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$dir/log" | grep -o '[0-9]*$' | tail -1)
        prop=$(grep -o "FINDING [^ ]* fails '[^']*'" "$dir/log" | head -1 | sed "s/.*fails '\(.*\)'/\1/")
        printf 'ttf kernel=%s start=%s feedback=%s seed=%s seconds=%.1f execs=%s finding=%s\n' \
          "$k" "$start" "$fb" "$s" "$secs" "${execs:-?}" "${prop:-none}"
      done
    done
  done
done
