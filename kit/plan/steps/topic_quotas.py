"""Count balance that spreads every topic: which topics the fewest moves should carry.

Balancing replica counts fixes how many replicas each broker gives or takes, not which
topics: a greedy pass ends balanced in total but may leave a topic piled on the brokers
it was created on, and then no order of replicas can spread that topic's leaders. Here
one min-cost flow over (topic, broker) decides, for the same minimal number of moves,
how many replicas of each topic leave and reach each broker, with a convex penalty on
each topic's distance from its even share. The greedy balance then follows these quotas
(`balance_counts(..., quotas=...)`): it still picks the broker pairs and the partitions,
which keeps broker pairs diverse for failover, but prefers the topics the flow planned.

A group is a topic, or a topic within one rack when every replica set of the topic spans
every rack (then a replica can only move inside its rack). The network over the groups is
built and solved with the problem (`kit.plan.solvers.quota_flow`), in the second process
when there is one.
"""
from __future__ import annotations

import numpy as np

from kit.array_ops import distinct
from kit.plan.solvers.quota_flow import TopicFlow, arcs_bound
from kit.plan.steps.count_balance import count_range
from kit.plan.workspace import Workspace, flat_buckets

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
    in_rack = [tidx[racks == r] for r in sorted({int(r) for r in racks})]  # the same for every topic
    groups: list[tuple[int, np.ndarray]] = []
    for t in np.flatnonzero(present):
        if pinned and spans[t]:
            groups += [(int(t), sub) for sub in in_rack]
        else:
            groups.append((int(t), tidx))
    return groups


def topic_flow(ws: Workspace) -> TopicFlow | None:
    """The topic flow's problem, for the fewest moves that bring every target's count into
    the balanced range; None when its network would be too large or nothing needs to move.

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
    if arcs_bound(distinct(ws.topic[ws.is_selected]).size, tidx.size) > _MAX_ARCS:
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
    # Movable replicas per (topic, broker), from the targets' buckets flattened in C (a loop
    # over the 156,000 buckets of 200,000 partitions took 0.02 s).
    per_target, topics, bucket_sizes, _ = flat_buckets([ws.on_topic[x] for x in tidx.tolist()])
    held = np.zeros(ws.tcount.shape, dtype=np.int64)
    held[topics, np.repeat(tidx, per_target)] = bucket_sizes
    group_topic = np.array([t for t, _ in groups], dtype=np.int64)
    sizes = np.array([sub.size for _, sub in groups], dtype=np.int64)
    pair_broker = np.concatenate([sub for _, sub in groups]).astype(np.int64)
    pair_held = held[np.repeat(group_topic, sizes), pair_broker]
    return TopicFlow(tidx, counts, lo, hi, len(ws.ids), group_topic, sizes, pair_broker, pair_held, ws.tcount.shape)


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
