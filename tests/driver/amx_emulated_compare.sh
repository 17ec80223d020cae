#!/bin/bash
# A quantized model built two ways on this machine, outputs compared byte for
# byte (docs/amx.md, "Convolutions"):
#   1. for this machine as it is (conv2d_NCHWc_int8.x86 / dense_int8.x86:
#      vpdpbusd, or AVX2 code);
#   2. for this machine plus amx-tile and amx-int8, with the tiles emulated
#      (KILN_DEBUG_AMX_EMULATE=1: conv2d_NCHWc_int8_amx.x86 /
#      dense_int8_amx.x86, the AMX kernels' loops and indexing, bit-exact);
#      the package's requires.cpu_features loses its amx-* entries so that
#      this CPU runs it.
# Both run on the same input; the script prints how many kernels use each
# template and exits 0 when every output is byte-identical, 1 otherwise.
# The emulated package's speed says nothing about AMX: do not time it.
#
# Usage: amx_emulated_compare.sh KILN MODEL.onnx INPUT.npz WORKDIR
# Not part of ctest: the models (bench/models/quantized_models.py) are not in
# the repository. tests/driver/amx_conv_build_test.cc does the same on a
# small ResNet built in the test.
set -euo pipefail
if [ $# -ne 4 ]; then
  echo "usage: $0 KILN MODEL.onnx INPUT.npz WORKDIR" >&2
  exit 2
fi
kiln=$1 model=$2 input=$3 work=$4
mkdir -p "$work"
target=$("$kiln" target | awk '/^target/ { $1 = ""; print substr($0, 2) }')

# The builds' reports go to files (a pipe into head would end kiln early).
"$kiln" build "$model" -o "$work/plain.tar" >"$work/plain.log" 2>&1
head -1 "$work/plain.log"
KILN_DEBUG_AMX_EMULATE=1 "$kiln" build "$model" --target "$target,+amx-tile,+amx-int8" \
  -o "$work/amx.tar" >"$work/amx.log" 2>&1
head -1 "$work/amx.log"

# Drops amx-* from mod.json's requires and prints the templates per package.
/usr/bin/python3 - "$work" <<'EOF'
import collections, io, json, sys, tarfile
work = sys.argv[1]
for name in ("plain", "amx"):
    src = f"{work}/{name}.tar"
    with tarfile.open(src) as t:
        members = [(m, t.extractfile(m).read()) for m in t.getmembers()]
    out = []
    for m, data in members:
        if m.name.endswith("mod.json"):
            j = json.loads(data)
            used = collections.Counter(
                op for k in j["kernels"] for op in k["op_types"] if op.endswith(".x86"))
            print(f"{name}: " + ", ".join(f"{n} x{c}" for n, c in sorted(used.items())))
            f = j["requires"]["cpu_features"]
            j["requires"]["cpu_features"] = [x for x in f if not x.startswith("amx-")]
            data = json.dumps(j).encode()
            m.size = len(data)
        out.append((m, data))
    with tarfile.open(f"{work}/{name}.run.tar", "w") as o:
        for m, data in out:
            o.addfile(m, io.BytesIO(data))
EOF

for name in plain amx; do
  "$kiln" run "$work/$name.run.tar" --inputs "$input" --output "$work/$name.npz"
done

# npz members are .npy files: equal bytes, equal arrays (shape, dtype, values).
/usr/bin/python3 - "$work" <<'EOF'
import sys, zipfile
work = sys.argv[1]
a, b = zipfile.ZipFile(f"{work}/plain.npz"), zipfile.ZipFile(f"{work}/amx.npz")
same = sorted(a.namelist()) == sorted(b.namelist())
for n in sorted(a.namelist()):
    eq = same and a.read(n) == b.read(n)
    print(f"{n}: {'byte-identical' if eq else 'DIFFERENT'} ({len(a.read(n))} bytes)")
    same = same and eq
sys.exit(0 if same else 1)
EOF
