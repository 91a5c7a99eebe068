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
heavy = sorted(m for m in ("numba", "scipy", "highspy", "ortools", "yaml") if m in sys.modules)
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
    assert not {"numba", "scipy", "highspy"} & set(found["heavy"])
    assert found["forks"] == 0



@pytest.fixture(scope="module")
def replacement(tmp_path_factory):
    """3,000 partitions on 24 brokers, two dead, two empty ones registered: (snapshot, OLD:NEW pairs)."""
    path = tmp_path_factory.mktemp("small") / "replace.json"
    subprocess.run([sys.executable, str(SHARED / "tools" / "gen_cluster.py"), "--brokers", "24", "--racks", "3",
                    "--partitions", "3000", "--topics", "40", "--seed", "11", "--scenario", "replace",
                    "--dead", "2", "--out", str(path)], check=True)
    doc = json.loads(path.read_text())
    holding = {r for p in doc["partitions"] for r in p["replicas"]}
    dead = sorted(b["id"] for b in doc["brokers"] if not b.get("alive", True) and b["id"] in holding)
    new = sorted(b["id"] for b in doc["brokers"] if b.get("alive", True) and b["id"] not in holding)
    return path, ",".join(f"{d}:{n}" for d, n in zip(dead, new))


def test_a_plan_that_solves_no_flow_loads_no_ortools(replacement, tmp_path):
    # A replacement swaps brokers one for one: no flow is solved, and importing OR-Tools would
    # cost some 0.2-0.3 CPU s of the command's 0.6 s budget (issue 38); nor is a YAML file read.
    snapshot, pairs = replacement
    found, plan = probe(snapshot, tmp_path, "replace", "--replace", pairs, "--ignore-warns")
    assert found["code"] == 0
    assert len(plan["partitions"]) > 100  # a real plan was made and reviewed
    assert "ortools" not in found["heavy"]
    assert "yaml" not in found["heavy"]  # only a pools or parameters file is YAML
