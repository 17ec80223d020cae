#!/usr/bin/env bash
# Fuzzes kiln's readers of untrusted files with libFuzzer (clang, AddressSanitizer,
# UndefinedBehaviorSanitizer): the ONNX import path, the npz reader, the package
# loader (tar + mod.json + mod.params) and `kiln records import` (fuzz/*_fuzzer.cc).
#
#   scripts/fuzz.sh [SECONDS=600] [TARGET ...]
#
# TARGET is onnx_import, npz, package, records_import or python_api (default: all five),
# run side by side, one per core, SECONDS each. python_api is the Python API's
# random-call fuzzer (fuzz/python_api_fuzz.py) on the normal build's module (python3
# cannot load an instrumented one), with a fresh seed: odd and invalid arguments to every
# public call, each of which must return or raise a clear kiln error, TypeError,
# ValueError or IndexError; a crash (caught in its worker process), a hang or any
# other outcome is a finding, listed with the seed and call in build/fuzz_python_api.log. The build is build-asan/, the
# one `scripts/test.sh --sanitize` uses. The corpora grow across runs in
# build-asan/fuzz-corpus/TARGET (seeded by fuzz/make_seeds.py); a crash,
# sanitizer report, leak, timeout or out-of-memory input is saved in
# build-asan/fuzz-findings/TARGET/ and makes the script exit 1. Reproduce one
# with `build-asan/fuzz/fuzz_TARGET FILE`. The summary gives executions, coverage
# (libFuzzer's cov: edges, ft: features) and corpus size per target.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(onnx_import npz package records_import python_api)
native=()
python_api=0
for t in "${targets[@]}"; do
  if [ "$t" = python_api ]; then python_api=1; else native+=("$t"); fi
done

# kiln itself (the normal build) makes the seed packages and records, and has the Python module.
[ -x build/kiln ] || bash scripts/build.sh
py_status=0
py_pid=
if [ $python_api -eq 1 ]; then
  [ -f build/python/kiln/__init__.py ] || { echo "fuzz: no Python module in build/" >&2; exit 2; }
  echo "fuzz: python_api for ${seconds}s"
  PYTHONPATH=build/python PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 fuzz/python_api_fuzz.py \
    --seconds "$seconds" --work build/fuzz-python-api-long >build/fuzz_python_api.log 2>&1 &
  py_pid=$!
fi
if [ ${#native[@]} -eq 0 ]; then
  wait "$py_pid" || py_status=1
  tail -n 40 build/fuzz_python_api.log
  exit $py_status
fi
targets=("${native[@]}")
command -v clang++-14 >/dev/null || bash scripts/install-deps.sh
CC=clang-14 CXX=clang++-14 cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DKILN_FUZZ=ON -DKILN_BUILD_BENCH=OFF -DKILN_BUILD_PYTHON=OFF >/dev/null
cmake --build build-asan --target kiln_fuzzers

out=build-asan
seeds=$out/fuzz-seeds
[ -f $seeds/records_import/tuned.jsonl ] ||
  /usr/bin/python3 fuzz/make_seeds.py --kiln build/kiln --out $seeds
export KILN_FUZZ_SEED_PACKAGE=$PWD/$seeds/package/conv_relu_gemm.tar
# Leaks are findings too; an allocation the reader asks for and cannot get
# must be its error, not an abort.
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

run_target() {
  local t=$1
  mkdir -p $out/fuzz-corpus/$t $out/fuzz-findings/$t
  $out/fuzz/fuzz_$t -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix=$out/fuzz-findings/$t/ \
    $out/fuzz-corpus/$t $seeds/$t >$out/fuzz_$t.log 2>&1
}

pids=()
running=0
slots=$(($(nproc) - python_api))  # python_api has a core of its own
[ $slots -ge 1 ] || slots=1
for t in "${targets[@]}"; do
  [ -x $out/fuzz/fuzz_$t ] || { echo "fuzz: no target '$t'" >&2; exit 2; }
  if [ $running -ge "$slots" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  echo "fuzz: $t for ${seconds}s"
  run_target "$t" &
  pids+=($!)
  running=$((running + 1))
done
status=0
for i in "${!targets[@]}"; do
  wait "${pids[$i]}" || status=1
done

printf '\n%-16s %12s %8s %8s %8s %10s  %s\n' target execs exec/s cov ft corpus findings
for t in "${targets[@]}"; do
  log=$out/fuzz_$t.log
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p' <<<"$last")
  findings=$(find $out/fuzz-findings/$t -type f | wc -l)
  printf '%-16s %12s %8s %8s %8s %10s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" \
    "${ft:-?}" "${corp:-?}" "$findings"
  if [ "$findings" -gt 0 ]; then
    status=1
    echo "  findings in $out/fuzz-findings/$t/ (log: $log):"
    grep -E 'ERROR: |SUMMARY: |fuzz: ' "$log" | head -5 | sed 's/^/    /'
  fi
done
if [ -n "$py_pid" ]; then
  wait "$py_pid" || py_status=1
  echo
  grep -E '^python api fuzz: [0-9]|^findings|^  seed' build/fuzz_python_api.log | head -40
  [ $py_status -eq 0 ] || { status=1; echo "  python_api findings (log: build/fuzz_python_api.log)"; }
fi
exit $status
