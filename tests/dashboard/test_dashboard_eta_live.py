"""The dashboard's ETA against the end of a real simulated reassignment (issue 39).

A simulated ZooKeeper cluster copies a runbook's plan under the auto-throttle, both on the
simulated clock (`kit sim run --await-actor`, `kit throttle run --clock simulated`), as the
runbooks run it. The test is a third actor on that clock: at each of the controller's samples
the clock waits while the dashboard's poller reads the cluster, so every sample is seen once
however loaded the machine, and the ETA is compared on the simulated clock with the second the
reassignment actually ended.
"""
from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("panel")

from conftest import plan_replace  # noqa: E402
from kit.cluster.backend import ClusterAddress  # noqa: E402
from kit.dashboard import tiles  # noqa: E402
from kit.dashboard.poller import Poller  # noqa: E402
from kit.sim.clock import Actor  # noqa: E402
from kit.sim.physics import SAMPLE_EPOCH  # noqa: E402
from kit.testing import kit_command, run_kit, stop_process  # noqa: E402
from kit.throttle.loop import ACTOR  # noqa: E402

CLUSTERS = Path(__file__).resolve().parents[2] / "runbooks" / "clusters"
INTERVAL = 300.0  # simulated seconds: the runbooks' auto-throttle round, and one sample each
TEST_ACTOR = "dashboard-eta-test"


def _watch(root: str, snapshot: Path, folder: Path, plan: Path) -> tuple[list[tuple[float, dict, str]], float]:
    """Apply `plan` at the auto-throttle's minimum, copy it on the simulated clock, and read the
    dashboard's ETA at every sample: ([(simulated second, eta's dict, the tile's text)], the
    simulated second the copy ended)."""
    assert run_kit("apply", plan, "--zk", root, "--throttle", "10000000").returncode == 0
    samples, events, report = folder / "samples", folder / "events.jsonl", folder / "controller.json"
    actor = Actor(str(samples), TEST_ACTOR, INTERVAL)
    actor.register()
    with open(folder / "sim.log", "w") as sim_log, open(folder / "loop.log", "w") as loop_log:
        sim = subprocess.Popen(kit_command() + [
            "sim", "run", "--zk", root, "--speed", "2000", "--until-idle", "--client-load", "0.5", "--samples",
            str(samples), "--sample-every", str(INTERVAL), "--report", str(report), "--await-actor", ACTOR,
            "--await-actor", TEST_ACTOR], stdout=sim_log, stderr=subprocess.STDOUT)
        loop = subprocess.Popen(kit_command() + [
            "throttle", "run", "--zk", root, "--samples", str(samples), "--interval", str(INTERVAL), "--events",
            str(events), "--until-idle", "--max-seconds", "1500", "--clock", "simulated"],
            stdout=loop_log, stderr=subprocess.STDOUT)
    poller = Poller(ClusterAddress(zk=root), events=str(events), samples=str(samples))
    seen, stop = [], threading.Event()
    deadline = time.monotonic() + 1200  # wall seconds: generous, a loaded machine is slow, not wrong
    try:
        while sim.poll() is None:
            assert time.monotonic() < deadline, "the simulated copy did not end within 1200 s"
            if not actor.wait(stop, idle_every=1.0):
                break
            st = poller.poll()
            if st.progress and st.clock_source == "samples":
                e = tiles.eta(st.progress, st.history)
                text = tiles.progress_view(st.status, e, detail=st.progress, copy_basis=st.copy_basis,
                                           clock_source=st.clock_source).object
                seen.append((st.clock - SAMPLE_EPOCH.timestamp(), e, text))
            actor.acted()
        actor.leave()
        assert sim.wait(timeout=300) == 0, (folder / "sim.log").read_text()[-1500:]
    finally:
        actor.leave()
        for proc in (sim, loop):
            if proc.poll() is None:
                stop_process(proc)
        poller.stop()
    return seen, json.loads(report.read_text())["completion_s"]


@pytest.mark.slow
@pytest.mark.parametrize("situation", ["broker_replacement", "scale_out"])
def test_the_eta_lands_within_ten_percent_of_the_actual_end(situation, zookeeper, tmp_path):
    snapshot = CLUSTERS / f"{situation}.json"
    root = f"{zookeeper}/kit-eta-{situation}"
    assert run_kit("sim", "seed", "--zk", root, "--snapshot", snapshot).returncode == 0
    if situation == "broker_replacement":
        plan = plan_replace(snapshot, tmp_path)
    else:
        plan = tmp_path / "plan.json"
        r = run_kit("plan", "scale-out", "--snapshot", snapshot, "--out", plan)
        assert r.returncode == 0, r.stderr
    seen, end = _watch(root, snapshot, tmp_path, plan)
    # Once the rate is steady: after the auto-throttle's first two rounds, and while at least two
    # samples' worth of the copy is left (the bytes left are as of the newest sample).
    steady = [(t, e, text) for t, e, text in seen if t >= 2 * INTERVAL and end - t >= 2 * INTERVAL]
    assert len(steady) >= 10, [t for t, _, _ in seen]
    off = {t: (e["seconds"] - (end - t)) / (end - t) for t, e, _ in steady}
    assert all(abs(x) <= 0.10 for x in off.values()), {t: f"{x:+.1%}" for t, x in off.items()}
    for _, e, text in steady:
        assert e["basis"] == "physics", e
        assert "at the throttles now, per broker, as the estimate models" in text, text
