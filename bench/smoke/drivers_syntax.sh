#!/usr/bin/env bash
# Smoke test (ctest bench_drivers_syntax): every Python driver under bench/
# byte-compiles and every shell driver parses, including the ones that need
# PyTorch or a long run to do anything (those also have real runs in the
# other smoke tests when their dependencies are there). The peers' venv
# (bench/.venv) is not kiln's code: left out.
set -euo pipefail
source "$(dirname "$0")/common.sh"
[ -x "$PYTHON" ] || PYTHON=$(command -v python3) || skip "no python3 to byte-compile with"

mapfile -t py < <(find "$ROOT/bench" -name '*.py' -not -path "$ROOT/bench/.venv/*" | sort)
mapfile -t sh < <(find "$ROOT/bench" -name '*.sh' -not -path "$ROOT/bench/.venv/*" | sort)
[ ${#py[@]} -gt 0 ] || fail "no Python files found under $ROOT/bench"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Compiled into a temporary folder: no __pycache__ in the source tree.
"$PYTHON" - "$tmp" "${py[@]}" <<'PY'
import os, py_compile, sys
out, files = sys.argv[1], sys.argv[2:]
for i, f in enumerate(files):
    py_compile.compile(f, cfile=os.path.join(out, f"{i}.pyc"), doraise=True)
    print(f"ok {f}")
PY
for f in "${sh[@]}"; do
  bash -n "$f"
  echo "ok $f"
done
