#!/usr/bin/env bash
# gpu.sh — the GPU job (needs an NVIDIA GPU, sm_90 build by default): build, run the GPU tests (label gpu:
# CUDA kernels vs CPU models and the fp64 reference, cuda:cudnn, the tensor-core probe), the property suites
# with every CUDA kernel beside its CPU model (verdicts must be equal) and on cuda:cudnn, compute-sanitizer
# (memcheck, racecheck, synccheck, initcheck) on a subset of the tests, the benchmarks (ours and cuDNN's fused
# SDPA in one program; forward_many throughput), and write a report.
#   bash ci/gpu.sh                     build in build-gpu, results and report in out/gpu/
# Environment: ATTNCHECK_GPU_BUILD (build dir), ATTNCHECK_GPU_OUT (results dir), ATTNCHECK_GPU_SKIP_BUILD=1
# (use binaries already in the build dir, e.g. a bundle from ci/gpu_bundle.sh built elsewhere and copied), ATTNCHECK_GPU_BENCH_FILTER (a
# --benchmark_filter regex; default all), ATTNCHECK_GPU_NO_BENCH=1, ATTNCHECK_GPU_NO_SANITIZER=1,
# ATTNCHECK_GPU_SANITIZER_TOOLS (default "memcheck racecheck synccheck initcheck"), ATTNCHECK_GPU_SANITIZER_FILTER (a
# --gtest_filter for every tool; default all tests, racecheck a subset), ATTNCHECK_GPU_RACECHECK_FILTER,
# ATTNCHECK_GPU_SANITIZER_TIMEOUT (seconds per tool, default 240; 480 per part with the next),
# ATTNCHECK_GPU_RACECHECK_FULL=1 (racecheck over every test, in parts side by side, the filters not applied: ~6 min),
# ATTNCHECK_GPU_NO_SUITES=1 (skip the property suites), ATTNCHECK_GPU_SUITES (default "default bias"; "default bias
# long" adds lengths past several 64- and 128-wide key tiles, properties/suites.cpp; on the H200, 2026-12-05, one of its
# 100 verdicts per kernel differs, at the bound's margin: cuda:fa2 fails accurate on tied_max 130x200 d64 at 1.08 of
# the bound, the fa2 model passes at 0.947; both shrink to one case, corpus/gpu/cuda_fa2-accurate-tied_max-*; the
# same on the H100). A check whose verdicts differ is run again on the CUDA kernel's CPU twin (~15 s): a difference
# the twin predicts (it gets the GPU's verdict) is listed as PREDICTED and does not fail the job (compare_verdicts.py).
# Order: tests, sanitizers, benchmarks, property suites (the longest step last).
# Exit status: 1 when a GPU test, a sanitizer run or the verdict comparison fails (benchmarks never fail the job:
# their exit status is noted in the report); 2, at once and said in the report, when this host has no usable CUDA
# device (every GPU test would skip and read as a pass, the benchmarks would measure nothing).
# ATTNCHECK_CUDA_ARCH (CMAKE_CUDA_ARCHITECTURES of the build this script makes; default 90, as ci/gpu_bundle.sh).
# Paths in ATTNCHECK_GPU_BUILD and ATTNCHECK_GPU_OUT are relative to the repository root (or absolute).
# Test (the no-GPU path): ci/ci_scripts_test.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${ATTNCHECK_GPU_BUILD:-build-gpu}
case $build in /*) ;; *) build="$PWD/$build" ;; esac
out=${ATTNCHECK_GPU_OUT:-out/gpu}
mkdir -p "$out"
status=0
report="$out/gpu_report.md"
rm -f "$report"  # an earlier run's, which this run's last lines must not be added to
started=$(date +%s) ended=0
failed_steps=()  # run_step names that failed, for the report's last lines
# The report ends with the job's exit status, its time and the steps that failed (whatever the way out): a report cut
# short used to read like a whole one.
# (Killed by a signal, bash runs this trap with $? of the last command, not the signal's: said as stopped. The step
# then running is stopped too: each runs under its own `timeout`, in a process group of its own that a signal to the
# job's group does not reach, and it ran on, on the GPU, up to its time limit. SIGKILL runs no trap: a report without
# this last line was cut short.)
finish() {
  local rc=$?
  [ $ended = 1 ] || pkill -TERM -P $$ 2>/dev/null  # (timeout passes the signal on to its command's group)
  [ -f "$report" ] || return
  { if [ $ended = 1 ]; then echo "## Job status: $rc in $(( $(date +%s) - started )) s"
    else echo "## Job status: stopped after $(( $(date +%s) - started )) s, before its last step (killed?)"; fi
    [ ${#failed_steps[@]} -gt 0 ] && printf -- '- failed: %s\n' "${failed_steps[@]}"
  } >>"$report"
}
trap finish EXIT
bin="$build/kernels/cuda"
cli="$build/harness/attncheck"

if [ "${ATTNCHECK_GPU_SKIP_BUILD:-0}" != 1 ]; then
  bash ci/install_deps.sh
  ATTNCHECK_CMAKE_ARGS="-DATTNCHECK_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=${ATTNCHECK_CUDA_ARCH:-90} ${ATTNCHECK_CMAKE_ARGS:-}" \
    bash ci/build.sh "$build" Release || exit 1
fi

# A bundle from ci/gpu_bundle.sh carries the shared libraries a bare GPU host lacks.
[ -d "$build/lib" ] && export LD_LIBRARY_PATH="$build/lib:${LD_LIBRARY_PATH:-}"
# cuda:cudnn loads libcudnn.so.9 at run time: where the CUDA toolkit has none (e.g. a host whose cuDNN came with
# PyTorch's wheel), look in the Python packages and put the first one found on the library path.
if ! ldconfig -p 2>/dev/null | grep -q 'libcudnn.so.9' && [ ! -e /usr/local/cuda/lib64/libcudnn.so.9 ]; then
  cudnn_dir=$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib"))' 2>/dev/null ||
              ls -d /opt/*/.venv/lib/python3*/site-packages/nvidia/cudnn/lib 2>/dev/null | head -1)
  [ -n "${cudnn_dir:-}" ] && export LD_LIBRARY_PATH="$cudnn_dir:${LD_LIBRARY_PATH:-}"
fi

{
  echo "# attncheck GPU report ($(date -u +%FT%TZ))"
  echo '```'
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
  # The newest CUDA the driver runs, and the toolkit the binaries were built with: a build folder's CMake cache, or a
  # bundle's BUILD_INFO (gpu_bundle.sh). The loaded cuDNN's version is among the GPU tests' lines (cudnn_test prints
  # it where libcudnn loaded).
  nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' | head -1 | sed 's/^/driver: /'
  if [ -f "$build/CMakeCache.txt" ]; then bash ci/build_info.sh "$build"
  elif [ -s "$build/BUILD_INFO" ]; then cat "$build/BUILD_INFO"
  else echo "built with: unknown (no CMake cache, no BUILD_INFO); this host's nvcc: $(nvcc --version 2>/dev/null |
    grep -o 'release [0-9.]*' || echo none)"; fi
  compute-sanitizer --version 2>&1 | tail -1
  # What was run: the binaries' commit (`attncheck --version`: `-dirty` for uncommitted changes) and this tree's.
  [ -x "$cli" ] && "$cli" --version 2>&1 | head -1
  echo "tree: $(git -C "$(dirname "$0")/.." describe --always --dirty 2>/dev/null || echo 'not a git checkout')"
  echo '```'
} >"$report"

# No usable CUDA device, no GPU job: say why (CUDA's own reason, as attncheck gives it) and stop.
no_gpu_reason() {  # prints why the cuda: kernels are absent here; nothing when cuda:fa2 is registered
  [ -x "$cli" ] || { echo "$cli is missing (build first, or point ATTNCHECK_GPU_BUILD at a bundle)"; return; }
  # (grep without -q: under pipefail an early exit of grep -q would SIGPIPE the list)
  "$cli" list kernels 2>/dev/null | grep -x '  cuda:fa2' >/dev/null && return
  local why
  why=$("$cli" check -q --suite quick -k cuda:fa2 2>&1 >/dev/null | sed -n 's/.*kernels are not available here: //p' | head -1)
  echo "${why:-cuda:fa2 is not registered (\`attncheck list kernels\` lists no cuda: kernel)}"
}
why=$(no_gpu_reason)
if [ -n "$why" ]; then
  { echo "## No usable CUDA device: nothing was run"; echo "$why"; } >>"$report"
  case $why in no\ usable\ CUDA\ device*) said=$why ;; *) said="no usable CUDA device: $why" ;; esac  # not twice
  echo "gpu.sh: $said (report in $report, status 2)" >&2
  ended=1
  exit 2
fi

run_step() {  # run_step NAME LOGFILE command...: runs, logs, records PASS/FAIL in the report
  local name=$1 log=$2
  shift 2
  local t0=$(date +%s)
  "$@" >"$log" 2>&1
  local rc=$?
  local verdict=PASS
  [ $rc -ne 0 ] && verdict="FAIL (exit $rc)" && status=1 && failed_steps+=("$name")
  # A GoogleTest binary whose every test skipped (cudnn_test where libcudnn did not load) exits 0: it read PASS, and
  # the cuDNN suites below then dropped out unsaid (a GPU docs audit, session 40). Said as SKIP, with the first reason;
  # the job's status is not changed by it.
  if [ $rc -eq 0 ] && grep -q '^\[  PASSED  \] 0 tests' "$log" && grep -q '^\[  SKIPPED \] [0-9]* test' "$log"; then
    local why
    why=$(grep -A1 ': Skipped$' "$log" | sed -n 2p | cut -c1-200)
    verdict="SKIP (every test skipped${why:+: $why})"
  fi
  echo "- $name: $verdict in $(( $(date +%s) - t0 )) s (log: $(basename "$log"))" >>"$report"
  return $rc
}

echo "## GPU tests" >>"$report"
# Every step runs under a timeout: a hung kernel must not eat the GPU host's time.
run_step "cuda_kernels_test" "$out/tests.log" timeout 300 "$bin/cuda_kernels_test" --gtest_output=xml:"$out/tests.xml"
run_step "mma_probe_test" "$out/probe.log" timeout 120 "$bin/mma_probe_test"
# A GPU this build has no code for is no device (an sm_80 copy of the check must say so here, with the reason).
[ -x "$bin/device_check_test" ] && run_step "device_check_test" "$out/device_check.log" timeout 60 "$bin/device_check_test"
[ -x "$bin/cudnn_test" ] && run_step "cudnn_test (cuda:cudnn)" "$out/cudnn_test.log" timeout 300 "$bin/cudnn_test"
{
  echo '```'
  # (not cudnn_test's call-by-call trace of the first graph: "[cudnn] ok ...", "[cudnn] tensor ...", "[cudnn] op ...")
  grep -hE '^\[(agreement|throughput|tensor cores|cudnn)\]|^cuDNN version|PASSED|FAILED|SKIPPED' \
    "$out/tests.log" "$out/probe.log" \
    "$out/device_check.log" "$out/cudnn_test.log" 2>/dev/null | grep -vE '^\[cudnn\] (ok|tensor|op) '
  echo '```'
} >>"$report"

if [ "${ATTNCHECK_GPU_NO_SANITIZER:-0}" != 1 ]; then
  echo "## compute-sanitizer" >>"$report"
  # memcheck, synccheck, initcheck: the whole of cuda_kernels_test (57 tests at session 32, ~40 s each on an H100).
  # racecheck (~30x slower: the whole binary in one process ran past 570 s, the long-batch tests alone take ~210 s):
  # by default the four variants' SameInputSameBits (forward and backward on both head dims, tails, causal, GQA,
  # keep-mask, bias), forward_many, the infinite-tolerance test and the poison tests (~50 s). With
  # ATTNCHECK_GPU_RACECHECK_FULL=1 every test, in parts run side by side (the work splits one process each, and a
  # part for each test the others leave out: until session 32 the edge-shape sweep's 8 of 57 tests never ran under
  # racecheck while the report said "every test"); the step fails unless every listed test ran exactly once.
  all=${ATTNCHECK_GPU_SANITIZER_FILTER:-'*'}
  subset='Variants/CudaKernel.SameInputSameBits/*:Variants/CudaKernel.ForwardManyEqualsForward/*:CudaFixedPolicy.*:CudaPoison.*'
  race=${ATTNCHECK_GPU_RACECHECK_FILTER:-${ATTNCHECK_GPU_SANITIZER_FILTER:-$subset}}
  for tool in ${ATTNCHECK_GPU_SANITIZER_TOOLS:-memcheck racecheck synccheck initcheck}; do
    if [ "$tool" = racecheck ] && [ "${ATTNCHECK_GPU_RACECHECK_FULL:-0}" = 1 ]; then
      # Every test: the filters above do not apply. The fixed parts, then each work split and each test no fixed
      # part names (by their positive patterns, as gtest matches them) as a part of its own: the edge-shape sweep's
      # tests (CudaShapes) take long under racecheck. gtest does not run DISABLED_ tests.
      parts=("$subset" 'Variants/CudaKernel.Forward*-Variants/CudaKernel.ForwardManyEqualsForward/*' 'Variants/CudaKernel.Backward*' 'CudaLaunch.*:CudaRegistry.*')
      listed=$("$bin/cuda_kernels_test" --gtest_list_tests | awk '/^[^ ]/ {suite = $1} /^  / {print suite $1}' | grep -v 'DISABLED_')
      named=()  # the fixed parts' positive patterns
      for part in "${parts[@]}"; do IFS=: read -ra positive <<<"${part%%-*}"; named+=("${positive[@]}"); done
      while read -r t; do
        own=1
        for pat in "${named[@]}"; do [[ $t == $pat ]] && own=0; done  # (pat unquoted: a glob, as gtest's)
        [[ $t == Splits/* ]] && own=1
        [ $own = 1 ] && [ -n "$t" ] && parts+=("$t")
      done <<<"$listed"
      rm -f "$out"/sanitizer_racecheck_*.log  # an earlier run's parts would be read below
      t0=$(date +%s)
      pids=()
      for i in "${!parts[@]}"; do
        GTEST_COLOR=no timeout "${ATTNCHECK_GPU_SANITIZER_TIMEOUT:-480}" compute-sanitizer --tool racecheck --error-exitcode 3 \
          "$bin/cuda_kernels_test" --gtest_filter="${parts[$i]}" >"$out/sanitizer_racecheck_$i.log" 2>&1 &
        pids+=($!)
      done
      failed=0 failures=()
      for i in "${!parts[@]}"; do
        wait "${pids[$i]}" || { failed=$((failed + 1)); failures+=("  - FAIL: ${parts[$i]} (sanitizer_racecheck_$i.log)"); }
      done
      hazards=$(grep -h 'RACECHECK SUMMARY' "$out"/sanitizer_racecheck_*.log | grep -vc ': 0 hazards displayed (0 errors, 0 warnings)')
      # Each listed test must have run (passed or skipped) in exactly one part: the tests' own result lines, by name
      # (a count alone let a test run twice stand in for one that never ran).
      ran=$(sed -n -E 's/^\[ +(OK|SKIPPED) \] ([^ ]+) \([0-9]+ ms\)$/\2/p' "$out"/sanitizer_racecheck_*.log | sort)
      total=$(grep -c . <<<"$listed")
      missing=$(comm -23 <(sort -u <<<"$listed") <(sort -u <<<"$ran") | grep .)
      twice=$(uniq -d <<<"$ran" | grep .)
      unlisted=$(comm -13 <(sort -u <<<"$listed") <(sort -u <<<"$ran") | grep .)
      covered=$([ -z "$missing$twice$unlisted" ] && echo 1 || echo 0)
      { [ $failed -ne 0 ] || [ "$covered" = 0 ]; } && status=1 &&
        failed_steps+=("compute-sanitizer --tool racecheck (every test)")
      verdict=PASS
      [ $failed -ne 0 ] && verdict="FAIL ($failed parts)"
      [ "$covered" = 0 ] && verdict="FAIL (not every test ran exactly once)"
      echo "- compute-sanitizer --tool racecheck, every test in ${#parts[@]} parts side by side: $verdict in $(( $(date +%s) - t0 )) s (logs: sanitizer_racecheck_*.log)" >>"$report"
      for f in "${failures[@]}"; do echo "$f" >>"$report"; done
      [ -n "$missing" ] && echo "  - never ran: $(tr '\n' ' ' <<<"$missing")" >>"$report"
      [ -n "$twice" ] && echo "  - ran more than once: $(tr '\n' ' ' <<<"$twice")" >>"$report"
      [ -n "$unlisted" ] && echo "  - ran but not listed: $(tr '\n' ' ' <<<"$unlisted")" >>"$report"
      echo "  - $(grep -c . <<<"$ran") test runs for the $total tests listed; parts with hazards: $hazards" >>"$report"
      continue
    fi
    sub=$all
    [ "$tool" = racecheck ] && sub=$race
    run_step "compute-sanitizer --tool $tool ($sub)" "$out/sanitizer_$tool.log" timeout "${ATTNCHECK_GPU_SANITIZER_TIMEOUT:-240}" \
      compute-sanitizer --tool "$tool" --error-exitcode 3 "$bin/cuda_kernels_test" --gtest_filter="$sub"
    echo "  - $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer_$tool.log" | tail -1)" >>"$report"
  done
fi

if [ "${ATTNCHECK_GPU_NO_BENCH:-0}" != 1 ]; then
  echo "## Benchmarks" >>"$report"
  filter=${ATTNCHECK_GPU_BENCH_FILTER:-.}
  echo "command: $bin/bench_attention --benchmark_filter='$filter'" >>"$report"
  timeout 600 "$bin/bench_attention" --benchmark_filter="$filter" >"$out/bench.log" 2>&1 || echo "(bench_attention exited $?)" >>"$report"
  { echo '```'; sed -n '/^config (TFLOP\/s)/,$p' "$out/bench.log"; echo '```'; } >>"$report"
  echo "forward_many throughput (small instances, host packing and checks included; bm_host_*: its two host passes alone): $bin/bench_forward_many" >>"$report"
  timeout 300 "$bin/bench_forward_many" >"$out/bench_forward_many.log" 2>&1 || echo "(bench_forward_many exited $?)" >>"$report"
  { echo '```'; grep -E 'bm_forward_many|bm_host_' "$out/bench_forward_many.log"; echo '```'; } >>"$report"
  # cuDNN's rows come from the same program (bench_cudnn_sdpa.cpp, cuDNN's backend API) when it found libcudnn.
  if python3 kernels/cuda/bench_table.py "$out/bench.log" >"$out/bench_table.md" 2>&1; then
    { echo; echo "Joined (fix overhead = base/fixed − 1, by time):"; cat "$out/bench_table.md"; } >>"$report"
  else
    echo "(no joined table: $(tail -1 "$out/bench_table.md"))" >>"$report"
  fi
fi
if [ "${ATTNCHECK_GPU_NO_SUITES:-0}" != 1 ]; then
echo "## Property suites: CUDA kernels vs their CPU models (same binary, same seeds)" >>"$report"
# attncheck check exits 1 when a kernel fails a property (paper must): the verdict comparison is the step's result.
# A report left by an earlier run is removed first, so a check that wrote none cannot be compared in its place.
pairs="-k fa2 -k fa2-fixed -k paper -k paper-fixed -k fa2-psum"
pairs+=" -k cuda:fa2 -k cuda:fa2-fixed -k cuda:paper -k cuda:paper-fixed -k cuda:fa2-psum"
for suite in ${ATTNCHECK_GPU_SUITES:-default bias}; do
  rm -f "$out/suite-$suite.json"
  timeout 600 "$cli" check -q --suite $suite $pairs --findings "$out/findings-$suite" --json "$out/suite-$suite.json" \
    >"$out/suite-$suite.log" 2>&1
done
suite_reports=$(for suite in ${ATTNCHECK_GPU_SUITES:-default bias}; do echo "$out/suite-$suite.json"; done)
# Each check whose verdicts differ, again on the CPU twin (twin:cuda:K; the header says why), for
# compare_verdicts.py --twin.
rm -f "$out"/twin-rerun-*.json
twin_reports=()
i=0
while IFS=$'\t' read -r suite kernel property generator; do
  [ -n "$suite" ] || continue
  i=$((i + 1))
  timeout 600 "$cli" check -q --suite "$suite" -k "twin:$kernel" --property "$property" --family "$generator" \
    --no-shrink --findings "$out/findings-twin-rerun" --json "$out/twin-rerun-$i.json" </dev/null \
    >"$out/twin-rerun-$i.log" 2>&1
  [ -s "$out/twin-rerun-$i.json" ] && twin_reports+=(--twin "$out/twin-rerun-$i.json")
done < <(python3 ci/compare_verdicts.py --differing-checks $suite_reports 2>"$out/differing-checks.log")
run_step "verdicts: cuda:K == K on the suites ${ATTNCHECK_GPU_SUITES:-default bias} (a difference the CPU twin predicts excepted)" \
  "$out/verdicts.log" python3 ci/compare_verdicts.py ${twin_reports[@]+"${twin_reports[@]}"} $suite_reports
{ echo '```'; cat "$out/verdicts.log"; echo '```'; } >>"$report"
# gpu_matches_cpu_model: each CUDA kernel against its CPU twin over the gpu suite (every check must hold).
rm -f "$out/suite-gpu.json"
run_step "gpu_matches_cpu_model: cuda:K against its CPU twin (gpu suite)" "$out/suite-gpu.log" \
  timeout 600 "$cli" check --suite gpu -k cuda:fa2 -k cuda:fa2-fixed -k cuda:paper -k cuda:paper-fixed \
  -k cuda:fa2-psum \
  --findings "$out/findings-gpu" --json "$out/suite-gpu.json"
python3 - "$out/suite-gpu.json" >>"$report" 2>&1 <<'PY' || true
import json, sys
rows = {}
try:
    outcomes = json.load(open(sys.argv[1]))["outcomes"]
except (OSError, ValueError, KeyError, TypeError) as e:
    print(f"(no twin summary: cannot read {sys.argv[1]}: {e}; see suite-gpu.log)")
    sys.exit(0)
for c in outcomes:
    st = c.get("stats", {})
    r = rows.setdefault(c["kernel"], [0, 0, 0.0, 0.0, 0.0, 0.0, []])
    r[0] += c["status"] == "pass"
    r[1] += c["status"] == "fail"
    r[2] = max(r[2], st.get("differ_pct", 0))
    r[3] = max(r[3], st.get("worst_of_bound", 0))
    if st.get("grad_outside_model", 0) > 0:  # the backward's bound is vacuous somewhere in that instance
        r[6].append(c["family"]["generator"])
    else:
        r[4] = max(r[4], st.get("grad_differ_pct", 0))
        r[5] = max(r[5], st.get("grad_worst_of_bound", 0))
print("```")
for k, (p, f, d, w, gd, gw, gu) in rows.items():
    print(f"{k}: {p} pass, {f} FAIL; worst instance: {d:.3f}% of outputs differ from the twin, at {w:.3f} of the bound;"
          f" backward vs the twin: {gd:.3f}% of dQ/dK/dV, at {gw:.3f} of the bound"
          + (f" (the bound vacuous on part of: {', '.join(gu)})" if gu else ""))
print("```")
PY
# The vendor kernel through the same properties (registered when the build found cuDNN).
# (grep without -q: under pipefail an early exit of grep -q would SIGPIPE the list and fail the test)
if "$cli" list 2>/dev/null | grep 'cuda:cudnn' >/dev/null; then
  for suite in ${ATTNCHECK_GPU_SUITES:-default bias}; do
    rm -f "$out/cudnn-$suite.json"
    timeout 600 "$cli" check --suite $suite -k cuda:cudnn --findings "$out/findings-cudnn" \
      --json "$out/cudnn-$suite.json" >"$out/cudnn-$suite.log" 2>&1
  done
  { echo "cuda:cudnn (cuDNN fused SDPA) through the property suites:"; echo '```';
    grep -hE 'FAIL|^ *[0-9]+ checks?:|summary' "$out"/cudnn-*.log | head -60; echo '```'; } >>"$report"
else  # said, not dropped: why attncheck has no cuda:cudnn here (no libcudnn 9, a build without cuDNN headers)
  cudnn_why=$("$cli" check -q --suite quick -k cuda:cudnn 2>&1 >/dev/null | head -1 | cut -c1-300)
  echo "cuda:cudnn (cuDNN fused SDPA) through the property suites: not run, cuda:cudnn is not registered" \
    "here${cudnn_why:+ ($cudnn_why)}" >>"$report"
fi
fi

echo "gpu.sh: report in $report (status $status)"
ended=1
exit $status
