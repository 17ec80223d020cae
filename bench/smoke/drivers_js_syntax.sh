#!/usr/bin/env bash
# Smoke test (ctest bench_drivers_js_syntax): the ONNX Runtime driver and its
# npz reader parse (node --check). Needs only node, not onnxruntime-node.
set -euo pipefail
source "$(dirname "$0")/common.sh"
command -v node >/dev/null || skip "no node on PATH (scripts/install-deps.sh installs nodejs)"
mapfile -t js < <(find "$ROOT/bench" -name '*.js' -not -path '*/node_modules/*' | sort)
[ ${#js[@]} -gt 0 ] || fail "no JavaScript files found under $ROOT/bench"
for f in "${js[@]}"; do
  node --check "$f"
  echo "ok $f"
done
