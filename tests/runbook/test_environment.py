"""The runbooks' environment on a workdir used before: a simulated cluster kit started there
(its marker says so) is replaced by a fresh one, whatever state it was left in; what kit did
not mark, or what another run still uses, is refused and left alone."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kit.cluster.zk import server as localzk
from kit.errors import Unsafe
from kit.pids import alive  # a zombie not yet reaped (by init, here) counts as gone
from kit.runbook.steps import SIMULATED_MARKER, open_environment

ROOT = Path(__file__).resolve().parents[2]


def test_open_environment_twice_on_one_workdir_replaces_the_simulated_cluster(tmp_path, capsys):
    wd = str(tmp_path / "wd")
    first = open_environment("", "broker_replacement", wd)
    try:
        cluster, _ = first.read()
        first.close()  # as `kit run` leaves it: stopped, its ZooKeeper's data still there
        (tmp_path / "wd" / "events.jsonl").write_text('{"source":"throttle","kind":"rate"}\n')  # the last change's
        capsys.readouterr()
        second = open_environment("", "broker_replacement", wd)  # was: Unsafe, already holds Kafka topics
        said = capsys.readouterr().out
        assert said.count("Replacing the simulated cluster kit started in") == 1 and said.count("\n") == 1
        again, _ = second.read()
        assert again.assignment() == cluster.assignment()  # the situation afresh
        assert not (tmp_path / "wd" / "events.jsonl").exists()  # nor read as the new run's
        running = localzk.status(os.path.join(wd, "zookeeper"))
        third = open_environment("", "broker_replacement", wd)  # the same kernel, Run All again
        assert not alive(running.pid) and second.zk_data is None  # the one it replaced is stopped
        third.close()
    finally:
        first.close()


def test_a_simulated_cluster_left_running_by_a_dead_kernel_is_stopped_and_replaced(tmp_path, capsys):
    wd = tmp_path / "wd"
    # A kernel that started the simulated cluster and died without closing it (no atexit).
    # It says which kafka-python modules it loaded: a ZooKeeper cluster needs none (0.1 CPU s
    # of a runbook's kernel when kit.sim.kraft.cluster was imported for either cluster).
    script = ("import os, sys\nfrom kit.runbook.steps import open_environment\n"
              f"open_environment('', 'broker_replacement', {str(wd)!r})\n"
              "print(sorted(m for m in sys.modules if m.partition('.')[0] == 'kafka'), flush=True)\nos._exit(0)\n")
    ran = subprocess.run([sys.executable, "-c", script], check=True, timeout=180, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True)
    assert "[]" in ran.stdout.splitlines(), ran.stdout  # the list, whatever else the start printed
    left = localzk.status(str(wd / "zookeeper"))
    assert left is not None and alive(left.pid)
    env = open_environment("", "broker_replacement", str(wd))
    try:
        assert "(stopped it, removed its files)" in capsys.readouterr().out
        assert not alive(left.pid)
        assert env.read()[0].partitions
    finally:
        env.close()


def test_what_kit_did_not_mark_or_another_run_still_uses_is_left_alone(tmp_path):
    wd = tmp_path / "wd"
    (wd / "zookeeper").mkdir(parents=True)
    (wd / "zookeeper" / "precious").write_text("someone's")
    with pytest.raises(Unsafe, match="kit did not mark"):
        open_environment("", "broker_replacement", str(wd))
    assert (wd / "zookeeper" / "precious").read_text() == "someone's"
    assert not (wd / SIMULATED_MARKER).exists()

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:  # marked by a run whose process is still going: its cluster is not ours to stop
        (wd / SIMULATED_MARKER).write_text(json.dumps({"pid": other.pid, "started": "2026-01-01T00:00:00Z"}))
        with pytest.raises(Unsafe, match=f"process {other.pid}"):
            open_environment("", "broker_replacement", str(wd))
        assert (wd / "zookeeper" / "precious").exists()
    finally:
        other.kill()
        other.wait()
