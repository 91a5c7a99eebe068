"""An evacuation's count balance over the replicas it re-placed (`place.place_orphans`): where
they already sit where the moves would go, it ends without loading numba (its first move is
searched for plainly, `CountBalance.run`), and the plan is the one the compiled kernel makes."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import SHARED

# Runs `kit plan` as the command does (numba loaded first when asked), then says what it loaded.
PROBE = """
import json, sys
if sys.argv[1] == "preload":
    from kit.plan.steps import count_kernels
    count_kernels.preload()
from kit.cli import main
code = main(sys.argv[2:])
print(json.dumps({"code": code, "numba": "numba" in sys.modules}))
"""


@pytest.fixture(scope="module")
def drifted(tmp_path_factory):
    """6,000 partitions on 30 brokers, counts drifted (the balance's fewest moves: some 3,000),
    the two highest ids to remove."""
    path = tmp_path_factory.mktemp("drift") / "drift.json"
    subprocess.run([sys.executable, str(SHARED / "tools" / "gen_cluster.py"), "--brokers", "30", "--racks", "3",
                    "--partitions", "6000", "--topics", "60", "--seed", "11", "--scenario", "drift",
                    "--out", str(path)], check=True)
    ids = sorted(b["id"] for b in json.loads(path.read_text())["brokers"])
    return path, f"{ids[-2]},{ids[-1]}"


def _remove(snapshot, remove, out, preload):
    env = {**os.environ, "KIT_PLAN_PROCESSES": "1"}  # one process: what this one loads is what decides
    run = subprocess.run([sys.executable, "-c", PROBE, "preload" if preload else "-", "plan", "remove",
                          "--snapshot", str(snapshot), "--remove", remove, "--out", str(out)],
                         capture_output=True, text=True, check=True, env=env, timeout=600)
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_a_pool_with_no_move_to_make_loads_no_numba_and_plans_as_the_kernel_does(drifted, tmp_path):
    snapshot, remove = drifted
    plain = _remove(snapshot, remove, tmp_path / "plain.json", preload=False)
    assert plain == {"code": 0, "numba": False}
    compiled = _remove(snapshot, remove, tmp_path / "compiled.json", preload=True)
    assert compiled == {"code": 0, "numba": True}
    assert (tmp_path / "plain.json").read_bytes() == (tmp_path / "compiled.json").read_bytes()
    assert json.loads((tmp_path / "plain.json").read_text())["partitions"]  # the brokers' replicas moved
