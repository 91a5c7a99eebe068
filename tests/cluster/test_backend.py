"""The seam to a cluster (kit/cluster/backend.py): the ZooKeeper backend keeps the protocol, and
a change goes round trip through the backend alone against a real ZooKeeper."""
from __future__ import annotations

import inspect
import itertools
import json
import threading
from pathlib import Path

import pytest

from conftest import finish_reassignment, seed
from kit.cluster.backend import ROLES, ClusterAddress, ClusterBackend, ConnectionWatch, open_backend
from kit.cluster.kafka.backend import AdminBackend
from kit.cluster.zk.backend import ZkBackend
from kit.dashboard.poller import Poller
from kit.errors import BadInput, Unsafe
from kit.formats import load_snapshot
from kit.throttle.configs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS

_chroots = itertools.count()


def members(protocol) -> set[str]:
    """The methods a protocol class itself declares (its own, not inherited)."""
    return {n for n, v in vars(protocol).items() if callable(v) and (not n.startswith("_") or n in ("__enter__", "__exit__"))}


PROTOCOL = sorted(set().union(*map(members, ROLES)))


@pytest.fixture
def kafka(zookeeper, snapshots):
    """A chroot holding the scale-out cluster (three empty brokers): (connect string, cluster)."""
    root = f"{zookeeper}/kit-backend-{next(_chroots)}"
    cluster = load_snapshot(str(snapshots["scale-out"]))
    seed(root, cluster)
    return root, cluster


@pytest.mark.parametrize("module", ["kit/cli/__init__.py", "kit/cli/change.py", "kit/cli/dashboard.py",
                                    "kit/dashboard/poller.py", "kit/metrics/edge.py"])
def test_these_reach_a_cluster_through_the_backend_alone(module):
    """`kit apply`, `verify`, `elect`, `rollback`, `status`, `snapshot`, `dashboard`, `metrics --zk`
    and the dashboard's poller name no ZooKeeper module, only kit.cluster.backend."""
    source = (Path(__file__).resolve().parents[2] / module).read_text()
    assert "kit.cluster.zk" not in source and "kazoo.client" not in source


def test_the_simulated_clusters_facts_are_read_and_a_real_cluster_has_none(kafka):
    root, seeded = kafka
    with open_backend(ClusterAddress(zk=root)) as backend:
        facts = backend.sim_facts()
        assert sorted(facts["brokers"]) == sorted(str(b.id) for b in seeded.brokers.values() if b.known)
        assert len(facts["traffic"]) == len(seeded.partitions)
        backend.client.delete("/kit/sim/facts")  # what a real cluster is: Kafka's own znodes
        assert backend.sim_facts() is None


def test_metrics_written_through_the_backend_are_what_it_reads_back(kafka):
    root, seeded = kafka
    sizes = {}
    for p in seeded.partitions:
        sizes.setdefault(p.topic, {})[str(p.partition)] = {"Size": 1000 + p.partition}
    free = {str(b): {"StorageFree": 7_000 + b} for b in seeded.live_ids}
    with open_backend(ClusterAddress(zk=root)) as backend:
        backend.write_metrics(sizes, free)
        backend.write_metrics(sizes, free)  # replaced, not refused for being there
        cluster, _ = backend.read()
    assert {(p.topic, p.partition): p.size for p in cluster.partitions} == \
        {(p.topic, p.partition): 1000 + p.partition for p in seeded.partitions}
    assert {b: cluster.brokers[b].storage_free for b in seeded.live_ids} == {b: 7_000 + b for b in seeded.live_ids}


def _compatible(wanted: inspect.Signature, got: inspect.Signature) -> list[str]:
    """Why `got` cannot be called every way `wanted` can (empty when it can)."""
    why = []
    params = list(got.parameters.values())
    rest = any(p.kind is p.VAR_POSITIONAL for p in params)
    for i, p in enumerate(wanted.parameters.values()):
        if p.kind is p.VAR_POSITIONAL:
            if not rest:
                why.append("takes no *args")
            continue
        q = got.parameters.get(p.name)
        if q is None:
            why.append(f"no parameter {p.name}")
        elif p.kind is p.POSITIONAL_OR_KEYWORD and params.index(q) != i:
            why.append(f"{p.name} is not parameter {i}")
        elif p.default is not p.empty and q.default != p.default:
            why.append(f"{p.name} defaults to {q.default!r}, not {p.default!r}")
    extra = [q.name for q in params if q.name not in wanted.parameters and q.default is q.empty
             and q.kind not in (q.VAR_POSITIONAL, q.VAR_KEYWORD)]
    return why + [f"{n} is required" for n in extra]


def test_the_protocol_covers_what_kit_does_to_a_cluster():
    assert PROTOCOL == sorted(["__enter__", "__exit__", "close", "read", "follow", "reassigning", "progress", "apply",
                               "sim_facts", "write_metrics",
                               "rollback", "verify", "verify_until_done", "elect", "status", "throttles",
                               "set_throttles", "clear_throttles", "clear_leftover_throttles",
                               "watch_reassignment", "watch_connection", "throttle_overrides",
                               "store_throttle_override", "remove_throttle_override", "broker_metrics",
                               "hold_lease", "release_lease", "leases"])


def test_the_seam_is_split_by_role_each_member_in_one_role():
    """`ClusterBackend` is its roles and nothing more: no member in two roles, none of its own
    besides `__enter__` (typed to return the whole backend)."""
    seen: dict[str, str] = {}
    for role in ROLES:
        for name in members(role):
            assert name not in seen, f"{name} in {seen.get(name)} and {role.__name__}"
            seen[name] = role.__name__
    assert members(ClusterBackend) == {"__enter__"}
    assert set(ClusterBackend.__mro__) >= set(ROLES)
    assert {r.__name__ for r in ROLES} == {"Connection", "Reading", "Reassigning", "Throttling", "Overrides", "Metrics"}


@pytest.mark.parametrize("backend", [ZkBackend, AdminBackend])
@pytest.mark.parametrize("role", ROLES, ids=lambda r: r.__name__)
def test_each_backend_is_an_instance_of_each_role(role, backend):
    assert members(role) <= set(dir(backend))


@pytest.mark.parametrize("backend", [ZkBackend, AdminBackend])
@pytest.mark.parametrize("name", PROTOCOL)
def test_each_backend_has_each_method_with_a_compatible_signature(name, backend):
    wanted = inspect.signature(getattr(ClusterBackend, name))
    got = inspect.signature(getattr(backend, name))
    assert _compatible(wanted, got) == []


@pytest.mark.parametrize("kwargs, says", [
    ({"bootstrap": "not an address"}, "--bootstrap .not an address.: expected HOST:PORT"),
    ({"zk": "127.0.0.1:2181", "bootstrap": "127.0.0.1:9092"}, "give one, not both"),
    ({}, "no cluster given"),
    ({"zk": "not a connect string"}, "expected HOST:PORT"),
])
def test_open_backend_refuses_what_it_cannot_open_as_bad_input(kwargs, says):
    with pytest.raises(BadInput, match=says.replace("(", r"\(").replace(")", r"\)")) as e:
        open_backend(ClusterAddress(**kwargs))
    assert e.value.exit_code == 2


@pytest.mark.parametrize("fields, says", [
    ({"zk": "127.0.0.1:2181", "bootstrap": "127.0.0.1:9092"}, "give one, not both"),
    ({"zk": "127.0.0.1:2181", "command_config": "client.properties"}, "--command-config goes with --bootstrap"),
    ({"bootstrap": "127.0.0.1:9092", "auth": "digest:kit:secret"}, "--zk-auth / --zk-auth-file go with --zk"),
    ({"zk": "127.0.0.1:2181", "sim_facts": "facts.json"}, "--sim-facts goes with --bootstrap"),
    ({"zk": "127.0.0.1:2181", "state_file": "state.json"}, "are the Admin API's"),
])
def test_a_cluster_address_refuses_options_that_do_not_go_together_when_it_is_made(fields, says):
    """One rule, one place: every command, the doctor, the runbooks and the dashboard make
    their address with `ClusterAddress`, which checks the pairing before anything is opened."""
    with pytest.raises(BadInput, match=says.replace("(", r"\(").replace(")", r"\)")) as e:
        ClusterAddress(**fields)
    assert e.value.exit_code == 2


def test_a_cluster_address_keeps_its_credentials_out_of_its_repr_and_says_how_it_is_reached():
    zk = ClusterAddress(zk="127.0.0.1:2181/kafka", auth="digest:kit:s3cret")
    assert "s3cret" not in repr(zk) and zk.live and zk.flags() == ["--zk", "127.0.0.1:2181/kafka"]
    assert zk.reached_through == ZkBackend.reached_through
    kraft = ClusterAddress(bootstrap="127.0.0.1:9092")
    assert kraft.flags() == ["--bootstrap", "127.0.0.1:9092"] and kraft.reached_through == AdminBackend.reached_through
    assert not ClusterAddress().live and ClusterAddress().flags() == []
    with pytest.raises(BadInput, match="no cluster given"):
        open_backend(ClusterAddress())


def _moves(cluster, n=4) -> list[dict]:
    """Move the last replica of `n` partitions onto the brokers that hold none (scale-out)."""
    empty = [b for b in cluster.live_ids if b not in cluster.map_brokers()]
    return [{"topic": p.topic, "partition": p.partition, "replicas": list(p.replicas[:-1]) + [empty[i % len(empty)]]}
            for i, p in enumerate(cluster.partitions[:n])]


def test_a_change_round_trip_through_the_zookeeper_backend_alone(kafka, tmp_path):
    root, seeded = kafka
    moves = _moves(seeded)
    rollback = tmp_path / "rollback.json"
    with open_backend(ClusterAddress(zk=root)) as backend:
        assert isinstance(backend, ClusterBackend) and isinstance(backend, ZkBackend)
        cluster, running = backend.read()
        assert running is None and not backend.reassigning() and backend.progress(moves) is None
        assert [p.key for p in cluster.partitions] == [p.key for p in seeded.partitions]
        assert backend.status()["reassigning"] is False

        done = backend.apply(moves, 50e6, str(rollback))
        assert done["partitions"] == len(moves) and done["throttled_topics"] and done["throttled_brokers"]
        assert [e["replicas"] for e in json.loads(rollback.read_text())["partitions"]] == \
            [list(p.replicas) for p in seeded.partitions[:len(moves)]]
        _, running = backend.read()
        assert running["partitions"] == moves and backend.reassigning() and backend.progress(moves) == "running"
        st = backend.status()
        assert st["reassigning"] and st["reassigning_partitions"] == len(moves) and st["bytes_left"] > 0
        brokers, topics = backend.throttles()
        assert sorted(brokers) == sorted(str(b) for b in st["throttled_brokers"])
        assert all(keys == {LEADER_RATE: "50000000", FOLLOWER_RATE: "50000000"} for keys in brokers.values())
        assert sorted(topics) == st["throttled_topics"] == sorted({m["topic"] for m in moves})
        assert all(set(keys) == {LEADER_REPLICAS, FOLLOWER_REPLICAS} for keys in topics.values())

        res = backend.verify(moves)
        assert res["running"] and not res["done"] and {r["state"] for r in res["partitions"]} == {"copying"}
        with pytest.raises(Unsafe, match="in progress"):
            backend.rollback(moves)

        finish_reassignment(root)
        res = backend.verify(moves)
        assert res["done"] and not res["running"] and res["cleared_brokers"] == len(brokers)
        assert backend.throttles() == ({}, {}) and backend.progress(moves) == "in place"
        assert not backend.status()["throttles_without_reassignment"]


def test_throttles_are_set_and_cleared_by_name_and_the_end_of_a_reassignment_is_watched(kafka):
    root, seeded = kafka
    moves = _moves(seeded, 2)
    changed = threading.Event()
    with open_backend(ClusterAddress(zk=root)) as backend:
        backend.watch_reassignment(changed.set)
        assert changed.wait(60)  # once at once
        changed.clear()
        backend.set_throttles(brokers={1: {LEADER_RATE: "7"}, "2": {FOLLOWER_RATE: "8"}},
                              topics={seeded.partitions[0].topic: {LEADER_REPLICAS: "0:1"}})
        assert backend.throttles() == ({"1": {LEADER_RATE: "7"}, "2": {FOLLOWER_RATE: "8"}},
                                       {seeded.partitions[0].topic: {LEADER_REPLICAS: "0:1"}})
        assert backend.clear_throttles(brokers=[1, 3]) == (["1"], [])
        assert backend.clear_leftover_throttles() == (1, 1) and backend.throttles() == ({}, {})

        backend.apply(moves)
        assert changed.wait(60)  # it started
        changed.clear()
        finish_reassignment(root)
        assert changed.wait(60)  # it ended
        assert not backend.reassigning()


def test_the_dashboards_poller_reads_status_and_rates_through_the_backend(kafka):
    root, seeded = kafka
    moves = _moves(seeded)
    with open_backend(ClusterAddress(zk=root)) as backend:
        backend.apply(moves, 30e6)
    poller = Poller(ClusterAddress(zk=root))
    try:
        state = poller.poll()
        assert state.error is None and state.status["reassigning_partitions"] == len(moves)
        rows, _ = poller.rows_since(0)
        assert rows and {r["throttle"] for r in rows} == {30.0}
    finally:
        poller.stop()


def test_kafka_kits_throttle_overrides_are_stored_read_and_removed_through_the_backend(kafka):
    root, seeded = kafka
    with open_backend(ClusterAddress(zk=root)) as backend:
        assert backend.throttle_overrides() == {} and backend.remove_throttle_override() is None
        assert backend.remove_throttle_override("1") is None
        assert backend.store_throttle_override(b'{"rate": 20.0, "autoremove": false}', "1002") \
            == "/autothrottle/override_rate/1002"
        where = backend.store_throttle_override(b'{"rate": 30.0, "autoremove": true}')
        backend.store_throttle_override(b"{}", "1001")
        assert where == "/autothrottle/override_rate"
        # The global one first, then the brokers' by name; each as stored (kafka-kit's layout).
        assert list(backend.throttle_overrides().items()) == [
            (where, (None, b'{"rate": 30.0, "autoremove": true}')),
            (f"{where}/1001", ("1001", b"{}")),
            (f"{where}/1002", ("1002", b'{"rate": 20.0, "autoremove": false}'))]
        assert json.loads(backend.client.get(f"{where}/1002")[0]) == {"rate": 20.0, "autoremove": False}
        backend.store_throttle_override(b'{"rate": 25.0}', "1002")  # replaced
        assert backend.throttle_overrides()[f"{where}/1002"] == ("1002", b'{"rate": 25.0}')
        # The global one is emptied (the brokers' stay), a broker's goes.
        assert backend.remove_throttle_override() == b'{"rate": 30.0, "autoremove": true}'
        assert backend.remove_throttle_override("1002") == b'{"rate": 25.0}'
        assert backend.throttle_overrides() == {where: (None, b"{}"), f"{where}/1001": ("1001", b"{}")}


def test_kafka_kits_broker_metrics_are_read_gunzipped_with_when_they_were_written(kafka):
    import gzip

    root, cluster = kafka
    doc = {"1001": {"StorageFree": 1e12, "NetRX": 25e6, "NetTX": 50e6}}
    with open_backend(ClusterAddress(zk=root)) as backend:
        seeded, _ = backend.broker_metrics()  # kit sim seed writes StorageFree, as kafka-kit does
        assert {k: set(v) for k, v in seeded.items()} == {str(b): {"StorageFree"} for b in cluster.brokers}
        backend.client.delete("/topicmappr/brokermetrics")
        assert backend.broker_metrics() is None
        backend.client.create("/topicmappr/brokermetrics", b"not json", makepath=True)
        assert backend.broker_metrics() is None
        backend.client.set("/topicmappr/brokermetrics", gzip.compress(json.dumps(doc).encode()))
        stat = backend.client.exists("/topicmappr/brokermetrics")
        assert backend.broker_metrics() == (doc, stat.mtime / 1000)
        backend.client.set("/topicmappr/brokermetrics", json.dumps(doc).encode())
        assert backend.broker_metrics()[0] == doc


def test_a_lost_connection_is_said_by_the_watch_and_raised_as_connection_lost(kafka):
    root, _ = kafka
    with open_backend(ClusterAddress(zk=root)) as backend:
        said = []
        watch = backend.watch_connection(0.1, said.append)
        try:
            assert isinstance(watch, ConnectionWatch) and not watch.down and not watch.gave_up.is_set()
            watch.raise_if_down()  # connected: nothing to say
            backend.client.stop()  # as when ZooKeeper goes: the session is lost
            assert watch.down and said == ["session lost"]  # told at once, by kazoo's thread
            with pytest.raises(backend.connection_lost):
                watch.raise_if_down()
            with pytest.raises(backend.connection_lost):
                backend.read()
            assert watch.gave_up.wait(60)  # its patience ran out: every wait has an end
        finally:
            watch.close()
