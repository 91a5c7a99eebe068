"""The topic flow (`kit.plan.steps.topic_quotas.topic_flow` states it from the workspace): its
network built and solved.

Its own module, apart from the stage that states the problem, because it is solved in the
second process beside the count balance's start (`kit.plan.actions.rebalance`): unpickling it
there imports this module and the solvers' package only, not the planner's stages (0.07 CPU s
the second process spent importing `topic_quotas` and the count balance behind it, at 200,000
partitions). The network is built there too, from the problem's per-target and per-pair
arrays: at 200,000 partitions its 1.2 million arcs took 47 MB to pickle, send and read (some
0.15 CPU s of the two processes, 0.3-0.5 s of wall time on a loaded machine, all on the
scale-out's critical path), the problem 2.5 MB.

Network (OR-Tools SimpleMinCostFlow): broker nodes carry each broker's surplus or deficit
against the balanced range; a replica of group g leaves broker a through node (g, a, out)
to the group's hub and arrives at broker b through (g, b, in). Each move costs `_MOVE`, more
than any topic gain a move can bring, so the flow never adds a move for topic balance alone.
OR-Tools picks among equal optima by arc order: the order built here is the plans' contract.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from kit.plan.solvers import new_min_cost_flow

_TIERS = 4  # the k-th unit away from a topic's even share costs min(k, _TIERS)
_MOVE = 2 * _TIERS + 1


class TopicFlow(NamedTuple):
    """The topic flow's problem: the target brokers (indices, of `n_brokers`) with their
    replica counts and balanced ranges [lo, hi]; the groups a topic's replicas move within
    (`group_topic`, `group_sizes`), each group's target brokers one group after another
    (`pair_broker`: one (group, broker) pair each) with the group's movable replicas there
    (`pair_held`); the (topic, broker) shape of the quotas."""

    targets: np.ndarray
    counts: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    n_brokers: int
    group_topic: np.ndarray
    group_sizes: np.ndarray
    pair_broker: np.ndarray
    pair_held: np.ndarray
    shape: tuple[int, int]

    def network(self):
        """OR-Tools' arcs (tails, heads, capacities, costs) and node supplies, and per (group,
        broker) pair its group, broker index, first and last arc (`_pair_arcs`).

        Nodes: brokers, the zero node, one hub per group, then two per (group, broker) pair.
        Arcs: the targets' range arcs (`_range_arcs`), then the pairs'."""
        zero = self.n_brokers
        hub0 = zero + 1
        node0 = hub0 + self.group_topic.size
        target_supply, *range_arcs = _range_arcs(self.targets, self.counts, self.lo, self.hi, zero)
        arcs, pairs = _pair_arcs(self.group_sizes, self.pair_broker, self.pair_held, hub0, node0, range_arcs[0].size)
        for whole, part in zip(arcs, range_arcs):
            whole[:part.size] = part  # range arcs cost nothing (costs start as zeros)
        supply = np.zeros(node0 + 2 * pairs[1].size, dtype=np.int64)
        supply[self.targets] = target_supply
        supply[zero] = -int(supply[:self.n_brokers].sum())
        return arcs, supply, pairs

    def quotas(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Solved: the replicas of each topic that leave and that reach each broker index,
        (leave, arrive) by (topic, broker index); None when the flow finds no such moves."""
        (tails, heads, caps, costs), supply, pairs = self.network()
        flow = new_min_cost_flow()
        flow.add_arcs_with_capacity_and_unit_cost(tails, heads, caps, costs)
        flow.set_nodes_supplies(np.arange(supply.size, dtype=np.int32), supply)
        if flow.solve() != flow.OPTIMAL:
            return None
        flows = flow.flows(np.arange(caps.size, dtype=np.int32))
        g, x, leave_at, arrive_at = pairs
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


def arcs_bound(n_topics: int, n_targets: int) -> int:
    """At most how many arcs the pairs of `n_topics` topics over `n_targets` targets take:
    known before the problem is stated (every topic's groups together span the targets once)."""
    return n_topics * n_targets * 2 * (_TIERS + 2)


def _runs(n: np.ndarray, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For runs of lengths `n` starting at positions `first`: each element's run and position."""
    run = np.repeat(np.arange(n.size), n)
    return run, np.arange(run.size) - np.repeat(np.cumsum(n) - n - first, n)


def _tier_arcs(units: np.ndarray, gain: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Arcs moving `units` through each (group, broker) node: per node how many, then all
    nodes' capacities and costs in node order. The first `gain` units bring the broker's
    count towards its even share (the k-th costs -min(k, _TIERS), largest gain first), the
    rest push it away (costs 1, 2, ... _TIERS, one unit each, the last tier taking the rest)."""
    towards_n = np.minimum(gain, units)
    rest = units - towards_n
    n = towards_n + np.minimum(rest, _TIERS)
    run, j = _runs(n, np.zeros(n.size, dtype=np.int64))
    towards = j < towards_n[run]
    k = j - towards_n[run] + 1  # the escalating tier, where not towards
    caps = np.where(towards | (k < _TIERS), 1, rest[run] - (_TIERS - 1))
    costs = np.where(towards, -np.minimum(gain[run] - j, _TIERS), np.minimum(k, _TIERS))
    return n, caps.astype(np.int64, copy=False), costs.astype(np.int64, copy=False)


def _range_arcs(targets: np.ndarray, counts, lo, hi, zero: int) -> tuple[np.ndarray, ...]:
    """Each target's supply (its excess over `hi` less its deficit below `lo`), and the arcs
    between it and the `zero` node for the slack inside its range: target by target, first
    the room up to `hi` (target -> zero), then the room down to `lo` (zero -> target)."""
    tidx = targets.astype(np.int64)
    counts, lo, hi = (np.asarray(a, dtype=np.int64) for a in (counts, lo, hi))
    settled = np.minimum(np.maximum(counts, lo), hi)
    supply = np.maximum(0, counts - hi) - np.maximum(0, lo - counts)
    up, down = hi - settled, settled - lo
    keep = np.stack([up > 0, down > 0], axis=1)  # row-major: a target's two arcs together
    zeros = np.full(tidx.size, zero, dtype=np.int64)
    tails = np.stack([tidx, zeros], axis=1)[keep]
    heads = np.stack([zeros, tidx], axis=1)[keep]
    return supply, tails, heads, np.stack([up, down], axis=1)[keep]


def _pair_arcs(sizes: np.ndarray, x: np.ndarray, c: np.ndarray, hub0: int, node0: int, skip: int):
    """The arcs through every (group, broker) pair (groups of `sizes` pairs, pair i at broker
    `x[i]` holding `c[i]` of its group's replicas), pairs in group order then broker order,
    pair i owning nodes node0 + 2i (out) and node0 + 2i + 1 (in). Per pair, in this order:
    broker -> out (the group's replicas there, if any), out -> hub (the leaving tiers, each
    costing _MOVE more), hub -> in (the arriving tiers), in -> broker.

    Returns
    -------
    arcs : tuple of np.ndarray
        Tails and heads (int32, as OR-Tools takes them: not converted there), capacities and
        costs, after `skip` arcs left to the caller (costs zero, the rest unset): the arrays
        are made once, whole (at 200,000 partitions, each concatenation of 1.2 million arcs
        cost the second process fresh pages).
    pairs : tuple of np.ndarray
        Per pair: its group, its broker index, the position (among all arcs) of its
        broker -> out arc (-1 where it has none) and of its in -> broker arc.
    """
    g = np.repeat(np.arange(sizes.size), sizes)
    n_g = np.add.reduceat(c, np.cumsum(sizes) - sizes)
    share_lo, share_hi = n_g // sizes, -(-n_g // sizes)
    room = n_g[g]  # arrivals are bounded by the broker's own range anyway
    n_out, out_caps, out_costs = _tier_arcs(c, np.maximum(0, c - share_hi[g]))
    n_in, in_caps, in_costs = _tier_arcs(room, np.maximum(0, share_lo[g] - c))
    has = (c > 0).astype(np.int64)
    per_pair = has + n_out + n_in + 1
    first = skip + np.cumsum(per_pair) - per_pair
    last = first + per_pair - 1
    out_node = node0 + 2 * np.arange(x.size, dtype=np.int64)
    in_node, hub = out_node + 1, hub0 + g
    total = skip + int(per_pair.sum())
    tails, heads = np.empty(total, dtype=np.int32), np.empty(total, dtype=np.int32)
    caps, costs = np.empty(total, dtype=np.int64), np.zeros(total, dtype=np.int64)

    def put(at, tail, head, cap, cost=0):
        tails[at], heads[at], caps[at], costs[at] = tail, head, cap, cost

    m = has > 0
    put(first[m], x[m], out_node[m], c[m])
    run, at = _runs(n_out, first + has)
    put(at, out_node[run], hub[run], out_caps, out_costs + _MOVE)
    run, at = _runs(n_in, first + has + n_out)
    put(at, hub[run], in_node[run], in_caps, in_costs)
    put(last, in_node, x, room)
    return (tails, heads, caps, costs), (g, x, np.where(m, first, -1), last)
