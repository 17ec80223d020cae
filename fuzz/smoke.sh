#!/usr/bin/env bash
# A short fuzzing run for the test suite: FUZZER on a fresh corpus seeded from
# SEEDS, RUNS inputs with a fixed random seed (the same inputs on every
# machine, so a CI run cannot turn red on a finding nobody can reproduce;
# scripts/fuzz.sh explores), at most SECONDS; exit 0 when nothing was found.
#   fuzz/smoke.sh FUZZER SEEDS WORK_DIR SECONDS RUNS
set -euo pipefail
fuzzer=$1 seeds=$2 work=$3 seconds=$4 runs=$5
rm -rf "$work"
mkdir -p "$work/corpus" "$work/findings"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
"$fuzzer" -seed=1 -runs="$runs" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 -max_len=65536 \
  -print_final_stats=1 -artifact_prefix="$work/findings/" "$work/corpus" "$seeds" \
  >"$work/log" 2>&1 || true
grep -E '^stat::number_of_executed_units|^#[0-9]+[[:space:]]+DONE' "$work/log" || true
if [ -n "$(ls -A "$work/findings")" ] || ! grep -qE '^#[0-9]+[[:space:]]+DONE' "$work/log"; then
  echo "fuzz smoke: $(basename "$fuzzer") found a problem (input and log in $work):"
  grep -E 'ERROR: |SUMMARY: |fuzz: |runtime error' "$work/log" | head -10
  exit 1
fi
echo "fuzz smoke: $(basename "$fuzzer"): nothing found in $runs runs"
