"""Spend the copies a count balance may still make on leadership balance.

`rebalance` and `scale-out` may add up to 5% more replicas than the lower bound for a
count-balanced result; kit takes 5% of the copies its balance made (or of the bound, if
less), so a cluster planned again, already balanced, gets none and the result stays put.
When the copies the balance chose leave a leadership target missed and no order of
replicas can fix it (a partition can only be led, or taken over, by the brokers holding
it), other replica sets, and a few spare copies, can give the leadership brokers to go to.

On small clusters an integer program (`exact_order.best_placement`) chooses every
partition's replica set and order at once: it finds sets that meet the targets, or
proves that no plan within the copies does (when each partition moves at most one
replica), and the plan says so. Where that program is too large, a local search:

- failover: a partition led by the broker whose death would be served worst moves its
  replica off the broker that would inherit too much onto one that would inherit too little;
- a topic: a partition led by the broker that leads most of the topic takes the broker that
  leads fewest as a follower, so the leadership pass can hand the partition over.

Where the counts must stay even, one replica also moves back the other way. Each try is
kept only if the leadership pass then ranks strictly better (`RANKING`). Small clusters
only: every try re-plans leadership.
"""
from __future__ import annotations

import numpy as np

from kit.plan.steps.count_balance import count_range
from kit.plan.solvers.exact_order import best_placement
from kit.plan.objectives import (FAILOVER_EXCESS, LEADER_SPREAD, TOPIC_LEADER_EXCESS, LeaderFigures, Ranking,
                                 allowance_key)
from kit.plan.steps.leadership import balance_leadership
from kit.plan.steps.order_notes import drop_order_notes, placement_budget_note
from kit.plan.steps.leadership_figures import failover_excess_by_broker, heirs_of, inherit_matrix, leader_figures
from kit.plan.workspace import Workspace

MAX_PARTITIONS = 5_000  # selected partitions: each try of the local search re-plans leadership
# Selected partitions above which the integer program is not tried: up to 400 it took at
# most 30 s (bench/leadership_sweep.py, random clusters); at 2,000 (RF 2, 9 brokers) 150 s.
PROGRAM_MAX_PARTITIONS = 500
MAX_TRIES = 30  # leadership re-plans in all
CANDIDATES = 6  # tries per round, for the worst broker or topic


def failover_profile(ws: Workspace, figs: LeaderFigures) -> tuple[int, ...]:
    """Every target broker's failover excess, worst first: one move evens out one broker, and
    several brokers may share the worst figure."""
    return tuple(sorted(failover_excess_by_broker(ws, inherit_matrix(ws, ws.assign)).values(), reverse=True))


# The leadership figures; the replica counts never get worse and the copies stay within the
# budget, so neither ranks a try. Ties go by every broker's failover excess, worst first.
RANKING = Ranking(LEADER_SPREAD, TOPIC_LEADER_EXCESS, FAILOVER_EXCESS, ties=failover_profile)


PLACEMENT_NOTE = ("the least any plan within {budget} copies allows where each partition moves at most one"
                  " replica (proved by integer programming)")


def may_spend_copies(ws: Workspace) -> bool:
    """Whether `spend_copies_on_leadership` may change anything: the integer program or the
    local search is small enough to run. Above, not even the copies are counted (~0.5 s a
    time at 200,000 partitions)."""
    return len(ws.selected) <= max(PROGRAM_MAX_PARTITIONS, MAX_PARTITIONS)


def spend_copies_on_leadership(ws: Workspace, bound: int, reason: str, figs: LeaderFigures) -> None:
    """Where a leadership target is still missed after the count balance, whose copies have
    a lower bound `bound`: replica sets and order by integer programming within 5% of the
    fewer of the copies made and the bound, else (too large for it) the local search.
    `figs` are the plan's leadership figures now (`leader_figures`)."""
    if figs.met() or not may_spend_copies(ws):
        return
    copies = ws.copies_made()
    if not copies:
        return
    allowance = int(1.05 * min(copies, bound))
    budget = max(copies, allowance)
    if not place_for_leadership(ws, budget, reason, figs) and copies <= bound:
        figs = leader_figures(ws, ws.assign)  # the program may have taken other sets
        if figs.shortfall().topic_leader_excess or figs.shortfall().failover_excess:
            spend_spare_copies(ws, allowance - ws.copies_made(), reason, figs)
    made = ws.copies_made()
    if made > copies:
        ws.notes.append(f"{made} copies where the count balance alone made {copies}: the others buy leadership "
                        f"balance (at most {budget}, 5% over the fewest)")


def place_within_copies(ws: Workspace, reason: str) -> None:
    """An evacuation's spare copies (`remove`, `az-loss`, healing): where leader or topic
    balance (failover is no target there) is still short and no order can fix it, the moved
    replicas may land elsewhere, chosen with the order; no more copies. Only where the
    program may run: the figures alone take ~0.5 s at 200,000 partitions."""
    if len(ws.selected) <= PROGRAM_MAX_PARTITIONS:
        figs = leader_figures(ws, ws.assign)
        if figs.shortfall().leader_spread or figs.shortfall().topic_leader_excess:
            place_for_leadership(ws, ws.copies_made(), reason, figs)


def place_for_leadership(ws: Workspace, budget: int, reason: str, figs: LeaderFigures) -> bool:
    """Take the integer program's replica sets and order (`best_placement`, at most `budget`
    copies) if they have lower shortfalls (or as low, with fewer copies); True when that
    settles it (targets met or proven least)."""
    if ws.target_idx.size < 3 or len(ws.selected) > PROGRAM_MAX_PARTITIONS:
        return False
    tidx = ws.target_idx
    lo, hi = _count_bounds(ws)
    found = best_placement(ws, lambda x: heirs_of(ws, x), figs.shortfall(), budget, lo[tidx], hi[tidx])
    if found is None:
        return False
    assign, proved = found
    before = ws.copies_made()
    after = sum(_copies_of(ws, p, assign[p]) for p in ws.selected)
    if allowance_key(leader_figures(ws, assign), after) < allowance_key(figs, before):
        _take(ws, assign, reason)
        drop_order_notes(ws)  # other replica sets now
        balance_leadership(ws)  # the flows' figures below the targets too: a fixed point
        figs = leader_figures(ws, ws.assign)
    if proved and not figs.met():
        drop_order_notes(ws)  # the program's claim covers every order of these sets too
        ws.notes.append(f"{figs.missed()}: {PLACEMENT_NOTE.format(budget=budget)}")
    elif not figs.met():
        # Its search ended at its node limit before the proof: the plan keeps the best found and
        # says that a better one may exist (a later step that changes the sets drops this; only
        # the last search's note holds).
        ws.notes[:] = [n for n in ws.notes if not n.endswith(placement_budget_note(""))]
        ws.notes.append(placement_budget_note(figs.missed()))
    return proved or figs.met()


def _take(ws: Workspace, assign: list[list[int]], reason: str) -> None:
    """Move the selected partitions to `assign`, with why each differs from the cluster."""
    parts = ws.cluster.partitions
    for p in ws.selected:
        if assign[p] == ws.assign[p]:
            continue
        ws.restore(p, assign[p])  # new replicas or a new order alike
        had = list(parts[p].replicas)
        if assign[p] == had:
            ws.reasons.pop(p, None)
        elif set(assign[p]) == set(had):
            ws.reasons[p] = "leadership"
        elif ws.reasons.get(p, "leadership") == "leadership":
            ws.reasons[p] = reason


def spend_spare_copies(ws: Workspace, budget: int, reason: str, figs: LeaderFigures) -> int:
    """Use at most `budget` more copies to lower the failover (or else the per-topic leader)
    shortfall; returns copies used.

    Moves keep every target broker's replica count within its range, the rack rule and
    every broker's number of peers (degree) at or above the floor the plan promises.
    `figs` are the plan's leadership figures now (`leader_figures`).
    """
    if budget < 1 or len(ws.selected) > MAX_PARTITIONS or ws.target_idx.size < 3:
        return 0
    used = tries = 0
    key = RANKING.key(ws, figs)
    while (figs.shortfall().topic_leader_excess or figs.shortfall().failover_excess) and tries < MAX_TRIES:
        for moves in _candidates(ws, figs):
            cost = _copies(ws, moves)
            if used + cost > budget:
                continue
            tries += 1
            saved = ([list(r) for r in ws.assign], dict(ws.reasons), list(ws.notes))
            spread = ws.count_spread()
            for p, a, b in moves:
                ws.replace_slot(p, ws.assign[p].index(a), b, reason)
            if ws.count_spread() <= spread and ws.degree_min() >= ws.degree_floor:
                drop_order_notes(ws)  # other replica sets now: the program proves afresh
                balance_leadership(ws)
                new = leader_figures(ws, ws.assign)
                new_key = RANKING.key(ws, new)
                if new_key < key:
                    used, figs, key = used + cost, new, new_key
                    break
            _undo(ws, saved)
            if tries >= MAX_TRIES:
                return used
        else:
            return used
    return used


def _candidates(ws: Workspace, figs: LeaderFigures) -> list[list[tuple[int, int, int]]]:
    """Moves (partition, from broker id, to broker id) for the worst figure still short:
    failover first, else the topic whose leaders are least even."""
    if figs.shortfall().failover_excess:
        return _failover_candidates(ws)
    if figs.shortfall().topic_leader_excess:
        return _topic_candidates(ws)
    return []


def _failover_candidates(ws: Workspace) -> list[list[tuple[int, int, int]]]:
    """Give the worst-failing broker's leadership a broker it under-serves in place of one
    it over-serves: a partition it leads with `over` first after it takes `under` instead."""
    inherit = inherit_matrix(ws, ws.assign)
    excess = failover_excess_by_broker(ws, inherit)
    worst = max(excess.values(), default=0)
    if worst <= FAILOVER_EXCESS.target:
        return []
    x = min(b for b, e in excess.items() if e == worst)
    elig = heirs_of(ws, x)
    vals = inherit[x, elig]
    over = int(elig[int(np.argmax(vals))])
    under = int(elig[int(np.argmin(vals))])
    x_id, over_id = ws.ids[x], ws.ids[over]
    parts = [p for p in ws.selected if len(ws.assign[p]) > 1 and ws.assign[p][:2] == [x_id, over_id]]
    return _moves(ws, parts, over, under, keep=x_id)


def _topic_candidates(ws: Workspace) -> list[list[tuple[int, int, int]]]:
    """Let the topic with the least even leaders be led from the broker that leads fewest of
    it: a partition led by the broker that leads most of it takes that broker as a follower
    (in place of another follower), so the leadership pass can hand it over."""
    idx = ws.index
    tidx = ws.target_idx
    n = len(ws.ids)
    lead = np.zeros((len(ws.topic_names), n), dtype=np.int64)
    for p in ws.selected:
        lead[ws.topic[p], idx[ws.assign[p][0]]] += 1
    sub = lead[:, tidx]
    n_t = np.bincount(ws.topic[ws.selected], minlength=len(ws.topic_names))
    excess = sub.max(axis=1) - sub.min(axis=1) - (n_t % len(tidx) != 0)
    t = int(np.argmax(excess))
    if excess[t] <= TOPIC_LEADER_EXCESS.target:
        return []
    most, fewest = int(tidx[int(np.argmax(sub[t]))]), int(tidx[int(np.argmin(sub[t]))])
    most_id = ws.ids[most]
    out = []
    for p in ws.selected:
        reps = ws.assign[p]
        if ws.topic[p] != t or reps[0] != most_id or len(reps) < 2 or ws.ids[fewest] in reps:
            continue
        for f in reps[1:]:  # the follower that gives its place
            out += _moves(ws, [p], idx[f], fewest, keep=most_id, limit=1)
        if len(out) >= CANDIDATES:
            break
    return out[:CANDIDATES]


def _moves(ws: Workspace, parts, src: int, dst: int, keep: int, limit: int = CANDIDATES):
    """For each partition (up to `limit`), its replica on broker index `src` moved to `dst`,
    rack rule kept, plus a move back from `dst` to `src` on a partition without broker id
    `keep` where the replica counts must stay in range."""
    src_id, dst_id = ws.ids[src], ws.ids[dst]
    lo, hi = _count_bounds(ws)
    needs_back = ws.count[src] - 1 < lo[src] or ws.count[dst] + 1 > hi[dst]
    out = []
    for p in parts:
        reps = ws.assign[p]
        if dst_id in reps or src_id not in reps:
            continue
        if not ws.rack_ok(dst_id, [m for m in reps if m != src_id], len(reps)):
            continue
        moves = [(p, src_id, dst_id)]
        if needs_back:
            back = _move_back(ws, p, keep, dst_id, src_id)
            if back is None:
                continue
            moves.append(back)
        out.append(moves)
        if len(out) >= limit:
            break
    return out


def _move_back(ws: Workspace, skip: int, x_id: int, from_id: int, to_id: int):
    """A partition (not led by x, not `skip`) that can move from `from_id` to `to_id`."""
    for q in ws.selected:
        reps = ws.assign[q]
        if q == skip or from_id not in reps or to_id in reps or x_id in reps:
            continue
        if ws.rack_ok(to_id, [m for m in reps if m != from_id], len(reps)):
            return (q, from_id, to_id)
    return None


def _count_bounds(ws: Workspace) -> tuple[np.ndarray, np.ndarray]:
    """Per broker index, the replica count range the balance reached (per rack where racks
    fix each rack's total)."""
    c = ws.count[ws.target_idx]
    lo_t, hi_t, _ = count_range(ws, c, int(c.min()), int(c.max()))
    lo, hi = np.zeros(len(ws.ids), dtype=np.int64), np.zeros(len(ws.ids), dtype=np.int64)
    lo[ws.target_idx], hi[ws.target_idx] = lo_t, hi_t
    return lo, hi


def _copies(ws: Workspace, moves) -> int:
    """How many more replicas than before the plan would add after the moves (a replica
    moved back onto a broker that held the partition gives a copy back)."""
    sets = {p: set(ws.assign[p]) for p, _, _ in moves}
    before = sum(_copies_of(ws, p, sets[p]) for p in sets)
    for p, a, b in moves:
        sets[p] = (sets[p] - {a}) | {b}
    return sum(_copies_of(ws, p, sets[p]) for p in sets) - before


def _copies_of(ws: Workspace, p: int, reps) -> int:
    """Replicas of partition p in `reps` that it did not have before the plan."""
    return len(set(reps) - set(ws.cluster.partitions[p].replicas))


def _undo(ws: Workspace, saved) -> None:
    assign, reasons, notes = saved
    for p in ws.selected:
        if ws.assign[p] != assign[p]:
            ws.restore(p, assign[p])
    ws.reasons.clear()
    ws.reasons.update(reasons)
    ws.notes[:] = notes
