"""Leadership and follower order only: no data moves."""
from __future__ import annotations

from kit.model import Cluster, Plan
from kit.plan.pipeline import Stages, run
from kit.plan.select import broker_changes, resolve_brokers, select_partitions
from kit.plan.workspace import Workspace


def plan_leaders(cluster: Cluster, topics: str | None = None, exclude: str | None = None,
                 brokers: list[int] | None = None) -> Plan:
    """Reorder replica lists for even leaders, per-topic leaders and failover."""
    selected = select_partitions(cluster, topics, exclude)
    targets = resolve_brokers(cluster, brokers, selected)
    # Only partitions wholly on the targets can be reordered without moving data off them.
    tset = set(targets)
    movable = [p for p in selected if all(b in tset for b in cluster.partitions[p].replicas)]
    leadership_alone = Stages()
    return run(Workspace(cluster, targets, movable), leadership_alone, "leaders", broker_changes(cluster, targets))
