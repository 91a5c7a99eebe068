"""What a simulated KRaft broker knows of its cluster, read from the private ZooKeeper.

The private ZooKeeper stands in for KRaft's metadata log: the znodes are the ones kit's
simulated controller keeps (Kafka's ZooKeeper layout, kit.cluster.zk.layout), read here in a
few batched round trips into the shape the wire handlers answer from.
"""
from __future__ import annotations

import json
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


def read_view(client: KazooClient, topics: list[str] | None = None) -> View:
    """Brokers and the partitions of `topics` (every topic when None; unknown names are left out)."""
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
