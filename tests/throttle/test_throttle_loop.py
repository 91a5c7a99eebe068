"""`kit throttle` against a real ZooKeeper, with the simulated controller copying the data."""
from __future__ import annotations

import contextlib
import itertools
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import (finish_reassignment, kit_command, kraft_cluster, plan_replace, restarting_zookeeper,
                      seed_and_apply_replace, wait_for)
from conftest import run_kit as kit
from kit.throttle.decide import Settings
from kit.events import EventLog, read_events
from kit.cluster.zk.changes import apply_plan, children_or_none, merge_configs, remove_config_keys
from kit.throttle.configs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from kit.throttle.loop import IDLE_FINISHED, reassignment_roles, run
from kit.throttle.overrides import remove_override, set_override
from kit.throttle.sources import SampleDirMetrics
from kit.cluster.backend import ClusterAddress, open_backend
from kit.cluster.zk.backend import OVERRIDES
from kit.cluster.zk.layout import SIM_FACTS, connect
from kit.cluster.zk.read import read_cluster

_chroots = itertools.count()
CAP = 125e6
CAP_MAP = ("--cap-map", '{"standard": 125}')  # gen_cluster's brokers: instance type "standard", 125 MB/s


def configs(root: str, kind: str) -> dict[str, dict]:
    client = connect(root)
    try:
        out = {}
        for n in client.get_children(f"/config/{kind}") if client.exists(f"/config/{kind}") else []:
            out[n] = json.loads(client.get(f"/config/{kind}/{n}")[0])["config"]
        return out
    finally:
        client.stop()


def replace_applied(zookeeper, snap, folder) -> tuple[str, Path]:
    """A seeded replace cluster in a chroot of its own, its replacement applied (no throttle)
    and not yet copying: (chroot, plan)."""
    root = f"{zookeeper}/kit-throttle-{next(_chroots)}"
    return root, seed_and_apply_replace(root, snap, folder)


@pytest.fixture
def running_replace(zookeeper, snapshots, tmp_path):
    """A seeded replace cluster with its replacement applied (no throttle) and not yet copying."""
    return replace_applied(zookeeper, snapshots["replace"], tmp_path)


def start_controller(root, samples, speed="20000"):
    # Generous bounds: both ends wait for the copy itself (--until-idle), however loaded the machine.
    return subprocess.Popen([*kit_command(), "sim", "run", "--zk", root, "--speed", speed, "--until-idle",
                             "--max-seconds", "300", "--client-load", "0.5", "--samples", str(samples),
                             "--sample-every", str(float(speed) / 20)],  # a sample every 50 ms of wall time
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@contextlib.contextmanager
def copying_replacement(cluster: str, zookeeper, snap, tmp_path):
    """The replace cluster with its replacement applied (no throttle) and the simulated
    controller copying it, writing samples: yields (kit's cluster options, the samples
    directory). `cluster` "zookeeper": `kit sim run`
    over a seeded chroot; "kraft": the simulated KRaft cluster (its controller running from the
    start, slowly enough that the loop, through the Admin API, decides while it copies)."""
    if cluster == "zookeeper":
        root, _ = replace_applied(zookeeper, snap, tmp_path)
        samples = tmp_path / "samples"
        sim = start_controller(root, samples)
        try:
            yield ["--zk", root], samples
        finally:
            sim.communicate(timeout=400)
        return
    state = tmp_path / "kraft"
    # At 2,500 simulated seconds a wall second (a sample every 50 ms of wall time) the loop still
    # made 44-58 rate decisions, both roles, in each of three runs beside two busy processes.
    with kraft_cluster(snap, state, speed=2500.0, client_load=0.5, sample_every=125.0) as bootstrap:
        plan = plan_replace(snap, tmp_path)
        r = kit("apply", plan, "--bootstrap", bootstrap, timeout=300)
        assert r.returncode == 0, r.stderr
        yield ["--bootstrap", bootstrap], state / "samples"


@pytest.mark.parametrize("cluster", ["zookeeper", "kraft"])
def test_the_loop_throttles_from_measured_network_and_clears_everything_when_done(cluster, zookeeper, snapshots,
                                                                                   tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_STATE_DIR", str(tmp_path / "kit-state"))  # the Admin API's state file, if any
    events, log = tmp_path / "events.jsonl", tmp_path / "throttle.log"
    with copying_replacement(cluster, zookeeper, snapshots["replace"], tmp_path) as (where, samples):
        r = kit("throttle", "run", *where, "--samples", samples, "--interval", "0.3", *CAP_MAP,
                "--events", events, "--log", log, "--until-idle", "--max-seconds", "300", timeout=400)
        assert r.returncode == 0, r.stderr
        # The cluster's own record of its configs, as its backend reads them: every throttle gone.
        with open_backend(ClusterAddress(**{where[0][2:]: where[1]})) as b:
            brokers, topics = b.throttles()
        assert not any(LEADER_RATE in c or FOLLOWER_RATE in c for c in brokers.values())
        assert not any(c for c in topics.values())
    got = [json.loads(x) for x in events.read_text().splitlines()]
    rates = [e for e in got if e["kind"] == "rate" and "clients" in e["reason"]]
    assert rates, got[:5]
    # Each rate is 90% of what that broker's measured clients leave of its 125 MB/s NIC (client
    # traffic is each broker's own, scaled to 50% on average), as its reason says.
    for e in rates:
        used, clients = (float(x) * 1e6 for x in re.search(r"[rt]x ([0-9.]+) MB/s of .*clients ([0-9.]+) MB/s",
                                                           e["reason"]).groups())
        expected = max(0.9 * (CAP - clients - max(used - CAP, 0.0)), 10e6)
        assert e["new"] == pytest.approx(expected, abs=0.2e6) and e["new"] <= 0.9 * CAP, e
    assert {e["role"] for e in rates} == {"leader", "follower"}
    # The last decision cleared everything; then --until-idle said why it stopped.
    assert [e["kind"] for e in got[-2:]] == ["done", "idle"] and got[-1]["reason"] == IDLE_FINISHED
    assert any(e["kind"] == "clear" for e in got)
    text = log.read_text()
    assert "throttle rate broker" in text and "-> " in text and "done" in text


def test_throttles_left_behind_with_nothing_running_are_cleared_at_start(zookeeper, snapshots, tmp_path):
    root = f"{zookeeper}/kit-leftover-{next(_chroots)}"
    assert kit("sim", "seed", "--zk", root, "--snapshot", snapshots["balanced"]).returncode == 0
    plan = tmp_path / "plan.json"
    assert kit("plan", "rebalance", "--snapshot", snapshots["balanced"], "--out", plan).returncode == 0
    client = connect(root)
    try:
        from kit.cluster.zk.changes import set_throttles
        from kit.formats import load_plan
        from kit.cluster.zk.read import read_cluster

        cluster, _ = read_cluster(client)
        moves = load_plan(str(plan), cluster, allow_empty=True) or [{"topic": cluster.partitions[0].topic, "partition": 0,
                                                   "replicas": [b for b in cluster.live_ids
                                                                if b not in cluster.partitions[0].replicas][:3]}]
        set_throttles(client, cluster, moves, 5e7)
        client.delete(SIM_FACTS)  # as a cluster of yours: no seeded NIC figures
    finally:
        client.stop()
    assert any(LEADER_RATE in c for c in configs(root, "brokers").values())
    events = tmp_path / "e.jsonl"
    # No capacity anywhere (ZooKeeper has no NIC figures, no --cap-map): refused before any write.
    r = kit("throttle", "run", "--zk", root, "--samples", tmp_path / "none", "--interval", "0.2",
            "--events", events, "--max-seconds", "0.5")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--cap-map" in r.stderr, r.stderr
    assert any(LEADER_RATE in c for c in configs(root, "brokers").values())
    r = kit("throttle", "run", "--zk", root, "--samples", tmp_path / "none", "--interval", "0.2", *CAP_MAP,
            "--events", events, "--max-seconds", "0.5")
    assert r.returncode == 0, r.stderr
    assert not any(LEADER_RATE in c for c in configs(root, "brokers").values())
    assert "no reassignment running: set for one that has ended, or by another tool" in events.read_text()


def test_a_rate_the_plan_set_on_a_dead_broker_is_cleared_and_not_called_another_runs(zookeeper, snapshots,
                                                                                      tmp_path):
    """A brand-new cluster, a replacement applied at the minimum rate: the apply throttles every
    replica of a moving partition, as Kafka's tool does, the dead broker's included. The loop
    takes that rate off at start (the dead broker copies nothing) and says why: not as a
    leftover of an earlier run or another tool, since nothing earlier existed."""
    from kit.events import EventLog
    from kit.formats import load_snapshot
    from kit.throttle.loop import ThrottleLoop

    root = f"{zookeeper}/kit-dead-rate-{next(_chroots)}"
    snap = snapshots["replace"]
    seed_and_apply_replace(root, snap, tmp_path, "--throttle", str(int(Settings().minimum)))
    dead = [b.id for b in load_snapshot(str(snap)).brokers.values() if not b.alive]
    assert len(dead) == 1 and LEADER_RATE in configs(root, "brokers")[str(dead[0])]  # the apply throttled it
    events = tmp_path / "events.jsonl"
    log = EventLog(str(events))
    with open_backend(ClusterAddress(zk=root)) as backend:
        loop = ThrottleLoop(backend, Settings(), SampleDirMetrics(str(tmp_path / "no-samples"), 60.0), log,
                            cap_map={"*": CAP})
        loop.prepare()
        loop.take_over()
    log.close()
    assert LEADER_RATE not in configs(root, "brokers").get(str(dead[0]), {})
    cleared = [e for e in read_events(str(events)) if e["kind"] == "clear"]
    assert len(cleared) == 1 and cleared[0]["brokers"] == dead, cleared
    reason = cleared[0]["reason"]
    assert "earlier run" not in reason and "another tool" not in reason and "leftover" not in reason, reason
    assert reason.startswith("cleared throttles not needed: 1 brokers' rates, 0 topics' replica lists"), reason
    assert f"dead, copying nothing: {dead[0]}" in reason, reason


def test_overrides_live_in_kafka_kits_znodes_and_the_loop_honours_them(running_replace, tmp_path):
    root, _ = running_replace
    assert kit("throttle", "set", "30000000", "--zk", root, "--autoremove").returncode == 0
    assert kit("throttle", "set", "20000000", "--broker", "1002", "--zk", root).returncode == 0
    client = connect(root)
    try:
        assert json.loads(client.get("/autothrottle/override_rate")[0]) == {"rate": 30.0, "autoremove": True}
        assert json.loads(client.get("/autothrottle/override_rate/1002")[0]) == {"rate": 20.0, "autoremove": False}
    finally:
        client.stop()
    events = tmp_path / "e.jsonl"
    r = kit("throttle", "run", "--zk", root, "--samples", tmp_path / "s", "--interval", "0.2", *CAP_MAP,
            "--events", events, "--max-seconds", "0.5")
    assert r.returncode == 0, r.stderr
    brokers = configs(root, "brokers")
    assert brokers["1002"] == {LEADER_RATE: "20000000", FOLLOWER_RATE: "20000000"}
    assert all(v == "30000000" for b, c in brokers.items() if b != "1002" for v in c.values())
    # The reassignment finishes: the global override goes (autoremove), the broker's stays.
    sim = start_controller(root, tmp_path / "s", speed="300000")
    try:
        r = kit("throttle", "run", "--zk", root, "--samples", tmp_path / "s", "--interval", "0.2", *CAP_MAP,
                "--events", events, "--until-idle", "--max-seconds", "300", timeout=400)
    finally:
        sim.communicate(timeout=400)
    assert r.returncode == 0, r.stderr
    client = connect(root)
    try:
        assert json.loads(client.get("/autothrottle/override_rate")[0] or b"{}") == {}
        assert client.exists("/autothrottle/override_rate/1002")
    finally:
        client.stop()
    assert configs(root, "brokers").get("1002") == {LEADER_RATE: "20000000", FOLLOWER_RATE: "20000000"}
    assert kit("throttle", "remove", "--broker", "1002", "--zk", root).stdout.strip() == "override removed"
    assert kit("throttle", "remove", "--zk", root).stdout.strip() == "no override was set"


def test_without_metrics_the_loop_fails_safe_to_the_minimum_rate(running_replace, tmp_path):
    root, _ = running_replace
    events = tmp_path / "e.jsonl"
    r = kit("throttle", "run", "--zk", root, "--samples", tmp_path / "never", "--interval", "0.2", *CAP_MAP,
            "--stale-intervals", "1", "--min-rate", "7000000", "--events", events, "--max-seconds", "1.5")
    assert r.returncode == 0, r.stderr
    got = [json.loads(x) for x in events.read_text().splitlines()]
    assert any(e["kind"] == "failsafe" and "no metrics" in e["reason"] for e in got)
    assert "failsafe" in r.stderr  # loudly: the human log goes to stderr by default
    rates = configs(root, "brokers")
    assert rates and all(v == "7000000" for c in rates.values() for v in c.values())


@contextlib.contextmanager
def loop_process(launcher: list[str], root: str, tmp_path, events):
    """`kit throttle run --until-idle` over `root` as a process started by `launcher` (the kit
    command, or tests/kill_at.py with its point); killed at the end if still running."""
    loop = subprocess.Popen([*launcher, "throttle", "run", "--zk", root, "--samples", str(tmp_path / "s"),
                             "--interval", "0.3", *CAP_MAP, "--events", str(events), "--until-idle",
                             "--max-seconds", "120"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield loop
    finally:
        if loop.poll() is None:
            loop.kill()
            loop.communicate()


def assert_rode_out(loop: subprocess.Popen, root: str, timeout: float) -> None:
    """The loop ends on its own, having said the outage and its end, and no throttle is left.
    (Whether a call failed and was retried, or waited queued in kazoo for the connection, is
    the race of who noticed first; the watch says the outage either way.)"""
    _, err = loop.communicate(timeout=timeout)
    assert loop.returncode == 0, err
    assert "ZooKeeper unreachable" in err and "ZooKeeper reachable again" in err
    assert not any(LEADER_RATE in c or FOLLOWER_RATE in c for c in configs(root, "brokers").values())
    assert not any(LEADER_REPLICAS in c or FOLLOWER_REPLICAS in c for c in configs(root, "topics").values())


@pytest.mark.slow
def test_the_loop_rides_out_a_zookeeper_restart(snapshots, tmp_path):
    """ZooKeeper goes away mid-run: the loop retries with the rates in force, never crashes,
    and still clears every throttle once the reassignment is done."""
    events = tmp_path / "events.jsonl"
    with restarting_zookeeper(snapshots["scale-out"], tmp_path) as (root, plan, restart, _):
        with loop_process(kit_command(), root, tmp_path, events) as loop:
            # The outage must fall after the loop's first decision, however slowly it starts.
            deadline = time.monotonic() + 60
            while not (events.exists() and events.read_text()) and loop.poll() is None:
                assert time.monotonic() < deadline, "the loop made no decision within 60 s"
                time.sleep(0.1)
            restart()
            assert_rode_out(loop, root, timeout=120)


def _stopped(pid: int) -> bool:
    """Whether the process is stopped (SIGSTOP): state T in /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] in ("T", "t")


@pytest.mark.slow
def test_the_loop_rides_out_a_zookeeper_restart_during_its_start_up(snapshots, tmp_path):
    """ZooKeeper goes away after the loop connected and before it took over the throttles
    (the loop is held there by SIGSTOP, tests/kill_at.py): start-up is retried like a round."""
    events = tmp_path / "events.jsonl"
    kill_at = Path(__file__).parents[1] / "kill_at.py"
    with restarting_zookeeper(snapshots["scale-out"], tmp_path) as (root, plan, restart, _):
        with loop_process([sys.executable, str(kill_at), "pause-before-take-over"], root, tmp_path, events) as loop:
            deadline = time.monotonic() + 120
            while not _stopped(loop.pid):
                assert loop.poll() is None and time.monotonic() < deadline, "the loop never reached its start-up"
                time.sleep(0.1)

            def resume_while_down():
                loop.send_signal(signal.SIGCONT)  # take_over now meets a ZooKeeper that is gone
                wait_until = time.monotonic() + 120
                while not (events.exists() and "ZooKeeper unreachable" in events.read_text()):
                    if loop.poll() is not None:
                        pytest.fail(f"the loop ended while ZooKeeper was down: {loop.communicate()[1][-2000:]}")
                    if time.monotonic() > wait_until:  # what the loop said, for whoever reads the failure
                        loop.kill()
                        pytest.fail(f"no retry within 120 s while ZooKeeper was down: {loop.communicate()[1][-3000:]}")
                    time.sleep(0.1)
            restart(while_down=resume_while_down)
            assert_rode_out(loop, root, timeout=300)


@pytest.mark.parametrize("args, message", [
    (["--samples", "/nonexistent/dir/x"], "--samples"),
    (["--samples", "s", "--cap-map", "[1, 2]"], "--cap-map"),
    (["--samples", "s", "--interval", "-1"], "positive rate"),
])
def test_bad_loop_settings_exit_2_with_one_line(still_replacing, args, message, tmp_path, monkeypatch):
    # Refused before the cluster is reached: the module's one replacement in flight serves.
    root, _ = still_replacing
    monkeypatch.chdir(tmp_path)
    r = kit("throttle", "run", "--zk", root, *args, "--max-seconds", "1")
    assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_kafka_kit_broker_metrics_znode_is_a_metric_source(running_replace, tmp_path):
    """NetRX/NetTX beside StorageFree in /topicmappr/brokermetrics (gzipped, as kafka-kit may
    write it) drive the rates; brokers it does not describe are held at the minimum."""
    import gzip

    root, _ = running_replace
    client = connect(root)
    try:
        doc = {str(b): {"StorageFree": 1e12, "NetRX": 25e6, "NetTX": 50e6}
               for b in map(int, client.get_children("/brokers/ids")) if b != 1013}
        client.set("/topicmappr/brokermetrics", gzip.compress(json.dumps(doc).encode()))
    finally:
        client.stop()
    events = tmp_path / "e.jsonl"
    # The znode's age counts from its write, before kit starts (a second or more on a loaded
    # machine): allow it minutes, so that only the metrics decide the first rates.
    r = kit("throttle", "run", "--zk", root, "--metrics-znode", "--cap-map", '{"*": 125}', "--interval", "0.2",
            "--stale-intervals", "1500", "--events", events, "--max-seconds", "0.5")
    assert r.returncode == 0, r.stderr
    got = {}  # each broker's first decision (later ones see their own throttle in the unchanged figures)
    for e in map(json.loads, events.read_text().splitlines()):
        if e["kind"] == "rate":
            got.setdefault((e["brokers"][0], e["role"]), e)
    leaders = [e for (b, role), e in got.items() if role == "leader"]
    assert leaders and all(e["new"] == pytest.approx(0.9 * (CAP - 50e6)) for e in leaders)
    assert got[(1013, "follower")]["new"] == 10e6 and "no metrics yet" in got[(1013, "follower")]["reason"]


def test_kit_metrics_outputs_are_a_metric_source(tmp_path):
    """`kit metrics --follow` keeps broker_rates.json current; without it the batch job's
    broker_load.parquet gives the latest measured rx/tx."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from kit.errors import BadInput
    from kit.throttle.sources import BrokerLoadMetrics

    with pytest.raises(BadInput, match="no broker_load.parquet"):
        BrokerLoadMetrics(str(tmp_path / "missing"))
    pq.write_table(pa.table({"broker": [1, 2], "measured_rx_bytes_per_sec": [1e6, 2e6],
                             "measured_tx_bytes_per_sec": [3e6, None]}), tmp_path / "broker_load.parquet")
    source = BrokerLoadMetrics(str(tmp_path))
    got = source.read({1, 2})
    assert (got[1].rx, got[1].tx) == (1e6, 3e6) and got[2].tx == 0.0
    (tmp_path / "broker_rates.json").write_text(json.dumps({
        "1": {"window_end": "2026-01-01T00:05:00Z", "rx_bytes_per_sec": 5e6, "tx_bytes_per_sec": 6e6},
        "3": {"window_end": "2026-01-01T00:05:00Z", "rx_bytes_per_sec": 7e6, "tx_bytes_per_sec": 8e6}}))
    got = source.read({1, 2})
    assert set(got) == {1} and (got[1].rx, got[1].tx) == (5e6, 6e6)


def throttles(root: str) -> tuple[dict, dict]:
    """The throttle keys present now: ({topic: replica lists}, {broker: rates}), keyless ones left out."""
    lists = {t: {k: v for k, v in c.items() if k in (LEADER_REPLICAS, FOLLOWER_REPLICAS)}
             for t, c in configs(root, "topics").items()}
    rates = {b: {k: v for k, v in c.items() if k in (LEADER_RATE, FOLLOWER_RATE)}
             for b, c in configs(root, "brokers").items()}
    return {t: c for t, c in lists.items() if c}, {b: c for b, c in rates.items() if c}


def said(events: Path, kind: str) -> bool:
    """Whether the events log holds an event of `kind` (written after the round's writes)."""
    return any(e["kind"] == kind for e in read_events(str(events)))


def test_a_restarted_loop_takes_over_and_clears_what_the_reassignment_in_flight_does_not_need(running_replace,
                                                                                              tmp_path):
    """Loop A throttles the replacement and is killed (SIGKILL: it clears nothing). The replacement
    finishes and a one-partition move begins; loop B, started now, keeps only what that move needs
    (and a broker override), rewrites it whole, and leaves nothing once the move is done."""
    root, _ = running_replace
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    loop = [*kit_command(), "throttle", "run", "--zk", root, "--samples", str(tmp_path / "none"), "--interval", "0.2",
            *CAP_MAP]
    a = subprocess.Popen([*loop, "--events", str(first)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for("loop A's first decision", lambda: said(first, "rate") or a.poll() is not None)
    finally:
        a.kill()
        a.wait(timeout=120)
    assert said(first, "rate"), "loop A exited before deciding"
    old_lists, old_rates = throttles(root)
    assert old_lists and old_rates
    finish_reassignment(root)
    client = connect(root)
    try:
        cluster, running = read_cluster(client)
        assert running is None
        p = next(p for p in cluster.partitions if p.topic in old_lists)
        new = next(b for b in cluster.live_ids if b not in p.replicas)
        apply_plan(client, [{"topic": p.topic, "partition": p.partition, "replicas": [*p.replicas[1:], new]}])
        # `kit apply` clears the leftovers it finds; a loop killed while this move runs leaves its
        # throttles behind all the same: loop A's are written back as that loop would leave them.
        merge_configs(client, "topics", old_lists)
        merge_configs(client, "brokers", old_rates)
        cluster, running = read_cluster(client)
        sources, dests, lists = reassignment_roles(cluster, running)
        taking_part = {str(b) for b in sources | dests}
        overridden = next(b for b in sorted(old_rates) if b not in taking_part)
    finally:
        client.stop()
    with open_backend(ClusterAddress(zk=root)) as backend:
        set_override(backend, 20e6, int(overridden))
    assert set(lists) == {p.topic} and lists[p.topic] != old_lists[p.topic]
    gone_rates = set(old_rates) - taking_part - {overridden}
    gone_lists = set(old_lists) - set(lists)
    assert gone_rates and gone_lists
    b = subprocess.Popen([*loop, "--events", str(second), "--until-idle", "--max-seconds", "300"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Its first round applies the override (A left the minimum there), then says so.
        wait_for("loop B's first round", lambda: said(second, "override") or b.poll() is not None)
        assert b.poll() is None, b.communicate()
        now_lists, now_rates = throttles(root)
        # Every list present is the move's own, whole; every rate one a broker taking part needs,
        # or the override.
        assert now_lists == lists
        assert set(now_rates) == taking_part | {overridden}
        assert now_rates[overridden] == {LEADER_RATE: "20000000", FOLLOWER_RATE: "20000000"}
        with open_backend(ClusterAddress(zk=root)) as backend:
            remove_override(backend, int(overridden))
        finish_reassignment(root)
        out, err = b.communicate(timeout=400)
    finally:
        if b.poll() is None:
            b.kill()
    assert b.returncode == 0, err
    summary = f"cleared throttles not needed: {len(gone_rates)} brokers' rates, {len(gone_lists)} topics' replica lists"
    assert summary in err and summary in out, (out, err)
    cleared = [e for e in read_events(str(second)) if summary in e["reason"]]
    assert len(cleared) == 1 and cleared[0]["kind"] == "clear"
    assert {str(x) for x in cleared[0]["brokers"]} == gone_rates
    assert throttles(root) == ({}, {})  # nothing left anywhere once the move is done


# A stored override the loop cannot honour: (znode under OVERRIDES, "" for the global one; its body).
# "BROKER" stands for a broker taking part in the reassignment.
BAD_OVERRIDES = {
    "rate-a-word": ("", b'{"rate": "fast"}'),
    "rate-nan": ("", b'{"rate": NaN, "autoremove": true}'),
    "rate-infinity": ("BROKER", b'{"rate": Infinity}'),
    "rate-huge-exponent": ("", b'{"rate": 1e400}'),
    "rate-negative": ("BROKER", b'{"rate": -30}'),
    "rate-below-1-byte": ("", b'{"rate": 1e-9}'),
    "rate-above-long": ("", b'{"rate": 1e13}'),  # 1e19 B/s: above Kafka's long
    "rate-a-bool": ("BROKER", b'{"rate": true}'),
    "autoremove-a-word": ("", b'{"rate": 30, "autoremove": "no"}'),
    "not-json": ("BROKER", b"thirty MB/s"),
    "not-utf8": ("", b"\xff\xfe{}"),
    "a-list": ("", b"[30]"),
    "a-number": ("BROKER", b"30"),
    "broker-not-an-id": ("fast", b'{"rate": 30}'),
    "broker-above-int32": ("2147483648", b'{"rate": 30}'),
    "broker-negative": ("-1", b'{"rate": 30}'),
    "broker-leading-zero": ("0BROKER", b'{"rate": 30}'),
    "broker-not-in-cluster": ("999999", b'{"rate": 30}'),
}


@pytest.fixture(scope="module")
def still_replacing(zookeeper, snapshots, tmp_path_factory):
    """One replacement in flight (nothing copies it) for the module's cases that change
    nothing or reset what they change first (the override cases, refused settings): (chroot,
    a destination broker of it). One seed, plan and apply instead of one per case."""
    root, _ = replace_applied(zookeeper, snapshots["replace"], tmp_path_factory.mktemp("overrides"))
    client = connect(root)
    try:
        _, dests, _ = reassignment_roles(*read_cluster(client))
    finally:
        client.stop()
    return root, min(dests)


@pytest.mark.parametrize("case", sorted(BAD_OVERRIDES) + ["rate-0"])
def test_a_bad_stored_override_is_ignored_said_and_the_loop_goes_on(case, still_replacing, tmp_path):
    root, dest = still_replacing
    child, body = BAD_OVERRIDES.get(case, ("BROKER", b'{"rate": 0, "autoremove": false}'))
    child = child.replace("BROKER", str(dest))
    path = f"{OVERRIDES}/{child}" if child else OVERRIDES
    with open_backend(ClusterAddress(zk=root)) as backend:
        client = backend.client
        # Each case starts bare: no override but this one, no throttle in force.
        if client.exists(OVERRIDES):
            client.delete(OVERRIDES, recursive=True)
        for kind in ("brokers", "topics"):
            remove_config_keys(client, kind, children_or_none(client, f"/config/{kind}"))
        client.create(path, body, makepath=True)
        log = EventLog()
        outcome = run(backend, Settings(interval=0.2), SampleDirMetrics(str(tmp_path / "none"), 0.2), log,
                      {"standard": CAP}, max_seconds=0.1)
        cluster, running = read_cluster(client)
        sources, dests, _ = reassignment_roles(cluster, running)
        if child and child != str(dest):
            assert not client.exists(f"/config/brokers/{child}")  # nothing written for a bogus broker
    alerts = [e for e in log.events if e["kind"] == "alert"]
    if case == "rate-0":
        # kafka-kit removes an override by writing rate 0: no override, and nothing to say.
        assert not alerts and not outcome.ignored
    else:
        # Said once as an event (however many rounds), and in the outcome the command prints.
        assert len(alerts) == 1 and path in alerts[0]["reason"], alerts
        assert list(outcome.ignored) == [path]
        assert any(line.startswith("degraded: override ignored") and path in line for line in outcome.lines())
    # The loop went on deciding, at the automatic rate: no metrics here, so the minimum.
    assert outcome.rounds >= 1
    decisions = {(e["brokers"][0], e["role"]) for e in log.events if e["kind"] == "rate"}
    assert decisions == {(b, "leader") for b in sources} | {(b, "follower") for b in dests}
    rates = throttles(root)[1]
    assert set(rates) == {str(b) for b in sources | dests}
    assert all(v == "10000000" for c in rates.values() for v in c.values())


def test_kit_throttle_set_refuses_a_broker_the_cluster_lacks(still_replacing):
    root, _ = still_replacing
    client = connect(root)
    try:  # a bad-override case may have left this one in the module's cluster
        if client.exists(f"{OVERRIDES}/999999"):
            client.delete(f"{OVERRIDES}/999999")
    finally:
        client.stop()
    r = kit("throttle", "set", "30000000", "--broker", "999999", "--zk", root)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--broker" in r.stderr and "Traceback" not in r.stderr
    client = connect(root)
    try:
        assert not client.exists(f"{OVERRIDES}/999999")
    finally:
        client.stop()


def test_until_idle_exits_when_the_reassignment_is_already_over_after_clearing_leftovers(running_replace, tmp_path):
    """The copy ended before the loop started: --until-idle clears the rate left behind and
    exits, saying why (it used to wait for a reassignment it would never see)."""
    root, _ = running_replace
    finish_reassignment(root)
    client = connect(root)
    try:
        merge_configs(client, "brokers", {"1001": {LEADER_RATE: "50000000", FOLLOWER_RATE: "50000000"}})
    finally:
        client.stop()
    events = tmp_path / "e.jsonl"
    # --max-seconds far beyond the run's own bound: only the idle exit ends it in time.
    r = kit("throttle", "run", "--zk", root, "--samples", tmp_path / "s", "--interval", "0.3", *CAP_MAP,
            "--events", events, "--until-idle", "--max-seconds", "3600", timeout=300)
    assert r.returncode == 0, r.stderr
    assert "no reassignment running and no throttle left to clear (--until-idle)" in r.stdout, r.stdout
    assert said(events, "clear") and said(events, "idle")
    assert not any(LEADER_RATE in c or FOLLOWER_RATE in c for c in configs(root, "brokers").values())


def test_the_loop_waits_for_a_zookeeper_away_at_its_start_and_says_what_it_waits_for(snapshots, tmp_path):
    """ZooKeeper down when the loop starts: it says it waits (up to its outage patience) and,
    once ZooKeeper is back, carries on (here: clears the leftover rate and exits idle); it
    used to exit 2 after ten seconds."""
    from kit.cluster.zk import server as localzk
    from kit.cluster.zk.layout import write_cluster
    from kit.formats import load_snapshot

    port, data = localzk.free_port(), str(tmp_path / "zk")
    root = f"{localzk.start(port, data).connect}/kafka"
    try:
        client = connect(root)
        try:
            write_cluster(client, load_snapshot(str(snapshots["scale-out"])))
            merge_configs(client, "brokers", {"1001": {LEADER_RATE: "50000000"}})
        finally:
            client.stop()
        localzk.stop(data)
        events = tmp_path / "e.jsonl"
        # Each attempt to connect waits --zk-connect-timeout (1 s, not the default 10) for ZooKeeper.
        loop = subprocess.Popen([*kit_command(), "throttle", "run", "--zk", root, "--zk-connect-timeout", "1",
                                 "--samples", str(tmp_path / "s"), "--interval", "0.3", *CAP_MAP, "--events",
                                 str(events), "--until-idle", "--max-seconds", "600"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for("the loop saying it waits for ZooKeeper",
                     lambda: (events.exists() and said(events, "unreachable")) or loop.poll() is not None, limit=180)
            assert loop.poll() is None, loop.communicate()
            wait_for(f"port {port} free again", lambda: localzk.port_free(port))
            localzk.start(port, data)
            out, err = loop.communicate(timeout=300)
        finally:
            if loop.poll() is None:
                loop.kill()
                loop.communicate()
        assert loop.returncode == 0, err
        waiting = next(e["reason"] for e in read_events(str(events)) if e["kind"] == "unreachable")
        assert "no ZooKeeper answers there" in waiting and "waiting for it up to 300 s before starting" in waiting
        assert "no throttle left" in out, out
        assert LEADER_RATE not in configs(root, "brokers").get("1001", {})
    finally:
        localzk.stop(data)
