#!/usr/bin/env bash
# The long soak: concurrent `kiln tune` processes on one database killed with
# -9 at random moments (tests/soak/tune_kill_soak.py), ROUNDS times with fresh
# seeds, then PY_SECONDS of 8 Python threads sharing one GraphModule
# (tests/soak/python_threads_soak.py: run(x=...) and set_input/run/get_output,
# every output checked) with a fresh seed. The test suite runs one round of 20
# kills (ctest -R soak_tune_kill) and 4 seconds of the threads (soak_python_threads).
#   scripts/soak.sh [ROUNDS=5] [KILLS=20] [PY_SECONDS=300]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
kills=${2:-20}
py_seconds=${3:-300}
[ -x build/kiln ] || bash scripts/build.sh
for ((i = 1; i <= rounds; i++)); do
  echo "== soak round $i of $rounds"
  /usr/bin/python3 tests/soak/tune_kill_soak.py --kiln build/kiln --kills "$kills" \
    --seed "$((RANDOM * 32768 + RANDOM))"
done
if [ "$py_seconds" != 0 ]; then
  if [ -f build/python/kiln/__init__.py ]; then
    echo "== python threads soak, ${py_seconds}s"
    PYTHONPATH=build/python PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 \
      tests/soak/python_threads_soak.py --seconds "$py_seconds" --seed "$((RANDOM * 32768 + RANDOM))"
  else
    echo "== python threads soak skipped: no Python package in build/ (python3-dev, python3-pybind11)"
  fi
fi
