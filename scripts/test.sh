#!/usr/bin/env bash
# Builds kiln and runs the whole test suite with ctest.
#
#   scripts/test.sh                   Release build in build/, every test
#   scripts/test.sh --sanitize        the same suite built with clang, AddressSanitizer and
#                                     UndefinedBehaviorSanitizer in build-asan/, plus a
#                                     minute of each libFuzzer target (fuzz/)
#   scripts/test.sh --sanitize --quick  what CI runs of it: the runtime and tuner tests
#                                     and the fuzz smoke runs
# The Python module is left out of the sanitizer build: python3 itself is not
# built with AddressSanitizer, so it cannot load an instrumented extension.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" != --sanitize ]; then
  bash scripts/build.sh
  cd build
  ctest --output-on-failure -j "$(nproc)"
  exit
fi

quick=0
[ "${2:-}" = --quick ] && quick=1
bash scripts/install-deps.sh
# -O1, as the AddressSanitizer documentation advises: instrumented code at -O3 took about
# 1.6x as long to compile (src/graph/ops/elementwise.cc: 71 s against 45 s with clang 14)
# and CI builds the compiler a second time here.
CC=clang-14 CXX=clang++-14 cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
  -DKILN_FUZZ=ON -DKILN_BUILD_BENCH=OFF -DKILN_BUILD_PYTHON=OFF
# Leaks are findings; a failed allocation must reach the code that asks for it
# (a package too large for memory is an error, not an abort).
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:detect_odr_violation=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp:print_suppressions=0
if [ $quick -eq 1 ]; then
  cmake --build build-asan --target kiln kiln-measure-worker kiln_fuzzers \
    kiln_runtime_tests kiln_tuner_tests example_deploy example_deploy_c
  cd build-asan
  ctest --output-on-failure -j "$(nproc)" -L '^(runtime|tuner|fuzz)$'
else
  cmake --build build-asan
  cd build-asan
  ctest --output-on-failure -j "$(nproc)"
fi
