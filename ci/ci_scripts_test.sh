#!/usr/bin/env bash
# ci_scripts_test.sh BUILD_DIR — the GPU job's scripts as a user meets them, on any host:
#   compare_verdicts.py: equal verdicts exit 0, a difference exit 1 (also where a failure's family shrank, or an
#     outcome has no partner; a CPU twin twin:cuda:K pairs with K too); a missing, truncated or malformed report and a
#     report with no cuda:K beside its K (nothing compared) or of an interrupted run exit 2 with one line, never a
#     traceback or "0 differ"; a difference the CPU twin predicts (--twin) exits 0, one it does not exits 1;
#     --differing-checks names the checks to rerun;
#   gpu.sh on a host without a usable CUDA device (skipped where BUILD_DIR's attncheck lists cuda:fa2): exit 2 at
#     once, saying why on standard error and in the report, instead of "PASS" for tests that all skipped;
#   gpu.sh on a stand-in GPU build (stub programs: an attncheck that lists cuda:fa2 and writes no report) whose
#     out folder holds an earlier run's reports of equal verdicts: the comparison must fail, not pass on them;
#   the same stand-ins with a cudnn_test whose every test skips and no cuda:cudnn: SKIP with the reason, not PASS, and
#     the cuDNN suites say why they did not run; the report names the build (a bundle's BUILD_INFO), and ends with the
#     job's status, time and failed steps, or that it was stopped (killed mid-way: the step it ran is stopped too);
#   gpu.sh with stand-ins whose suite differs from the model where the twin rerun predicts it (step PASS) or not (FAIL);
#   gpu.sh's racecheck over every test (ATTNCHECK_GPU_RACECHECK_FULL=1), with a stand-in compute-sanitizer and test
#     program that matches --gtest_filter as gtest does: every listed test runs in exactly one part, and a test that
#     never runs or runs twice fails the step, named (the edge-shape sweep's tests were left out until session 32);
#   twin_verdicts.sh with a WORKDIR touches nothing there but its own files;
#   bench_table.py: rows whose fixed variants did not run are kept; a log without rows exits 1, saying so;
#   bench_ab.sh (with bench_ab.py): two stand-in builds alternated, the paired rows' B − A and the TFLOP/s ratios; a run
#     without a GPU, a build without bench_attention and ROUNDS 0 exit 2, saying so;
#   gpu_profile.sh (with ncu_diff.py) on a stand-in ncu: the launches' headline numbers and busiest pipe (a number a
#     details page lacks as –), the comparison's totals, stall reasons and instruction kinds (a guarded instruction
#     counted under its opcode); without ncu, with a spec that is not BUILD:ROW, a build without
#     bench_attention, and a side whose profiled run failed: exit 2, saying why; ncu_diff.py on a file that is not a
#     source page, none, two kernels' pages, or a missing details page: exit 1 with one line.
# Run: ctest -R ci_scripts   or   bash ci/ci_scripts_test.sh build
set -uo pipefail
ci=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
  echo "FAIL: $*" >&2
  echo "  status $rc; stdout: $(head -c 400 "$tmp/out" | tr '\n' ' ')" >&2
  echo "  stderr: $(head -c 600 "$tmp/err" | tr '\n' ' ')" >&2
  failures=$((failures + 1))
}
compare() {  # compare REPORT...: runs compare_verdicts.py, status in $rc
  python3 "$ci/compare_verdicts.py" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
}
no_traceback() { ! grep -q Traceback "$tmp/err"; }

# outcome KERNEL PROPERTY STATUS: one outcome as `attncheck check --json` writes it (the fields the script reads)
outcome() {
  printf '{"kernel": "%s", "property": "%s", "status": "%s", "family_label": "normal", "family_description": "d", "message": ""}' "$@"
}
report() { echo "{\"format\": \"attncheck-report\", \"outcomes\": [$(IFS=,; echo "$*")]}"; }

report "$(outcome fa2 finite pass)" "$(outcome fa2 accurate fail)" \
  "$(outcome cuda:fa2 finite pass)" "$(outcome cuda:fa2 accurate fail)" >"$tmp/same.json"
compare "$tmp/same.json"
{ [ $rc = 0 ] && grep -q '0 differing verdict(s) of 2 compared' "$tmp/out"; } || fail "equal verdicts: want 0, 2 compared"

report "$(outcome fa2 finite pass)" "$(outcome cuda:fa2 finite fail)" >"$tmp/differ.json"
compare "$tmp/differ.json"
{ [ $rc = 1 ] && grep -q 'DIFFERS cuda:fa2=fail fa2=pass' "$tmp/err"; } || fail "a differing verdict: want 1, named"

# A failure's family_description is its shrunk family; the pair is the family as checked (family_checked). Keyed on
# the description, a cuda:K that fails where K passes went unpaired: "0 differing verdict(s) of 0 compared" here.
shrunk() {  # shrunk KERNEL STATUS DESCRIPTION
  printf '{"kernel": "%s", "property": "accurate", "status": "%s", "family_label": "normal", "family_description": "%s", "family_checked": "d", "message": ""}' "$@"
}
report "$(shrunk fa2 pass d)" "$(shrunk cuda:fa2 fail 'd, shrunk to n_k 2')" "$(outcome fa2 finite pass)" \
  "$(outcome cuda:fa2 finite pass)" >"$tmp/shrunk.json"
compare "$tmp/shrunk.json"
{ [ $rc = 1 ] && grep -q 'DIFFERS cuda:fa2=fail fa2=pass: accurate' "$tmp/err" &&
  grep -q '1 differing verdict(s) of 2 compared' "$tmp/out"; } ||
  fail "cuda:K failing (shrunk family) where K passes: want 1, DIFFERS, 2 compared"

# Two reports (the default and bias suites) share entries: each report's outcomes pair among themselves. Keyed without
# the report, the second's outcome replaced the first's, and the first report's difference was not seen.
report "$(outcome fa2 finite pass)" "$(outcome cuda:fa2 finite fail)" >"$tmp/suite_a.json"
report "$(outcome fa2 finite pass)" "$(outcome cuda:fa2 finite pass)" >"$tmp/suite_b.json"
compare "$tmp/suite_a.json" "$tmp/suite_b.json"
{ [ $rc = 1 ] && grep -q '1 differing verdict(s) of 2 compared' "$tmp/out"; } ||
  fail "a difference in the first of two reports sharing an entry: want 1, 2 compared"

# An outcome of one kernel with none of the other under its key is a difference too (one suite run ran both).
report "$(outcome fa2 finite pass)" "$(outcome cuda:fa2 finite pass)" "$(outcome cuda:fa2 accurate pass)" >"$tmp/alone.json"
compare "$tmp/alone.json"
{ [ $rc = 1 ] && grep -q 'UNPAIRED cuda:fa2=pass, no fa2: accurate' "$tmp/err" && grep -q '1 outcome(s) unpaired' "$tmp/out"; } ||
  fail "an outcome of cuda:fa2 with none of fa2: want 1, UNPAIRED"

# A CPU twin (twin:cuda:K, ci/twin_verdicts.sh) pairs with K as cuda:K does, each pair counted on its own.
report "$(outcome fa2 finite pass)" "$(outcome twin:cuda:fa2 finite fail)" "$(outcome cuda:fa2 finite pass)" >"$tmp/twin.json"
compare "$tmp/twin.json"
{ [ $rc = 1 ] && grep -q 'DIFFERS twin:cuda:fa2=fail fa2=pass' "$tmp/err" &&
  grep -q '1 differing verdict(s) of 2 compared$' "$tmp/out" && ! grep -q UNPAIRED "$tmp/err"; } ||
  fail "twin:cuda:fa2 against fa2: want 1, DIFFERS, 2 compared, none unpaired"

# A difference the CPU twin predicts (--twin: the twin rerun on the differing check, same suite) does not fail; one
# it does not predict, or a twin report of another suite, still does. --differing-checks names what to rerun.
in_suite() {  # in_suite SUITE OUTCOME...: a report of that suite (run.suite), outcomes with a family generator
  local suite=$1; shift
  echo "{\"run\": {\"suite\": \"$suite\"}, \"outcomes\": [$(IFS=,; echo "$*" | sed 's/"message"/"family": {"generator": "tied_max"}, "message"/g')]}"
}
in_suite long "$(outcome fa2 accurate pass)" "$(outcome cuda:fa2 accurate fail)" "$(outcome fa2 finite pass)" \
  "$(outcome cuda:fa2 finite pass)" >"$tmp/long.json"
in_suite long "$(outcome twin:cuda:fa2 accurate fail)" >"$tmp/twin_fails.json"
in_suite long "$(outcome twin:cuda:fa2 accurate pass)" >"$tmp/twin_passes.json"
in_suite default "$(outcome twin:cuda:fa2 accurate fail)" >"$tmp/twin_other_suite.json"
compare --differing-checks "$tmp/long.json"
{ [ $rc = 0 ] && [ "$(cat "$tmp/out")" = "$(printf 'long\tcuda:fa2\taccurate\ttied_max')" ]; } ||
  fail "--differing-checks: want one line, suite, kernel, property, generator"
compare --twin "$tmp/twin_fails.json" "$tmp/long.json"
{ [ $rc = 0 ] && grep -q '^PREDICTED cuda:fa2=fail fa2=pass: accurate .*twin:cuda:fa2=fail' "$tmp/out" &&
  grep -q '0 differing verdict(s) of 2 compared; 1 more differ(s) as the CPU twin predicts' "$tmp/out" &&
  grep -qF '| cuda:fa2 | fa2 | 1 | 1 | 1 | 0 | 0 |' "$tmp/out"; } ||
  fail "a difference the twin predicts: want 0, PREDICTED, counted apart"
compare --twin "$tmp/twin_passes.json" "$tmp/long.json"
{ [ $rc = 1 ] && grep -q 'DIFFERS cuda:fa2=fail fa2=pass: .*not predicted: twin:cuda:fa2=pass' "$tmp/err"; } ||
  fail "a difference the twin does not predict: want 1, DIFFERS, not predicted"
compare --twin "$tmp/twin_other_suite.json" "$tmp/long.json"
{ [ $rc = 1 ] && grep -q '1 differing verdict(s) of 2 compared$' "$tmp/out"; } ||
  fail "a twin report of another suite: want 1 (it predicts nothing here)"
compare --twin "$tmp/long.json"
{ [ $rc = 2 ] && no_traceback; } || fail "--twin with no suite report after it: want 2"
compare --bogus "$tmp/long.json"
{ [ $rc = 2 ] && grep -q 'unknown option --bogus' "$tmp/err"; } || fail "an unknown option: want 2, said"
# A twin rerun that erred (the harness's "error: ..." or a kernel fault is a failing status, not a verdict) predicts
# nothing; nor does a twin run cut short; and a GPU outcome that is an error is no verdict to predict.
in_suite long "$(outcome twin:cuda:fa2 accurate fail | sed 's/"message": ""/"message": "error: boom"/')" >"$tmp/twin_error.json"
compare --twin "$tmp/twin_error.json" "$tmp/long.json"
{ [ $rc = 1 ] && grep -q 'not predicted: twin:cuda:fa2=error: boom' "$tmp/err"; } ||
  fail "a twin rerun that erred: want 1, not predicted"
echo "{\"run\": {\"suite\": \"long\", \"interrupted\": \"SIGTERM\"}, \"outcomes\": []}" >"$tmp/twin_cut.json"
compare --twin "$tmp/twin_cut.json" "$tmp/long.json"
{ [ $rc = 1 ] && grep -q 'interrupted by SIGTERM.*predicts nothing' "$tmp/err" && grep -q '^DIFFERS' "$tmp/err"; } ||
  fail "an interrupted twin rerun: want 1, the difference listed, the rerun said to predict nothing"
in_suite long "$(outcome fa2 accurate pass)" "$(outcome cuda:fa2 accurate fail | sed 's/"message": ""/"message": "kernel fault: cuda: boom"/')" \
  >"$tmp/gpu_fault.json"
compare --twin "$tmp/twin_fails.json" "$tmp/gpu_fault.json"
{ [ $rc = 1 ] && grep -q 'DIFFERS cuda:fa2=fail fa2=pass.*kernel fault: cuda: boom' "$tmp/err"; } ||
  fail "a GPU fault beside a failing twin: want 1, no prediction"
# Keys that are not strings: said, exit 2, never a traceback (a list as run.suite raised a TypeError, exit 1).
sed 's/"suite": "long"/"suite": ["long"]/' "$tmp/long.json" >"$tmp/list_suite.json"
compare "$tmp/list_suite.json"
{ [ $rc = 2 ] && grep -q 'run.suite is not a string' "$tmp/err" && no_traceback; } || fail "a list as run.suite: want 2"
sed 's/"family_label": "normal"/"family_label": ["normal"]/' "$tmp/long.json" >"$tmp/list_label.json"
compare "$tmp/list_label.json"
{ [ $rc = 2 ] && grep -q 'family_label not a string' "$tmp/err" && no_traceback; } || fail "a list as family_label: want 2"

report "$(outcome fa2 finite pass)" "$(outcome paper finite fail)" >"$tmp/cpu_only.json"
compare "$tmp/cpu_only.json"
{ [ $rc = 2 ] && grep -q 'nothing compared' "$tmp/err" && ! grep -q '0 differing' "$tmp/out"; } ||
  fail "a report without cuda: kernels: want 2 (nothing compared), not '0 differing'"

report "$(outcome fa2 finite pass)" "$(outcome cuda:paper finite pass)" >"$tmp/unpaired.json"
compare "$tmp/unpaired.json"
[ $rc = 2 ] || fail "cuda:paper without paper: want 2 (nothing compared)"

# A report of an interrupted run (Ctrl-C, a CI cancel: `check` writes it, run.interrupted set): the checks it ran may
# all agree, but some never ran; without the check it read "0 differing", exit 0.
echo "{\"run\": {\"interrupted\": \"SIGTERM\"}, \"not_run\": [{}, {}], \"outcomes\": [$(outcome fa2 finite pass), $(outcome cuda:fa2 finite pass)]}" \
  >"$tmp/interrupted.json"
compare "$tmp/interrupted.json"
{ [ $rc = 2 ] && grep -q 'interrupted by SIGTERM; 2 check(s) did not run' "$tmp/err" && no_traceback; } ||
  fail "an interrupted run's report: want 2, said"

head -c 60 "$tmp/same.json" >"$tmp/truncated.json"
compare "$tmp/same.json" "$tmp/truncated.json"
{ [ $rc = 2 ] && grep -q 'cannot read .*truncated.json' "$tmp/err" && no_traceback; } || fail "a truncated report: want 2"

for bad in '[]' '{"outcomes": null}' '{"outcomes": [{"kernel": "cuda:fa2"}]}' '{"outcomes": [7]}'; do
  echo "$bad" >"$tmp/bad.json"
  compare "$tmp/bad.json"
  { [ $rc = 2 ] && grep -q 'cannot read' "$tmp/err" && no_traceback; } || fail "a malformed report ($bad): want 2, no traceback"
done

compare "$tmp/no_such_report.json"
{ [ $rc = 2 ] && no_traceback; } || fail "a missing report: want 2"

# gpu.sh without a GPU: only the steps before the tests run (the rest is switched off in case it went on).
if "$build/harness/attncheck" list kernels 2>/dev/null | grep -x '  cuda:fa2' >/dev/null; then
  echo "ci_scripts_test: a CUDA device is present: gpu.sh's no-GPU path not tested here"
else
  rc=0
  ATTNCHECK_GPU_SKIP_BUILD=1 ATTNCHECK_GPU_BUILD="$build" ATTNCHECK_GPU_OUT="$tmp/gpu" ATTNCHECK_GPU_NO_SANITIZER=1 \
    ATTNCHECK_GPU_NO_BENCH=1 ATTNCHECK_GPU_NO_SUITES=1 timeout 120 bash "$ci/gpu.sh" >"$tmp/out" 2>"$tmp/err" || rc=$?
  # ... and the reason is attncheck's own (CUDA's answer, or a build without CUDA), not gpu.sh's fallback words
  { [ $rc = 2 ] && grep -q 'no usable CUDA device' "$tmp/err" &&
    grep -q 'No usable CUDA device: nothing was run' "$tmp/gpu/gpu_report.md" &&
    grep -qE 'cudaGetDeviceCount|cannot run this build|has no CUDA kernels' "$tmp/gpu/gpu_report.md" &&
    ! grep -q 'PASS' "$tmp/gpu/gpu_report.md" &&
    tail -1 "$tmp/gpu/gpu_report.md" | grep -qx '## Job status: 2 in [0-9]* s'; } ||
    fail "gpu.sh without a GPU: want status 2, the reason on stderr and in the report (its last line), no PASS"
fi

# gpu.sh past its GPU check, with stand-ins: the suites' attncheck check writes no report this time.
fake="$tmp/fake-build"
mkdir -p "$fake/harness" "$fake/kernels/cuda" "$tmp/gpu-stale"
printf '#!/bin/sh\ncase $1 in list) echo "  cuda:fa2" ;; *) echo "stand-in: no report" >&2; exit 2 ;; esac\n' \
  >"$fake/harness/attncheck"
for t in cuda_kernels_test mma_probe_test; do printf '#!/bin/sh\necho "[  PASSED  ] 1 test."\n' >"$fake/kernels/cuda/$t"; done
# A cudnn_test whose every test skips (libcudnn did not load): SKIP with its reason, not PASS (a GPU docs audit).
printf '#!/bin/sh\necho "x/cudnn_test.cpp:63: Skipped"\necho "libcudnn.so.9 did not load"\necho "[  PASSED  ] 0 tests."\necho "[  SKIPPED ] 8 tests, listed below:"\n' \
  >"$fake/kernels/cuda/cudnn_test"
chmod +x "$fake/harness/attncheck" "$fake"/kernels/cuda/*
echo "built with: CUDA 0.0 (stand-in)" >"$fake/BUILD_INFO"
cp "$tmp/same.json" "$tmp/gpu-stale/suite-default.json"
cp "$tmp/same.json" "$tmp/gpu-stale/suite-bias.json"
rc=0
ATTNCHECK_GPU_SKIP_BUILD=1 ATTNCHECK_GPU_BUILD="$fake" ATTNCHECK_GPU_OUT="$tmp/gpu-stale" ATTNCHECK_GPU_NO_SANITIZER=1 \
  ATTNCHECK_GPU_NO_BENCH=1 timeout 120 bash "$ci/gpu.sh" >"$tmp/out" 2>"$tmp/err" || rc=$?
{ [ $rc = 1 ] && grep -q 'verdicts: cuda:K == K .*: FAIL' "$tmp/gpu-stale/gpu_report.md"; } ||
  fail "gpu.sh whose suites wrote no report: want the verdict step FAIL, not a pass on an earlier run's reports"
{ grep -q '^- cudnn_test (cuda:cudnn): SKIP (every test skipped: libcudnn.so.9 did not load)' \
    "$tmp/gpu-stale/gpu_report.md" && grep -q '^- cuda_kernels_test: PASS' "$tmp/gpu-stale/gpu_report.md" &&
  grep -q 'through the property suites: not run, cuda:cudnn is not registered here (stand-in: no report)' \
    "$tmp/gpu-stale/gpu_report.md"; } ||
  fail "gpu.sh where every cudnn_test test skipped and no cuda:cudnn: want SKIP with the reason and the suites' why"
# The report's header names the build (a bundle's BUILD_INFO); its last lines the job's status, its time and the
# steps that failed.
r="$tmp/gpu-stale/gpu_report.md"
{ grep -qx 'built with: CUDA 0.0 (stand-in)' "$r" &&
  grep -qx '## Job status: 1 in [0-9]* s' "$r" &&
  grep -q '^- failed: verdicts: cuda:K == K on the suites default bias' "$r" &&
  ! grep -q '^## Job status: stopped' "$r"; } ||
  fail "gpu.sh's report: want the bundle's BUILD_INFO, 'Job status: 1', the failed step ($(tail -3 "$r" | tr '\n' ' '))"
# A job killed mid-way (a timeout around it) says so in the report's last lines, not a report that reads whole.
slow="$tmp/slow-build"
cp -r "$fake" "$slow"
printf '#!/bin/sh\necho $$ >"%s"\nexec sleep 60\n' "$tmp/slow.pid" >"$slow/kernels/cuda/cuda_kernels_test"
# The job is sent SIGTERM (what `timeout` sends) once the stand-in test has started: a fixed `timeout 3` failed once
# under ctest -j2's load, when the job had not reached the test by then (session 43; not reproduced).
ATTNCHECK_GPU_SKIP_BUILD=1 ATTNCHECK_GPU_BUILD="$slow" ATTNCHECK_GPU_OUT="$tmp/gpu-slow" ATTNCHECK_GPU_NO_SANITIZER=1 \
  ATTNCHECK_GPU_NO_BENCH=1 bash "$ci/gpu.sh" >"$tmp/out" 2>"$tmp/err" &
job=$! rc=0
for _ in $(seq 300); do [ -s "$tmp/slow.pid" ] && break; sleep 0.1; done
[ -s "$tmp/slow.pid" ] || fail "gpu.sh with a slow stand-in test: the test did not start within 30 s"
kill -TERM "$job"
wait "$job" || rc=$?
r="$tmp/gpu-slow/gpu_report.md"
{ [ $rc = 143 ] && tail -1 "$r" | grep -qx '## Job status: stopped after [0-9]* s, before its last step (killed?)'; } ||
  fail "gpu.sh killed while a test ran: want 143 and 'Job status: stopped ...' last, got $rc ($(tail -3 "$r" | tr '\n' ' '))"
# ... and the test it was running is stopped with it (it ran on, in its timeout's process group, for its 60 s).
for _ in $(seq 25); do kill -0 "$(cat "$tmp/slow.pid")" 2>/dev/null || break; sleep 0.2; done
if kill -0 "$(cat "$tmp/slow.pid")" 2>/dev/null; then
  kill "$(cat "$tmp/slow.pid")"
  fail "gpu.sh killed while a test ran: the test still runs 5 s later"
fi

# gpu.sh with stand-ins whose suite run differs from the model on one check and whose twin rerun of that check gets
# the GPU's verdict: the verdict step passes and the report says PREDICTED; where the twin gets the model's verdict,
# the step fails.
for twin in twin_fails twin_passes; do
  fake="$tmp/fake-twin-build"
  rm -rf "$fake" "$tmp/gpu-twin"
  mkdir -p "$fake/harness" "$fake/kernels/cuda"
  cp "$tmp/long.json" "$fake/suite.json"
  cp "$tmp/$twin.json" "$fake/twin.json"
  cat >"$fake/harness/attncheck" <<'STUB'
#!/bin/bash
here=$(dirname "$0")/..
[ "$1" = list ] && { echo "  cuda:fa2"; exit 0; }
json= twin=0
case " $* " in *" -k twin:cuda:"*) twin=1 ;; esac
# The rerun must name the differing check: its suite, the twin, the property and the family's generator.
if [ $twin = 1 ] && [[ " $* " != *" --suite long -k twin:cuda:fa2 --property accurate --family tied_max --no-shrink "* ]]; then
  echo "stand-in: a rerun that does not name the check: $*" >&2
  exit 2
fi
while [ $# -gt 0 ]; do
  case $1 in --json) json=$2; shift ;; esac
  shift
done
[ -n "$json" ] || exit 2
if [ $twin = 1 ]; then cp "$here/twin.json" "$json"; else cp "$here/suite.json" "$json"; fi
exit 1
STUB
  for t in cuda_kernels_test mma_probe_test; do printf '#!/bin/sh\necho "[  PASSED  ] 1 test."\n' >"$fake/kernels/cuda/$t"; done
  chmod +x "$fake/harness/attncheck" "$fake"/kernels/cuda/*
echo "built with: CUDA 0.0 (stand-in)" >"$fake/BUILD_INFO"
  rc=0
  ATTNCHECK_GPU_SKIP_BUILD=1 ATTNCHECK_GPU_BUILD="$fake" ATTNCHECK_GPU_OUT="$tmp/gpu-twin" ATTNCHECK_GPU_NO_SANITIZER=1 \
    ATTNCHECK_GPU_NO_BENCH=1 ATTNCHECK_GPU_SUITES=long timeout 120 bash "$ci/gpu.sh" >"$tmp/out" 2>"$tmp/err" || rc=$?
  if [ $twin = twin_fails ]; then
    { grep -q 'verdicts: cuda:K == K on the suites long .*: PASS' "$tmp/gpu-twin/gpu_report.md" &&
      grep -q '^PREDICTED cuda:fa2=fail fa2=pass' "$tmp/gpu-twin/gpu_report.md"; } ||
      fail "gpu.sh where the twin predicts the difference: want the verdict step PASS, PREDICTED in the report"
  else
    { grep -q 'verdicts: cuda:K == K on the suites long .*: FAIL' "$tmp/gpu-twin/gpu_report.md" &&
      grep -q 'not predicted: twin:cuda:fa2=pass' "$tmp/gpu-twin/verdicts.log"; } ||
      fail "gpu.sh where the twin gets the model's verdict: want the verdict step FAIL, not predicted"
  fi
done

# gpu.sh's racecheck over every test: a stand-in test program lists tests in gtest's format and, given
# --gtest_filter, runs (logs) the tests the filter selects, matched as gtest matches (POS[:POS...][-NEG[:NEG...]],
# globs); a stand-in compute-sanitizer runs it. Every listed test must run exactly once over the parts.
fake="$tmp/fake-race-build"
rm -rf "$fake" "$tmp/gpu-race"
mkdir -p "$fake/harness" "$fake/kernels/cuda" "$tmp/sanbin"
printf '#!/bin/sh\ncase $1 in list) echo "  cuda:fa2" ;; *) exit 2 ;; esac\n' >"$fake/harness/attncheck"
printf '#!/bin/sh\necho "[  PASSED  ] 1 test."\n' >"$fake/kernels/cuda/mma_probe_test"
cat >"$fake/kernels/cuda/cuda_kernels_test" <<'STUB'
#!/bin/bash
tests=(Variants/CudaKernel.SameInputSameBits/fa2 Variants/CudaKernel.ForwardAgreesWithItsCpuModel/fa2
       Variants/CudaKernel.ForwardManyEqualsForward/fa2 Variants/CudaKernel.BackwardAgreesWithItsCpuModel/fa2
       CudaPoison.DetectsUntouchedAndGuardWrites CudaLaunch.LongBatchBackwardSlices
       Splits/CudaFwdTiling.GivesTheDefaultSplitsBits/0 Splits/CudaFwdTiling.GivesTheDefaultSplitsBits/1
       Variants/CudaShapes.MatchTheirCpuTwin/fa2 Variants/CudaShapes.ForwardManyEqualsForward/fa2)
if [ "${1:-}" = --gtest_list_tests ]; then
  suite=
  for t in "${tests[@]}"; do
    s=${t%.*}. name=${t##*.}
    [ "$s" != "$suite" ] && echo "$s" && suite=$s
    echo "  $name  # GetParam() = x"
  done
  exit 0
fi
filter='*'
case ${1:-} in --gtest_filter=*) filter=${1#--gtest_filter=} ;; esac
pos=${filter%%-*} neg=
[[ $filter == *-* ]] && neg=${filter#*-}
IFS=: read -ra P <<<"$pos"
IFS=: read -ra N <<<"$neg"
n=0
for t in "${tests[@]}"; do
  hit=0
  for p in "${P[@]}"; do [[ $t == $p ]] && hit=1; done
  for p in "${N[@]}"; do [[ $t == $p ]] && hit=0; done
  [ "$t" = "${STANDIN_ALWAYS:-}" ] && hit=1  # a part that runs a test its filter does not select
  [ "$t" = "${STANDIN_NEVER:-}" ] && hit=0   # a test that never runs (or never says it ran)
  [ $hit = 1 ] && { n=$((n + 1)); echo "$t" >>"$(dirname "$0")/ran.log"; echo "[       OK ] $t (0 ms)"; }
done
echo "[  PASSED  ] $n test$([ $n = 1 ] || echo s)."
STUB
# compute-sanitizer --tool racecheck --error-exitcode 3 PROGRAM ARGS...
printf '#!/bin/bash\n[ "${1:-}" = --version ] && { echo stand-in; exit 0; }\nshift 4\n"$@"\nrc=$?\necho "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"\nexit $rc\n' \
  >"$tmp/sanbin/compute-sanitizer"
chmod +x "$fake/harness/attncheck" "$fake"/kernels/cuda/* "$tmp/sanbin/compute-sanitizer"
race_run() {  # race_run [NAME=VALUE ...]: gpu.sh's racecheck over every test on the stand-ins; status in $rc
  rc=0
  env "$@" PATH="$tmp/sanbin:$PATH" ATTNCHECK_GPU_SKIP_BUILD=1 ATTNCHECK_GPU_BUILD="$fake" \
    ATTNCHECK_GPU_OUT="$tmp/gpu-race" ATTNCHECK_GPU_SANITIZER_TOOLS=racecheck ATTNCHECK_GPU_RACECHECK_FULL=1 \
    ATTNCHECK_GPU_NO_BENCH=1 ATTNCHECK_GPU_NO_SUITES=1 timeout 120 bash "$ci/gpu.sh" >"$tmp/out" 2>"$tmp/err" || rc=$?
}
race_run
# The tests step ran the program once without a filter (all 10); the parts must add each test once more.
twice=$(sort "$fake/kernels/cuda/ran.log" | uniq -c | awk '$1 != 2' | wc -l)
{ [ $rc = 0 ] && [ "$twice" = 0 ] && grep -q 'racecheck, every test in .* parts side by side: PASS' "$tmp/gpu-race/gpu_report.md" &&
  grep -q '10 test runs for the 10 tests listed' "$tmp/gpu-race/gpu_report.md"; } ||
  fail "gpu.sh racecheck over every test: want each of the 10 tests in one part, PASS (tests not run once: $twice)"
# A test that never runs, or one run in a part besides its own (a count alone let the one stand in for the other), or
# both at once: FAIL, naming them. The filters do not apply to the full run: a racecheck filter changes nothing.
for kind in never twice both; do
  rm -f "$fake/kernels/cuda/ran.log"
  never= always=
  case $kind in never) never=CudaLaunch.LongBatchBackwardSlices ;; twice) always=CudaPoison.DetectsUntouchedAndGuardWrites ;;
    both) never=CudaLaunch.LongBatchBackwardSlices always=CudaPoison.DetectsUntouchedAndGuardWrites ;; esac
  race_run STANDIN_NEVER="$never" STANDIN_ALWAYS="$always" ATTNCHECK_GPU_RACECHECK_FILTER='CudaPoison.*'
  r="$tmp/gpu-race/gpu_report.md"
  { [ $rc = 1 ] && grep -q 'side by side: FAIL (not every test ran exactly once)' "$r" &&
    { [ -z "$never" ] || grep -q "never ran: $never" "$r"; } &&
    { [ -z "$always" ] || grep -q "ran more than once: $always" "$r"; }; } ||
    fail "gpu.sh racecheck where a test ran $kind: want status 1, FAIL and the test named ($(grep -A3 racecheck "$r" | tr '\n' ' '))"
done

# twin_verdicts.sh with a WORKDIR (ctest's, in the build tree) replaces its own files there and nothing else: it
# removed WORKDIR/corpus, so a WORKDIR of the repository root lost the tracked corpus/.
stub="$tmp/twin-stub"
report "$(outcome fa2 finite pass)" "$(outcome twin:cuda:fa2 finite pass)" >"$tmp/twin_same.json"
printf '#!/bin/bash\nwhile [ $# -gt 0 ]; do [ "$1" = --json ] && cp %q "$2"; shift; done\nexit 1\n' "$tmp/twin_same.json" >"$stub"
chmod +x "$stub"
mkdir -p "$tmp/work/corpus/keep" "$tmp/work/twin-verdicts-findings/old"
bash "$ci/twin_verdicts.sh" "$stub" "$tmp/work" >"$tmp/out" 2>"$tmp/err"
rc=$?
{ [ $rc = 0 ] && [ -d "$tmp/work/corpus/keep" ] && [ ! -e "$tmp/work/twin-verdicts-findings/old" ] &&
  [ -s "$tmp/work/default.json" ]; } ||
  fail "twin_verdicts.sh WORKDIR: want 0, WORKDIR/corpus kept, its own findings folder replaced, reports there"

# bench_table.py (gpu.sh's joined table): a row whose fixed variants did not run ('-': every bwd row) is kept, with
# its fa2/cuDNN ratio; a pattern of four numbers dropped all of them once bench_attention printed '-'.
cat >"$tmp/bench.log" <<'LOG'
config (TFLOP/s)                           fa2 fa2-fixed     paper paper-fix   fa2 ovh% paper ovh%
bwd d128 full   seq4096                  255.1         -     195.2         -          -          -
fwd d128 full   seq4096                  378.9     348.2     227.3     214.4       8.83       6.00

config (TFLOP/s)                 cudnn   (cuDNN 91400, backend graph API)
bwd d128 full   seq4096          543.8
fwd d128 full   seq4096          665.7
LOG
python3 "$ci/../kernels/cuda/bench_table.py" "$tmp/bench.log" >"$tmp/out" 2>"$tmp/err"
rc=$?
{ [ $rc = 0 ] && grep -qF '| bwd | 128 | full | 4096 | 255.1 | – | – | 195.2 | – | – | 543.8 | 0.47 |' "$tmp/out" &&
  grep -qF '| fwd | 128 | full | 4096 | 378.9 | 348.2 | 8.8 | 227.3 | 214.4 | 6.0 | 665.7 | 0.57 |' "$tmp/out"; } ||
  fail "bench_table.py: want the bwd row (fixed variants '-') and the fwd row, with their ratios"

# ... and a log without our rows (bench_attention stopped before its table) is an error, not a header alone and 0.
printf 'bench_attention: no usable CUDA device\n' >"$tmp/bench_empty.log"
python3 "$ci/../kernels/cuda/bench_table.py" "$tmp/bench_empty.log" >"$tmp/out" 2>"$tmp/err"
rc=$?
{ [ $rc = 1 ] && [ ! -s "$tmp/out" ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q 'no rows of our kernels' "$tmp/err"; } ||
  fail "bench_table.py on a log without rows: want 1, one line on stderr, nothing on stdout"

# bench_ab.sh: two stand-in builds (A's fa2-psum overhead 3.10%, B's 2.60%) alternated A B B A: the summary gives
# each side's runs, medians and B − A, and the TFLOP/s with cuDNN's row (its own table in the log) as the drift; a
# second comparison with one round reads its own four runs alone, not the first's eight; a filter asking for paired
# rows that met none says how they are named; a build whose run finds no GPU exits 2, saying so; a build without
# bench_attention exits 2.
stand_in_bench() {  # stand_in_bench DIR PSUM_OVH PSUM_TFLOPS CUDNN_TFLOPS
  mkdir -p "$1/kernels/cuda"
  cat >"$1/kernels/cuda/bench_attention" <<BENCH
#!/bin/bash
echo 'config (TFLOP/s)                           fa2 fa2-fixed     paper paper-fix   fa2 ovh%  paper ovh%  fa2-psum  psum ovh%'
echo 'fwd d128 full   seq4096                  380.0     350.0         -         -       8.57          -     $3       2.00'
echo 'ovh fwd d128 full   seq4096             8.90 [8.33, 9.29] n=15         -                              $2 [2.90, 3.50] n=15'
echo 'config (TFLOP/s)                 cudnn   (cuDNN 91400, backend graph API)'
echo 'fwd d128 full   seq4096          $4'
BENCH
  chmod +x "$1/kernels/cuda/bench_attention"
}
stand_in_bench "$tmp/abA" 3.10 372.5 680.0
stand_in_bench "$tmp/abB" 2.60 376.0 673.2
ab() { ATTNCHECK_AB_OUT="$tmp/ab" bash "$ci/bench_ab.sh" "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?; }
ab "$tmp/abA" "$tmp/abB" x 2
{ [ $rc = 0 ] && [ "$(ls "$tmp/ab"/A_*.log | wc -l)" = 4 ] &&
  grep -qF '| fwd d128 full seq4096 | fa2 → fa2-psum | 3.10, 3.10, 3.10, 3.10 | 2.60, 2.60, 2.60, 2.60 | 3.10 | 2.60 | -0.50 |' "$tmp/out" &&
  grep -qF '| fwd d128 full seq4096 | fa2 → fa2-fixed | 8.90, 8.90, 8.90, 8.90 | 8.90, 8.90, 8.90, 8.90 | 8.90 | 8.90 | +0.00 |' "$tmp/out" &&
  grep -qF '| fwd d128 full seq4096 | fa2-psum | 372.5 | 376.0 | 1.009 |' "$tmp/out" &&
  grep -qF '| fwd d128 full seq4096 | cudnn | 680.0 | 673.2 | 0.990 |' "$tmp/out" &&
  grep -q "card's drift" "$tmp/out" &&
  ! grep -q 'paper → paper-fixed\|| paper |' "$tmp/out" && cmp -s "$tmp/out" "$tmp/ab/summary.md"; } ||
  fail "bench_ab.sh: want 0, 4 runs a side, the paired rows with B − A, the TFLOP/s rows (cuDNN last), nothing unrun"
ab "$tmp/abA" "$tmp/abB" x 1
{ [ $rc = 0 ] && [ "$(ls "$tmp/ab"/*.log | wc -l)" = 4 ] && grep -qF '| 3.10, 3.10 | 2.60, 2.60 |' "$tmp/out"; } ||
  fail "bench_ab.sh, a second comparison: want its own 4 runs alone"
mkdir -p "$tmp/abT/kernels/cuda"  # a build whose runs print the TFLOP/s rows alone (a filter that met no ovh row)
grep -v "^echo 'ovh" "$tmp/abA/kernels/cuda/bench_attention" >"$tmp/abT/kernels/cuda/bench_attention"
chmod +x "$tmp/abT/kernels/cuda/bench_attention"
ab "$tmp/abT" "$tmp/abT" 'ovh/fwd/fa2-fixed|^fwd/fa2' 1
{ [ $rc = 0 ] && grep -q "No paired row: the filter 'ovh/fwd/fa2-fixed|^fwd/fa2' selects none" "$tmp/out" &&
  grep -q 'ovh/<fwd|step>/fa2/<d>/<full|causal>/seq4096 times fa2 → fa2-fixed' "$tmp/out" &&
  grep -q 'No paired row' "$tmp/err" && grep -qF '| fwd d128 full seq4096 | fa2 | 380.0 | 380.0 | 1.000 |' "$tmp/out"; } ||
  fail "bench_ab.sh, a filter asking for ovh rows that met none: want 0, the TFLOP/s rows and a line naming the rows"
ab "$tmp/abT" "$tmp/abT" '^fwd/fa2' 1
{ [ $rc = 0 ] && ! grep -q 'No paired row' "$tmp/out"; } ||
  fail "bench_ab.sh, a filter without ovh: want no line about paired rows"
ab "$tmp/abT" "$tmp/abT" '-ovh' 1  # Google Benchmark's negative filter: every benchmark but the paired ones
{ [ $rc = 0 ] && ! grep -q 'No paired row' "$tmp/out" && grep -qF '| fwd d128 full seq4096 | fa2 | 380.0 |' "$tmp/out"; } ||
  fail "bench_ab.sh, a negative filter (-ovh): want 0, the TFLOP/s rows, no line about paired rows"
printf '#!/bin/bash\necho "bench_attention: no usable CUDA device (no driver): nothing measured, exit 1" >&2\nexit 1\n' \
  >"$tmp/abB/kernels/cuda/bench_attention"
ab "$tmp/abA" "$tmp/abB"
{ [ $rc = 2 ] && grep -q 'no usable CUDA device' "$tmp/err"; } || fail "bench_ab.sh without a GPU: want 2, saying why"
ab "$tmp/abA" "$tmp/nowhere"
{ [ $rc = 2 ] && grep -q "no $tmp/nowhere/kernels/cuda/bench_attention" "$tmp/err"; } ||
  fail "bench_ab.sh with a build that has no bench_attention: want 2, naming it"
ab "$tmp/abA" "$tmp/abA" x 0
{ [ $rc = 2 ] && grep -q 'ROUNDS must be a positive integer' "$tmp/err"; } || fail "bench_ab.sh ROUNDS 0: want 2"

# gpu_profile.sh: a stand-in ncu writes a report file for -o and, on --import, a details page or a small source page
# (A: 100 HGMMA + 200 FMUL, 10 barrier samples at the wgmma wait, 2 samples at the HGMMA under no stall_ column;
# B: 40 more instructions, a guarded BRA, 30 at the wait and 4 under no column; details: A a duration and its busiest
# pipe, B those and its elapsed cycles, in the scaled units ncu picks by size, us and Kcycle: A's 4.32 us is 0.00432 ms).
mkdir -p "$tmp/ncubin"
cat >"$tmp/ncubin/ncu" <<'NCU'
#!/bin/bash
if [ "$1" = --import ]; then
  b=0; case $2 in */B.ncu-rep) b=1 ;; esac
  if [ "$3 $4" = "--page details" ]; then
    if [ $b = 0 ]; then printf '    Duration   us   4.32\n    INF   Shared is the highest-utilized pipeline (41.6%%) x\n'
    else printf '    Duration   us   1,620.00\n    Elapsed Cycles   Kcycle   2,774.58\n    INF   ALU is the highest-utilized pipeline (44.0%%) x\n'
    fi
    exit 0
  fi
  echo '"Kernel Name","flash_fwd_kernel<'$b'>"'
  echo '"Address","Source","# Samples","Instructions Executed","stall_barrier","stall_wait","stall_wait (Not Issued)"'
  echo '"0x10","      HGMMA.64x64x16.F32.BF16 R24, R56, gdesc[UR12].tnspB, R24","'$((7 + 2 * b))'","100","0","5","5"'
  echo '"0x20","      FMUL R1, R2, R3 ;","7","200","0","7","7"'
  echo '"0x30","      WARPGROUP.DEPBAR.LE gsb0, 0x0 ;","'$((10 + 20 * b))'","1","'$((10 + 20 * b))'","0","0"'
  [ $b = 1 ] && echo '"0x40","  @!P0 BRA 0x70 ;","3","40","0","3","3"'
  exit 0
fi
[ -n "${NCU_FAIL:-}" ] && { echo "bench_attention: no usable CUDA device (no driver): nothing measured"; exit 1; }
while [ $# -gt 0 ]; do [ "$1" = -o ] && : >"$2.ncu-rep" && echo report >"$2.ncu-rep"; shift; done
NCU
chmod +x "$tmp/ncubin/ncu"
prof() { PATH="$tmp/ncubin:$PATH" ATTNCHECK_PROFILE_OUT="$tmp/prof" bash "$ci/gpu_profile.sh" "$@" >"$tmp/out" \
  2>"$tmp/err"; rc=$?; }
prof "$tmp/abA:fwd/fa2/d128/full/seq4096" "$tmp/abA:fwd/fa2-psum/d128/full/seq4096"
{ [ $rc = 0 ] && grep -qF '| instructions executed | 301 | 341 | +40 | 1.1329 |' "$tmp/out" &&
  grep -qF '| warp-state samples | 24 | 49 | +25 | 2.0417 |' "$tmp/out" &&
  grep -qF '| (no column) | 2 | 4 | +2 |' "$tmp/out" &&
  grep -qF '| barrier | 10 | 30 | +20 |' "$tmp/out" && grep -qF '| BRA | 0 | 40 | +40 |' "$tmp/out" &&
  grep -qF '| `WARPGROUP.DEPBAR.LE`, barrier | 10 | 30 | +20 |' "$tmp/out" && ! grep -q 'FMUL' "$tmp/out" &&
  grep -qF '| duration (ms) | 0.00432 | 1.62 | 375.0000 |' "$tmp/out" &&
  grep -qF '| elapsed cycles | – | 2,774,580 | – |' "$tmp/out" &&
  grep -qF '| busiest pipe | Shared (41.6%) | ALU (44.0%) | |' "$tmp/out" &&
  grep -q Duration "$tmp/prof/details_B.txt" && cmp -s "$tmp/out" "$tmp/prof/summary.md"; } ||
  fail "gpu_profile.sh: want 0, the headline rows (a missing number as –), the totals, the barrier growth at the wait, BRA"
cat "$tmp/prof/sass_A.csv" "$tmp/prof/sass_B.csv" >"$tmp/two.csv"  # two kernels' pages in one file, for below
cp "$tmp/prof/sass_A.csv" "$tmp/one.csv"  # one kernel's page, for below
prof "$tmp/abA:fwd/fa2/d128/full/seq4096" "$tmp/abA"
{ [ $rc = 2 ] && grep -q "is not BUILD:ROW" "$tmp/err"; } || fail "gpu_profile.sh, a spec without ':': want 2"
prof "$tmp/abA:fwd/fa2/d128/full/seq4096" "$tmp/nowhere:fwd/fa2/d128/full/seq4096"
{ [ $rc = 2 ] && grep -q "no $tmp/nowhere/kernels/cuda/bench_attention" "$tmp/err"; } ||
  fail "gpu_profile.sh, a build without bench_attention: want 2, naming it"
NCU_FAIL=1 prof "$tmp/abA:fwd/fa2/d128/full/seq4096" "$tmp/abA:fwd/fa2-psum/d128/full/seq4096"
{ [ $rc = 2 ] && grep -q 'A (.*): ncu exited 1, no report; its log: .*ncu_A.log: .*no usable CUDA' "$tmp/err"; } ||
  fail "gpu_profile.sh, a profiled run that failed: want 2, naming its log and why"
PATH=/usr/bin:/bin ATTNCHECK_PROFILE_OUT="$tmp/prof" bash "$ci/gpu_profile.sh" "$tmp/abA:fwd/x" "$tmp/abA:fwd/y" \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
{ [ $rc = 2 ] && grep -q 'no ncu' "$tmp/err"; } || fail "gpu_profile.sh without ncu: want 2, saying so"
echo "  Duration  ms  1.47" >"$tmp/details.txt"
for page in "$tmp/details.txt" "$tmp/nowhere.csv" "$tmp/two.csv"; do
  python3 "$ci/../kernels/cuda/ncu_diff.py" "$page" "$page" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  want='not an Nsight Compute source page'; [ "$page" = "$tmp/nowhere.csv" ] && want='cannot read'
  [ "$page" = "$tmp/two.csv" ] && want='holds 2 kernels'
  { [ $rc = 1 ] && [ ! -s "$tmp/out" ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "$want" "$tmp/err"; } ||
    fail "ncu_diff.py on $page: want 1, one line on stderr, nothing on stdout"
done
python3 "$ci/../kernels/cuda/ncu_diff.py" "$tmp/one.csv" "$tmp/one.csv" \
  --details "$tmp/nowhere.txt" "$tmp/details.txt" >"$tmp/out" 2>"$tmp/err"
{ [ $? = 1 ] && [ ! -s "$tmp/out" ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q 'cannot read' "$tmp/err"; } ||
  fail "ncu_diff.py with a missing details page: want 1, one line on stderr, nothing on stdout"

[ $failures = 0 ] && echo "ci_scripts_test: all cases pass"
exit $((failures > 0))
