"""The best replica order, and on small clusters the best replica sets with it, by integer
programming (HiGHS, `kit.plan.solvers.mip`).

Leader balance overall, per topic and on failover are each a flow problem, but together
they are not: the flows in `leadership.py` take them in turn and can stop short of an
order that meets all three. On small clusters this program settles all three at once:
each partition picks its (leader, first follower) pair; the figures above their targets
(leader spread 1, topic leader excess 1, failover spread 2) are minimised in that order of
importance, then the number of partitions whose order changes.

`best_placement` lets each partition also pick its replica set: the one it has, or that set
with one replica moved to another target broker. Replica counts stay in their range, every
broker keeps at least the degree the plan promises, and the copies stay within a budget; the
copies are minimised after the figures and before the order changes. Where no order of the
sets a balance chose can meet the targets, this finds sets that can, or proves that no
plan moving at most one replica of each partition within the budget does.

Failover is counted as evaluate_plan counts it: a broker whose partitions cannot split
evenly over the brokers that inherit them is forgiven 1, which the program models with an
integer quotient per broker.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kit.plan.objectives import FAILOVER_EXCESS, LEADER_SPREAD, TOPIC_LEADER_EXCESS
from kit.plan.solvers.mip import SparseRows, solve

# Selected partitions, and variables (one per class of interchangeable partitions and
# ordered pair of their replicas), above which the order program is not tried: beyond it
# HiGHS may take minutes.
MAX_VARIABLES = 6_000
# The placement program (one variable per replica set and ordered pair) is harder: at
# 12,000 variables HiGHS took up to 39 s on the clusters of bench/leadership_sweep.py.
MAX_PLACEMENT_VARIABLES = 12_000
# Branch-and-bound nodes: a count, not a time, so the same input gives the same order.
NODE_LIMIT = 2_000


def best_order(ws, assign: list[list[int]], eligible, caps: tuple[int, int, int]):
    """The selected partitions reordered to minimise the leadership shortfalls.

    Parameters
    ----------
    ws : Workspace
        Targets, topics and selection.
    assign : list of list of int
        The current order; partitions not selected keep theirs and count as fixed load.
    eligible : callable
        Broker index -> indices of the brokers that share its leadership when it dies.
    caps : (int, int, int)
        Current shortfalls (leader, topic, failover): the program looks only at orders no
        worse in any of them.

    Returns
    -------
    (list of list of int, bool) or None
        The new order and whether no order is proven to have lower shortfalls; None when
        the program is too large or finds nothing.
    """
    if len(ws.selected) > MAX_VARIABLES:
        return None
    # No relative gap: HiGHS's default (1e-4 of an objective weighted in the millions) let it stop
    # short of the proof, so a plan at the least its replica sets allow could not say so. This
    # program is small; the placement program, larger, keeps the default.
    return _solve(ws, assign, assign, lambda p: [tuple(assign[p])], eligible, caps, MAX_VARIABLES, gap=0.0)


def best_placement(ws, eligible, caps: tuple[int, int, int], budget: int, count_lo, count_hi):
    """Replica sets and order for the selected partitions that minimise the leadership
    shortfalls, then the copies, then the partitions changed.

    Parameters
    ----------
    ws : Workspace
        The plan so far (`ws.assign`); its replica sets are always among the choices.
    eligible : callable
        Broker index -> indices of the brokers that share its leadership when it dies.
    caps : (int, int, int)
        Shortfalls of the plan so far: nothing worse in any of them is looked at.
    budget : int
        Most replicas the result may add to the cluster as it was (`copies_made`).
    count_lo, count_hi : array of int
        Per target broker (in `ws.target_idx` order), the replica count range to keep.

    Returns
    -------
    (list of list of int, bool) or None
        The assignment and whether no plan of these choices is proven to have lower
        shortfalls; None when the program is too large or finds nothing.
    """
    limits = (budget, np.asarray(count_lo), np.asarray(count_hi))
    original = [list(p.replicas) for p in ws.cluster.partitions]
    return _solve(ws, ws.assign, original, lambda p: _replica_sets(ws, p), eligible, caps,
                  MAX_PLACEMENT_VARIABLES, limits)


def _replica_sets(ws, p: int) -> list[tuple[int, ...]]:
    """Sets (broker ids) partition p may end with: the one it had, or that one with a
    replica moved to another target broker (a replica off the targets must move), rack
    rule kept; and always the one the plan gives it now."""
    orig = list(ws.cluster.partitions[p].replicas)
    idx, tgt = ws.index, ws.is_target_list
    off = [b for b in orig if not tgt[idx[b]]]
    out = [tuple(orig)] if not off and ws.rack_ok_set(orig) else []
    if len(off) <= 1 and len(orig) == len(ws.assign[p]):
        for b in off or orig:
            for d in ws.targets:
                moved = [d if m == b else m for m in orig]
                if d not in orig and ws.rack_ok_set(moved):
                    out.append(tuple(moved))
    now = frozenset(ws.assign[p])
    if all(frozenset(s) != now for s in out):
        out.append(tuple(ws.assign[p]))
    return out


def _solve(ws, assign, base, sets_of, eligible, caps, max_variables, limits=None, gap=None):
    """The program over `sets_of(p)` for each selected partition; a choice differing from
    `base` in set or (leader, first follower) counts as a change. Copies are
    counted against `base` too. `limits` = (copies budget, count range) turns on the
    replica-count, degree and copy constraints. `gap`: the relative gap at which HiGHS may
    stop searching (None: its default)."""
    tidx = ws.target_idx
    pos_of = np.full(len(ws.ids), -1, dtype=np.int64)
    pos_of[tidx] = np.arange(tidx.size)
    found = _classes(ws, assign, base, sets_of, pos_of, max_variables, limits is not None)
    if found is None:
        return None
    items, groups, choices, fixed = found
    topics = sorted({int(ws.topic[p]) for p in items} | {t for t, _ in fixed.topic})
    elig = [set(int(pos_of[e]) for e in eligible(int(x))) for x in tidx]
    var = _Variables(len(choices), len(topics), tidx.size, limits is not None)
    rows = SparseRows()
    _leadership_rows(rows, ws, var, choices, groups, items, topics, elig, fixed)
    budget = 0
    if limits:
        budget, count_lo, count_hi = limits
        _placement_rows(rows.add, choices, tidx.size, fixed.count, fixed.peers, count_lo, count_hi, budget,
                        var.peer_at, var.peer_pairs, ws.degree_floor)
    cost, upper, weights = _objective(ws, var, choices, groups, items, base, pos_of, budget, caps, len(assign))
    lower = _tighten(upper, var, choices, groups, topics, elig, fixed, ws, caps)
    found = solve(cost, rows, lower, upper, NODE_LIMIT, gap)
    if found is None:
        return None
    xs = found.x
    # Any plan with lower shortfalls (in order of importance) would cost at least one
    # failover unit less, more than all the copies and changes: a dual bound above that
    # proves none exists, whether or not the search finished.
    w_lead, w_topic, w_fail = weights
    weighed = w_lead * xs[var.s_lead] + w_topic * xs[var.s_topic] + w_fail * xs[var.s_fail]
    proved = bool(found.dual_bound > weighed - 0.5)
    return _assignment(ws, assign, groups, choices, xs[:var.nv]), proved


@dataclass
class _Fixed:
    """The load of the partitions the program does not choose for, per target position."""

    lead: np.ndarray  # partitions led
    topic: dict[tuple[int, int], int]  # (topic, leader) -> partitions led
    pair: dict[tuple[int, int], int]  # (leader, first follower) -> partitions
    led: np.ndarray  # partitions with followers led
    count: np.ndarray  # replicas held (placement only)
    peers: np.ndarray  # pairs of positions sharing a partition (placement only)


def _classes(ws, assign, base, sets_of, pos_of, max_variables: int, placement: bool):
    """The program's choices: (items, groups, choices, fixed), or None when it would have
    more than `max_variables` choices or nothing to choose.

    Partitions of one topic with the same replica list in `base` and the same choices are
    interchangeable: one variable per class and choice counts how many of them take it.
    The same program, without the symmetric copies of every solution. A choice is (class,
    set positions, leader, follower or -1, copies)."""
    nt = ws.target_idx.size
    idx = ws.index
    items, groups, group_of, choices = [], [], {}, []
    # The fixed load is counted in lists (most partitions are fixed: one numpy scalar update
    # each cost more than the rest of the loop) and made arrays once at the end.
    fixed = _Fixed([0] * nt, {}, {}, [0] * nt, [0] * nt, [[False] * nt for _ in range(nt)])
    pos, selected, topic_of = pos_of.tolist(), ws.is_selected.tolist(), ws.topic_list
    for p, reps in enumerate(assign):
        ps = [pos[idx[b]] for b in reps]
        if not selected[p] or min(ps) < 0:
            _add_fixed(fixed, ps, topic_of[p], placement)
            continue
        items.append(p)
        sets = [tuple(s) for s in sets_of(p)]
        key = (topic_of[p], tuple(base[p]), tuple(sets))
        if key in group_of:
            groups[group_of[key]].append(p)
            continue
        g = group_of[key] = len(groups)
        groups.append([p])
        had = set(base[p])
        for s in sets:
            sp = tuple(pos[idx[b]] for b in s)
            copies = len(set(s) - had)
            if len(sp) == 1:
                choices.append((g, sp, sp[0], -1, copies))
            for a in sp:
                for c in sp:
                    if a != c:
                        choices.append((g, sp, a, c, copies))
        if len(choices) > max_variables:
            return None
    if not items:
        return None
    fixed.lead, fixed.led, fixed.count = (np.array(v, dtype=np.int64) for v in (fixed.lead, fixed.led, fixed.count))
    fixed.peers = np.array(fixed.peers, dtype=bool).reshape(nt, nt)
    return items, groups, choices, fixed


def _add_fixed(fixed: _Fixed, ps: list[int], topic: int, placement: bool) -> None:
    """Count a partition the program does not choose for (replicas at target positions `ps`,
    -1 off the targets) into the fixed load (its counts still lists: `_classes`)."""
    if placement:
        on = [a for a in ps if a >= 0]
        for a in on:
            fixed.count[a] += 1
            row = fixed.peers[a]
            for c in on:
                row[c] = True
    if ps and ps[0] >= 0:
        fixed.lead[ps[0]] += 1
        key = (topic, ps[0])
        fixed.topic[key] = fixed.topic.get(key, 0) + 1
        if len(ps) > 1:
            fixed.led[ps[0]] += 1
            if ps[1] >= 0:
                fixed.pair[(ps[0], ps[1])] = fixed.pair.get((ps[0], ps[1]), 0) + 1


class _Variables:
    """Where each variable sits: first one per choice, then the smallest leader count, the
    smallest per topic, the smallest per failover row, per broker whether its partitions
    split unevenly and their quotient, the three shortfalls, then (placement only) whether
    each pair of brokers shares a partition."""

    def __init__(self, nv: int, n_topics: int, nt: int, placement: bool):
        self.nv = nv
        self.m_lead = nv
        self.m_topic = nv + 1
        self.m_fail = self.m_topic + n_topics
        self.uneven_at = self.m_fail + nt
        self.quot_at = self.uneven_at + nt
        self.s_lead, self.s_topic, self.s_fail = self.quot_at + nt, self.quot_at + nt + 1, self.quot_at + nt + 2
        self.peer_at = self.s_fail + 1
        self.peer_pairs = [(a, c) for a in range(nt) for c in range(a + 1, nt)] if placement else []
        self.n = self.peer_at + len(self.peer_pairs)


def _leadership_rows(rows: SparseRows, ws, var: _Variables, choices, groups, items, topics, elig, fixed: _Fixed) -> None:
    """Every class's partitions chosen for; the leader count, each topic's leaders and each
    broker's failover within their targets, what exceeds them counted in the shortfalls."""
    nt = ws.target_idx.size
    tnum = {t: i for i, t in enumerate(topics)}
    by_group: dict[int, list[int]] = {}
    by_lead: list[list[int]] = [[] for _ in range(nt)]
    by_topic: dict[tuple[int, int], list[int]] = {}
    by_pair: dict[tuple[int, int], list[int]] = {}
    by_led: list[list[int]] = [[] for _ in range(nt)]
    for k, (g, sp, a, c, _) in enumerate(choices):
        by_group.setdefault(g, []).append(k)
        by_lead[a].append(k)
        if c >= 0:
            by_led[a].append(k)
        by_topic.setdefault((tnum[int(ws.topic[groups[g][0]])], a), []).append(k)
        if c >= 0 and c in elig[a]:
            by_pair.setdefault((a, c), []).append(k)
    for g, ks in by_group.items():
        rows.add([(k, 1.0) for k in ks], len(groups[g]), len(groups[g]))
    for a in range(nt):
        ks = [(k, 1.0) for k in by_lead[a]]
        f = float(fixed.lead[a])
        rows.add(ks + [(var.m_lead, -1.0)], -f, np.inf)
        rows.add(ks + [(var.m_lead, -1.0), (var.s_lead, -1.0)], -np.inf, LEADER_SPREAD.target - f)
    n_topic = np.zeros(len(topics), dtype=np.int64)
    for p in items:
        n_topic[tnum[int(ws.topic[p])]] += 1
    for (t, _), v in fixed.topic.items():
        n_topic[tnum[t]] += v
    for i, t in enumerate(topics):
        uneven = 0 if n_topic[i] % nt == 0 else 1
        for a in range(nt):
            ks = [(k, 1.0) for k in by_topic.get((i, a), [])]
            f = float(fixed.topic.get((t, a), 0))
            rows.add(ks + [(var.m_topic + i, -1.0)], -f, np.inf)
            rows.add(ks + [(var.m_topic + i, -1.0), (var.s_topic, -1.0)], -np.inf,
                     TOPIC_LEADER_EXCESS.target + uneven - f)
    for a in range(nt):
        # uneven may be 1 only if led - |elig| * quotient lies in 1 .. |elig| - 1.
        e = float(len(elig[a]))
        led = [(k, 1.0) for k in by_led[a]]
        f = float(fixed.led[a])
        rows.add(led + [(var.quot_at + a, -e), (var.uneven_at + a, -1.0)], -f, np.inf)
        rows.add(led + [(var.quot_at + a, -e)], -np.inf, e - 1 - f)
        for c in elig[a]:
            ks = [(k, 1.0) for k in by_pair.get((a, c), [])]
            f = float(fixed.pair.get((a, c), 0))
            rows.add(ks + [(var.m_fail + a, -1.0)], -f, np.inf)
            rows.add(ks + [(var.m_fail + a, -1.0), (var.s_fail, -1.0), (var.uneven_at + a, -1.0)], -np.inf,
                     FAILOVER_EXCESS.target - f)


def _objective(ws, var: _Variables, choices, groups, items, base, pos_of, budget: int, caps, n_parts: int):
    """Costs and upper bounds of the variables, and the weights of the three shortfalls.

    Lexicographic by weights: one unit of a more important shortfall outweighs every
    possible unit of the less important ones, all the copies and all the changes together."""
    idx = ws.index
    nt = ws.target_idx.size
    w_copy = float(len(items) + 1)
    w_fail = w_copy * (budget + 1)
    w_topic = w_fail * (caps[2] + 2)
    w_lead = w_topic * (caps[1] + 2)
    cost = np.zeros(var.n)
    for k, (g, sp, a, c, copies) in enumerate(choices):
        was = base[groups[g][0]]
        kept = (copies == 0 and pos_of[idx[was[0]]] == a and (c < 0 or pos_of[idx[was[1]]] == c)
                and len(sp) == len(was) and set(sp) == {int(pos_of[idx[b]]) for b in was})
        cost[k] = copies * w_copy + (0.0 if kept else 1.0)
    cost[var.s_lead], cost[var.s_topic], cost[var.s_fail] = w_lead, w_topic, w_fail
    upper = np.ones(var.n)
    upper[:var.nv] = [len(groups[g]) for g, *_ in choices]
    upper[var.nv:var.peer_at] = n_parts
    upper[var.uneven_at:var.uneven_at + nt] = 1
    # No worse in any figure: with each shortfall capped, the weights order plans exactly
    # as the shortfalls do, most important first.
    upper[var.s_lead], upper[var.s_topic], upper[var.s_fail] = caps
    return cost, upper, (w_lead, w_topic, w_fail)


def _tighten(upper, var: _Variables, choices, groups, topics, elig, fixed: _Fixed, ws, caps) -> np.ndarray:
    """Bounds of the smallest counts and the quotients that every solution keeps (a smallest
    count is at most the average, and at least the largest allowed less the spread allowed);
    tightens `upper` in place, returns the lower bounds.

    They cut nothing off, but without them these variables range up to the partition count
    and HiGHS's bound propagation creeps through the rows that tie them, one unit a pass:
    most of the placement program's time went there."""
    nt = len(elig)
    lower = np.zeros(var.n)
    tnum = {t: i for i, t in enumerate(topics)}
    size = np.array([len(groups[g]) for g, *_ in choices], dtype=np.int64)
    leads = int(fixed.lead.sum()) + sum(len(g) for g in groups)
    by_topic = np.zeros(len(topics), dtype=np.int64)
    led_most = fixed.led.copy()  # the most partitions with followers each broker can lead
    counted: set[tuple[int, int]] = set()
    for k, (g, _, a, c, _) in enumerate(choices):
        if c >= 0 and (g, a) not in counted:
            counted.add((g, a))
            led_most[a] += size[k]
    for g in groups:
        by_topic[tnum[int(ws.topic[g[0]])]] += len(g)
    for (t, _), v in fixed.topic.items():
        by_topic[tnum[t]] += v
    upper[var.m_lead] = leads // nt
    lower[var.m_lead] = max(0, -(-leads // nt) - LEADER_SPREAD.target - caps[0])
    for i, n in enumerate(by_topic):
        upper[var.m_topic + i] = n // nt
        uneven = 0 if n % nt == 0 else 1
        lower[var.m_topic + i] = max(0, -(-int(n) // nt) - TOPIC_LEADER_EXCESS.target - uneven - caps[1])
    for a in range(nt):
        e = len(elig[a])
        upper[var.m_fail + a] = led_most[a] // e if e else 0
        upper[var.quot_at + a] = led_most[a] // e if e else 0
    return lower


def _assignment(ws, assign, groups, choices, taken) -> list[list[int]]:
    """Each class's partitions given the replica lists its variables chose (`taken[k]` of
    them each): first to partitions that have that list now, then in partition order."""
    tg = ws.targets
    out = [list(reps) for reps in assign]
    wanted: dict[int, list[list[int]]] = {}
    for k in np.flatnonzero(taken):
        g, sp, a, c, _ = choices[k]
        lead, follow = tg[a], (tg[c] if c >= 0 else None)
        reps = [lead] + ([follow] if follow is not None else []) + [tg[b] for b in sp if tg[b] not in (lead, follow)]
        wanted.setdefault(g, []).extend([reps] * int(taken[k]))
    for g, lists in wanted.items():
        rest = []
        for p in groups[g]:
            if assign[p] in lists:
                lists.remove(assign[p])
            else:
                rest.append(p)
        for p, reps in zip(rest, lists):
            out[p] = list(reps)  # its own list: workspaces change replica lists in place
    return out


def _placement_rows(constraint, choices, nt, fixed_count, fixed_peers, count_lo, count_hi, budget,
                    peer_at, peer_pairs, degree_floor) -> None:
    """Replica counts in range, copies within the budget, and every broker sharing
    partitions with at least `degree_floor` others (a pair counts as peers only if some
    chosen set, or a fixed partition, holds both)."""
    by_holder: list[list[int]] = [[] for _ in range(nt)]
    pair_num = {pr: i for i, pr in enumerate(peer_pairs)}
    by_peers: dict[int, list[int]] = {}
    copies = []
    for k, (_, sp, _, _, cp) in enumerate(choices):
        for b in sp:
            by_holder[b].append(k)
        for i, a in enumerate(sp):
            for c in sp[i + 1:]:
                by_peers.setdefault(pair_num[(min(a, c), max(a, c))], []).append(k)
        if cp:
            copies.append((k, float(cp)))
    for a in range(nt):
        f = int(fixed_count[a])
        constraint([(k, 1.0) for k in by_holder[a]], int(count_lo[a]) - f, int(count_hi[a]) - f)
    constraint(copies, 0, budget)
    for i, (a, c) in enumerate(peer_pairs):
        if not fixed_peers[a, c]:
            constraint([(k, 1.0) for k in by_peers.get(i, [])] + [(peer_at + i, -1.0)], 0, np.inf)
    for a in range(nt):
        constraint([(peer_at + pair_num[(min(a, c), max(a, c))], 1.0) for c in range(nt) if c != a],
                   degree_floor, np.inf)
