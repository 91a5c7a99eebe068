"""Scale out: move the fewest replicas onto new and underfull brokers until counts are even."""
from __future__ import annotations

from kit.model import Cluster, Plan
from kit.plan.actions.rebalance import count_rebalance


def plan_scale_out(cluster: Cluster, topics: str | None = None, exclude: str | None = None,
                   brokers: list[int] | None = None, ignore_warns: bool = False) -> Plan:
    """Move the fewest replicas onto new and underfull brokers until counts are even: the
    count rebalance, whose moves say where they go."""
    return count_rebalance(cluster, "scale-out", "moved to new/underfull broker", topics, exclude, brokers,
                           ignore_warns)
