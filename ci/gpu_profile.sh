#!/usr/bin/env bash
# gpu_profile.sh A B — two kernels profiled with Nsight Compute on one warm GPU, one launch each, and compared
# instruction kind by instruction kind (kernels/cuda/ncu_diff.py): a change against its baseline, or a fix against
# the kernel it fixes. What session 46 did by hand to find where fa2-psum's ~3% went and the descriptor arithmetic
# behind a 5% faster fa2 (kernels/cuda/TENSOR_CORES.md, GPU_RUNS.md).
#   A, B: BUILD:ROW. BUILD: a bundle from ci/gpu_bundle.sh or a build folder (BUILD/kernels/cuda/bench_attention,
#   BUILD/lib on the library path where it exists); ROW: a bench_attention benchmark up to its shape.
#   bash ci/gpu_profile.sh gpu-run:fwd/fa2/d128/full/seq4096 gpu-run:fwd/fa2-psum/d128/full/seq4096
# Per side, `ncu --clock-control none --set full` (the card's clocks left as they are) profiles one launch: the first
# after ATTNCHECK_PROFILE_SKIP (default 5, past the row's warm-up) launches of kernels whose name matches
# ATTNCHECK_PROFILE_KERNEL (a regex, default flash_fwd_kernel: a forward row launches that one kernel; for a backward
# row name one of its kernels). Then its details page (details_X.txt), its SASS source page (sass_X.csv) and
# ncu_diff.py's comparison of both (summary.md: the launches' headline numbers and busiest pipe, then the SASS), in
# ATTNCHECK_PROFILE_OUT (default out/profile), the reports as X.ncu-rep.
# Relative BUILD and ATTNCHECK_PROFILE_OUT paths are taken from the repository root (the script works from there).
# Exit status: ncu_diff.py's (0; 1 when a side has no source page); 2, said on standard error, for a spec without
# ':', a build without bench_attention, no ncu on PATH, or a side whose profiled run failed or profiled nothing (no
# usable GPU, a row no benchmark matches, a kernel regex no launch matches, counters not readable: its log, ncu_X.log,
# is named).
# Test (the paths without a GPU, and ncu_diff.py on a stand-in ncu's pages): ci/ci_scripts_test.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# = 2 ] || { echo "usage: bash ci/gpu_profile.sh BUILD:ROW BUILD:ROW" >&2; exit 2; }
out=${ATTNCHECK_PROFILE_OUT:-out/profile}
kernel=${ATTNCHECK_PROFILE_KERNEL:-flash_fwd_kernel} skip=${ATTNCHECK_PROFILE_SKIP:-5}
for spec in "$1" "$2"; do
  case $spec in *:?*) ;; *) echo "gpu_profile.sh: '$spec' is not BUILD:ROW" >&2; exit 2 ;; esac
  [ -x "${spec%%:*}/kernels/cuda/bench_attention" ] ||
    { echo "gpu_profile.sh: no ${spec%%:*}/kernels/cuda/bench_attention" >&2; exit 2; }
done
command -v ncu >/dev/null || { echo "gpu_profile.sh: no ncu (Nsight Compute) on PATH" >&2; exit 2; }
mkdir -p "$out"
rm -f "$out"/ncu_?.log "$out"/details_?.txt "$out"/sass_?.csv "$out"/?.ncu-rep "$out/summary.md"
for x in A B; do
  spec=$1; [ $x = B ] && spec=$2
  build=${spec%%:*} row=${spec#*:}
  LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ncu --clock-control none --set full \
    --kernel-name "regex:$kernel" --launch-skip "$skip" --launch-count 1 --import-source no -f -o "$out/$x" \
    "$build/kernels/cuda/bench_attention" --benchmark_filter="^$row/" >"$out/ncu_$x.log" 2>&1
  rc=$?
  if [ $rc != 0 ] || [ ! -s "$out/$x.ncu-rep" ]; then
    echo "gpu_profile.sh: $x ($spec): ncu exited $rc$([ -s "$out/$x.ncu-rep" ] || echo ', no report'); its log:" \
      "$out/ncu_$x.log: $(grep -m1 -E 'ERROR|No kernels were profiled|no usable CUDA|selects no benchmark' \
      "$out/ncu_$x.log")" >&2
    exit 2
  fi
  ncu --import "$out/$x.ncu-rep" --page details >"$out/details_$x.txt" 2>&1
  ncu --import "$out/$x.ncu-rep" --page source --csv --print-source sass >"$out/sass_$x.csv" 2>&1
done
python3 kernels/cuda/ncu_diff.py "$out/sass_A.csv" "$out/sass_B.csv" \
  --details "$out/details_A.txt" "$out/details_B.txt" >"$out/summary.md"
status=$?
cat "$out/summary.md"
exit $status
