"""The simulated cluster's store seam (kit.sim.store): the controller written once, carried out
the same over Kafka's znodes in a real ZooKeeper (kit.sim.zkstore) and in memory
(kit.sim.memstore); the memory store saved and loaded back whole; the simulated KRaft cluster
stopped and resumed from its saved store."""
from __future__ import annotations

import itertools
import json

import pytest
from kafka.admin import KafkaAdminClient

from kit.cluster.backend import ClusterAddress, open_backend
from kit.cluster.zk.layout import close, connect, write_cluster
from kit.formats import cluster_from_snapshot
from kit.sim.brokers import sync_registrations
from kit.sim.controller import SimController, kill_broker, revive_broker
from kit.sim.memstore import MemoryStore
from kit.sim.zkstore import ZkStore
from kit.throttle.configs import FOLLOWER_RATE, LEADER_RATE
from tests.conftest import run_kit

MB = 10**6
_chroots = itertools.count()


def small_cluster():
    """Four brokers; two topics of three partitions, 200 MB each; broker 4 new."""
    brokers = [{"id": b, "rack": f"r{b % 2}", "storage_total": 10**12, "storage_free": 9 * 10**11,
                "net_capacity": 125 * MB} for b in range(1, 5)]
    parts = [{"topic": t, "partition": p, "replicas": [1 + p % 3, 1 + (p + 1) % 3], "size": 200 * MB,
              "bytes_in": MB, "bytes_out": 2 * MB} for t in ("a", "b") for p in range(3)]
    return cluster_from_snapshot({"version": 1, "brokers": brokers, "partitions": parts})


TARGETS = {("a", 0): [4, 2], ("a", 1): [2, 4], ("b", 2): [3, 4]}


def drive(store) -> tuple[SimController, list]:
    """Throttle every broker to 20 MB/s, start TARGETS, and run the controller step by step
    (a bounded number of steps, never a time) until it is idle; returns it and what the store
    showed after its first step (replicas, adding, removing, leader, ISR per partition)."""
    for b in (1, 2, 3, 4):
        store.alter_config("brokers", str(b), {LEADER_RATE: str(20 * MB), FOLLOWER_RATE: str(20 * MB)}, [])
    store.set_reassignment(TARGETS, None)
    ctl = SimController(store, speed=1.0, record_every=0)
    ctl.step(1.0)
    marked = [(k, p.replicas, p.adding, p.removing, p.leader, p.isr) for k, p in sorted(store.view().partitions.items())]
    for _ in range(1000):
        if not ctl.busy():
            break
        ctl.step(5.0)
    assert not ctl.busy()
    return ctl, marked


def settled(store) -> list:
    return [(k, p.replicas, p.adding, p.removing, p.leader, p.isr) for k, p in sorted(store.view().partitions.items())]


def test_the_controller_carries_a_reassignment_out_the_same_in_zookeeper_and_in_memory(zookeeper):
    cluster = small_cluster()
    client = connect(f"{zookeeper}/kit-store-{next(_chroots)}")
    try:
        write_cluster(client, cluster)
        sync_registrations(client)  # the brokers' registrations, in this session
        on_zk, zk_marked = drive(ZkStore(client))
        zk_after = settled(ZkStore(client))
        zk_gone = ZkStore(client).reassignment()
    finally:
        close(client)
    memory = MemoryStore.from_cluster(cluster, {b: 9092 for b in range(1, 5)})
    in_memory, mem_marked = drive(memory)
    # KIP-455 marks after the pick-up, then the end state and the clock: the same in both.
    assert mem_marked == zk_marked
    assert any(adding for _, _, adding, _, _, _ in mem_marked)  # the move was under way then
    assert settled(memory) == zk_after
    assert settled(memory)[0][1] == [4, 2] and settled(memory)[0][5] == [4, 2]
    # Three copies of 200 MB into broker 4, sharing its 20 MB/s follower throttle.
    assert in_memory.completion_s() == pytest.approx(on_zk.completion_s()) == pytest.approx(30.0, rel=0.05)
    assert memory.reassignment() is None and zk_gone is None


def test_kill_and_revive_change_the_isr_the_same_way_in_memory():
    memory = MemoryStore.from_cluster(small_cluster(), {b: 9092 for b in range(1, 5)})
    led = kill_broker(memory, 1)
    assert led == sum(p.replicas[0] == 1 for p in small_cluster().partitions) > 0  # the preferred leads
    view = memory.view()
    assert 1 not in view.brokers and all(1 not in p.isr and p.leader != 1 for p in view.partitions.values())
    assert memory.killed(1)
    revive_broker(memory, 1)
    view = memory.view()
    assert 1 in view.brokers and all(1 in p.isr for p in view.partitions.values() if 1 in p.replicas)


def test_a_saved_memory_store_loads_back_with_its_reassignment_configs_and_progress(tmp_path):
    memory = MemoryStore.from_cluster(small_cluster(), {b: 9000 + b for b in range(1, 5)})
    for b in (1, 2, 3, 4):
        memory.alter_config("brokers", str(b), {LEADER_RATE: str(MB), FOLLOWER_RATE: str(MB)}, [])
    memory.set_reassignment(TARGETS, None)
    ctl = SimController(memory, speed=1.0, record_every=0)
    ctl.step(10.0)  # copying at 1 MB/s: 10 MB of each 200 MB copy done
    assert ctl.busy()
    path = tmp_path / "store.json"
    memory.save(str(path))
    again = MemoryStore.load(str(path))
    assert settled(again) == settled(memory)
    assert again.reassignment() == memory.reassignment()
    assert again.config("brokers", "3") == {LEADER_RATE: str(MB), FOLLOWER_RATE: str(MB)}
    assert again.progress() == memory.progress() and again.progress()["left"]
    assert again.view().brokers == memory.view().brokers
    # A controller over the loaded store resumes each copy from the bytes left.
    resumed = SimController(again, speed=1.0, record_every=0)
    resumed.step(1.0)
    assert resumed.resumed["progress"] == "recorded"
    assert resumed.resumed["bytes_left"] == sum(n for t in memory.progress()["left"].values()
                                                for d in t.values() for n in d.values())


def test_a_resume_without_a_saved_cluster_is_refused_in_one_line_and_writes_nothing(tmp_path):
    state = tmp_path / "nothing-here"
    r = run_kit("sim", "start", "--kraft", "--state", state)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "no stopped simulated KRaft cluster to resume" in r.stderr
    assert not state.exists()


def test_stop_and_start_on_the_same_state_resume_the_reassignment_and_its_throttles(tmp_path):
    """One end-to-end run: a plan applied at 1 MB/s through the Admin API, the cluster stopped
    and started again from its state directory alone."""
    doc = {"version": 1, "brokers": [{"id": b, "rack": f"r{b % 2}"} for b in range(1, 5)],
           "partitions": [{"topic": "a", "partition": p, "replicas": [1 + p % 3, 1 + (p + 1) % 3], "size": 500 * MB}
                          for p in range(3)]}
    snap, state, plan = tmp_path / "cluster.json", tmp_path / "state", tmp_path / "plan.json"
    snap.write_text(json.dumps(doc))
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "a", "partition": 0, "replicas": [4, 2]}]}))
    r = run_kit("sim", "start", "--kraft", "--snapshot", snap, "--state", state, timeout=180)
    assert r.returncode == 0, r.stderr
    try:
        bootstrap = (state / "bootstrap").read_text().strip()
        r = run_kit("apply", plan, "--bootstrap", bootstrap, "--throttle", str(MB), timeout=300)
        assert r.returncode == 0, r.stderr
        with open_backend(ClusterAddress(bootstrap=bootstrap)) as b:
            throttles = b.throttles()
        assert throttles[0]  # the apply throttled the brokers
    finally:
        assert run_kit("sim", "stop", "--state", state, timeout=180).returncode == 0
    r = run_kit("sim", "start", "--kraft", "--state", state, timeout=180)
    assert r.returncode == 0, r.stderr
    try:
        assert (state / "bootstrap").read_text().strip() == bootstrap  # the same ports
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=60000)
        try:
            moving = admin.list_partition_reassignments()
        finally:
            admin.close()
        [(tp, moving_a0)] = moving.items()
        assert (tp.topic, tp.partition) == ("a", 0) and moving_a0["adding_replicas"] == [4]
        with open_backend(ClusterAddress(bootstrap=bootstrap)) as b:
            assert b.throttles() == throttles
    finally:
        assert run_kit("sim", "stop", "--state", state, timeout=180).returncode == 0


def test_answers_kept_for_the_whole_cluster_follow_every_change_of_the_store():
    """Metadata and DescribeLogDirs of everything are kept encoded while nothing changes; a
    broker's death, or the controller's record of a copy's progress, is in the next answer."""
    from types import SimpleNamespace

    from kafka.protocol.admin import DescribeLogDirsResponse
    from kafka.protocol.metadata import MetadataResponse

    from kit.sim.kraft import handlers, logdirs
    from kit.sim.kraft.context import Context

    memory = MemoryStore.from_cluster(small_cluster(), {b: 9000 + b for b in range(1, 5)})
    ctx = Context(memory, 2, "cluster-id")
    everything = SimpleNamespace(topics=None)
    first = handlers.metadata(ctx, everything, 12)
    assert handlers.metadata(ctx, everything, 12) is first  # kept
    assert {b.node_id for b in MetadataResponse.decode(first.body, version=12).brokers} == {1, 2, 3, 4}
    kill_broker(memory, 3)
    after = MetadataResponse.decode(handlers.metadata(ctx, everything, 12).body, version=12)
    assert {b.node_id for b in after.brokers} == {1, 2, 4}
    assert all(3 not in p.isr_nodes for t in after.topics for p in t.partitions)

    def sizes():
        resp = DescribeLogDirsResponse.decode(logdirs.describe_log_dirs(ctx, everything, 4).body, version=4)
        return {(t.name, p.partition_index): p.partition_size for r in resp.results for t in r.topics
                for p in t.partitions}
    before = sizes()
    assert before[("a", 1)] == 200 * MB  # broker 2 holds a-1 whole
    memory.write_progress({"left": {"a": {"1": {"2": 150 * MB}}}})
    assert sizes()[("a", 1)] == 50 * MB


def test_between_any_two_writes_the_isr_and_the_leader_stay_within_the_replica_list():
    """make test of aefe15b: `kit verify` read a partition between the simulated controller's
    two writes at a copy's end (the new replica list, the old ISR naming the replica it dropped)
    and stopped on bad input: the controller wrote the replica list first. Kafka's controller
    shrinks the ISR and moves the leader (B3-B4) before it writes the replica list (B6)."""
    store = MemoryStore.from_cluster(small_cluster(), {b: 9092 for b in range(1, 5)})
    seen = []

    def check(write):
        def wrapped(*args):
            write(*args)
            for key, p in store.view().partitions.items():
                if not (set(p.isr) <= set(p.replicas) and p.leader in p.replicas):
                    seen.append((write.__name__, key, p.replicas, p.isr, p.leader))
        return wrapped
    store.update_topic, store.update_state = check(store.update_topic), check(store.update_state)
    drive(store)
    assert settled(store)[0][1] == [4, 2]  # the copies finished: ("a", 0) ended on its targets
    assert seen == []


def test_the_samples_written_are_the_json_modules_compact_lines(tmp_path):
    """The controller writes its samples with orjson (a runbook cluster's replica file: 17 ms
    with the json module, 1.5 ms with orjson): each line here is the json module's compact form
    of the row it reads back as (orjson writes floats under 1e-4 otherwise: none here)."""
    memory = MemoryStore.from_cluster(small_cluster(), {b: 9000 + b for b in range(1, 5)})
    ctl = SimController(memory, speed=1.0, record_every=0, samples_dir=str(tmp_path), sample_every=5.0)
    for b in (1, 2, 3, 4):
        memory.alter_config("brokers", str(b), {LEADER_RATE: str(MB), FOLLOWER_RATE: str(MB)}, [])
    memory.set_reassignment(TARGETS, None)
    ctl.step(10.0)
    ctl.write_samples()
    for kind, rows in (("replica", 12), ("broker", 4)):
        lines = [line for f in sorted((tmp_path / kind).glob("*.jsonl")) for line in f.read_text().splitlines()]
        assert len(lines) >= rows, (kind, lines)
        for line in lines:
            assert line == json.dumps(json.loads(line), separators=(",", ":")), line
