"""`kit` runs numpy with one OpenBLAS thread (kit.cli.BLAS_THREADS): set before numpy loads, so
that the pool's second thread is never started; a value the user set is kept."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

# Records OPENBLAS_NUM_THREADS as it is when numpy is first imported, then runs `kit`.
PROBE = """
import importlib.abc, os, sys
seen = []
class Probe(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "numpy" and not seen:
            seen.append(os.environ.get("OPENBLAS_NUM_THREADS", "unset"))
        return None
sys.meta_path.insert(0, Probe())
from kit.cli import main
code = main(sys.argv[1:])
print(code, seen[0] if seen else "numpy never loaded")
"""


@pytest.mark.parametrize("given, expected", [(None, "1"), ("3", "3")])
def test_numpy_loads_with_one_blas_thread_unless_the_user_chose(tmp_path, snapshots, given, expected):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    out = subprocess.run([sys.executable, "-c", PROBE, "plan", "leaders", "--snapshot", str(snapshots["balanced"]),
                          "--out", str(tmp_path / "plan.json"), "--ignore-warns"],
                         env=env, capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.split()[-2:] == ["0", expected], out.stdout + out.stderr
