#!/usr/bin/env bash
# device_run.sh — on a GPU machine with PyTorch 2.x: build plugin:torch_* (this folder, standalone CMake; a plain
# g++ line if CMake cannot configure against torch) and run attncheck's bias and default suites on each SDPA
# backend, one attncheck process per kernel, in parallel (a crash in one backend cannot take the others down).
# Everything lands in $OUT/r/ and is packed into $OUT/results.tgz (the device tool returns at most 8 files).
# Usage, from the repo root, with attncheck already built in build-gpu/:
#   OUT=/tmp/o bash harness/plugin/torch_sdpa/device_run.sh
# Overrides: RUNS="bias default bias_s7" (suites, _sN = --seed N); for a dry run elsewhere: SO=path/to/plugin.so
# KERNELS="a b" SKIP_BUILD=1 SUITE_TIMEOUT=seconds
set -u
OUT=${OUT:-out/torch_sdpa}
R=$OUT/r
mkdir -p "$R"
B=${BUILD_DIR:-/tmp/tb}
SO=${SO:-$B/libattncheck_torch_sdpa_plugin.so}
KERNELS=${KERNELS:-"torch_flash torch_efficient torch_cudnn torch_math"}
T=${SUITE_TIMEOUT:-90}
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
export LD_LIBRARY_PATH=$PWD/build-gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

if [ -z "${SKIP_BUILD:-}" ]; then
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), torch.cuda.get_device_name(0)); print("sdp switches:", [n for n in dir(torch.backends.cuda) if "sdp" in n or "fa3" in n])' > "$R/env.txt" 2>&1
  PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
  TDIR=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')
  # libtorch_cuda's CUDA libraries (cudart, cudnn, cublas) come from the nvidia-* wheels beside torch.
  NV=$(python3 -c 'import nvidia;print(list(nvidia.__path__)[0])' 2>/dev/null)
  if [ -n "$NV" ]; then
    for d in $(find "$NV" -name 'lib*.so*' -printf '%h\n' | sort -u); do LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d; done
  fi
  stamp "cmake configure" | tee -a "$R/build.log"
  if timeout 90 cmake -S harness/plugin/torch_sdpa -B "$B" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX" >> "$R/build.log" 2>&1; then
    stamp "cmake build" | tee -a "$R/build.log"
    timeout 180 cmake --build "$B" -j16 >> "$R/build.log" 2>&1
  else
    stamp "cmake configure failed: plain g++" | tee -a "$R/build.log"
    ABI=$(python3 -c 'import torch;print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
    mkdir -p "$B"
    timeout 180 g++ -std=c++20 -O2 -fPIC -shared -fvisibility=hidden -D_GLIBCXX_USE_CXX11_ABI=$ABI -I harness/plugin \
      -I "$TDIR/include" -I "$TDIR/include/torch/csrc/api/include" harness/plugin/torch_sdpa/torch_sdpa_plugin.cpp \
      -o "$SO" -L "$TDIR/lib" -Wl,--no-as-needed -ltorch -ltorch_cuda -ltorch_cpu -lc10_cuda -lc10 -Wl,-rpath,"$TDIR/lib" \
      >> "$R/build.log" 2>&1
  fi
  stamp "build done: $(ls -la "$SO" 2>&1)" | tee -a "$R/build.log"
  tail -c 6000 "$R/build.log"
fi

if [ -f "$SO" ]; then
  export ATTNCHECK_PLUGIN_ISOLATION=0  # attncheck initialises CUDA; CUDA does not survive fork
  for k in $KERNELS; do
    (
      for run in ${RUNS:-bias default}; do  # a run is SUITE or SUITE_sSEED (e.g. bias_s7: --suite bias --seed 7)
        suite=${run%%_s*}; seed=(); [ "$suite" != "$run" ] && seed=(--seed "${run##*_s}")
        timeout $T build-gpu/harness/attncheck check --plugin "$SO" -k plugin:$k --suite $suite "${seed[@]}" -q \
          --json "$R/${k}_$run.json" --findings "$R/f_${k}_$run" > "$R/${k}_$run.txt" 2>&1
        echo "exit $?" >> "$R/${k}_$run.txt"
      done
    ) &
  done
  wait
  stamp "suites done"
  for f in "$R"/*.txt; do echo "== $f"; grep -a "note\|^FAIL\|checks:\|^exit" "$f"; done
fi
tar -C "$OUT" -czf "$OUT/results.tgz" r && rm -rf "$R"
stamp "packed $(ls -la "$OUT/results.tgz")"
