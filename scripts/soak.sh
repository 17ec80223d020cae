#!/usr/bin/env bash
# The long soak: concurrent `kiln tune` processes on one database killed with
# -9 at random moments (tests/soak/tune_kill_soak.py), ROUNDS times with fresh
# seeds. The test suite runs one round of 20 kills (ctest -R soak_tune_kill).
#   scripts/soak.sh [ROUNDS=5] [KILLS=20]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
kills=${2:-20}
[ -x build/kiln ] || bash scripts/build.sh
for ((i = 1; i <= rounds; i++)); do
  echo "== soak round $i of $rounds"
  /usr/bin/python3 tests/soak/tune_kill_soak.py --kiln build/kiln --kills "$kills" \
    --seed "$((RANDOM * 32768 + RANDOM))"
done
