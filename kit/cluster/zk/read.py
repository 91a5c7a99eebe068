"""Reading a cluster from Kafka's znodes, once (`read_cluster`) or kept up to date by watches
(`WatchedZnodes`, `ClusterReader`).

Only the znodes Kafka (ZooKeeper mode, up to 3.x) and kafka-kit keep are read: /brokers/ids/N,
/brokers/topics/T, /brokers/topics/T/partitions/P/state, /admin/reassign_partitions,
/topicmappr/partitionmeta and /topicmappr/brokermetrics. Reads of many znodes are issued
together with kazoo's async API, not one round trip at a time. Laying a cluster out, and the
connection, are `kit.cluster.zk.layout`'s.
"""
from __future__ import annotations

import gzip
import json
import threading

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import Callback

from kit.errors import BadInput
from kit.formats import OutsideReplicas, cluster_from_snapshot
from kit.model import Cluster

# kafka-kit's metric znodes (plain or gzipped JSON, written by its metricsfetcher): each
# partition's size, each broker's free storage.
PARTITION_META = "/topicmappr/partitionmeta"
BROKER_METRICS = "/topicmappr/brokermetrics"


def parse_znode_json(raw: bytes, where: str):
    """A znode's JSON (gunzipped when kafka-kit gzipped it); `BadInput` names the znode."""
    if raw[:2] == b"\x1f\x8b":  # kafka-kit may gzip its metric znodes
        raw = gzip.decompress(raw)
    try:
        return json.loads(raw.decode() or "null")
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise BadInput(f"znode {where}: not JSON") from None


def get_many(client: KazooClient, paths: list[str]) -> dict[str, bytes | None]:
    """Data of many znodes, requested all at once; None for the missing ones."""
    pending = [(p, client.get_async(p)) for p in paths]
    out = {}
    for path, result in pending:
        try:
            out[path] = result.get()[0]
        except NoNodeError:
            out[path] = None
    return out


def children_or_none(client: KazooClient, path: str) -> list[str]:
    """The children of `path`, or none when it does not exist."""
    try:
        return client.get_children(path)
    except NoNodeError:
        return []


class WatchedZnodes:
    """Znodes read once and kept until ZooKeeper says they changed: for a process that reads the
    same thousands of znodes every second (the simulated controller), of which a few change.

    Every read leaves a one-time watch (on the data, on the children, or on the creation of a
    znode not there); the watch's notification drops what was kept, and the next read asks
    ZooKeeper again. So a read returns what one straight from ZooKeeper would, once the change's
    notification has arrived (as Kafka's own controller, which follows znodes by their watches,
    sees them). A writer using this client calls `forget(path)` after its write: kazoo delivers
    notifications on a thread of its own, which may not have run yet. `changes` counts what was
    dropped, so a reader can keep what it derived from the znodes while it stays the same.
    Without a connection nothing is kept (a lost session loses its watches).
    """

    def __init__(self, client: KazooClient):
        self.client = client
        self.changes = 0
        self._lock = threading.Lock()
        self._data: dict[str, bytes | None] = {}
        self._children: dict[str, list[str]] = {}
        self._fired: dict[str, int] = {}  # the value of `changes` when a path's watch last fired
        client.add_listener(self._on_state)

    def _on_state(self, state) -> None:
        if state != KazooState.CONNECTED:
            with self._lock:
                self._data.clear()
                self._children.clear()
                self.changes += 1

    def _on_change(self, event) -> None:
        self.forget(event.path)

    def catch_up(self, bound: float = 60.0) -> None:
        """Hear every change ZooKeeper made before now, so that the next read returns it: a
        round trip (ZooKeeper sends a watch's notification ahead of any later answer on the
        session), then a turn of kazoo's callback thread, which runs the notifications
        (`forget`) in the order they came. `bound`: seconds to wait for that thread."""
        self.client.sync("/")
        heard = threading.Event()
        self.client.handler.dispatch_callback(Callback("watch", heard.set, ()))
        heard.wait(bound)

    def forget(self, path: str) -> None:
        """Drop what is kept of `path` (its data and its children): the next read asks ZooKeeper."""
        with self._lock:
            self.changes += 1
            self._fired[path] = self.changes
            self._data.pop(path, None)
            self._children.pop(path, None)

    def _keep(self, into: dict, path: str, value, asked_at: int) -> None:
        # Not kept when its watch fired after the read was sent: the value may predate the change.
        with self._lock:
            if self._fired.get(path, 0) <= asked_at and self.client.connected:
                into[path] = value

    def get_many(self, paths: list[str]) -> dict[str, bytes | None]:
        """`get_many`, from what is kept where nothing changed."""
        with self._lock:
            out = {p: self._data[p] for p in paths if p in self._data}
            asked_at = self.changes
        reads = [(p, self.client.get_async(p, watch=self._on_change)) for p in paths if p not in out]
        missing = []
        for path, result in reads:
            try:
                out[path] = result.get()[0]
            except NoNodeError:
                missing.append(path)
                continue
            self._keep(self._data, path, out[path], asked_at)
        # A znode not there is watched for its creation; one created meanwhile is read next time.
        for path, result in [(p, self.client.exists_async(p, watch=self._on_change)) for p in missing]:
            out[path] = None
            if result.get() is None:
                self._keep(self._data, path, None, asked_at)
        return out

    def children(self, path: str) -> list[str] | None:
        """The children of `path` (None when it does not exist), from what is kept if unchanged."""
        with self._lock:
            if path in self._children:
                return list(self._children[path])
            asked_at = self.changes
        try:
            kids = self.client.get_children(path, watch=self._on_change)
        except NoNodeError:
            if self.client.exists(path, watch=self._on_change) is None:
                self._keep(self._children, path, None, asked_at)
            return None
        self._keep(self._children, path, list(kids), asked_at)
        return kids


class ClusterReader:
    """`read_cluster` for a process that reads the cluster again and again: the znodes through
    `WatchedZnodes`, and the same answer while none of them changed. `current`: each read
    first hears every change made before it (`WatchedZnodes.catch_up`), for a reader told by
    another process that it wrote (the loop on a simulated cluster's clock: the controller
    writes, then moves the clock)."""

    def __init__(self, client: KazooClient, current: bool = False):
        self.znodes = WatchedZnodes(client)
        self.current = current
        self._last: tuple[int, tuple[Cluster, dict | None]] | None = None

    def read(self) -> tuple[Cluster, dict | None]:
        """The cluster and the reassignment in flight, as `read_cluster` (the answer is shared:
        a caller does not change it)."""
        if self.current:
            self.znodes.catch_up()
        asked_at = self.znodes.changes
        if self._last is not None and self._last[0] == asked_at:
            return self._last[1]
        got = read_cluster(self.znodes.client, self.znodes)
        self._last = (asked_at, got)  # read again next time if anything changed meanwhile
        return got


def read_cluster(client: KazooClient, znodes: WatchedZnodes | None = None,
                 reread: bool = False) -> tuple[Cluster, dict | None]:
    """The cluster as Kafka's znodes describe it, and the reassignment in flight (or None).

    A broker named in a replica list but absent from /brokers/ids is dead. Partition sizes and
    free storage come from kafka-kit's metric znodes when they exist. `znodes`: read through
    them (`WatchedZnodes`), only what changed since the last read; a partition whose ISR or
    leader is outside its kept replica list has its topic read again straight from ZooKeeper
    (`reread`: this is that second read).
    """
    many = znodes.get_many if znodes is not None else (lambda paths: get_many(client, paths))
    try:
        kids = znodes.children("/brokers/ids") if znodes is not None else client.get_children("/brokers/ids")
        if kids is None:
            raise NoNodeError
        ids = sorted(int(b) for b in kids if b.isdigit())
    except NoNodeError:
        # Kafka creates /brokers/ids when it first starts: without it this is no Kafka cluster
        # (most often a typo in the chroot), and an empty cluster would be a silent wrong answer.
        where = client.chroot or "/"
        raise BadInput(f"no Kafka cluster at chroot {where}: /brokers/ids does not exist "
                       "(check the chroot in --zk)") from None
    topics = sorted((znodes.children("/brokers/topics") or []) if znodes is not None
                    else children_or_none(client, "/brokers/topics"))
    # The reassignment before the replica lists (a session's reads are answered in the order
    # asked): Kafka settles a partition's replicas before it drops the reassignment, so one read
    # as moving that has just finished only waits a round, where one read at its old replicas
    # with no reassignment would be taken for never started (kit.cluster.reassign's `Stuck`).
    data = many(["/admin/reassign_partitions"] + [f"/brokers/ids/{b}" for b in ids]
                + [f"/brokers/topics/{t}" for t in topics] + [PARTITION_META, BROKER_METRICS])
    metrics = parse_znode_json(data[BROKER_METRICS], BROKER_METRICS) if data[BROKER_METRICS] else {}
    sizes = parse_znode_json(data[PARTITION_META], PARTITION_META) if data[PARTITION_META] else {}
    brokers = []
    for b in ids:
        info = parse_znode_json(data[f"/brokers/ids/{b}"] or b"{}", f"/brokers/ids/{b}")
        entry = {"id": b, "rack": info.get("rack"), "alive": True}
        free = (metrics.get(str(b)) or {}).get("StorageFree")
        if free is not None:
            entry["storage_free"] = int(free)
        brokers.append(entry)
    assignments = {}
    state_paths = []
    for t in topics:
        doc = parse_znode_json(data[f"/brokers/topics/{t}"] or b"{}", f"/brokers/topics/{t}")
        for p, reps in (doc.get("partitions") or {}).items():
            assignments[(t, int(p))] = reps
            state_paths.append(f"/brokers/topics/{t}/partitions/{p}/state")
    states = many(state_paths)
    parts = []
    for (t, p), reps in sorted(assignments.items()):
        entry = {"topic": t, "partition": p, "replicas": reps}
        raw = states[f"/brokers/topics/{t}/partitions/{p}/state"]
        if raw:
            st = parse_znode_json(raw, f"/brokers/topics/{t}/partitions/{p}/state")
            entry["isr"] = st.get("isr", reps)
            if st.get("leader", -1) >= 0:
                entry["leader"] = st["leader"]
        size = ((sizes.get(t) or {}).get(str(p)) or {}).get("Size")
        if size is not None:
            entry["size"] = int(size)
        parts.append(entry)
    reassigning = parse_znode_json(data["/admin/reassign_partitions"], "/admin/reassign_partitions") \
        if data["/admin/reassign_partitions"] else None
    try:
        cluster = cluster_from_snapshot({"version": 1, "brokers": brokers, "partitions": parts}, "zookeeper")
    except OutsideReplicas as e:
        if znodes is None or reread:
            raise
        # A topic's replica list kept from before a change whose notification is not in yet
        # (after a reconnect, say) beside a state read fresh: Kafka writes the replicas before
        # the state names them. Its znodes are read again, once, straight from ZooKeeper; a
        # cluster still inconsistent then is refused.
        znodes.forget(f"/brokers/topics/{e.topic}")
        for t, p in assignments:
            if t == e.topic:
                znodes.forget(f"/brokers/topics/{t}/partitions/{p}/state")
        return read_cluster(client, znodes, reread=True)
    return cluster, reassigning
