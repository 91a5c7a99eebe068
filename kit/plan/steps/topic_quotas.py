"""Count balance that spreads every topic: which topics the fewest moves should carry.

Balancing replica counts fixes how many replicas each broker gives or takes, not which
topics: a greedy pass ends balanced in total but may leave a topic piled on the brokers
it was created on, and then no order of replicas can spread that topic's leaders. Here
one min-cost flow over (topic, broker) decides, for the same minimal number of moves,
how many replicas of each topic leave and reach each broker, with a convex penalty on
each topic's distance from its even share. The greedy balance then follows these quotas
(`balance_counts(..., quotas=...)`): it still picks the broker pairs and the partitions,
which keeps broker pairs diverse for failover, but prefers the topics the flow planned.

Network (OR-Tools SimpleMinCostFlow): broker nodes carry each broker's surplus or deficit
against the balanced range; a replica of group g leaves broker a through node (g, a, out)
to the group's hub and arrives at broker b through (g, b, in). A group is a topic, or a
topic within one rack when every replica set of the topic spans every rack (then a
replica can only move inside its rack). Each move costs `_MOVE`, more than any topic
gain a move can bring, so the flow never adds a move for topic balance alone.
"""
from __future__ import annotations

import numpy as np
from ortools.graph.python import min_cost_flow

from kit.plan.steps.count_balance import count_range
from kit.plan.workspace import Workspace

_TIERS = 4  # the k-th unit away from a topic's even share costs min(k, _TIERS)
_MOVE = 2 * _TIERS + 1
_MAX_ARCS = 3_000_000


def _groups(ws: Workspace) -> list[tuple[int, np.ndarray]]:
    """The groups a selected topic's replicas move within: (topic, target indices), one per
    topic, or one per (topic, rack) where every replica set of the topic spans every rack."""
    n_topics = len(ws.topic_names)
    tidx = ws.target_idx
    racks = ws.rack[tidx]
    spans = np.ones(n_topics, dtype=bool)
    present = np.zeros(n_topics, dtype=bool)
    for p in ws.selected:
        t = ws.topic[p]
        present[t] = True
        if len(ws.assign[p]) != ws.n_racks:
            spans[t] = False
    pinned = ws.n_racks >= 2 and (racks >= 0).all()
    rack_ids = sorted({int(r) for r in racks})
    groups: list[tuple[int, np.ndarray]] = []
    for t in np.flatnonzero(present):
        if pinned and spans[t]:
            groups += [(int(t), tidx[racks == r]) for r in rack_ids]
        else:
            groups.append((int(t), tidx))
    return groups


def _tier_arcs(units: int, gain: int) -> list[tuple[int, int]]:
    """(capacity, cost) arcs for moving `units` through a (group, broker) node: the first
    `gain` units bring the broker's count towards its even share (negative cost, largest
    gain first), the rest push it away (escalating cost)."""
    arcs = []
    for k in range(gain, 0, -1):
        if units <= 0:
            break
        arcs.append((1, -min(k, _TIERS)))
        units -= 1
    k = 1
    while units > 0:
        cap = 1 if k < _TIERS else units
        arcs.append((cap, min(k, _TIERS)))
        units -= cap
        k += 1
    return arcs


# One min-cost-flow network built and read whole (92 lines): its node numbering runs through it all.
def plan_topic_moves(ws: Workspace) -> list[tuple[int, np.ndarray, np.ndarray]] | None:
    """Per group: (topic, replicas leaving, replicas arriving per broker index), for the
    fewest moves that bring every target's count into the balanced range. None when the
    flow would be too large or finds no such moves."""
    tidx = ws.target_idx
    counts = ws.count[tidx]
    total = int(counts.sum())
    lo_all, hi_all = total // tidx.size, -(-total // tidx.size)
    lo, hi, pinned = count_range(ws, counts, lo_all, hi_all)
    if pinned:
        # Racks pin each rack's total: balance inside each rack.
        lo, hi = _rack_balanced(ws, counts)
    if ((counts >= lo) & (counts <= hi)).all():
        return None
    groups = _groups(ws)
    held = np.zeros(ws.tcount.shape, dtype=np.int64)  # movable replicas per (topic, broker)
    for x in tidx:
        for t, bucket in ws.on_topic[x].items():
            held[t, x] = len(bucket)
    n_groups = len(groups)
    if sum(sub.size for _, sub in groups) * 2 * (_TIERS + 2) > _MAX_ARCS:
        return None

    flow = min_cost_flow.SimpleMinCostFlow()
    n_b = len(ws.ids)
    zero = n_b  # balances the range slack
    hub0 = zero + 1
    node = hub0 + n_groups
    supply = np.zeros(node, dtype=np.int64)
    tails, heads, caps, costs = [], [], [], []

    def arc(u, v, cap, cost):
        tails.append(u)
        heads.append(v)
        caps.append(cap)
        costs.append(cost)

    for k, x in enumerate(tidx):
        c, l, h = int(counts[k]), int(lo[k]), int(hi[k])
        excess, deficit = max(0, c - h), max(0, l - c)
        supply[x] = excess - deficit
        settled = min(max(c, l), h)
        if h > settled:
            arc(x, zero, h - settled, 0)
        if settled > l:
            arc(zero, x, settled - l, 0)
    supply[zero] = -int(supply[:n_b].sum())

    pair_nodes = []  # (group, broker, out node, in node)
    for g, (t, sub) in enumerate(groups):
        n_g = int(held[t, sub].sum())
        share_lo, share_hi = n_g // sub.size, -(-n_g // sub.size)
        hub = hub0 + g
        for x in sub:
            c = int(held[t, x])
            out_node, in_node = node, node + 1
            node += 2
            pair_nodes.append((g, int(x), out_node, in_node))
            if c:
                arc(int(x), out_node, c, 0)
                for cap, cost in _tier_arcs(c, max(0, c - share_hi)):
                    arc(out_node, hub, cap, cost + _MOVE)
            room = n_g  # arrivals are bounded by the broker's own range anyway
            for cap, cost in _tier_arcs(room, max(0, share_lo - c)):
                arc(hub, in_node, cap, cost)
            arc(in_node, int(x), room, 0)
    supply = np.concatenate([supply, np.zeros(node - supply.size, dtype=np.int64)])
    flow.add_arcs_with_capacity_and_unit_cost(np.array(tails), np.array(heads), np.array(caps), np.array(costs))
    flow.set_nodes_supplies(np.arange(node), supply)
    if flow.solve() != flow.OPTIMAL:
        return None
    flows = flow.flows(np.arange(len(tails)))
    # Units through each pair node's first arc (broker -> out) and last arc (in -> broker).
    through: dict[int, int] = {}
    for i in np.flatnonzero(flows):
        u, v = tails[i], heads[i]
        if u < n_b and v >= hub0 + n_groups:
            through[v] = through.get(v, 0) + int(flows[i])
        elif v < n_b and u >= hub0 + n_groups:
            through[u] = through.get(u, 0) + int(flows[i])
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for g, x, out_node, in_node in pair_nodes:
        leave, arrive = through.get(out_node, 0), through.get(in_node, 0)
        if leave == arrive:
            continue  # a topic passing through a broker is no move at all
        if g not in out:
            out[g] = (np.zeros(n_b, dtype=np.int64), np.zeros(n_b, dtype=np.int64))
        if leave > arrive:
            out[g][0][x] = leave - arrive
        else:
            out[g][1][x] = arrive - leave
    return [(groups[g][0], leave, arrive) for g, (leave, arrive) in sorted(out.items())]


def _rack_balanced(ws: Workspace, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    racks = ws.rack[ws.target_idx]
    lo = np.empty_like(counts)
    hi = np.empty_like(counts)
    for r in np.unique(racks):
        m = racks == r
        tot = int(counts[m].sum())
        lo[m], hi[m] = tot // int(m.sum()), -(-tot // int(m.sum()))
    return lo, hi


def topic_quotas(ws: Workspace) -> tuple[np.ndarray, np.ndarray] | None:
    """The topic flow's moves as (leave, arrive) counts per (topic, broker index), for the
    greedy balance to follow (`balance_counts(..., quotas=...)`)."""
    planned = plan_topic_moves(ws)
    if not planned:
        return None
    leave = np.zeros(ws.tcount.shape, dtype=np.int64)
    arrive = np.zeros(ws.tcount.shape, dtype=np.int64)
    for t, out, into in planned:
        leave[t] += out
        arrive[t] += into
    return leave, arrive
