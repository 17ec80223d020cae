"""The peers (ONNX Runtime, PyTorch) held to one ISA, so that kiln's code for a target is
timed against the peers' code for the same target on one CPU.

    env = peer_env("avx2", os.environ, work_dir, kiln="build/kiln")

"native" returns the environment unchanged. "avx2" returns one in which
- ONNX Runtime loads a copy of its library whose cpuid instructions trap (isa_mask.py) into
  cpuid_mask.so, which hides AVX-512, VNNI and AMX: MLAS and cpuinfo then pick their AVX2
  kernels, as on an AMD EPYC Zen 3 (ORT has no switch for this);
- PyTorch runs ATen's AVX2 kernels (ATEN_CPU_CAPABILITY) and oneDNN's (ONEDNN_MAX_CPU_ISA).
`kiln_target(isa)` is the kiln target that matches: the Zen 3 CPU that an AVX2-only machine of
MACHINE.md's kind reports.
"""
import os
import shutil
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ISAS = ("native", "avx2")
KILN_TARGETS = {"avx2": "llvm -mcpu=znver3"}
MASK_LIB = "libkiln_cpuid_mask.so"


class PeerIsaError(RuntimeError):
    pass


def kiln_target(isa):
    return KILN_TARGETS.get(isa)


def ort_library():
    """The x86-64 libonnxruntime.so.1 that onnxruntime-node's binding loads."""
    path = os.path.join(HERE, "..", "models", "node_modules", "onnxruntime-node", "bin",
                        "napi-v6", "linux", "x64", "libonnxruntime.so.1")
    if not os.path.exists(path):
        raise PeerIsaError(f"no ONNX Runtime library at {path} (cd bench/models && npm ci)")
    return os.path.normpath(path)


def mask_library(work, kiln=None):
    """cpuid_mask.so: the default build's (next to kiln), else compiled here into work."""
    if kiln:
        built = os.path.join(os.path.dirname(os.path.abspath(kiln)), MASK_LIB)
        if os.path.exists(built):
            return built
    out = os.path.join(work, MASK_LIB)
    src = os.path.join(HERE, "cpuid_mask.c")
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(src):
        cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        if not cc:
            raise PeerIsaError("no C compiler to build cpuid_mask.c")
        subprocess.run([cc, "-O2", "-shared", "-fPIC", src, "-o", out], check=True)
    return out


def masked_ort_dir(work):
    """A folder holding the cpuid-trapping copy of ORT's library (rewritten when ORT changes)."""
    lib = ort_library()
    out_dir = os.path.join(work, "ort-avx2")
    out = os.path.join(out_dir, os.path.basename(lib))
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(lib):
        os.makedirs(out_dir, exist_ok=True)
        subprocess.run(["/usr/bin/python3", os.path.join(HERE, "isa_mask.py"), lib, out],
                       check=True, stdout=subprocess.DEVNULL)
    return out_dir


def check_ort_loads(env, ort_dir):
    """Fails unless node, in env, maps the masked copy of ORT's library and not the original:
    a wrong LD_LIBRARY_PATH would otherwise time ORT's AVX-512 code and call it AVX2."""
    script = ("require('onnxruntime-node');"
              "process.stdout.write(require('fs').readFileSync('/proc/self/maps','utf8'))")
    p = subprocess.run(["node", "-e", script], env=env, cwd=os.path.join(HERE, "..", "models"),
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise PeerIsaError(f"node could not load onnxruntime-node masked:\n{p.stderr[-2000:]}")
    loaded = {line.split()[-1] for line in p.stdout.splitlines()
              if line.endswith("libonnxruntime.so.1")}
    want = os.path.realpath(os.path.join(ort_dir, "libonnxruntime.so.1"))
    if {os.path.realpath(x) for x in loaded} != {want}:
        raise PeerIsaError(f"node loaded {sorted(loaded)}, not the masked {want}")


def peer_env(isa, base_env, work, kiln=None):
    env = dict(base_env)
    if isa in (None, "native"):
        return env
    if isa != "avx2":
        raise PeerIsaError(f"unknown peer ISA '{isa}' (expected one of {', '.join(ISAS)})")
    os.makedirs(work, exist_ok=True)
    ort_dir = masked_ort_dir(work)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        [ort_dir] + [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p])
    env["LD_PRELOAD"] = " ".join([mask_library(work, kiln)] + env.get("LD_PRELOAD", "").split())
    env["KILN_CPUID_MASK"] = "avx2"
    env["ATEN_CPU_CAPABILITY"] = "avx2"
    env["ONEDNN_MAX_CPU_ISA"] = "AVX2"
    env["DNNL_MAX_CPU_ISA"] = "AVX2"
    check_ort_loads(env, ort_dir)
    return env
