"""The peers (ONNX Runtime, PyTorch) held to one ISA, so that kiln's code for a target is
timed against the peers' code for the same target on one CPU.

    env = peer_env("avx2", os.environ, work_dir, kiln="build/kiln")

"native" returns the environment unchanged. "avx2" returns one in which
- ONNX Runtime (the `onnxruntime` package of the peers' venv, bench/.venv, run through
  ort_run.py) imports a copy of its package (PYTHONPATH) whose native module's cpuid
  instructions trap (isa_mask.py) into cpuid_mask.so, which hides AVX-512, VNNI and AMX: MLAS
  and cpuinfo then pick their AVX2 kernels, as on an AMD EPYC Zen 3 (ORT has no switch for
  this);
- PyTorch runs ATen's AVX2 kernels (ATEN_CPU_CAPABILITY) and oneDNN's (ONEDNN_MAX_CPU_ISA).
`kiln_target(isa)` is the kiln target that matches: the Zen 3 CPU that an AVX2-only machine of
MACHINE.md's kind reports.
"""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ISAS = ("native", "avx2")
KILN_TARGETS = {"avx2": "llvm -mcpu=znver3"}
MASK_LIB = "libkiln_cpuid_mask.so"
sys.path.insert(0, HERE)
import ort_run  # noqa: E402  (this folder: where the peers' venv is)


class PeerIsaError(RuntimeError):
    pass


def kiln_target(isa):
    return KILN_TARGETS.get(isa)


def ort_library():
    """The native module of the venv's onnxruntime package (onnxruntime_pybind11_state*.so,
    which holds ORT itself: the wheel links it in) and the package folder that holds it."""
    why = ort_run.missing()
    if why:
        raise PeerIsaError(why)
    p = subprocess.run([ort_run.PYTHON, "-c", "import onnxruntime.capi.onnxruntime_pybind11_state"
                        " as m, onnxruntime as o, os; print(os.path.dirname(o.__file__));"
                        " print(m.__file__)"], capture_output=True, text=True)
    if p.returncode != 0:
        raise PeerIsaError(f"{ort_run.PYTHON} could not locate onnxruntime:\n{p.stderr[-2000:]}")
    package, lib = p.stdout.split("\n")[:2]
    return os.path.normpath(package), os.path.normpath(lib)


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
    """A folder to put first on PYTHONPATH: an `onnxruntime` package of links to the venv's
    files, except its native module, a cpuid-trapping copy (rewritten when ORT changes)."""
    package, lib = ort_library()
    out_dir = os.path.join(work, "ort-avx2")
    shadow = os.path.join(out_dir, "onnxruntime")
    masked = os.path.join(shadow, os.path.relpath(lib, package))
    if not os.path.exists(masked) or os.path.getmtime(masked) < os.path.getmtime(lib):
        shutil.rmtree(shadow, ignore_errors=True)
        for dirpath, dirnames, filenames in os.walk(package):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            rel = os.path.relpath(dirpath, package)
            os.makedirs(os.path.join(shadow, rel), exist_ok=True)
            for f in filenames:
                src = os.path.join(dirpath, f)
                if src != lib:
                    os.symlink(src, os.path.join(shadow, rel, f))
        subprocess.run(["/usr/bin/python3", os.path.join(HERE, "isa_mask.py"), lib, masked],
                       check=True, stdout=subprocess.DEVNULL)
    return out_dir, os.path.realpath(masked)


def check_ort_loads(env, masked):
    """Fails unless the venv's Python, in env, maps the masked copy of ORT's native module and
    not the original: a wrong PYTHONPATH would otherwise time ORT's AVX-512 code and call it
    AVX2."""
    script = ("import onnxruntime, sys; sys.stdout.write(open('/proc/self/maps').read())")
    p = subprocess.run([ort_run.PYTHON, "-c", script], env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise PeerIsaError(f"{ort_run.PYTHON} could not import onnxruntime masked:\n"
                           f"{p.stderr[-2000:]}")
    name = os.path.basename(masked)
    loaded = {line.split()[-1] for line in p.stdout.splitlines() if line.endswith(name)}
    if {os.path.realpath(x) for x in loaded} != {masked}:
        raise PeerIsaError(f"onnxruntime loaded {sorted(loaded)}, not the masked {masked}")


def peer_env(isa, base_env, work, kiln=None, ort=True):
    """The peers' environment for `isa`; ort=False leaves ONNX Runtime out (a run that does
    not time it needs neither the venv nor the masked copy)."""
    env = dict(base_env)
    if isa in (None, "native"):
        return env
    if isa != "avx2":
        raise PeerIsaError(f"unknown peer ISA '{isa}' (expected one of {', '.join(ISAS)})")
    os.makedirs(work, exist_ok=True)
    if ort:
        ort_dir, masked = masked_ort_dir(work)
        env["PYTHONPATH"] = os.pathsep.join(
            [ort_dir] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["LD_PRELOAD"] = " ".join([mask_library(work, kiln)] + env.get("LD_PRELOAD", "").split())
    env["KILN_CPUID_MASK"] = "avx2"
    env["ATEN_CPU_CAPABILITY"] = "avx2"
    env["ONEDNN_MAX_CPU_ISA"] = "AVX2"
    env["DNNL_MAX_CPU_ISA"] = "AVX2"
    if ort:
        check_ort_loads(env, masked)
    return env
