"""The count balance's choices depend on the cluster only, never on how numpy orders equal values."""
from __future__ import annotations

from kit.model import Broker, Cluster, Partition
from kit.plan.steps.count_balance import balance_counts
from kit.plan.workspace import Workspace


def test_among_equally_uneven_topics_the_highest_numbered_32_are_searched_first():
    # Broker 1 holds two partitions of each of 40 topics, brokers 2 and 3 none: every topic is
    # equally uneven (d = 2), more topics than a pick looks at (32). Which 32 it keeps must be a
    # rule of kit's (the highest topic numbers; then the lowest of them first), not whatever
    # numpy's argpartition (SIMD code on some CPUs) returns among equal keys.
    topics = [f"t{i:02d}" for i in range(40)]
    parts = tuple(Partition(topic=t, partition=n, replicas=(1,), isr=(1,), leader=1) for t in topics for n in (0, 1))
    cluster = Cluster(brokers={b: Broker(id=b) for b in (1, 2, 3)}, partitions=parts)
    ws = Workspace(cluster, targets=[1, 2, 3], selected=range(len(parts)))
    assert balance_counts(ws, "balance", max_moves=1) == 1
    moved = [p for p, reps in enumerate(ws.assign) if reps != [1]]
    assert [(parts[p].topic, ws.assign[p]) for p in moved] == [("t08", [2])]
