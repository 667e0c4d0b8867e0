#!/usr/bin/env bash
# main.sh — README command (1): install, build, and run the main job: the default property suite on the
# built-in kernels (CUDA kernels too when a GPU is present). Exit status is attncheck's: 1 when a kernel
# fails a property (the paper's kernel is expected to), 0 when all pass, 2 on a usage or input error.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install_deps.sh
bash ci/build.sh build Release
./build/harness/attncheck list
exec ./build/harness/attncheck check "$@"
