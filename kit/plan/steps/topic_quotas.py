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

from kit.array_ops import distinct
from kit.plan.solvers.quota_flow import TopicFlow
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
    sel_topics = ws.topic[ws.selected]
    sizes = np.fromiter(map(len, map(ws.assign.__getitem__, ws.selected)), dtype=np.int64, count=sel_topics.size)
    spans = np.ones(n_topics, dtype=bool)
    spans[sel_topics[sizes != ws.n_racks]] = False
    present = np.zeros(n_topics, dtype=bool)
    present[sel_topics] = True
    pinned = ws.n_racks >= 2 and (racks >= 0).all()
    rack_ids = sorted({int(r) for r in racks})
    groups: list[tuple[int, np.ndarray]] = []
    for t in np.flatnonzero(present):
        if pinned and spans[t]:
            groups += [(int(t), tidx[racks == r]) for r in rack_ids]
        else:
            groups.append((int(t), tidx))
    return groups


def _runs(n: np.ndarray, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For runs of lengths `n` starting at positions `first`: each element's run and position."""
    run = np.repeat(np.arange(n.size), n)
    return run, first[run] + np.arange(run.size) - (np.cumsum(n) - n)[run]


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
    return n, caps.astype(np.int64), costs.astype(np.int64)


def _range_arcs(ws: Workspace, counts, lo, hi, zero: int) -> tuple[np.ndarray, ...]:
    """Each target's supply (its excess over `hi` less its deficit below `lo`), and the arcs
    between it and the `zero` node for the slack inside its range: target by target, first
    the room up to `hi` (target -> zero), then the room down to `lo` (zero -> target)."""
    tidx = ws.target_idx.astype(np.int64)
    counts, lo, hi = (np.asarray(a, dtype=np.int64) for a in (counts, lo, hi))
    settled = np.minimum(np.maximum(counts, lo), hi)
    supply = np.maximum(0, counts - hi) - np.maximum(0, lo - counts)
    up, down = hi - settled, settled - lo
    keep = np.stack([up > 0, down > 0], axis=1)  # row-major: a target's two arcs together
    zeros = np.full(tidx.size, zero, dtype=np.int64)
    tails = np.stack([tidx, zeros], axis=1)[keep]
    heads = np.stack([zeros, tidx], axis=1)[keep]
    return supply, tails, heads, np.stack([up, down], axis=1)[keep]


def _pair_arcs(groups, held: np.ndarray, hub0: int, node0: int):
    """The arcs through every (group, broker) pair, pairs in group order then broker order,
    pair i owning nodes node0 + 2i (out) and node0 + 2i + 1 (in). Per pair, in this order:
    broker -> out (the group's replicas there, if any), out -> hub (the leaving tiers, each
    costing _MOVE more), hub -> in (the arriving tiers), in -> broker.

    Returns
    -------
    arcs : tuple of np.ndarray
        Tails, heads, capacities and costs.
    pairs : tuple of np.ndarray
        Per pair: its group, its broker index, the position of its broker -> out arc (-1
        where it has none) and of its in -> broker arc.
    """
    sizes = np.array([sub.size for _, sub in groups], dtype=np.int64)
    g = np.repeat(np.arange(len(groups)), sizes)
    x = np.concatenate([sub for _, sub in groups]).astype(np.int64)
    c = held[np.array([t for t, _ in groups], dtype=np.int64)[g], x]
    n_g = np.add.reduceat(c, np.cumsum(sizes) - sizes)
    share_lo, share_hi = n_g // sizes, -(-n_g // sizes)
    room = n_g[g]  # arrivals are bounded by the broker's own range anyway
    n_out, out_caps, out_costs = _tier_arcs(c, np.maximum(0, c - share_hi[g]))
    n_in, in_caps, in_costs = _tier_arcs(room, np.maximum(0, share_lo[g] - c))
    has = (c > 0).astype(np.int64)
    per_pair = has + n_out + n_in + 1
    first = np.cumsum(per_pair) - per_pair
    last = first + per_pair - 1
    out_node = node0 + 2 * np.arange(x.size, dtype=np.int64)
    in_node, hub = out_node + 1, hub0 + g
    total = int(per_pair.sum())
    tails, heads = np.empty(total, dtype=np.int64), np.empty(total, dtype=np.int64)
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


def topic_flow(ws: Workspace) -> TopicFlow | None:
    """The topic flow's network, for the fewest moves that bring every target's count into
    the balanced range; None when it would be too large or nothing needs to move.

    Where racks pin each rack's total, the racks are in fact independent problems (every
    group stays in one rack, and each rack's net flow through the zero node is fixed), and
    solved apart they take 1.0 s instead of 1.8 at 200,000 partitions; but OR-Tools then
    takes other optima among the ties, and the scale-out's failover excess went 3 -> 4. So
    one network."""
    tidx = ws.target_idx
    # Every selected topic's groups together span the targets once (`_groups`): the pairs
    # are known before anything is built, and at 1,000,000 partitions (5,000 topics x 500
    # brokers) the flow is always too large, where the ranges, groups and movable counts
    # took ~3 s.
    if distinct(ws.topic[ws.is_selected]).size * tidx.size * 2 * (_TIERS + 2) > _MAX_ARCS:
        return None
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
    if not groups:
        return None  # nothing selected can move
    held = np.zeros(ws.tcount.shape, dtype=np.int64)  # movable replicas per (topic, broker)
    for x in tidx:
        for t, bucket in ws.on_topic[x].items():
            held[t, x] = len(bucket)
    # Nodes: brokers, the zero node, one hub per group, then two per (group, broker) pair.
    # OR-Tools picks among equal optima by arc order: this order is the plans' contract.
    n_b = len(ws.ids)
    zero = n_b
    hub0 = zero + 1
    node0 = hub0 + len(groups)
    target_supply, r_tails, r_heads, r_caps = _range_arcs(ws, counts, lo, hi, zero)
    (tails, heads, caps, costs), pairs = _pair_arcs(groups, held, hub0, node0)
    supply = np.zeros(node0 + 2 * pairs[1].size, dtype=np.int64)
    supply[tidx] = target_supply
    supply[zero] = -int(supply[:n_b].sum())
    return TopicFlow(np.concatenate([r_tails, tails]), np.concatenate([r_heads, heads]),
                     np.concatenate([r_caps, caps]), np.concatenate([np.zeros(r_caps.size, dtype=np.int64), costs]),
                     supply, r_caps.size, pairs, np.array([t for t, _ in groups], dtype=np.int64), ws.tcount.shape)


def _rack_balanced(ws: Workspace, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    racks = ws.rack[ws.target_idx]
    lo = np.empty_like(counts)
    hi = np.empty_like(counts)
    for r in distinct(racks):
        m = racks == r
        tot = int(counts[m].sum())
        lo[m], hi[m] = tot // int(m.sum()), -(-tot // int(m.sum()))
    return lo, hi


def topic_quotas(ws: Workspace) -> tuple[np.ndarray, np.ndarray] | None:
    """The topic flow's moves as (leave, arrive) counts per (topic, broker index), for the
    greedy balance to follow (`balance_counts(..., quotas=...)`); None without any."""
    flow = topic_flow(ws)
    return None if flow is None else flow.quotas()
