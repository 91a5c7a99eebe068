"""Kafka's ZooKeeper layout (kit/cluster/zk/layout.py) against a real ZooKeeper server."""
from __future__ import annotations

import gzip
import itertools
import json
import threading

import pytest

from kit.sim.brokers import sync_registrations

from conftest import run_kit as kit
from conftest import seed
from kit.errors import BadInput, Unsafe
from kit.formats import load_snapshot, snapshot_doc
from conftest import wait_for
from kit.cluster.zk.layout import connect, write_cluster
from kit.cluster.zk.read import ClusterReader, WatchedZnodes, read_cluster

_chroots = itertools.count()


@pytest.fixture
def zk_root(zookeeper):
    """A fresh chroot on the session's server for each test: HOST:PORT/chroot."""
    return f"{zookeeper}/kit-test-{next(_chroots)}"




def test_a_cluster_laid_out_in_znodes_reads_back_the_same(zk_root, snapshots):
    cluster = load_snapshot(str(snapshots["replace"]))  # one dead broker, one new empty one
    client = connect(zk_root)
    try:
        write_cluster(client, cluster)
        sync_registrations(client)  # the live brokers register (ephemeral, in this session)
        back, reassigning = read_cluster(client)
    finally:
        client.stop()
    assert reassigning is None
    assert [p.replicas for p in back.partitions] == [p.replicas for p in cluster.partitions]
    assert [p.size for p in back.partitions] == [p.size for p in cluster.partitions]
    dead = {b.id for b in cluster.brokers.values() if not b.alive}
    assert {b.id for b in back.brokers.values() if not b.alive} == dead
    for b in back.brokers.values():
        if b.alive:
            assert b.rack == cluster.brokers[b.id].rack
            assert b.storage_free == cluster.brokers[b.id].storage_free
    # Kafka drops a dead broker from the ISR, and leadership goes to the first live one.
    for p in back.partitions:
        assert not dead & set(p.isr)
        assert p.leader in p.isr


def test_gzipped_metrics_and_a_reassignment_in_flight_are_read(zk_root):
    client = connect(zk_root)
    try:
        client.create("/brokers/ids/1", json.dumps({"host": "h", "port": 9092, "rack": "a"}).encode(), makepath=True)
        client.create("/brokers/topics/t", json.dumps({"version": 1, "partitions": {"0": [1, 2]}}).encode(),
                      makepath=True)
        client.create("/topicmappr/partitionmeta", gzip.compress(b'{"t": {"0": {"Size": 42}}}'), makepath=True)
        client.create("/admin/reassign_partitions",
                      b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,3]}]}', makepath=True)
        cluster, reassigning = read_cluster(client)
    finally:
        client.stop()
    assert cluster.partitions[0].size == 42
    assert not cluster.brokers[2].alive  # named in a replica list, not registered
    assert reassigning["partitions"][0]["replicas"] == [1, 3]


def test_a_cluster_reader_follows_every_change_another_client_makes(zk_root, snapshots):
    """`ClusterReader` keeps what it read and reads again only what ZooKeeper says changed: its
    answer is always the one `read_cluster` gives, once the change's notification arrived."""
    cluster = load_snapshot(str(snapshots["replace"]))
    client, other = connect(zk_root), connect(zk_root)
    try:
        write_cluster(client, cluster)
        sync_registrations(client)
        reader = ClusterReader(client)

        def same():
            got, fresh = reader.read(), read_cluster(other)
            return snapshot_doc(got[0]) == snapshot_doc(fresh[0]) and got[1] == fresh[1]
        assert same()
        first = reader.read()
        assert reader.read() is first  # nothing changed: the same answer, nothing read again
        p = cluster.partitions[0]
        state = f"/brokers/topics/{p.topic}/partitions/{p.partition}/state"
        other.set(state, json.dumps({"leader": -1, "isr": [], "leader_epoch": 9}).encode())
        wait_for("the reader to see a partition state changed", same, 60)
        assert reader.read()[0].partitions[0].leader is None
        other.set(f"/brokers/topics/{p.topic}",
                  json.dumps({"version": 1, "partitions": {str(q.partition): list(reversed(q.replicas))
                                                           for q in cluster.partitions if q.topic == p.topic}}).encode())
        wait_for("the reader to see a replica list changed", same, 60)
        other.create("/admin/reassign_partitions", b'{"version":1,"partitions":[]}')  # created: was not there
        wait_for("the reader to see a reassignment begin", lambda: same() and reader.read()[1] is not None, 60)
        other.delete("/admin/reassign_partitions")
        live = next(b for b in cluster.brokers.values() if b.alive)
        client.delete(f"/brokers/ids/{live.id}")  # a broker's registration goes
        wait_for("the reader to see a broker go and the reassignment end",
                 lambda: same() and reader.read()[1] is None and not reader.read()[0].brokers[live.id].alive, 60)
    finally:
        other.stop()
        client.stop()


def test_a_current_cluster_reader_returns_a_change_whose_notification_is_not_in_yet(zk_root, snapshots):
    """The auto-throttle on a simulated cluster's clock reads right after the controller wrote
    and moved the clock; kazoo runs watch notifications on a thread of its own, and a read
    before that thread ran answered the kept, older state (a round read a copy as going on,
    and its decisions differed from another speed's run). A `current` reader hears every change
    made before it reads."""
    from kazoo.protocol.states import Callback

    cluster = load_snapshot(str(snapshots["replace"]))
    client, other = connect(zk_root), connect(zk_root)
    busy = threading.Event()
    try:
        write_cluster(client, cluster)
        sync_registrations(client)
        kept, current = ClusterReader(client), ClusterReader(client, current=True)
        assert kept.read()[0].partitions[0].leader is not None
        assert current.read()[0].partitions[0].leader is not None
        # kazoo's callback thread is busy: the change's notification waits behind this.
        client.handler.dispatch_callback(Callback("watch", busy.wait, (120,)))
        p = cluster.partitions[0]
        other.set(f"/brokers/topics/{p.topic}/partitions/{p.partition}/state",
                  json.dumps({"leader": -1, "isr": [], "leader_epoch": 9}).encode())
        assert kept.read()[0].partitions[0].leader is not None  # what it kept: not notified yet
        threading.Timer(0.5, busy.set).start()
        assert current.read()[0].partitions[0].leader is None  # waited for the notification
    finally:
        busy.set()
        other.stop()
        client.stop()


class FinishingAtRead:
    """A kazoo client whose reads are answered one at a time, in the order they are asked, and
    whose `at`-th read lets `finish` run first: another client's change landing between two of
    a reader's reads, at a chosen point."""

    def __init__(self, client, at: int, finish):
        self.client, self.at, self.finish, self.reads = client, at, finish, 0

    def _turn(self) -> None:
        self.reads += 1
        if self.reads == self.at:
            self.finish()

    def get_children(self, *args, **kwargs):
        self._turn()
        return self.client.get_children(*args, **kwargs)

    def get(self, *args, **kwargs):
        self._turn()
        return self.client.get(*args, **kwargs)

    def exists(self, *args, **kwargs):
        self._turn()
        return self.client.exists(*args, **kwargs)

    def get_async(self, *args, **kwargs):
        self._turn()
        result = self.client.get_async(*args, **kwargs)
        result.wait()
        return result

    def __getattr__(self, name):
        return getattr(self.client, name)


def _verify_sees_it_moving_or_done(client, moves) -> bool:
    from kit.cluster.zk.changes import verify

    res = verify(client, moves)
    return res["done"] or any(r["state"] == "copying" for r in res["partitions"])


def _progress_sees_it_moving_or_done(client, moves) -> bool:
    from kit.cluster.zk.changes import plan_progress

    return plan_progress(client, moves) in ("running", "in place")


@pytest.mark.parametrize("look", [_verify_sees_it_moving_or_done, _progress_sees_it_moving_or_done])
def test_a_reassignment_ending_between_two_reads_is_never_read_as_never_started(zookeeper, look):
    """CI (test_rollback_puts_the_previous_assignment_back[zookeeper]): `verify --wait` ended
    with "no reassignment is running ... (never started, or cancelled)" while the controller was
    finishing it. It read the replica lists, then /admin/reassign_partitions: the controller
    settling the replicas and dropping the reassignment between the two left a partition at its
    old replicas with nothing running. Whatever read the end lands before, a verify round sees
    the partition copying or done, and an apply run again (`plan_progress`) sees the plan
    running or in place, never not started."""
    from kit.cluster.zk.changes import apply_plan
    from kit.cluster.zk.layout import close
    from kit.formats import cluster_from_snapshot
    from kit.sim.controller import SimController

    cluster = cluster_from_snapshot({"version": 1, "brokers": [{"id": b} for b in (1, 2, 3, 4)], "partitions": [
        {"topic": "t", "partition": p, "replicas": r, "size": 10**10} for p, r in ((0, [1, 2]), (1, [2, 3]))]})
    moves = [{"topic": "t", "partition": 0, "replicas": [4, 2]}, {"topic": "t", "partition": 1, "replicas": [2, 3]}]
    for at in itertools.count(1):  # until the reads of a whole round are over before it
        root = f"{zookeeper}/kit-test-{next(_chroots)}"
        client = seed(root, cluster)
        apply_plan(client, moves)
        controller = SimController(connect(root))
        try:
            controller.advance_to(1.0)  # picked up, copying: 10 GB take longer than a second
            assert controller.busy()
            reader = FinishingAtRead(client, at, lambda: controller.advance_to(1e9))
            seen = look(reader, moves)
        finally:
            close(controller.store.client)
        assert seen, f"the end landing before read {at}"
        if reader.reads < at:
            break
    assert at > 2  # the end landed before each of the round's reads in turn


class LaggingZnodes(WatchedZnodes):
    """`WatchedZnodes` whose kept copy of one znode is `stale` until it is forgotten: a change
    whose notification is not in yet (after a reconnect, say)."""

    def __init__(self, client, path: str, stale: bytes):
        super().__init__(client)
        self.path, self.stale = path, stale

    def get_many(self, paths):
        out = super().get_many(paths)
        if self.stale is not None and self.path in out:
            out[self.path] = self.stale
        return out

    def forget(self, path):
        if path == self.path:
            self.stale = None
        super().forget(path)


def test_a_replica_list_kept_from_before_a_change_is_read_again_not_refused(zk_root, snapshots):
    """A partition's state read fresh names a broker its kept replica list does not (the
    reassignment's change of the replicas not yet notified): the reader reads that topic again
    and answers what ZooKeeper holds, where it refused the cluster before (CI:
    test_the_loop_rides_out_a_zookeeper_restart, "isr names broker 1006, which is not one of
    its replicas")."""
    cluster = load_snapshot(str(snapshots["replace"]))
    client, other = connect(zk_root), connect(zk_root)
    try:
        write_cluster(client, cluster)
        sync_registrations(client)
        p = cluster.partitions[0]
        topic = f"/brokers/topics/{p.topic}"
        before = client.get(topic)[0]
        newcomer = next(b.id for b in cluster.brokers.values() if b.alive and b.id not in p.replicas)
        moved = [newcomer, *p.replicas[1:]]
        doc = json.loads(before)
        doc["partitions"][str(p.partition)] = moved
        other.set(topic, json.dumps(doc).encode())
        other.set(f"{topic}/partitions/{p.partition}/state",
                  json.dumps({"leader": newcomer, "isr": moved, "leader_epoch": 9}).encode())
        got, _ = read_cluster(client, LaggingZnodes(client, topic, before))
        fresh, _ = read_cluster(other)
        assert snapshot_doc(got) == snapshot_doc(fresh)
        assert list(got.partitions[0].replicas) == moved and got.partitions[0].leader == newcomer
    finally:
        other.stop()
        client.stop()


def test_writing_over_a_kafka_cluster_is_refused(zk_root, snapshots):
    cluster = load_snapshot(str(snapshots["balanced"]))
    client = connect(zk_root)
    try:
        write_cluster(client, cluster)
        with pytest.raises(Unsafe):
            write_cluster(client, cluster)
    finally:
        client.stop()


def test_a_cluster_too_big_for_the_metric_znodes_is_refused_before_anything_is_written(zookeeper, make_snapshot):
    """100,000 partitions: the simulator's facts gzip to ~1.1 MB, over a znode's 1 MB. It used to
    lay out every partition (minutes at this size), then fail with ConnectionLoss."""
    snap = make_snapshot("--brokers", "30", "--racks", "3", "--topics", "50", "--partitions", "100000",
                         "--seed", "1")
    chroot = f"kit-test-{next(_chroots)}"
    r = kit("sim", "seed", "--zk", f"{zookeeper}/{chroot}", "--snapshot", str(snap))
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().count("\n") == 0
    assert "over what a znode holds" in r.stderr and "--kraft" in r.stderr
    client = connect(zookeeper)
    try:
        assert client.exists(f"/{chroot}") is None
    finally:
        client.stop()


def test_cli_snapshot_and_plan_from_zookeeper(zk_root, snapshots, tmp_path):
    cluster = load_snapshot(str(snapshots["scale-out"]))
    seed(zk_root, cluster)
    snap = tmp_path / "from-zk.json"
    r = kit("snapshot", "--zk", zk_root, "--out", str(snap))
    assert r.returncode == 0, r.stderr
    assert [p.replicas for p in load_snapshot(str(snap)).partitions] == [p.replicas for p in cluster.partitions]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert kit("plan", "scale-out", "--zk", zk_root, "--out", str(a)).returncode == 0
    assert kit("plan", "scale-out", "--snapshot", str(snapshots["scale-out"]), "--out", str(b)).returncode == 0
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize("spec", ["127.0.0.1:1", "not a host", "127.0.0.1"])
def test_unreachable_or_malformed_zookeeper_is_one_line_exit_2(spec, tmp_path):
    # Nothing answers at port 1: the wait is the operator's --zk-connect-timeout (the default's
    # ten seconds are held to what --help says below, without waiting them out).
    r = kit("plan", "leaders", "--zk", spec, "--zk-connect-timeout", "1", "--out", str(tmp_path / "p.json"))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0
    assert not (tmp_path / "p.json").exists()
    if spec == "127.0.0.1:1":
        assert f"--zk {spec}: no ZooKeeper answers there" in r.stderr


def test_the_zookeeper_connect_timeout_is_the_option_else_the_default_help_says(monkeypatch, capsys):
    """--zk-connect-timeout reaches ZooKeeper's connect (over a caller's own wait); without it
    the wait is `DEFAULT_TIMEOUT`, the default --help names; with --bootstrap, or not above 0,
    it is refused in one line."""
    import kit.cluster.zk.backend as zk_backend
    from kit.cli import build_parser, main
    from kit.cli.options import cluster_address
    from kit.cluster.backend import DEFAULT_TIMEOUT, ClusterAddress, open_backend
    from kit.errors import Unreachable

    waits = []

    def connect_nowhere(spec, timeout, auth):
        waits.append(timeout)
        raise Unreachable(f"--zk {spec}: no ZooKeeper answers there")

    monkeypatch.setattr(zk_backend, "connect", connect_nowhere)
    parser = build_parser()
    for argv, timeout in [([], None), ([], 5.0), (["--zk-connect-timeout", "0.5"], None),
                          (["--zk-connect-timeout", "0.5"], 5.0)]:
        a = parser.parse_args(["plan", "leaders", "--zk", "127.0.0.1:1", "--out", "p.json", *argv])
        with pytest.raises(Unreachable):
            open_backend(cluster_address(a), timeout=timeout)
    assert waits == [DEFAULT_TIMEOUT, 5.0, 0.5, 0.5]
    with pytest.raises(SystemExit):
        main(["plan", "leaders", "--help"])
    said = " ".join(capsys.readouterr().out.split())
    assert f"zookeeper.connection.timeout.ms (default {DEFAULT_TIMEOUT:g})" in said, said
    with pytest.raises(BadInput, match="--zk-connect-timeout goes with --zk"):
        ClusterAddress(bootstrap="127.0.0.1:9092", zk_connect_timeout=1.0)
    with pytest.raises(BadInput, match="above 0"):
        ClusterAddress(zk="127.0.0.1:1", zk_connect_timeout=0.0)


def test_connect_rejects_a_bad_spec():
    with pytest.raises(BadInput):
        connect("host-without-port")


def test_digest_auth_reads_a_protected_cluster_and_never_prints_the_password(zookeeper, snapshots, tmp_path):
    import os

    from kazoo.security import make_digest_acl

    root = f"{zookeeper}/kit-acl-{next(_chroots)}"
    secret = "s3cret-pw"
    client = connect(root, auth=f"digest:kit:{secret}")
    try:
        acl = [make_digest_acl("kit", secret, all=True)]
        client.create("/brokers/ids/1", b'{"rack": "a"}', makepath=True, acl=acl)
        client.set_acls("/brokers/ids", acl)
        client.set_acls("/brokers", acl)
    finally:
        client.stop()
    out = tmp_path / "snap.json"
    denied = kit("snapshot", "--zk", root, "--out", str(out))
    assert denied.returncode != 0 and not out.exists()
    assert "Traceback" not in denied.stderr
    env = {**os.environ, "KIT_ZK_AUTH": f"digest:kit:{secret}"}
    ok = kit("snapshot", "--zk", root, "--out", out, env=env)
    assert ok.returncode == 0, ok.stderr
    assert secret not in ok.stdout + ok.stderr + denied.stdout + denied.stderr
    r = kit("snapshot", "--zk", root, "--zk-auth", f"digest:kit:{secret}", "--out", str(tmp_path / "b.json"))
    assert r.returncode == 0 and secret not in r.stdout + r.stderr
