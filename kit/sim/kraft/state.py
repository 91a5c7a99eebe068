"""What a simulated KRaft broker knows of its cluster, read from the private ZooKeeper.

The private ZooKeeper stands in for KRaft's metadata log: the znodes are the ones kit's
simulated controller keeps (Kafka's ZooKeeper layout, kit.cluster.zk.layout), read here in a
few batched round trips into the shape the wire handlers answer from.

A Kafka broker answers reads from its metadata cache, which follows the controller's log a
little behind. So does the simulated one (`recent`): what it read less than `FRESH_S` seconds
ago answers the next read requests (an Admin API client's `read` asks every broker for its
log dirs: one ZooKeeper read of 600 partitions takes ~0.5 s on a busy machine, and would be
repeated per broker). Requests that change the cluster read afresh (`uncached`), and what
they or a broker's death change is seen at once by the next read (`invalidate`).
"""
from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from dataclasses import dataclass, field

from kazoo.client import KazooClient

from kit.cluster.zk.changes import children_or_none
from kit.cluster.zk.layout import get_many, parse_znode_json


@dataclass(frozen=True)
class BrokerInfo:
    """A live broker's registration: where its listener is and its rack."""

    id: int
    host: str
    port: int
    rack: str | None


@dataclass
class PartitionInfo:
    """One partition: replica list (the union while it moves), KIP-455 adding/removing
    replicas, and the partition state (leader, epoch, ISR)."""

    topic: str
    partition: int
    replicas: list[int]
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)
    leader: int = -1
    leader_epoch: int = 0
    isr: list[int] = field(default_factory=list)


@dataclass
class View:
    """Live brokers by id and partitions by (topic, partition), topics sorted."""

    brokers: dict[int, BrokerInfo]
    partitions: dict[tuple[str, int], PartitionInfo]
    topics: list[str]

    def controller(self) -> int:
        """The broker reported as controller: the lowest live id (the simulated controller
        has no broker of its own; clients only need one that answers), -1 with none live."""
        return min(self.brokers) if self.brokers else -1

    def topic_partitions(self, topic: str) -> list[PartitionInfo]:
        return sorted((p for (t, _), p in self.partitions.items() if t == topic), key=lambda p: p.partition)


def topic_id(topic: str) -> uuid.UUID:
    """A topic's id (KIP-516), stable for its name: the simulated cluster never recreates a topic."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"kit-sim-topic:{topic}")


def read_brokers(client: KazooClient) -> dict[int, BrokerInfo]:
    """The live brokers (/brokers/ids) with their listener and rack."""
    ids = sorted(int(b) for b in children_or_none(client, "/brokers/ids") if b.isdigit())
    raw = get_many(client, [f"/brokers/ids/{b}" for b in ids])
    out = {}
    for b in ids:
        body = raw[f"/brokers/ids/{b}"]
        if body is None:
            continue  # deregistered between the two reads
        info = parse_znode_json(body, f"/brokers/ids/{b}") or {}
        out[b] = BrokerInfo(b, info.get("host") or "127.0.0.1", int(info.get("port") or -1), info.get("rack"))
    return out


FRESH_S = 1.0  # how far behind the simulated cluster's state a read may be (wall seconds)
_recent: dict[tuple[int, str], tuple[float, object]] = {}
_generation = [0]  # bumped by `invalidate`: a read begun before it is not kept
_lock = threading.Lock()
_reading: dict[tuple[int, str], threading.Lock] = {}  # held while that key is read afresh
_local = threading.local()


def invalidate() -> None:
    """Forget every read kept by `recent` (the cluster just changed)."""
    with _lock:
        _recent.clear()
        _generation[0] += 1


@contextlib.contextmanager
def uncached():
    """Within the block, on this thread, `recent` reads afresh; the reads kept are forgotten
    before and after it (a request that changes the cluster)."""
    invalidate()
    _local.fresh = True
    try:
        yield
    finally:
        _local.fresh = False
        invalidate()


def recent(client: KazooClient, key: str, read):
    """`read(client)`, or what it returned less than `FRESH_S` seconds ago (the value must not
    be changed by its users)."""
    if getattr(_local, "fresh", False):
        return read(client)
    # One read at a time per key: the brokers asked at once (a client's DescribeLogDirs to
    # each) wait for the read in flight and share it, rather than each reading the whole
    # cluster (8 reads of 600 partitions at once took ~7 s on a loaded machine, one ~0.5 s).
    with _lock:
        reading = _reading.setdefault((id(client), key), threading.Lock())
    with reading:
        now = time.monotonic()
        with _lock:
            hit = _recent.get((id(client), key))
            generation = _generation[0]
        if hit is not None and now - hit[0] < FRESH_S:
            return hit[1]
        value = read(client)
        with _lock:
            if _generation[0] == generation:
                _recent[(id(client), key)] = (now, value)  # stamped when the read began
        return value


def read_view(client: KazooClient, topics: list[str] | None = None) -> View:
    """Brokers and the partitions of `topics` (every topic when None; unknown names are left
    out), from a recent read of the whole cluster (`recent`) unless within `uncached`."""
    if getattr(_local, "fresh", False):
        return _read_view(client, topics)
    full = recent(client, "view", _read_view)
    if topics is None:
        return full
    wanted = set(topics)
    return View(full.brokers, {k: p for k, p in full.partitions.items() if k[0] in wanted},
                [t for t in full.topics if t in wanted])


def _read_view(client: KazooClient, topics: list[str] | None = None) -> View:
    brokers = read_brokers(client)
    known = sorted(children_or_none(client, "/brokers/topics"))
    wanted = known if topics is None else sorted(set(topics) & set(known))
    docs = get_many(client, [f"/brokers/topics/{t}" for t in wanted])
    parts: dict[tuple[str, int], PartitionInfo] = {}
    for t in wanted:
        raw = docs[f"/brokers/topics/{t}"]
        if raw is None:
            continue
        doc = parse_znode_json(raw, f"/brokers/topics/{t}") or {}
        adding, removing = doc.get("adding_replicas") or {}, doc.get("removing_replicas") or {}
        for p, reps in (doc.get("partitions") or {}).items():
            parts[(t, int(p))] = PartitionInfo(t, int(p), list(reps), list(adding.get(p) or []),
                                               list(removing.get(p) or []))
    states = get_many(client, [f"/brokers/topics/{t}/partitions/{p}/state" for t, p in parts])
    for (t, p), info in parts.items():
        raw = states[f"/brokers/topics/{t}/partitions/{p}/state"]
        st = json.loads(raw.decode() or "{}") if raw else {}
        info.leader, info.leader_epoch = int(st.get("leader", -1)), int(st.get("leader_epoch", 0))
        info.isr = list(st.get("isr", []))
    return View(brokers, parts, sorted({t for t, _ in parts}))
