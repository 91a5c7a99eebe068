"""Plain data for a cluster and a plan.

A `Cluster` is immutable input: brokers by id and partitions in (topic, partition)
order. Planners work on lists of replica lists aligned with `Cluster.partitions`
(an *assignment*), so a plan is just the cluster plus the assignment after it.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, fields, replace
from itertools import compress, count, repeat
from operator import attrgetter, ne

_set_attribute = object.__setattr__  # how a frozen dataclass sets its own fields


@dataclass(frozen=True)
class Broker:
    """One Kafka broker as kit sees it."""

    id: int
    rack: str | None = None
    alive: bool = True
    storage_total: int | None = None
    storage_free: int | None = None
    instance_type: str | None = None
    net_capacity: float | None = None
    known: bool = True  # False when only named in replica lists (dead, unregistered)


# Slots, not a __dict__: 96 bytes a partition instead of 328 (a dict each), and reads
# through a slot's descriptor; pickling, replace() and fields() work as for any dataclass.
@dataclass(frozen=True, init=False, slots=True)
class Partition:
    """One topic partition: replica order matters, replicas[0] is the preferred leader."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    size: int = 0
    bytes_in: float = 0.0
    bytes_out: float = 0.0
    leader: int | None = None

    # Written out (the fields above, in order, with their defaults): a frozen dataclass's own
    # __init__ looks up object.__setattr__ again for every field, and a snapshot of 200,000
    # partitions builds 200,000 of them.
    def __init__(self, topic: str, partition: int, replicas: tuple[int, ...], isr: tuple[int, ...],
                 size: int = 0, bytes_in: float = 0.0, bytes_out: float = 0.0, leader: int | None = None):
        _set_attribute(self, "topic", topic)
        _set_attribute(self, "partition", partition)
        _set_attribute(self, "replicas", replicas)
        _set_attribute(self, "isr", isr)
        _set_attribute(self, "size", size)
        _set_attribute(self, "bytes_in", bytes_in)
        _set_attribute(self, "bytes_out", bytes_out)
        _set_attribute(self, "leader", leader)

    @classmethod
    def many(cls, topic: list, partition: list, replicas: list, isr: list, size: list, bytes_in: list,
             bytes_out: list, leader: list) -> list[Partition]:
        """Partitions from columns, one list per field: the same as the class called row by
        row, but each field is set for every row in one pass in C, through its slot (half
        the time of 200,000 calls of `__init__`, loading a snapshot)."""
        columns = (topic, partition, replicas, isr, size, bytes_in, bytes_out, leader)
        if len(set(map(len, columns))) != 1:
            raise ValueError("Partition.many: columns of different lengths")  # map would stop short
        made = list(map(object.__new__, repeat(cls, len(topic))))
        for f, column in zip(fields(cls), columns):
            deque(map(getattr(cls, f.name).__set__, made, column), maxlen=0)
        return made

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class Cluster:
    """Brokers (sorted by id) and partitions (sorted by topic, partition)."""

    brokers: dict[int, Broker]
    partitions: tuple[Partition, ...]
    # The partitions' replica lists and isrs, flat, as the snapshot reader made them while it
    # read (a pair of `kit.array_ops.Lists`, rows in partition order; `set_lists`), so that
    # those who want them flat do not flatten the partitions again (0.17 CPU s each at
    # 1,000,000 partitions). None otherwise: a cluster made from this one (`with_assignment`,
    # `dataclasses.replace`) has none.
    lists: tuple | None = field(default=None, init=False, compare=False, repr=False)

    def set_lists(self, replicas, isrs) -> None:
        """Keep the partitions' replica lists and isrs flat (`lists`), made from the same
        columns as the partitions; once, by the reader that built the cluster."""
        _set_attribute(self, "lists", (replicas, isrs))

    @property
    def live_ids(self) -> list[int]:
        return [b.id for b in self.brokers.values() if b.alive]

    def rack_of(self, broker_id: int) -> str | None:
        b = self.brokers.get(broker_id)
        return b.rack if b else None

    def assignment(self) -> list[list[int]]:
        """The current replica lists, one per partition."""
        return [list(p.replicas) for p in self.partitions]

    def topics(self) -> list[str]:
        return sorted({p.topic for p in self.partitions})

    def map_brokers(self) -> list[int]:
        """Brokers named in any replica list."""
        return sorted({b for p in self.partitions for b in p.replicas})

    def with_assignment(self, assignment: list[list[int]]) -> "Cluster":
        """The same cluster after a reassignment: new replica lists; new replicas count as in sync
        (the state once the reassignment has finished)."""
        parts = tuple(
            p if list(p.replicas) == reps else
            replace(p, replicas=tuple(reps), isr=tuple(b for b in reps if b in p.isr or b not in p.replicas),
                    leader=None)
            for p, reps in zip(self.partitions, assignment)
        )
        return Cluster(brokers=self.brokers, partitions=parts)

    def assignment_after(self, moves: list[dict] | None) -> list[list[int]]:
        """The replica lists, one per partition, once a reassignment's moves (Kafka's
        reassignment JSON entries: topic, partition, replicas) are done; a move of a partition
        this cluster does not hold changes nothing."""
        after = self.assignment()
        if moves:
            row = {p.key: i for i, p in enumerate(self.partitions)}
            for m in moves:
                i = row.get((m["topic"], int(m["partition"])))
                if i is not None:
                    after[i] = [int(b) for b in m["replicas"]]
        return after

    def after_moves(self, moves: list[dict] | None) -> "Cluster":
        """The cluster once a reassignment's moves are done (`assignment_after`, `with_assignment`)."""
        return self.with_assignment(self.assignment_after(moves))


@dataclass
class Plan:
    """The outcome of a planner: the assignment after, and what the operator should know."""

    cluster: Cluster
    action: str
    after: list[list[int]]
    targets: list[int]
    selected: list[int] = field(default_factory=list)  # partition indices the planner could change
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reasons: dict[int, str] = field(default_factory=dict)  # partition index -> why it changed
    broker_changes: dict[str, list[int]] = field(default_factory=dict)
    groups: dict[str, dict] = field(default_factory=dict)  # pool name -> its topics and brokers
    # Selected partitions left out because they are offline (kit.offline): never reassigned.
    offline: list[int] = field(default_factory=list)
    # `changed()` as first computed: a plan is an outcome, its `after` is not changed once built.
    _changed: list[int] | None = field(default=None, init=False, repr=False, compare=False)

    def changed(self) -> list[int]:
        """Indices of partitions whose replica list (or order) changes (a new list each call)."""
        # Computed once: the plan's text, its waves and its duration estimate each ask (0.4 CPU s
        # a call at 1,000,000 partitions). One pass in C (`list(replicas) != after`, partition
        # by partition): a loop in Python took 0.2 s at 200,000 partitions.
        if self._changed is None:
            differs = map(ne, map(list, map(attrgetter("replicas"), self.cluster.partitions)), self.after)
            self._changed = list(compress(count(), differs))
        return list(self._changed)

    def reassignment(self) -> dict:
        """Kafka's reassignment JSON for the partitions that change."""
        parts = self.cluster.partitions
        return {
            "version": 1,
            "partitions": [
                {"topic": parts[i].topic, "partition": parts[i].partition, "replicas": list(self.after[i])}
                for i in self.changed()
            ],
        }
