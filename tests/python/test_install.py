"""`cmake --install` puts a working kiln package under the prefix: the
module and kiln-measure-worker find libkiln_runtime by their RUNPATH, and
_paths.py names the installed worker and shipped logs."""

import os
import subprocess
import sys

import pytest

BUILD_DIR = os.environ.get("KILN_BUILD_DIR")


@pytest.mark.skipif(not BUILD_DIR, reason="KILN_BUILD_DIR (set by ctest) names the build")
def test_installed_package(tmp_path, tiny):
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", BUILD_DIR, "--prefix", str(prefix)], check=True,
                   stdout=subprocess.DEVNULL)
    site = [p for p, _, files in os.walk(prefix) if "__init__.py" in files
            and os.path.basename(p) == "kiln"]
    assert len(site) == 1, site
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "KILN_MEASURE_WORKER", "KILN_LOGS_DIR")}
    env["PYTHONPATH"] = os.path.dirname(site[0])
    env.pop("LD_LIBRARY_PATH", None)  # the module and the worker find libkiln_runtime by RUNPATH
    code = f"""
import os, kiln, numpy as np
assert kiln.__file__.startswith({str(prefix)!r}), kiln.__file__
assert os.environ["KILN_MEASURE_WORKER"] == {str(prefix / "bin" / "kiln-measure-worker")!r}
assert os.environ["KILN_LOGS_DIR"].startswith({str(prefix)!r})
m = kiln.build({tiny[0]!r}).load()
print(m.run(input=np.zeros((1, 3, 16, 16), np.float32))[0].shape)
s = kiln.tune({tiny[0]!r}, {str(tmp_path / "t.db")!r}, trials=1, tuner="random")
print(s.trials)
"""
    r = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    # tiny's 4 tasks (with the Winograd alternative of its 3x3 convolution), 1 trial each.
    assert r.stdout.split() == ["(1,", "10)", "4"], r.stdout
