#!/usr/bin/env bash
# run_mutants.sh — mutation testing of the CUDA kernels on a GPU host: for the unmutated control m0 and each mutant
# mN (binaries built elsewhere, one folder each: mN/cuda_kernels_test, mN/attncheck), runs what ci/gpu.sh's tests
# and property suites run on the cuda: kernels, without sanitizers and benchmarks:
#   tests     cuda_kernels_test --gtest_brief=1 (the GPU tests: CUDA kernels vs CPU models, twin, rule, splits, ...)
#   default   attncheck check -q --suite default  -k fa2 -k fa2-fixed -k paper -k paper-fixed -k cuda:... (8 kernels)
#   bias      the same, --suite bias
#   verdicts  ci/compare_verdicts.py default.json bias.json (cuda:K must get K's verdict), as gpu.sh
#   gpu       attncheck check --suite gpu -k cuda:fa2 -k cuda:fa2-fixed -k cuda:paper -k cuda:paper-fixed
# Differences from gpu.sh: --no-shrink on every check (a failure's shrinking takes up to 20 s each; a mutant fails
# dozens); no
# mma_probe_test, cudnn_test, device_check_test, cuda:cudnn, sanitizers or benchmarks (none exercises the mutated
# kernels). Steps run side by side (MUT_JOBS processes share the one GPU; the work is mostly single-threaded host code).
# Built and packed by kernels/cuda/mutants/build.sh (README.md there). Usage on the GPU host (repository root,
# after `tar xJf gpu-exp/mut/mut.tar.xz -C gpu-exp/mut`):
#   OUT=/some/dir bash gpu-exp/mut/run_mutants.sh        -> $OUT/mutants.txt, $OUT/mut_logs.tgz
# Environment: OUT (default gpu-exp/mut/out), MUT_JOBS (parallel steps, default 12), MUT_BUDGET (seconds for all
# steps, default 360: a step starting late gets only what is left; steps not started by then are 'notrun'),
# MUT_LIST (variants, default every mN folder, m0 first), MUT_TESTS_TIMEOUT (240), MUT_SUITE_TIMEOUT (300).
# Exit status: 0 when the summary was written; 2 when no usable CUDA device (m0's attncheck lists no cuda:fa2).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
out=${OUT:-$here/out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
[ -d "$here/lib" ] && export LD_LIBRARY_PATH="$here/lib:${LD_LIBRARY_PATH:-}"
jobs=${MUT_JOBS:-12}
budget=${MUT_BUDGET:-360}
t_tests=${MUT_TESTS_TIMEOUT:-240}
t_suite=${MUT_SUITE_TIMEOUT:-300}
if [ -n "${MUT_LIST:-}" ]; then
  variants=$MUT_LIST
else
  variants=$(cd "$here" && ls -d m[0-9]* 2>/dev/null | grep -E '^m[0-9]+$' | sort -t m -k 2 -n | tr '\n' ' ')
fi
case " $variants " in *" m0 "*) ;; *) echo "run_mutants.sh: no m0 (the control) in '$variants'" >&2; exit 2 ;; esac
compare=$root/ci/compare_verdicts.py
[ -f "$compare" ] || compare=$here/compare_verdicts.py  # a copy travels in the tarball

# No usable CUDA device: stop, as gpu.sh does (every GPU test would skip and read as a pass).
# (grep without -q: under pipefail an early exit of grep -q would SIGPIPE the list)
if ! "$here/m0/attncheck" list kernels 2>/dev/null | grep -x '  cuda:fa2' >/dev/null; then
  why=$("$here/m0/attncheck" check -q --suite quick -k cuda:fa2 2>&1 >/dev/null | head -3)
  echo "run_mutants.sh: no usable CUDA device (m0's attncheck lists no cuda:fa2): $why" | tee "$out/mutants.txt" >&2
  exit 2
fi

pairs="-k fa2 -k fa2-fixed -k paper -k paper-fixed -k cuda:fa2 -k cuda:fa2-fixed -k cuda:paper -k cuda:paper-fixed"
cuda4="-k cuda:fa2 -k cuda:fa2-fixed -k cuda:paper -k cuda:paper-fixed"
start=$(date +%s)

# step VARIANT NAME TIMEOUT: runs one step, its exit status in $logs/VARIANT/NAME.rc ('notrun' past the budget).
step() {
  local v=$1 name=$2 limit=$3 d="$logs/$1" bin="$here/$1"
  local left=$(( budget - ($(date +%s) - start) ))
  if [ "$left" -lt 15 ]; then echo notrun >"$d/$name.rc"; return; fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0=$(date +%s) rc
  case $name in
    tests) timeout -k 10 "$limit" "$bin/cuda_kernels_test" --gtest_brief=1 --gtest_output=xml:"$d/tests.xml" \
             >"$d/tests.log" 2>&1 ;;
    default|bias)
      # shellcheck disable=SC2086
      timeout -k 10 "$limit" "$bin/attncheck" check -q --no-shrink --suite "$name" $pairs --findings "$d/findings-$name" \
        --json "$d/$name.json" >"$d/$name.log" 2>&1 ;;
    gpu)
      # shellcheck disable=SC2086
      timeout -k 10 "$limit" "$bin/attncheck" check -q --no-shrink --suite gpu $cuda4 --findings "$d/findings-gpu" \
        --json "$d/gpu.json" >"$d/gpu.log" 2>&1 ;;
  esac
  rc=$?
  echo "$rc" >"$d/$name.rc"
  echo "$v $name rc=$rc $(( $(date +%s) - t0 )) s (limit $limit)" >>"$logs/timing.txt"
  if [ "$name" = bias ] || [ "$name" = default ]; then
    # compare_verdicts once both reports are there (the second of the two steps to finish runs it)
    if [ -f "$d/default.rc" ] && [ -f "$d/bias.rc" ] && mkdir "$d/.verdicts" 2>/dev/null; then
      python3 "$compare" "$d/default.json" "$d/bias.json" >"$d/verdicts.log" 2>&1
      echo $? >"$d/verdicts.rc"
    fi
  fi
}

# The queue: every variant's four steps, m0 first; the long suite steps of each variant first.
queue=()
for v in $variants; do
  [ -x "$here/$v/attncheck" ] && [ -x "$here/$v/cuda_kernels_test" ] || { echo "run_mutants.sh: $here/$v lacks binaries" >&2; continue; }
  mkdir -p "$logs/$v"
  for s in gpu default bias tests; do queue+=("$v $s"); done
done
running=0
for item in "${queue[@]}"; do
  read -r v s <<<"$item"
  while [ "$running" -ge "$jobs" ]; do wait -n; running=$((running - 1)); done
  case $s in tests) lim=$t_tests ;; *) lim=$t_suite ;; esac
  step "$v" "$s" "$lim" &
  running=$((running + 1))
done
wait
# A variant whose default/bias step did not run still gets a verdicts.rc (compare on what is there).
for v in $variants; do
  d="$logs/$v"
  [ -d "$d" ] && [ ! -f "$d/verdicts.rc" ] && { python3 "$compare" "$d/default.json" "$d/bias.json" >"$d/verdicts.log" 2>&1; echo $? >"$d/verdicts.rc"; }
done
echo "total $(( $(date +%s) - start )) s, MUT_JOBS=$jobs, budget $budget s" >>"$logs/timing.txt"
{
  python3 "$here/mut_summary.py" "$logs" "$here/MUTANTS.md"
  echo
  echo "## Timing"
  sort -k1,1V "$logs/timing.txt"
} >"$out/mutants.txt" 2>&1
# Logs, compressed (findings folders are dropped: with --no-shrink they hold one case file per failure).
tar czf "$out/mut_logs.tgz" -C "$logs" --exclude='findings-*' . 2>/dev/null
echo "run_mutants.sh: $out/mutants.txt, $out/mut_logs.tgz ($(( $(date +%s) - start )) s)"
tail -n 20 "$out/mutants.txt"
exit 0
