#!/usr/bin/env bash
# bench_ab.sh A B [FILTER] [ROUNDS] — two builds of bench_attention on one GPU host, compared: A the baseline, B a
# change (each a bundle from ci/gpu_bundle.sh or a build folder: A/kernels/cuda/bench_attention, with A/lib on the
# library path where it exists). Each round runs A, B, B, A (the order balanced: warmer or cooler cancels to first
# order), ROUNDS rounds (default 2), each run with --benchmark_filter=FILTER (default the fix's paired rows at seq
# 4096 and the d128 full forward: 'ovh/fwd|^fwd/.*/d128/full/seq4096'); then kernels/cuda/bench_ab.py's tables
# (the paired overheads, B − A in points, and the TFLOP/s, B / A, cuDNN's as the drift). Logs and summary.md in
# ATTNCHECK_AB_OUT (out/ab).
#   bash ci/bench_ab.sh gpu-exp/old gpu-exp/new 'ovh/fwd/fa2-psum' 3
# The paired rows are named by the base (ovh/fwd/fa2/d128/full/seq4096: fa2 → fa2-fixed; ovh/fwd/paper/...: paper →
# paper-fixed), except fa2-psum's (ovh/fwd/fa2-psum/...: fa2 → fa2-psum); a filter asking for "ovh" that met none is
# said in the summary and on standard error.
# Exit status: bench_ab.py's (0, or 1 when no run measured a row); 2 when a build has no bench_attention, or a run
# finds no usable GPU (bench_attention's exit 1), said on standard error.
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: bash ci/bench_ab.sh A B [FILTER] [ROUNDS]" >&2; exit 2; }
a=$1 b=$2 filter=${3:-'ovh/fwd|^fwd/.*/d128/full/seq4096'} rounds=${4:-2}
case $rounds in '' | *[!0-9]* | 0) echo "bench_ab.sh: ROUNDS must be a positive integer, not '$rounds'" >&2; exit 2 ;; esac
out=${ATTNCHECK_AB_OUT:-out/ab}
for x in "$a" "$b"; do
  [ -x "$x/kernels/cuda/bench_attention" ] || { echo "bench_ab.sh: no $x/kernels/cuda/bench_attention" >&2; exit 2; }
done
mkdir -p "$out"
rm -f "$out"/A_*.log "$out"/B_*.log "$out/summary.md"  # an earlier comparison's runs must not join this one's
run=0
for r in $(seq "$rounds"); do
  for x in A B B A; do
    run=$((run + 1))
    dir=$a; [ $x = B ] && dir=$b
    log="$out/${x}_$run.log"
    LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$dir/kernels/cuda/bench_attention" \
      --benchmark_filter="$filter" >"$log" 2>&1
    rc=$?
    if [ $rc = 1 ] && grep -q "no usable CUDA device" "$log"; then
      echo "bench_ab.sh: $(grep -m1 'no usable CUDA device' "$log")" >&2
      exit 2
    fi
    [ $rc = 0 ] || echo "bench_ab.sh: run $run ($x, round $r) exited $rc; its log: $log" >&2
  done
done
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
{ echo "# bench_ab: A = $a, B = $b"
  echo "filter '$filter', $rounds round(s) of A B B A${gpu:+, on $gpu (driver)}"
  echo
  # --filter=F as one word: a negative filter (-ovh, every benchmark but those) is not an option to argparse
  python3 kernels/cuda/bench_ab.py --a "$out"/A_*.log --b "$out"/B_*.log --filter="$filter"
} >"$out/summary.md"
status=$?
# (the pipeline's status is python's: a summary without tables is said on stderr and the exit is 1)
cat "$out/summary.md"
exit $status
