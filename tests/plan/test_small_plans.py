"""Small clusters (`kit.plan.workspace.SMALL` partitions or fewer) are planned without the
heavy machinery (issue 38): no numba (nor the SciPy it pulls in) and no second process, even
where the count balance makes more moves than its plain-Python share of a large plan."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import SHARED

# Runs `kit plan` as the command does, then says what it loaded and how often it forked.
PROBE = """
import json, os, sys
forks = []
fork = os.fork
def counted():
    forks.append(1)
    return fork()
os.fork = counted
from kit.cli import main
code = main(sys.argv[1:])
heavy = sorted(m for m in ("numba", "scipy", "ortools") if m in sys.modules)
print(json.dumps({"code": code, "heavy": heavy, "forks": len(forks)}))
"""


@pytest.fixture(scope="module")
def scale_out(tmp_path_factory):
    """3,000 partitions on 24 brokers, 3 empty ones added: the count balance makes 999 moves."""
    path = tmp_path_factory.mktemp("small") / "scale-out.json"
    subprocess.run([sys.executable, str(SHARED / "tools" / "gen_cluster.py"), "--brokers", "24", "--racks", "3",
                    "--partitions", "3000", "--topics", "40", "--seed", "11", "--scenario", "scale-out",
                    "--add", "3", "--out", str(path)], check=True)
    return path


def probe(snapshot, tmp_path, *args):
    """(what the probe said, the plan written) of `kit plan ARGS` on `snapshot`."""
    out = tmp_path / "plan.json"
    env = dict(os.environ)
    env.pop("KIT_PLAN_PROCESSES", None)  # the second process allowed: the size alone decides
    run = subprocess.run([sys.executable, "-c", PROBE, "plan", *args, "--snapshot", str(snapshot), "--out", str(out)],
                         capture_output=True, text=True, check=True, env=env)
    return json.loads(run.stdout.strip().splitlines()[-1]), json.loads(out.read_text())


def test_a_small_scale_out_loads_no_numba_and_forks_no_second_process(scale_out, tmp_path):
    found, plan = probe(scale_out, tmp_path, "scale-out")
    assert found["code"] == 0
    assert len(plan["partitions"]) > 500  # beyond the plain-Python share of a large balance
    assert "numba" not in found["heavy"] and "scipy" not in found["heavy"]
    assert found["forks"] == 0

