"""The harness kit ships (kit/testing.py) does what its users rely on: a real ZooKeeper that
answers, seeded brokers registered as running ones would be, and nothing left running after."""
from __future__ import annotations

import os

from kit.cluster.zk import server as localzk
from kit.cluster.zk.layout import connect
from kit.formats import load_snapshot
from kit.testing import local_zookeeper, run_kit, seed, wait_for


def test_a_local_zookeeper_answers_holds_a_seeded_cluster_and_leaves_nothing_running(tmp_path, snapshots):
    data = str(tmp_path / "zk")
    cluster = load_snapshot(str(snapshots["replace"]))
    with local_zookeeper(data) as where:
        port = int(where.rsplit(":", 1)[1])
        assert localzk.answers(port)
        seed(f"{where}/harness", cluster)
        client = connect(f"{where}/harness")
        try:
            registered = sorted(map(int, client.get_children("/brokers/ids")))
        finally:
            client.stop()
            client.close()
        assert registered == sorted(cluster.live_ids)
        # `kit sim seed`'s own holder in another chroot is stopped on exit too.
        assert run_kit("sim", "seed", "--zk", f"{where}/held", "--snapshot", snapshots["replace"]).returncode == 0
    assert localzk.status(data) is None
    wait_for("the server's port free", lambda: localzk.port_free(port), limit=60)


def test_wait_for_returns_what_the_event_gave_and_names_it_when_it_never_comes():
    seen = iter([None, 0, "there"])
    assert wait_for("the third look", lambda: next(seen), every=0.01) == "there"
    try:
        wait_for("an event that never comes", lambda: None, limit=0.05, every=0.01)
    except AssertionError as e:
        assert "an event that never comes: not within 0 s" in str(e)
    else:
        raise AssertionError("wait_for did not give up")


def test_a_warm_run_is_the_command_run_cold(tmp_path, snapshots):
    """`run_kit` forks its commands from a process that has imported kit (kit.warm_cli): the
    same exit code, stdout, stderr and files as the console script started from nothing, with
    the caller's arguments, environment and working directory."""
    def both(*args, **kw):
        return [run_kit(*args, cold=cold, **kw) for cold in (False, True)]

    # A refusal: exit 2, its one line on stderr.
    warm, cold = both("plan", "rebuild", "--snapshot", tmp_path / "missing.json", "--out", tmp_path / "p.json")
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    assert warm.returncode == 2 and warm.stderr.count("\n") == 1
    # A plan written to a path relative to the working directory given.
    for name in ("warm", "cold"):
        (tmp_path / name).mkdir()
    runs = [run_kit("plan", "scale-out", "--snapshot", snapshots["scale-out"], "--out", "plan.json",
                    cwd=tmp_path / name, cold=name == "cold") for name in ("warm", "cold")]
    assert [r.returncode for r in runs] == [0, 0] and runs[0].stdout == runs[1].stdout
    assert (tmp_path / "warm" / "plan.json").read_bytes() == (tmp_path / "cold" / "plan.json").read_bytes()
    # The environment given, not the caller's: a malformed ZooKeeper auth there is refused first;
    # under the caller's environment (no $KIT_ZK_AUTH) the same command is refused for its
    # address without a port instead (at once: a closed port was waited on for the connect
    # timeout, 10 s).
    assert "KIT_ZK_AUTH" not in os.environ
    env = {"PATH": "/usr/bin:/bin", "KIT_ZK_AUTH": "nonsense"}
    warm, cold = both("status", "--zk", "127.0.0.1/x", env=env, timeout=60)
    assert (warm.returncode, warm.stderr) == (cold.returncode, cold.stderr) and warm.returncode == 2
    assert "ZooKeeper auth" in warm.stderr, warm.stderr
    plain = run_kit("status", "--zk", "127.0.0.1/x", timeout=60)
    assert plain.returncode == 2 and "ZooKeeper auth" not in plain.stderr and "HOST:PORT" in plain.stderr, plain.stderr


def test_a_warm_run_past_its_timeout_is_killed_and_said(tmp_path):
    import subprocess
    import time

    started = time.monotonic()
    try:
        # Waits for a ZooKeeper nobody runs (a closed port) longer than the timeout.
        run_kit("sim", "run", "--zk", "127.0.0.1:9/x", timeout=5)
    except subprocess.TimeoutExpired as e:
        assert e.timeout == 5
    else:
        raise AssertionError("no timeout")
    assert time.monotonic() - started < 120
