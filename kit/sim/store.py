"""What the simulated cluster keeps, behind one interface: the store the controller and the
KRaft wire handlers read and write.

The simulated controller (kit.sim.controller) and the simulated KRaft broker's handlers
(kit.sim.kraft) are written once over `Store`. Two stores implement it:

- `kit.sim.zkstore.ZkStore`: Kafka's own znodes in a real ZooKeeper (`kit sim run --zk`: the
  simulated controller of a ZooKeeper-mode cluster, whose state every ZooKeeper tool sees);
- `kit.sim.memstore.MemoryStore`: the same documents in the memory of the simulated KRaft
  cluster's one process (no JVM), saved to its state directory.

The documents keep the shapes of Kafka's ZooKeeper layout (design.md, "ZooKeeper"): a topic's
assignment ``{"partitions": {"0": [1001, 1002]}, "adding_replicas": ..., "removing_replicas":
...}`` (KIP-455), a partition's state ``{"leader", "isr", "leader_epoch", ...}``, dynamic
configs by kind ("brokers", "topics") and entity name, the reassignment in flight as the
targets of /admin/reassign_partitions. So one piece of controller logic changes them the same
way in both stores.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable

from kit.model import Cluster


def copies_left(doc: dict | None) -> dict[tuple[str, int, int], float]:
    """Bytes still to copy per (topic, partition, new replica) in the simulated controller's
    record of its progress (`Store.progress`'s ``"left"``); empty without one, or for a record
    not in that shape."""
    try:
        return {(t, int(p), int(d)): float(n) for t, parts in ((doc or {}).get("left") or {}).items()
                for p, dests in parts.items() for d, n in dests.items()}
    except (AttributeError, TypeError, ValueError):
        return {}


class Conflict(Exception):
    """The document changed between the read and the write (a compare-and-set lost): read again."""


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
    """Live brokers by id and partitions by (topic, partition), topics sorted: what a broker
    answers reads from; `fenced` the brokers registered but not alive (a KRaft broker that died
    stays registered, fenced). Shared between readers: never changed once made."""

    brokers: dict[int, BrokerInfo]
    partitions: dict[tuple[str, int], PartitionInfo]
    topics: list[str]
    fenced: dict[int, BrokerInfo] = field(default_factory=dict)
    _by_topic: dict[str, list[PartitionInfo]] | None = field(default=None, init=False, repr=False, compare=False)

    def controller(self) -> int:
        """The broker reported as controller: the lowest live id (the simulated controller
        has no broker of its own; clients only need one that answers), -1 with none live."""
        return min(self.brokers) if self.brokers else -1

    def topic_partitions(self, topic: str) -> list[PartitionInfo]:
        """A topic's partitions by number (an index made once: a view holds 200,000 of them)."""
        if self._by_topic is None:
            by_topic: dict[str, list[PartitionInfo]] = {}
            for (t, _), p in self.partitions.items():
                by_topic.setdefault(t, []).append(p)
            for ps in by_topic.values():
                ps.sort(key=lambda p: p.partition)
            self._by_topic = by_topic
        return self._by_topic.get(topic, [])

    @classmethod
    def of_topics(cls, brokers: dict[int, BrokerInfo], by_topic: dict[str, list[PartitionInfo]],
                  fenced: dict[int, BrokerInfo]) -> "View":
        """The view of `by_topic` (each topic's partitions by number, lists nobody changes)."""
        view = cls(brokers, {(p.topic, p.partition): p for ps in by_topic.values() for p in ps}, sorted(by_topic),
                   fenced)
        view._by_topic = by_topic
        return view

    def only(self, topics: list[str] | None) -> "View":
        """The same brokers with the partitions of `topics` only (all when None; unknown names
        are left out)."""
        if topics is None:
            return self
        wanted = sorted(set(topics) & set(self.topics))
        return View(self.brokers, {(p.topic, p.partition): p for t in wanted for p in self.topic_partitions(t)},
                    wanted, self.fenced)


@dataclass(frozen=True)
class Pending:
    """The reassignment in flight: its moves (``{"topic", "partition", "replicas"}``, in the
    order written), which reassignment it is (`ident`: a new one gets a new ident) and which
    version of it (`version`: every change of its targets makes a new one)."""

    moves: list[dict]
    ident: int
    version: int

    def targets(self) -> dict[tuple[str, int], list[int]]:
        return {(m["topic"], m["partition"]): list(m["replicas"]) for m in self.moves}


class Store:
    """The simulated cluster's state. Every method is safe to call from several threads."""

    # Exceptions meaning the store is out of reach for now (ZooKeeper gone);
    # `kit.sim.controller_loop.run` rides them out, and raises the first itself while `outage(...).down`. None for a store that
    # is always there.
    lost: tuple[type[BaseException], ...] = ()

    # -- the cluster as Kafka's state describes it
    def cluster(self) -> Cluster:
        """Brokers (registered ones alive, those only named in replica lists dead), partitions
        with replicas, ISR, leader and size."""
        raise NotImplementedError

    def view(self, topics: list[str] | None = None) -> View:
        """Registered brokers and the partitions of `topics` (all when None) with KIP-455's
        adding/removing replicas and the leader epoch."""
        raise NotImplementedError

    def facts(self) -> dict:
        """What only the simulator knows (kit.cluster.zk.layout.sim_facts): NICs, disks, traffic."""
        raise NotImplementedError

    def replicas(self, topic: str, partition: int) -> list[int]:
        """A partition's replica list (the union while it moves)."""
        raise NotImplementedError

    def update_topic(self, topic: str, fn: Callable[[dict], None]) -> None:
        """Change a topic's assignment document in place with `fn`."""
        raise NotImplementedError

    def update_state(self, topic: str, partition: int, fn: Callable[[dict], None]) -> None:
        """Change a partition's state document with `fn`; its leader epoch goes up by one."""
        raise NotImplementedError

    def update_states(self, changes: list[tuple[str, int, Callable[[dict], None]]]) -> None:
        """`update_state(topic, partition, fn)` for each change, one partition's in their order
        (its leader epoch up by one per change). A store may carry them out together: all are
        done when this returns, and a reader meanwhile sees each partition before or after."""
        for topic, partition, fn in changes:
            self.update_state(topic, partition, fn)

    def update_topics(self, changes: list[tuple[str, Callable[[dict], None]]]) -> None:
        """`update_topic(topic, fn)` for each change, one topic's in their order (as
        `update_states`)."""
        for topic, fn in changes:
            self.update_topic(topic, fn)

    # -- the reassignment in flight (/admin/reassign_partitions)
    def reassignment_id(self) -> tuple[int, int] | None:
        """(ident, version) of the reassignment in flight, None without one (a cheap look)."""
        raise NotImplementedError

    def reassignment(self) -> Pending | None:
        raise NotImplementedError

    def set_reassignment(self, targets: dict[tuple[str, int], list[int]], version: int | None) -> None:
        """Write the targets in flight (none: the reassignment goes), if it is still at
        `version` (None: if there is none). Conflict when it changed meanwhile."""
        raise NotImplementedError

    def drop_reassignment(self, version: int | None) -> bool:
        """Remove the reassignment in flight if still at `version` (None: whatever its version),
        with the controller's record of its progress; False when it changed or was gone."""
        raise NotImplementedError

    # -- preferred elections asked for (/admin/preferred_replica_election)
    def election(self) -> list[tuple[str, int]] | None:
        raise NotImplementedError

    def request_election(self, partitions: list[tuple[str, int]]) -> bool:
        """Ask the controller for preferred elections; False when an earlier request is pending."""
        raise NotImplementedError

    def drop_election(self) -> None:
        raise NotImplementedError

    # -- dynamic configs (kind "brokers" or "topics")
    def config(self, kind: str, name: str) -> dict[str, str]:
        raise NotImplementedError

    def throttles(self, brokers: list[int]) -> dict[int, dict]:
        """Each broker's own dynamic config (where its throttle rates are)."""
        return {b: self.config("brokers", str(b)) for b in brokers}

    def alter_config(self, kind: str, name: str, updates: dict[str, str], deletes: list[str]) -> None:
        """Set `updates` and remove `deletes` in one entity's config (other keys stay), with
        the change notification Kafka's brokers follow. Conflict when it changed meanwhile."""
        raise NotImplementedError

    # -- the simulated controller's record of its progress (kit.sim.controller)
    def progress(self) -> dict | None:
        raise NotImplementedError

    def write_progress(self, doc: dict) -> bool:
        """False (nothing written) when the store cannot hold it: the last record stays."""
        raise NotImplementedError

    def drop_progress(self) -> None:
        raise NotImplementedError

    # -- brokers' liveness
    def registered(self, broker: int) -> bool:
        raise NotImplementedError

    def killed(self, broker: int) -> bool:
        """Whether `broker` was killed by the simulator (and not revived since)."""
        raise NotImplementedError

    def deregister(self, broker: int) -> None:
        """The broker dies: marked dead (nothing registers it again), its registration gone."""
        raise NotImplementedError

    def register(self, broker: int, timeout: float) -> None:
        """A killed broker comes back; returns once it is registered (BadInput otherwise)."""
        raise NotImplementedError

    def per_topic(self, key: tuple, build: Callable[[View, str], object]) -> tuple[View, list]:
        """The view of every topic and, for each of its topics in order, `build(view, topic)`
        (an encoded part of an answer), which a store may keep per topic until that topic's
        partitions or the live brokers change."""
        view = self.view()
        return view, [build(view, t) for t in view.topics]

    def topic_kept(self, key: tuple, topic: str, build: Callable[[], object]):
        """`build()` (a part of an answer about `topic`), which a store may keep until that
        topic's partitions or the live brokers change; a `per_topic` build may call it for a
        part of its own (the same state)."""
        return build()

    def held(self, broker: int) -> list[tuple[str, int, int, float]]:
        """The replicas `broker`'s assignment names (the union while a partition moves), by
        topic then partition: (topic, partition, the partition's size, the bytes still to copy
        to this replica as the controller last recorded them, 0 when none)."""
        left = copies_left(self.progress())
        return sorted((p.topic, p.partition, p.size, left.get((p.topic, p.partition, broker), 0.0))
                      for p in self.cluster().partitions if broker in p.replicas)

    def broker_kept(self, key: tuple, broker: int, build: Callable[[], object]):
        """`build()` (an answer about the replicas `broker` holds, from `held`), which a store
        may keep until what `held(broker)` gives changes."""
        return build()

    def cached(self, key: tuple, build: Callable[[], object]):
        """What `build()` returns for the state as it is: a reader's answer derived from the
        whole store (an encoded response), which a store may keep until anything changes."""
        return build()

    # -- the connection behind the store
    def outage(self, patience: float):
        """What `kit.sim.controller_loop.run` watches for the store going away: `.down`, `.gave_up`
        (an Event) and `.close()` (kit.cluster.zk.layout.Outage for ZooKeeper)."""
        return Always()


class Always:
    """The outage watch of a store that cannot go away."""

    down = False

    def __init__(self):
        self.gave_up = threading.Event()

    def close(self) -> None:
        pass
