"""The runbook on the simulated cluster's clock (issue 36): what it starts and what it
estimates do not depend on `speed`, which only paces the wall clock."""
from __future__ import annotations

import subprocess

from kit.formats import load_snapshot
from kit.plan import plan_replace
from kit.runbook import catalog
from kit.runbook import change as change_step
from kit.runbook.environment import SIMULATED_INTERVAL_S, Environment
from kit.runbook.planning import plan_summary


class _Started:
    """A stand-in for subprocess.Popen: records each command line."""

    commands: list[list[str]] = []

    def __init__(self, cmd, **_):
        self.commands.append([str(x) for x in cmd])


def started(monkeypatch, tmp_path, speed: float, metrics: str = "") -> list[list[str]]:
    """The `kit` command lines `start_processes` runs for an auto-throttled change at `speed`."""
    _Started.commands = []
    monkeypatch.setattr(subprocess, "Popen", _Started)
    env = Environment("127.0.0.1:2181/kafka", True, str(tmp_path))
    samples = str(tmp_path / "samples")
    change = change_step.Change(env, [], "auto", 10e6, 0, [], str(tmp_path / "events.jsonl"), samples,
                                 str(tmp_path / "rollback.json"), str(tmp_path / "throttle.err"), "", "", "simulated")
    change_step.start_processes(change, speed, 0.5, SIMULATED_INTERVAL_S, metrics, 900.0)
    return _Started.commands


def option(cmd: list[str], name: str) -> str:
    return cmd[cmd.index(name) + 1]


def test_on_the_simulated_cluster_the_loop_runs_on_its_clock_the_same_at_any_speed(monkeypatch, tmp_path):
    runs = {speed: started(monkeypatch, tmp_path, speed) for speed in (2000.0, 20000.0)}
    for speed, (controller, loop) in runs.items():
        assert controller[3:5] == ["sim", "run"] and option(controller, "--speed") == str(speed)
        assert option(controller, "--await-actor") == "auto-throttle"  # its clock waits for the loop's first round
        assert option(loop, "--clock") == "simulated"
        assert float(option(loop, "--interval")) == SIMULATED_INTERVAL_S  # simulated seconds, not wall
        assert float(option(controller, "--sample-every")) == SIMULATED_INTERVAL_S  # a sample for each round
    assert runs[2000.0][1] == runs[20000.0][1]  # the loop cannot tell the speeds apart


def test_metrics_from_elsewhere_keep_the_loop_on_the_wall_clock(monkeypatch, tmp_path):
    """A what-if on the simulated cluster (metrics withheld: another samples folder): the loop
    reads no clock there, so it decides on the wall clock and the controller waits for no one."""
    elsewhere = tmp_path / "no-metrics"
    elsewhere.mkdir()
    controller, loop = started(monkeypatch, tmp_path, 50000.0, str(elsewhere))
    assert "--await-actor" not in controller
    assert option(loop, "--clock") == "samples" and float(option(loop, "--interval")) == 0.5


def test_the_estimate_does_not_depend_on_speed(capsys):
    cluster = load_snapshot(str(catalog.RUNBOOKS / "clusters" / "broker_replacement.json"))
    plan = plan_replace(cluster, [(1009, 1013)])
    env = Environment("127.0.0.1:2181/kafka", True, "unused")
    slow, fast = (plan_summary(plan, env=env, speed=s) for s in (100.0, 20000.0))
    assert slow["estimate_s"] == fast["estimate_s"] > 0
    assert slow["estimate_assumptions"] == fast["estimate_assumptions"]
