"""Change the replication factor of the selected topics, adding or dropping only what the change needs."""
from __future__ import annotations

from kit.model import Cluster, Plan
from kit.plan.pipeline import Stages, run
from kit.plan.select import broker_changes, check_replication, resolve_brokers, select_partitions
from kit.plan.steps.place import set_replication
from kit.plan.workspace import Workspace


def plan_rf(cluster: Cluster, replication: int, topics: str | None = None, exclude: str | None = None,
            brokers: list[int] | None = None) -> Plan:
    """Set every selected partition to `replication` replicas on the least-loaded rack-safe brokers."""
    selected = select_partitions(cluster, topics, exclude)
    targets = resolve_brokers(cluster, brokers, selected)
    check_replication(targets, replication)
    stages = Stages(place=lambda ws: set_replication(ws, replication, f"replication -> {replication}"))
    return run(Workspace(cluster, targets, selected), stages, "rf", broker_changes(cluster, targets))
