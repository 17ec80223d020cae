#!/usr/bin/env bash
# Builds kiln and runs its demo: a dense and a conv2d kernel scheduled,
# lowered, compiled to native code, checked against the reference and timed,
# then emitted as a shared library and run through the runtime.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
./build/kiln demo "$@"
