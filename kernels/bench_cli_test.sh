#!/usr/bin/env bash
# bench_cli_test.sh PROGRAM — the benchmark programs' command line and exit status as a script meets them
# (kernels/bench_main.h): --help prints the flags (exit 0, no GPU needed); an unknown flag, a malformed value
# (also those Google Benchmark takes silently) and a filter that selects nothing are exit 2; a GPU benchmark on a
# host without a usable CUDA device says so on standard error and exits 1, never 0 with nothing measured; what can be
# measured is measured (exit 0).
# PROGRAM is flash_model_bench, bench_attention or bench_forward_many (by its file name). Whether a device is
# present is read from the program's own "no usable CUDA device" line (a GPU the build has no code for counts as
# none), so the same test holds on a GPU host.
# Run: ctest -R bench_cli   or   bash kernels/bench_cli_test.sh build/kernels/cpu/flash_model_bench
set -uo pipefail
prog=$1
name=$(basename "$prog")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# run ARGS...: runs the program (60 s at most), leaves its status in $rc, its output in $tmp/out and $tmp/err.
run() {
  timeout 60 "$prog" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
}
fail() {
  echo "FAIL: $name $*" >&2
  echo "  status $rc; stdout: $(head -c 400 "$tmp/out" | tr '\n' ' ')" >&2
  echo "  stderr: $(head -c 400 "$tmp/err" | tr '\n' ' ')" >&2
  failures=$((failures + 1))
}
no_device() { grep -q 'no usable CUDA device' "$tmp/err"; }

run --help
{ [ $rc = 0 ] && grep -q -- '--benchmark_filter' "$tmp/out"; } || fail "--help: want status 0 and the flags on stdout"

run --no_such_flag
{ [ $rc = 2 ] && grep -q -- 'no_such_flag' "$tmp/err"; } || fail "--no_such_flag: want status 2 naming the flag"

# Bad values Google Benchmark 1.7 takes silently: 0 repetitions ran nothing (exit 0), -3 aborted, xml printed the usage (0)
for bad in --benchmark_repetitions=abc --benchmark_repetitions=0 --benchmark_repetitions=-3 --benchmark_format=xml \
  --benchmark_out_format=yaml; do
  run "$bad" '--benchmark_filter=^run_forward/fa2/16/16$|^fwd/fa2/d64/full/seq1024/|^bm_host_pack/16/'
  [ $rc = 2 ] || fail "$bad: want status 2"
done

run '--benchmark_filter=^no_such_benchmark$'
if [ "$name" = bench_attention ] && no_device; then
  [ $rc = 1 ] || fail "a filter matching nothing, no device: want status 1 (no CUDA device)"
else
  { [ $rc = 2 ] && grep -q 'selects no benchmark' "$tmp/err"; } || fail "a filter matching nothing: want status 2"
fi

case $name in
  flash_model_bench)
    run '--benchmark_filter=^run_forward/fa2/16/16$' --benchmark_min_time=0.01
    { [ $rc = 0 ] && grep -q 'items_per_second' "$tmp/out"; } || fail "one CPU benchmark: want status 0 and a rate"
    ;;
  bench_attention)
    run '--benchmark_filter=^fwd/fa2/d64/full/seq1024/'
    if no_device; then
      { [ $rc = 1 ] && ! grep -q 'TFLOPs=' "$tmp/out"; } || fail "no CUDA device: want status 1 and no measurement"
    else
      { [ $rc = 0 ] && grep -q 'TFLOPs=' "$tmp/out"; } || fail "one GPU benchmark: want status 0 and TFLOP/s"
    fi
    ;;
  bench_forward_many)
    run '--benchmark_filter=^bm_forward_many/16/32/20000/0/' --benchmark_min_time=0.01
    if no_device; then
      { [ $rc = 1 ] && grep -q 'measured nothing' "$tmp/err"; } || fail "no CUDA device: want status 1, said"
    else
      { [ $rc = 0 ] && grep -q 'instances_per_s' "$tmp/out"; } || fail "forward_many: want status 0 and a rate"
    fi
    run '--benchmark_filter=^bm_host_pack/16/' --benchmark_min_time=0.01  # host only: measures with or without a GPU
    { [ $rc = 0 ] && grep -q 'instances_per_s' "$tmp/out"; } || fail "the host pass: want status 0 and a rate"
    ;;
  *)
    echo "bench_cli_test.sh: unknown program $name" >&2
    exit 2
    ;;
esac

[ $failures = 0 ] && echo "bench_cli_test: $name: all cases pass"
exit $((failures > 0))
