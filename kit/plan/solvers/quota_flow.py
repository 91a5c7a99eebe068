"""The topic flow's network (`kit.plan.steps.topic_quotas.topic_flow` builds it from the workspace), solved.

Its own module, apart from the stage that builds it, because it is solved in the second
process beside the count balance's start (`kit.plan.actions.rebalance`): unpickling it there
imports this module and the solvers' package only, not the planner's stages (0.07 CPU s the
second process spent importing `topic_quotas` and the count balance behind it, at 200,000
partitions).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from kit.plan.solvers import new_min_cost_flow


class TopicFlow(NamedTuple):
    """The topic flow's network: OR-Tools' arcs and supplies, the first `n_range` arcs the
    targets' range arcs, then the (group, broker) pairs' (`pairs`: per pair its group, broker
    index, first and last arc), each group's topic, the (topic, broker) shape."""

    tails: np.ndarray
    heads: np.ndarray
    caps: np.ndarray
    costs: np.ndarray
    supply: np.ndarray
    n_range: int
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    group_topic: np.ndarray
    shape: tuple[int, int]

    def quotas(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Solved: the replicas of each topic that leave and that reach each broker index,
        (leave, arrive) by (topic, broker index); None when the flow finds no such moves."""
        flow = new_min_cost_flow()
        flow.add_arcs_with_capacity_and_unit_cost(self.tails, self.heads, self.caps, self.costs)
        flow.set_nodes_supplies(np.arange(self.supply.size), self.supply)
        if flow.solve() != flow.OPTIMAL:
            return None
        flows = flow.flows(np.arange(self.caps.size))[self.n_range:]
        g, x, leave_at, arrive_at = self.pairs
        # A pair's net move: units leaving its broker by its first arc less units arriving by
        # its last; a topic passing through a broker is no move at all.
        net = np.where(leave_at >= 0, flows[leave_at], 0) - flows[arrive_at]
        moved = np.flatnonzero(net)
        if not moved.size:
            return None
        leave = np.zeros(self.shape, dtype=np.int64)
        arrive = np.zeros(self.shape, dtype=np.int64)
        topic = self.group_topic[g[moved]]
        np.add.at(leave, (topic, x[moved]), np.maximum(net[moved], 0))
        np.add.at(arrive, (topic, x[moved]), np.maximum(-net[moved], 0))
        return leave, arrive
