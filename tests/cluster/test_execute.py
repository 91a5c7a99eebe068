"""`kit apply`, `verify`, `rollback`, `elect`, `status` and `kit sim kill/revive` on the simulated
clusters of both kinds: the behaviours written once and run through each backend (`sim_cluster`:
ZooKeeper mode through --zk, KRaft through --bootstrap and the Admin API), then what only
ZooKeeper mode has (its znodes, its transaction, a ZooKeeper restart, `kit sim run`)."""
from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import CRAWL, PROGRESS_LINE, kit_command, restarting_zookeeper, wait_for
from conftest import run_kit as kit
from conftest import seed
from kit.formats import load_snapshot
from kit.throttle.configs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS, throttle_configs
from kit.cluster.zk.layout import connect

_chroots = itertools.count()
KILL_AT = Path(__file__).parents[1] / "kill_at.py"




@pytest.fixture
def kafka(zookeeper, snapshots):
    """A chroot holding the scale-out cluster: (connect string, cluster)."""
    root = f"{zookeeper}/kit-apply-{next(_chroots)}"
    cluster = load_snapshot(str(snapshots["scale-out"]))
    seed(root, cluster)
    return root, cluster


def test_throttles_list_sources_and_destinations_as_kafka_does():
    from kit.formats import cluster_from_snapshot

    c = cluster_from_snapshot({"version": 1, "brokers": [{"id": b} for b in (1, 2, 3, 4)], "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2]}, {"topic": "t", "partition": 1, "replicas": [2, 3]}]})
    topics, brokers = throttle_configs(c, [{"topic": "t", "partition": 0, "replicas": [4, 2]},
                                           {"topic": "t", "partition": 1, "replicas": [3, 2]}], 5e7)
    assert topics == {"t": {LEADER_REPLICAS: "0:1,0:2", FOLLOWER_REPLICAS: "0:4"}}  # p1 only reorders
    assert brokers == {b: {LEADER_RATE: "50000000", FOLLOWER_RATE: "50000000"} for b in (1, 2, 4)}


def test_apply_on_zookeeper_writes_the_reassignment_znode_and_config_change_notifications(kafka, tmp_path):
    """ZooKeeper's layout (what Kafka's controller and brokers watch): the reassignment in
    /admin/reassign_partitions, the throttles in /config/... with a notification each."""
    root, _ = kafka
    plan = tmp_path / "plan.json"
    assert kit("plan", "scale-out", "--zk", root, "--out", plan).returncode == 0
    assert kit("apply", plan, "--zk", root, "--throttle", "50000000").returncode == 0
    moves = json.loads(plan.read_text())["partitions"]
    client = connect(root)
    try:
        assert json.loads(client.get("/admin/reassign_partitions")[0])["partitions"] == moves
        topics = {m["topic"] for m in moves}
        for t in topics:
            cfg = json.loads(client.get(f"/config/topics/{t}")[0])["config"]
            assert cfg[LEADER_REPLICAS] and cfg[FOLLOWER_REPLICAS]
        assert len(client.get_children("/config/changes")) >= len(topics)
        cfg = json.loads(client.get(f"/config/brokers/{moves[0]['replicas'][0]}")[0])["config"]
        assert cfg[LEADER_RATE] == cfg[FOLLOWER_RATE] == "50000000"
    finally:
        client.stop()


def test_elect_on_zookeeper_writes_the_election_znode_one_election_at_a_time(kafka):
    """No controller runs here: the request stays in /admin/preferred_replica_election, and a
    second is refused while it is there."""
    root, cluster = kafka
    p = cluster.partitions[0]
    client = connect(root)
    try:
        path = f"/brokers/topics/{p.topic}/partitions/{p.partition}/state"
        st = json.loads(client.get(path)[0])
        st["leader"] = p.replicas[1]
        client.set(path, json.dumps(st).encode())
    finally:
        client.stop()
    r = kit("elect", "--zk", root)
    assert r.returncode == 0 and "for 1 partition(s)" in r.stdout
    client = connect(root)
    try:
        doc = json.loads(client.get("/admin/preferred_replica_election")[0])
    finally:
        client.stop()
    assert doc == {"version": 1, "partitions": [{"topic": p.topic, "partition": p.partition}]}
    assert kit("elect", "--zk", root).returncode == 3  # one election at a time


def test_apply_writes_rollback_throttles_and_the_reassignment_and_a_second_changes_nothing(sim_cluster, tmp_path):
    c = sim_cluster()
    plan, rollback, other = tmp_path / "plan.json", tmp_path / "rollback.json", tmp_path / "other.json"
    assert kit("plan", "scale-out", *c.flag, "--out", plan).returncode == 0
    r = kit("apply", plan, *c.flag, "--throttle", CRAWL, "--rollback-out", rollback)
    assert r.returncode == 0, r.stderr
    moves = json.loads(plan.read_text())["partitions"]
    current = {(p.topic, p.partition): list(p.replicas) for p in c.seeded.partitions}
    assert [e["replicas"] for e in json.loads(rollback.read_text())["partitions"]] == \
        [current[(m["topic"], m["partition"])] for m in moves]
    with c.backend() as backend:
        _, running = backend.read()
        listed = [by_key(e) for e in running["partitions"]]
        assert set(listed) <= {by_key(m) for m in moves} and set(listed) >= set(copying(c.seeded, moves)), listed
        brokers, topics = backend.throttles()
        assert sorted(topics) == sorted({m["topic"] for m in moves})
        assert all(keys[LEADER_REPLICAS] and keys[FOLLOWER_REPLICAS] for keys in topics.values())
        assert brokers and all(keys == {LEADER_RATE: str(CRAWL), FOLLOWER_RATE: str(CRAWL)}
                               for keys in brokers.values())
        assert {int(b) for b in brokers} >= {b for m in moves for b in m["replicas"] if b not in current[
            (m["topic"], m["partition"])]}  # every broker receiving a replica
        # A second apply, of another plan, while that reassignment runs: exit 3, nothing changed.
        other.write_text(json.dumps({"version": 1, "partitions": [dict(m, replicas=m["replicas"][::-1])
                                                                  for m in moves[:2]]}))
        r = kit("apply", other, *c.flag, "--throttle", "50000000", "--rollback-out", tmp_path / "second.json")
        assert r.returncode == 3 and "already in progress" in r.stderr and r.stderr.count("\n") == 1, r.stderr
        assert not (tmp_path / "second.json").exists()
        assert backend.read()[1] == running and backend.throttles() == (brokers, topics)


def by_key(m: dict) -> tuple[str, int]:
    return m["topic"], m["partition"]


def copying(cluster, moves: list[dict]) -> list[tuple[str, int]]:
    """The moves that add a replica (a copy). A move that only reorders the replicas has
    nothing to copy: Kafka's KRaft controller completes it at once, so the Admin API no longer
    lists it as reassigning, while ZooKeeper mode keeps it in the reassignment znode."""
    now = {p.key: set(p.replicas) for p in cluster.partitions}
    return [by_key(m) for m in moves if set(m["replicas"]) - now[by_key(m)]]


def test_a_plan_naming_a_missing_partition_is_bad_input_for_apply_and_verify(sim_cluster, tmp_path):
    c = sim_cluster()
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "nope", "partition": 0, "replicas": [1001]}]}))
    r = kit("apply", plan, *c.flag, "--throttle", "50000000", "--rollback-out", tmp_path / "rollback.json")
    assert r.returncode == 2 and "nope-0" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "rollback.json").exists()
    with c.backend() as backend:
        assert not backend.reassigning() and backend.throttles() == ({}, {})
    # verify --wait ends (it could never finish) instead of waiting for ever.
    r = kit("verify", plan, *c.flag, "--wait", "--interval", "0.2", timeout=120)
    assert r.returncode == 1 and "does not have" in r.stderr and "nope-0" in r.stderr, r
    r = kit("verify", plan, *c.flag)
    assert r.returncode == 1 and "nope p0: not in the cluster" in r.stdout


def test_a_huge_plan_of_partitions_the_cluster_lacks_is_refused_from_one_read_per_topic(sim_cluster, tmp_path,
                                                                                        monkeypatch, capsys):
    """20,000 entries, nearly all naming partitions the cluster lacks (topics it has not, and
    partitions beyond the topics it has): refused as bad input, in one line saying how many and
    naming a few, nothing written, and no znode read per partition (it read one per entry: a
    plan of 300,000 took minutes). The reads are counted, so the plan need not be that large:
    of 200,000 entries, reading and checking the plan file took most of this test's 10-12 s."""
    from kazoo.client import KazooClient

    from kit.cli import main

    c = sim_cluster()
    topics = sorted(c.seeded.topics())
    real = [{"topic": p.topic, "partition": p.partition, "replicas": list(p.replicas)} for p in c.seeded.partitions[:5]]
    beyond = [{"topic": t, "partition": 10_000 + i, "replicas": [1001, 1002]} for t in topics for i in range(100)]
    ghosts = [{"topic": f"ghost-{t}", "partition": i, "replicas": [1001, 1002]} for t in range(2000) for i in range(9)]
    plan, rollback = tmp_path / "plan.json", tmp_path / "rollback.json"
    plan.write_text(json.dumps({"version": 1, "partitions": real + beyond + ghosts}))
    reads = []

    def counted(real_call):
        def call(self, path, *args, **kwargs):
            if path.startswith("/brokers/topics/"):
                reads.append(path)
            return real_call(self, path, *args, **kwargs)
        return call
    for name in ("get", "get_async", "exists"):
        monkeypatch.setattr(KazooClient, name, counted(getattr(KazooClient, name)))
    assert main(["apply", str(plan), *c.flag, "--throttle", "50000000", "--rollback-out", str(rollback)]) == 2
    err = capsys.readouterr().err
    assert len(reads) <= len(topics), len(reads)  # ZooKeeper: a topic's znode at most once each
    assert err.startswith(f"kit: the plan names {len(beyond) + len(ghosts)} partition(s) the cluster does not have, "
                          f"{len(ghosts)} of them in 2000 topic(s) it lacks altogether: ") and err.count("\n") == 1, err
    assert "nothing was changed" in err and not rollback.exists()
    with c.backend() as backend:
        assert not backend.reassigning() and backend.throttles() == ({}, {})


def test_verify_follows_the_copy_says_what_is_stuck_and_clears_throttles_when_done(sim_cluster, tmp_path):
    c = sim_cluster()
    plan = tmp_path / "plan.json"
    assert kit("plan", "scale-out", *c.flag, "--out", plan).returncode == 0
    assert kit("apply", plan, *c.flag, "--throttle", CRAWL).returncode == 0
    moves = json.loads(plan.read_text())["partitions"]
    n = len(moves)
    r = kit("status", *c.flag)
    listed = int(re.search(r"reassignment in progress: (\d+) partition\(s\)", r.stdout).group(1))
    assert r.returncode == 0 and len(copying(c.seeded, moves)) <= listed <= n, r.stdout
    assert "throttled brokers: none" not in r.stdout
    r = kit("verify", plan, *c.flag)
    done = int(re.search(rf"(\d+) of {n} partition\(s\) done", r.stdout).group(1))
    assert r.returncode == 1 and done < n, r.stdout  # at a crawl, no copy can finish
    # Crawling, no replica joins an ISR: with --stall the wait ends, naming what it waits for.
    r = kit("verify", plan, *c.flag, "--wait", "--interval", "0.2", "--stall", "2", timeout=120)
    assert r.returncode == 1 and "nothing has moved for" in r.stderr and "waiting for broker(s)" in r.stderr, r
    c.let_go()
    r = kit("verify", plan, *c.flag, "--wait", "--interval", "0.5", timeout=300)
    assert r.returncode == 0 and f"{n} of {n} partition(s) done" in r.stdout, r.stdout + r.stderr
    with c.backend() as backend:
        assert backend.throttles() == ({}, {}) and not backend.reassigning()
        assert backend.progress(json.loads(plan.read_text())["partitions"]) == "in place"
    r = kit("status", *c.flag)
    assert "no reassignment in progress" in r.stdout and "throttled brokers: none" in r.stdout


# What `kit rollback` does while the reassignment still runs: ZooKeeper mode has no way to
# cancel one (refused, exit 3); through the Admin API Kafka cancels it (docs/admin-api.md).
ROLLBACK_WHILE_RUNNING = {"zookeeper": (3, "kit cannot cancel it through ZooKeeper"),
                          "kraft": (0, "cancelled the reassignment in flight of")}


def test_rollback_puts_the_previous_assignment_back(sim_cluster, tmp_path):
    c = sim_cluster()
    plan, rollback = tmp_path / "plan.json", tmp_path / "rollback.json"
    assert kit("plan", "scale-out", *c.flag, "--out", plan).returncode == 0
    assert kit("apply", plan, *c.flag, "--throttle", CRAWL, "--rollback-out", rollback).returncode == 0
    code, says = ROLLBACK_WHILE_RUNNING[c.kind]
    r = kit("rollback", rollback, *c.flag)
    assert r.returncode == code and says in r.stdout + r.stderr, r
    if code != 0:  # refused: let the plan finish, then roll it back
        c.let_go()
        assert kit("verify", plan, *c.flag, "--wait", "--interval", "0.5", timeout=300).returncode == 0
        r = kit("rollback", rollback, *c.flag)  # now started as a plan is
        assert r.returncode == 0, r.stderr
    r = kit("verify", rollback, *c.flag, "--wait", "--interval", "0.5", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    with c.backend() as backend:
        cluster, running = backend.read()
        assert running is None and backend.throttles() == ({}, {})
    now = {p.key: list(p.replicas) for p in cluster.partitions}
    assert all(now[p.key] == list(p.replicas) for p in c.seeded.partitions)


def interrupted(point: str, *args) -> str:
    """`kit ARGS` sent SIGINT (Ctrl-C) at `point` (tests/kill_at.py): its stderr, checked to be
    one line, exit 130, no traceback and no lost connection."""
    r = subprocess.run([sys.executable, str(KILL_AT), point, *map(str, args)], capture_output=True, text=True,
                       timeout=300)
    r.stderr = "".join(x for x in r.stderr.splitlines(keepends=True) if not PROGRESS_LINE.fullmatch(x.rstrip("\n")))
    assert r.returncode == 130 and r.stderr.startswith("kit: interrupted") and r.stderr.count("\n") == 1, \
        (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "connection lost" not in r.stderr
    return r.stderr.rstrip("\n")


def test_ctrl_c_during_rollback_and_verify_wait_says_in_one_line_what_it_left_and_exits_130(sim_cluster, tmp_path):
    """Issue 35: as kit apply does, one line naming the state left and the command that
    continues it, exit 130 (they printed a traceback)."""
    c = sim_cluster()
    plan = tmp_path / "plan.json"
    assert kit("plan", "scale-out", *c.flag, "--out", plan).returncode == 0
    n_moves, where = len(json.loads(plan.read_text())["partitions"]), " ".join(c.flag)
    # With no reassignment running, kit rollback starts its file as kit apply starts a plan.
    line = interrupted("sigint-after-submit", "rollback", plan, *c.flag, "--throttle", CRAWL)
    with c.backend() as backend:
        brokers = len(backend.throttles()[0])
        assert backend.reassigning() and brokers
    assert line == f"kit: interrupted: the rollback was submitted; throttles set on {brokers} broker(s): " \
                   f"kit verify {plan} {where} --wait follows it", line
    line = interrupted("sigint-after-verify", "verify", plan, *c.flag, "--wait", "--interval", "0.5")
    with c.backend() as backend:
        brokers = len(backend.throttles()[0])
        assert backend.reassigning() and brokers
    assert re.fullmatch(rf"kit: interrupted: the reassignment goes on \(\d+ of {n_moves} partition\(s\) done at the "
                        rf"last check; throttles set on {brokers} broker\(s\)\): kit verify "
                        rf"{re.escape(f'{plan} {where}')} --wait follows it and clears them when it ends", line), line


def test_a_dead_destination_is_named_by_every_command_with_one_way_out_and_rollback_takes_it(sim_cluster, tmp_path):
    """Issue 35: status, doctor, verify --wait and rollback agree on a destination killed
    mid-copy (it can never finish): verify --wait stops at once (exit 3, not after its stall)
    and rollback cancels it on both backends, its throttles cleared."""
    c = sim_cluster()
    plan, rollback = tmp_path / "plan.json", tmp_path / "rollback.json"
    assert kit("plan", "scale-out", *c.flag, "--out", plan).returncode == 0
    assert kit("apply", plan, *c.flag, "--throttle", CRAWL, "--rollback-out", rollback).returncode == 0
    before = {p.key: list(p.replicas) for p in c.seeded.partitions}
    moves = json.loads(plan.read_text())["partitions"]
    victim = min(b for m in moves for b in m["replicas"] if b not in before[(m["topic"], m["partition"])])
    assert kit("sim", "kill", *c.where, "--broker", victim).returncode == 0
    try:
        says = f"broker {victim}, a destination of the reassignment in progress, is dead: it can never finish"
        way_out = f"kit rollback ROLLBACK.json {' '.join(c.flag)}"
        r = kit("status", *c.flag)
        assert r.returncode == 0 and says in r.stdout and way_out in r.stdout, r.stdout + r.stderr
        assert "clears them when it ends" not in r.stdout
        r = kit("doctor", *c.flag)
        assert r.returncode == 4 and says in r.stdout and "kit rollback ROLLBACK.json" in r.stdout, r.stdout + r.stderr
        r = kit("verify", plan, *c.flag, "--wait", "--interval", "0.5", "--stall", "3600", timeout=600)
        assert r.returncode == 3 and says in r.stderr and "kit rollback ROLLBACK.json" in r.stderr, r.stdout + r.stderr
        r = kit("rollback", rollback, *c.flag)
        assert r.returncode == 0 and "cancelled the reassignment in flight of" in r.stdout, r.stdout + r.stderr
        r = kit("verify", rollback, *c.flag, "--wait", "--interval", "0.5", timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        with c.backend() as backend:
            cluster, running = backend.read()
            assert running is None and backend.throttles() == ({}, {})
        assert {p.key: list(p.replicas) for p in cluster.partitions} == before
    finally:
        assert kit("sim", "revive", *c.where, "--broker", victim).returncode == 0


def test_elect_asks_only_for_partitions_not_led_by_their_first_replica(sim_cluster):
    c = sim_cluster()
    victim = c.seeded.partitions[0].replicas[0]
    # The broker dies and comes back: the partitions it led are led by another replica meanwhile.
    assert kit("sim", "kill", *c.where, "--broker", victim).returncode == 0
    assert kit("sim", "revive", *c.where, "--broker", victim).returncode == 0
    with c.backend() as backend:
        cluster = wait_for("the revived broker back in every ISR", lambda: in_sync(backend), limit=60)
        off = [p.key for p in cluster.partitions if p.leader != p.replicas[0]]
        assert c.seeded.partitions[0].key in off
        r = kit("elect", *c.flag)
        assert r.returncode == 0 and f"requested for {len(off)} partition(s)" in r.stdout, r.stdout + r.stderr
        wait_for("the controller to carry the election out",
                 lambda: all(p.leader == p.replicas[0] for p in backend.read()[0].partitions), limit=60)
    r = kit("elect", *c.flag)
    assert r.returncode == 0 and "every partition is led by" in r.stdout, r.stdout + r.stderr


def in_sync(backend):
    """The cluster when no partition is under-replicated, else None."""
    cluster, _ = backend.read()
    return None if any(set(p.replicas) - set(p.isr) for p in cluster.partitions) else cluster


def test_the_simulated_controller_runs_a_replace_plan_to_completion(sim_cluster, tmp_path):
    c = sim_cluster("replace")
    dead = [b.id for b in c.seeded.brokers.values() if not b.alive and b.id in c.seeded.map_brokers()][0]
    new = [b for b in c.seeded.live_ids if b not in c.seeded.map_brokers()][0]
    plan = tmp_path / "plan.json"
    r = kit("plan", "replace", *c.flag, "--replace", f"{dead}:{new}", "--out", plan)
    assert r.returncode == 0, r.stderr
    assert kit("apply", plan, *c.flag, "--throttle", "1000000000").returncode == 0
    r = kit("verify", plan, *c.flag, "--wait", "--interval", "0.5", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    with c.backend() as backend:
        after, running = backend.read()
        assert running is None and backend.throttles() == ({}, {})
    want = {(m["topic"], m["partition"]): m["replicas"] for m in json.loads(plan.read_text())["partitions"]}
    assert want and all(k in {p.key for p in after.partitions} for k in want)
    for p in after.partitions:
        if p.key in want:
            assert list(p.replicas) == want[p.key] and set(p.isr) == set(p.replicas)
            assert p.leader == p.replicas[0]
    assert not any(set(p.replicas) - set(p.isr) for p in after.partitions if dead not in p.replicas)


def test_killing_a_broker_moves_its_leadership_and_revive_brings_it_back(sim_cluster):
    c = sim_cluster()
    victim = c.seeded.partitions[0].replicas[0]
    led = sum(1 for p in c.seeded.partitions if p.replicas[0] == victim)
    r = kit("sim", "kill", *c.where, "--broker", victim)
    assert r.returncode == 0 and f"leadership of {led} partition(s)" in r.stdout, r.stdout + r.stderr
    r = kit("status", *c.flag)
    assert f"1 dead ({victim})" in r.stdout, r.stdout
    with c.backend() as backend:
        dead, _ = backend.read()
    assert all(victim not in p.isr and p.leader != victim for p in dead.partitions)
    assert all(p.leader == next(b for b in p.replicas if b != victim)
               for p in dead.partitions if p.replicas[0] == victim)
    assert kit("sim", "revive", *c.where, "--broker", victim).returncode == 0
    r = wait_for("the revived broker back in every ISR", lambda: (lambda r: r if "live, 0 dead" in r.stdout and
                 "under-replicated partitions: 0" in r.stdout else None)(kit("status", *c.flag)), limit=60)
    assert kit("sim", "revive", *c.where, "--broker", victim).returncode == 2


@pytest.fixture
def seeded_replace(zookeeper, snapshots, tmp_path):
    """The replace cluster seeded by `kit sim seed`, and a replace plan made from ZooKeeper:
    (connect string, dead broker, new broker, plan path)."""
    root = f"{zookeeper}/kit-sim-{next(_chroots)}"
    snap = snapshots["replace"]
    assert kit("sim", "seed", "--zk", root, "--snapshot", str(snap)).returncode == 0
    cluster = load_snapshot(str(snap))
    dead = [b.id for b in cluster.brokers.values() if not b.alive and b.id in cluster.map_brokers()]
    new = [b for b in cluster.live_ids if b not in cluster.map_brokers()]
    plan = tmp_path / "plan.json"
    r = kit("plan", "replace", "--zk", root, "--replace", f"{dead[0]}:{new[0]}", "--out", str(plan))
    assert r.returncode == 0, r.stderr
    return root, dead[0], new[0], plan


def test_zookeeper_simulated_brokers_are_ephemeral_and_vanish_when_their_holder_stops(zookeeper, snapshots):
    """As in Kafka, /brokers/ids/N lives only as long as a session: stopping the simulated
    brokers leaves every one of them dead, and the cluster's data where it was."""
    from kit.cluster.zk.read import read_cluster

    root = f"{zookeeper}/kit-holder-{next(_chroots)}"
    cluster = load_snapshot(str(snapshots["replace"]))
    assert kit("sim", "seed", "--zk", root, "--snapshot", str(snapshots["replace"])).returncode == 0
    client = connect(root)
    try:
        ids = client.get_children("/brokers/ids")
        assert sorted(int(b) for b in ids) == sorted(cluster.live_ids)
        assert all(client.exists(f"/brokers/ids/{b}").ephemeralOwner != 0 for b in ids)
        r = kit("sim", "stop", "--zk", root)
        assert r.returncode == 0 and "stopped" in r.stdout
        assert client.get_children("/brokers/ids") == []
        down, _ = read_cluster(client)
        assert not any(b.alive for b in down.brokers.values())
        assert len(down.partitions) == len(cluster.partitions)
    finally:
        client.stop()
    r = kit("sim", "stop", "--zk", root)
    assert r.returncode == 0 and "no simulated brokers" in r.stdout


def test_the_simulator_writes_metric_samples_in_the_pipeline_schema(seeded_replace, tmp_path):
    root, _, new, plan = seeded_replace
    assert kit("apply", str(plan), "--zk", root, "--throttle", "100000000").returncode == 0
    samples = tmp_path / "samples"
    r = kit("sim", "run", "--zk", root, "--speed", "1000000", "--until-idle", "--max-seconds", "60",
            "--samples", str(samples), "--sample-every", "7200")
    assert r.returncode == 0, r.stderr
    replica_files = sorted((samples / "replica").glob("*.jsonl"))
    broker_files = sorted((samples / "broker").glob("*.jsonl"))
    assert len(replica_files) >= 3 and len(broker_files) == len(replica_files)
    first = [json.loads(line) for line in replica_files[0].read_text().splitlines()]
    last = [json.loads(line) for line in replica_files[-1].read_text().splitlines()]
    keys = {"ts", "broker", "topic", "partition", "leader", "size_bytes", "bytes_in_per_sec",
            "bytes_out_per_sec", "reassigning"}
    assert all(set(row) == keys for row in first)
    assert any(row["reassigning"] for row in first) and not any(row["reassigning"] for row in last)
    assert all((row["bytes_in_per_sec"] is None) == (not row["leader"]) for row in first)
    on_new = lambda rows: sum(r["size_bytes"] for r in rows if r["broker"] == new)  # noqa: E731
    assert on_new(first) < on_new(last)
    brokers = [json.loads(line) for line in broker_files[-1].read_text().splitlines()]
    assert {"ts", "broker", "rack", "instance_type", "net_rx_bytes_per_sec", "net_tx_bytes_per_sec",
            "storage_total_bytes", "storage_free_bytes", "replication_rx_bytes_per_sec",
            "replication_tx_bytes_per_sec"} == set(brokers[0])
    assert all(b["storage_free_bytes"] is not None and b["storage_free_bytes"] <= b["storage_total_bytes"]
               for b in brokers)


def test_client_traffic_slows_the_simulated_copy_where_the_nic_is_the_limit(zookeeper, tmp_path):
    from kit.sim.controller import SimController

    root = f"{zookeeper}/kit-traffic-{next(_chroots)}"
    snap = tmp_path / "c.json"
    snap.write_text(json.dumps({"version": 1,
                                "brokers": [{"id": b, "net_capacity": 100e6} for b in (1, 2)],
                                "partitions": [{"topic": "t", "partition": 0, "replicas": [1], "size": 10**10}]}))
    plan = tmp_path / "p.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}))
    assert kit("sim", "seed", "--zk", root, "--snapshot", str(snap)).returncode == 0
    assert kit("apply", str(plan), "--zk", root).returncode == 0
    client = connect(root)
    try:
        ctl = SimController(client, speed=1.0, client_load=0.5, traffic="spike", spike_at=0.0)
        while ctl.busy():
            ctl.step(60.0)
    finally:
        client.stop()
    # 10 GB at 50 MB/s would take 200 s; the spike (x1.6 for 600 s) leaves 20 MB/s: 500 s.
    assert ctl.sim_seconds == pytest.approx(500.0, rel=0.02)


def test_apply_cut_short_by_zookeeper_leaves_no_reassignment_and_can_be_rerun(kafka, tmp_path):
    from kazoo.exceptions import ConnectionLoss

    from kit.cluster.zk.changes import REASSIGN, apply_plan
    from kit.formats import load_plan

    root, _ = kafka
    plan = tmp_path / "plan.json"
    assert kit("plan", "scale-out", "--zk", root, "--out", str(plan)).returncode == 0
    moves = load_plan(str(plan))
    client = connect(root)
    real_transaction = client.transaction

    def dies_on_commit():
        tx = real_transaction()

        def commit():
            raise ConnectionLoss()  # ZooKeeper goes away as the writes are sent
        tx.commit = commit
        return tx

    client.transaction = dies_on_commit
    try:
        with pytest.raises(ConnectionLoss):
            apply_plan(client, moves, throttle=5e7)
        # All or nothing: no half-written reassignment, and no throttle without it.
        assert not client.exists(REASSIGN)
        assert not any(throttle_configs_in(client, kind) for kind in ("brokers", "topics"))
    finally:
        client.transaction = real_transaction
        client.stop()
    # Running it again is safe: the throttles are merged again, the reassignment written once.
    r = kit("apply", str(plan), "--zk", root, "--throttle", "50000000")
    assert r.returncode == 0, r.stderr
    client = connect(root)
    try:
        assert json.loads(client.get(REASSIGN)[0])["partitions"] == moves
    finally:
        client.stop()


def throttle_configs_in(client, kind: str) -> list[str]:
    """Entities under /config/<kind> that carry a throttle key."""
    keys = (LEADER_RATE, FOLLOWER_RATE) if kind == "brokers" else (LEADER_REPLICAS, FOLLOWER_REPLICAS)
    out = []
    for name in client.get_children(f"/config/{kind}") if client.exists(f"/config/{kind}") else []:
        if any(k in json.loads(client.get(f"/config/{kind}/{name}")[0] or b"{}").get("config", {}) for k in keys):
            out.append(name)
    return out


def test_two_applies_started_together_on_zookeeper_the_loser_changes_nothing(kafka, tmp_path):
    """Two `kit apply` of different plans at once, many times: exactly one wins, the other exits 3,
    and every throttle znode is as the winner wrote it (issue 20: the loser once rewrote them).
    ZooKeeper only: its check and writes are one transaction; the Admin API has none (Kafka's
    own tool races the same way). Both are started together from two threads (each a process
    forked from the warm command line, as `run_kit` runs every command: 12 cold starts took
    most of this test's CPU)."""
    from concurrent.futures import ThreadPoolExecutor

    from kit.cluster.zk.changes import REASSIGN

    root, _ = kafka
    plans = [tmp_path / "plan-0.json", tmp_path / "plan-1.json"]
    assert kit("plan", "scale-out", "--zk", root, "--out", str(plans[0])).returncode == 0
    # The second plan: half of the first's moves, replicas in another order; applied at another rate.
    moves = json.loads(plans[0].read_text())["partitions"]
    plans[1].write_text(json.dumps({"version": 1, "partitions": [dict(m, replicas=list(reversed(m["replicas"])))
                                                                 for m in moves[: max(1, len(moves) // 2)]]}))
    client = connect(root)
    try:
        for _ in range(6):
            with ThreadPoolExecutor(2) as pool:
                runs = list(pool.map(lambda pr: kit("apply", pr[0], "--zk", root, "--throttle", pr[1]),
                                     ((plans[0], 10_000_000), (plans[1], 20_000_000))))
            codes = [r.returncode for r in runs]
            assert sorted(codes) == [0, 3], [r.stderr for r in runs]
            winner = codes.index(0)
            rate = ("10000000", "20000000")[winner]
            written = json.loads(client.get(REASSIGN)[0])["partitions"]
            assert written == json.loads(plans[winner].read_text())["partitions"]
            for b in throttle_configs_in(client, "brokers"):
                cfg = json.loads(client.get(f"/config/brokers/{b}")[0])["config"]
                assert cfg[LEADER_RATE] == rate and cfg[FOLLOWER_RATE] == rate, (b, cfg, winner)
            # Undo for the next round: the reassignment goes, and every throttle with it.
            client.delete(REASSIGN)
            for kind in ("brokers", "topics"):
                for name in throttle_configs_in(client, kind):
                    client.set(f"/config/{kind}/{name}", json.dumps({"version": 1, "config": {}}).encode())
    finally:
        client.stop()


def test_az_loss_from_the_cluster_takes_the_missing_brokers_as_the_lost_rack(sim_cluster, snapshots, tmp_path):
    """Kafka forgets a dead broker's rack (ZooKeeper keeps no registration for it, the Admin API
    lists live brokers only); the plan from the cluster must still equal the plan from the
    snapshot that knew it."""
    c = sim_cluster("az-loss")
    from_cluster, from_snap = tmp_path / "cluster.json", tmp_path / "snap.json"
    r = kit("plan", "az-loss", *c.flag, "--rack", "rack-c", "--out", from_cluster)
    assert r.returncode == 0, r.stderr
    assert "taking the 4 dead broker(s)" in r.stdout
    assert kit("plan", "az-loss", "--snapshot", snapshots["az-loss"], "--rack", "rack-c",
               "--out", from_snap).returncode == 0
    assert json.loads(from_cluster.read_text()) == json.loads(from_snap.read_text())
    r = kit("plan", "az-loss", *c.flag, "--rack", "rack-a", "--out", tmp_path / "a.json")
    assert r.returncode == 0 and "taking the" not in r.stdout


@pytest.mark.slow
def test_verify_wait_rides_out_a_zookeeper_restart_and_clears_throttles(snapshots, tmp_path):
    """Session loss during `kit verify`: the server goes away mid-watch and comes back on the
    same port with its data; verify reconnects, sees the copy finish and clears the throttles."""
    import subprocess

    import threading

    with restarting_zookeeper(snapshots["scale-out"], tmp_path) as (root, plan, restart, _):
        watcher = subprocess.Popen([*kit_command(), "verify", str(plan), "--zk", root, "--wait", "--interval", "0.3"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        err_lines: list[str] = []
        reader = threading.Thread(target=lambda: err_lines.extend(watcher.stderr), daemon=True)
        reader.start()
        try:
            # The outage must fall after verify's first check (its progress line on stderr),
            # however slowly it starts.
            deadline = time.monotonic() + 60
            while not any("kit verify --wait" in x for x in err_lines) and watcher.poll() is None:
                assert time.monotonic() < deadline, "verify --wait made no check within 60 s"
                time.sleep(0.1)
            restart()
            out = watcher.communicate(timeout=120)[0]
        finally:
            if watcher.poll() is None:
                watcher.kill()
        reader.join(timeout=10)
        err = "".join(err_lines)
        assert watcher.returncode == 0, err
        assert "ZooKeeper connection lost" in err
        n = len(json.loads(plan.read_text())["partitions"])
        assert f"{n} partition(s) done" in out.splitlines()[-1]
        # Progress goes to stderr, with a bar of partitions done: stdout is only the result.
        assert f"of {n} partition(s) done" in err and "kit verify --wait" not in out
        # Read through a new session: the fixture's own may have expired while the server was
        # down (seen in CI: SessionExpiredError here, after verify had passed every check).
        after = connect(root)
        try:
            assert all(json.loads(after.get(f"/config/brokers/{b}")[0])["config"] == {}
                       for b in after.get_children("/config/brokers"))
        finally:
            after.stop()
            after.close()


def test_a_chroot_without_kafka_is_an_error_for_every_command_the_doctor_included(zookeeper, tmp_path):
    """`--zk host:port/typo`: no /brokers/ids there. Exit 2 naming the chroot, never an empty
    cluster (a cron health check must alert, not report HEALTHY)."""
    typo = f"{zookeeper}/kafak-{next(_chroots)}"
    for args in (["snapshot", "--zk", typo, "--out", str(tmp_path / "s.json")], ["status", "--zk", typo],
                 ["doctor", "--zk", typo], ["plan", "scale-out", "--zk", typo, "--out", str(tmp_path / "p.json")],
                 ["verify", "--zk", typo]):
        r = kit(*args)
        assert r.returncode == 2 and "/brokers/ids does not exist" in r.stderr and "kafak" in r.stderr, (args, r)
        assert "HEALTHY" not in r.stdout and len(r.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())


def test_throttles_without_a_reassignment_are_cleared_by_verify_with_or_without_a_plan(sim_cluster, tmp_path):
    """A crash between throttles and reassignment (older kit, Kafka's tool, a hand edit):
    verify says the partitions were never started and clears every throttle, topic lists too."""
    c = sim_cluster()
    plan = tmp_path / "plan.json"
    assert kit("plan", "scale-out", *c.flag, "--out", plan).returncode == 0
    topics, brokers = throttle_configs(c.seeded, json.loads(plan.read_text())["partitions"], 5e7)
    for with_plan in (True, False):
        with c.backend() as backend:
            backend.set_throttles(brokers=brokers, topics=topics)
            assert backend.throttles() != ({}, {})
        r = kit("verify", *([plan] if with_plan else []), *c.flag)
        if with_plan:
            assert r.returncode == 1 and "not started (no reassignment runs for it)" in r.stdout, r
        with c.backend() as backend:
            assert backend.throttles() == ({}, {}), with_plan
    r = kit("verify", plan, *c.flag, "--wait", "--interval", "0.2")
    assert r.returncode == 1 and "no reassignment is running" in r.stderr
