"""`make lab`: the command it runs starts as the user it runs as (root included)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def lab_command(**env) -> str:
    """The `jupyter lab` line `make lab` would run (make -n: nothing is started or installed)."""
    if not shutil.which("make"):
        pytest.skip("no make")
    environ = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "LAB_ARGS")}
    r = subprocess.run(["make", "-n", "-C", str(ROOT), "lab"], capture_output=True, text=True, timeout=120,
                       env={**environ, **env})
    assert r.returncode == 0, r.stderr
    return next(line for line in r.stdout.splitlines() if "jupyter lab" in line)


def test_make_lab_allows_root_only_as_root_and_skips_the_browser_without_a_display():
    line = lab_command()
    # Jupyter refuses root without --allow-root; anyone else should not get it.
    assert ("--allow-root" in line.split()) == (os.geteuid() == 0), line
    assert "--no-browser" in line.split() or os.uname().sysname == "Darwin", line
    assert "--no-browser" not in lab_command(DISPLAY=":0").split()
    assert "--port=8899" in lab_command(LAB_ARGS="--port=8899").split()
