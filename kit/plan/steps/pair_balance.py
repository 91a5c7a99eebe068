"""RF-2 evacuations onto two racks: where each re-placed replica lands decides failover.

With replication factor 2 and two racks left, every partition ends with one replica in each
rack, and when a broker dies its follower takes each partition it led. A broker x's failover
spread is then the spread of ``lead[x, y]`` over the brokers y of the other rack, and for
each pair ``lead[a, b] + lead[b, a]`` is the number of partitions the pair holds together.
The order (who leads each pair's partitions) is the leadership stage's choice; what it can
reach depends on those pair counts. Partitions that kept both replicas fix theirs; a
partition that lost one keeps its survivor and may take any broker of the other rack. So
the re-placed replicas are chosen here, by a small integer program over counts (how many
of a survivor's partitions of a topic go to each broker, not which), to make every pair's
count, and every broker's count of each topic (per-topic leadership needs it), as even as
the fixed partitions allow, with every broker receiving as many re-placed replicas as
before: replica counts and copies do not change.

The new placement is kept only if, after the leadership stage, the plan ranks strictly
better (`RANKING`: replica count spread, then the leadership figures; the copies do not
change), and no figure ahead of failover gets worse. Where failover excess still misses its target on a
small cluster, `prove_failover` asks the placement program (`exact_order.best_placement`)
for the least within the same copies: with RF 2 every plan that adds only the forced
replicas keeps the survivors and so is among its choices, and the plan's NOTE states it.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from kit.plan.objectives import (COUNT_SPREAD, FAILOVER_EXCESS, LEADER_SPREAD, TOPIC_LEADER_EXCESS, LeaderFigures,
                                 Ranking)
from kit.plan.solvers.mip import SparseRows, solve
from kit.plan.steps.leadership import balance_leadership
from kit.plan.steps.order_notes import drop_order_notes
from kit.plan.steps.leadership_figures import leader_figures
from kit.plan.steps.spare_copies import PROGRAM_MAX_PARTITIONS, place_for_leadership
from kit.plan.workspace import LARGE, Workspace

# (survivor, topic, receiver) variables above which the program is not tried.
MAX_VARIABLES = 20_000
NODE_LIMIT = 500  # a count, not a time: the same input gives the same placement
# A re-placement keeps every broker's count of re-placed replicas, so not the copies.
RANKING = Ranking(COUNT_SPREAD, LEADER_SPREAD, TOPIC_LEADER_EXCESS, FAILOVER_EXCESS)


def _movable(ws: Workspace) -> dict[int, tuple[int, int]] | None:
    """Selected partition -> (survivor id, re-placed id) for the partitions whose one new
    replica may go anywhere in the other rack; None unless this is an RF-2 evacuation onto
    exactly two racks (every target in one of them)."""
    if ws.n_racks != 2 or (ws.rack[ws.target_idx] < 0).any() or not ws.selected:
        return None
    parts = ws.cluster.partitions
    out = {}
    for p in ws.selected:
        reps = ws.assign[p]
        if len(reps) != 2:
            return None
        kept = [b for b in reps if b in parts[p].replicas]
        if len(kept) == 1 and len(parts[p].replicas) == 2:
            new = reps[1 - reps.index(kept[0])]
            out[p] = (kept[0], new)
    return out or None


class _Problem(NamedTuple):
    """The placement question, by target position (`pos`) and topic row."""

    side: np.ndarray  # 0 or 1 per target: which of the two racks
    fixed: np.ndarray  # [i, j]: partitions held by targets i and j that are not movable
    tfixed: np.ndarray  # [topic row, i]: replicas of the topic on target i that stay where they are
    groups: dict[tuple[int, int], list[int]]  # (survivor, topic row) -> its movable partitions
    receive: np.ndarray  # re-placed replicas each target takes now (and will take)


def _problem(ws: Workspace, movable: dict[int, tuple[int, int]], pos: np.ndarray) -> _Problem:
    """The counts the program works on, from the plan so far."""
    tidx = ws.target_idx
    nt = tidx.size
    idx = ws.index
    side = (ws.rack[tidx] != ws.rack[tidx].min()).astype(np.int64)
    fixed = np.zeros((nt, nt), dtype=np.int64)
    for p, reps in enumerate(ws.assign):
        if len(reps) == 2 and p not in movable:
            i, j = pos[idx[reps[0]]], pos[idx[reps[1]]]
            if i >= 0 and j >= 0:
                fixed[i, j] += 1
                fixed[j, i] += 1
    topics = sorted({int(ws.topic[p]) for p in movable})
    row = {t: k for k, t in enumerate(topics)}
    tfixed = ws.tcount[np.ix_(topics, tidx)].copy()
    groups: dict[tuple[int, int], list[int]] = {}
    receive = np.zeros(nt, dtype=np.int64)
    for p, (s, new) in movable.items():
        k = row[int(ws.topic[p])]
        tfixed[k, pos[idx[new]]] -= 1
        receive[pos[idx[new]]] += 1
        groups.setdefault((int(pos[idx[s]]), k), []).append(p)
    return _Problem(side, fixed, tfixed, groups, receive)


def _even(rows: SparseRows, entries, base: int, lo: int, hi: int, slack: int, worst: int | None) -> None:
    """base + sum(entries) within [lo, hi], but for the slack variables `slack` (over) and
    `slack + 1` (under), each at most `worst` where that is given."""
    rows.add(entries + [(slack, -1)], -np.inf, hi - base)
    rows.add(entries + [(slack + 1, 1)], lo - base, np.inf)
    if worst is not None:
        rows.add([(slack, 1), (worst, -1)], -np.inf, 0)
        rows.add([(slack + 1, 1), (worst, -1)], -np.inf, 0)


# One builder for the whole program: its variables' numbering is shared by every row.
def _program(pb: _Problem) -> dict[tuple[int, int], np.ndarray] | None:
    """For each (survivor, topic) group, how many of its partitions take each target of the
    other rack: every target takes as many as now, every cross pair's count (fixed plus both
    directions) and every target's count of each topic as even as can be; the worst pair's
    distance from the even share and the topics' distances first, then the pairs'. None if
    too large or nothing found."""
    side = pb.side
    other = [np.flatnonzero(side != side[i]) for i in range(side.size)]
    keys = sorted(pb.groups)
    n_y = sum(other[s].size for s, _ in keys)
    if n_y > MAX_VARIABLES:
        return None
    at: dict[tuple[int, int, int], int] = {}
    for s, k in keys:
        for r in other[s].tolist():
            at[s, k, r] = len(at)
    by_pair: dict[tuple[int, int], list] = {}
    by_topic: dict[tuple[int, int], list] = {}
    by_receiver: dict[int, list] = {}
    for (s, k, r), v in at.items():
        by_pair.setdefault((min(s, r), max(s, r)), []).append((v, 1))
        by_topic.setdefault((k, r), []).append((v, 1))
        by_receiver.setdefault(r, []).append((v, 1))
    a_pos, b_pos = np.flatnonzero(side == 0).tolist(), np.flatnonzero(side == 1).tolist()
    cross = [(min(a, b), max(a, b)) for a in a_pos for b in b_pos]
    n_slack = 2 * (len(cross) + len(by_topic))
    n = n_y + n_slack + 1
    worst = n - 1
    rows = SparseRows()
    for s, k in keys:
        rows.add([(at[s, k, r], 1) for r in other[s].tolist()], len(pb.groups[s, k]), len(pb.groups[s, k]))
    for r in range(side.size):
        rows.add(by_receiver.get(r, []), pb.receive[r], pb.receive[r])
    total = int(sum(pb.fixed[a, b] for a, b in cross)) + sum(len(v) for v in pb.groups.values())
    lo, hi = total // len(cross), -(-total // len(cross))
    slack = n_y
    for a, b in cross:
        _even(rows, by_pair.get((a, b), []), int(pb.fixed[a, b]), lo, hi, slack, worst)
        slack += 2
    moving = np.zeros((pb.tfixed.shape[0], 2), dtype=np.int64)  # per topic, replicas arriving in each rack
    for (s, k), ps in pb.groups.items():
        moving[k, 1 - side[s]] += len(ps)
    for (k, r), entries in sorted(by_topic.items()):
        mine = side == side[r]
        t_total = int(pb.tfixed[k, mine].sum() + moving[k, side[r]])
        _even(rows, entries, int(pb.tfixed[k, r]), t_total // int(mine.sum()), -(-t_total // int(mine.sum())),
              slack, worst)
        slack += 2
    cost = np.zeros(n)
    cost[n_y:worst] = 1
    cost[worst] = n_slack + 1  # one unit off the worst distance outweighs all the others
    found = solve(cost, rows, np.zeros(n), np.full(n, np.inf), NODE_LIMIT)
    if found is None:
        return None
    ys = found.x[:n_y]
    out = {g: np.zeros(side.size, dtype=np.int64) for g in keys}
    for (s, k, r), v in at.items():
        out[s, k][r] = ys[v]
    return out


def _choose(ws: Workspace, pb: _Problem, take: dict[tuple[int, int], np.ndarray], movable, pos) -> dict[int, int]:
    """Partition -> the broker id its re-placed replica takes, as many of each group to each
    target as `take` says; a partition keeps its current broker where that has room."""
    tidx = ws.target_idx
    out = {}
    for g, ps in sorted(pb.groups.items()):
        room = take[g].copy()
        rest = []
        for p in ps:
            cur = int(pos[ws.index[movable[p][1]]])
            if room[cur] > 0:
                room[cur] -= 1
                out[p] = movable[p][1]
            else:
                rest.append(p)
        free = [r for r in range(room.size) for _ in range(int(room[r]))]
        for p, r in zip(rest, free):
            out[p] = ws.ids[int(tidx[r])]
    return out


def _standing(ws: Workspace) -> tuple[tuple, LeaderFigures, int]:
    """The plan's rank (`RANKING`), its leadership figures and its degree."""
    figs = leader_figures(ws, ws.assign)
    return RANKING.key(ws, figs), figs, ws.degree_min()


def _better(new: tuple[tuple, LeaderFigures, int], old: tuple[tuple, LeaderFigures, int]) -> bool:
    """Strictly better rank, and no figure a plan reports worse: leader spread within its
    target or no wider, topic leader excess and degree no worse."""
    (rank, figs, degree), (rank0, figs0, degree0) = new, old
    return (rank < rank0 and figs.leader_spread <= max(1, figs0.leader_spread)
            and figs.topic_leader_excess <= figs0.topic_leader_excess and degree >= degree0)


def even_pairs(ws: Workspace, reason: str) -> bool:
    """After the leadership stage: re-choose where an RF-2 evacuation's re-placed replicas
    land so that failover can be even (see the module's docstring) and balance leadership
    again; the new placement is kept only if the plan ranks strictly better and no figure
    it reports gets worse (`_better`). Returns True when it was kept."""
    placement = _re_placement(ws)
    return placement is not None and _take_placement(ws, placement, reason, exact=True)


def lead_then_even_pairs(ws: Workspace, reason: str) -> None:
    """An evacuation's leadership stage, then `even_pairs`, the integer program saved where
    it would be wasted.

    `even_pairs` re-places by counts alone (the order plays no part), and where the order the
    flows then balance meets every target, the program `balance_leadership` runs where its
    flows stop short (`exact`) on the placement before changed nothing the plan keeps but
    where the flows start from (an 18-broker RF-2 az-loss of 3,000 partitions: 15 of 21 CPU
    s). So the flows go first alone, on the placement as it is and on the re-placed one; if
    the re-placed one is kept and meets every target, that is the plan. Otherwise the flows'
    order comes back and the stage runs as it would without this: the program, then
    `even_pairs` (the same re-placement: it depends on the placement alone).
    """
    if len(ws.selected) > LARGE or _movable(ws) is None:
        balance_leadership(ws)  # `even_pairs` has nothing to re-place
        return
    balance_leadership(ws, exact=False)
    placement = _re_placement(ws)
    if placement is None:  # every target met, or no re-placement found: `even_pairs` stops too
        balance_leadership(ws)
        return
    base = _saved(ws)
    if _take_placement(ws, placement, reason, exact=False) and leader_figures(ws, ws.assign).met():
        return
    _restore(ws, base)
    balance_leadership(ws)
    if not leader_figures(ws, ws.assign).met():
        _take_placement(ws, placement, reason, exact=True)


def _re_placement(ws: Workspace) -> tuple[dict[int, tuple[int, int]], dict[int, int]] | None:
    """`_movable` and the broker each movable partition's re-placed replica should take
    (the program's counts, `_choose`); None when this is not an RF-2 evacuation onto two
    racks, every leadership target is met already, or the program finds nothing."""
    movable = _movable(ws) if len(ws.selected) <= LARGE else None
    if movable is None or leader_figures(ws, ws.assign).met():
        return None  # not this case, or every target met: nothing worth a second leadership pass
    tidx = ws.target_idx
    pos = np.full(len(ws.ids), -1, dtype=np.int64)
    pos[tidx] = np.arange(tidx.size)
    pb = _problem(ws, movable, pos)
    take = _program(pb)
    if take is None:
        return None
    return movable, _choose(ws, pb, take, movable, pos)


def _take_placement(ws: Workspace, placement, reason: str, exact: bool) -> bool:
    """Move the re-placed replicas as `placement` (`_re_placement`) says and balance
    leadership (`exact`: with the program); keep it if `_better`, else put the plan back.
    Returns True when it was kept."""
    movable, chosen = placement
    standing = _standing(ws)
    base = _saved(ws)
    for p, b in chosen.items():
        reps = ws.assign[p]
        s = movable[p][0]
        other = reps[1 - reps.index(s)]
        if other != b:
            ws.replace_slot(p, reps.index(other), b, reason)
    drop_order_notes(ws)  # other replica sets now: what was proved of the old ones no longer holds
    balance_leadership(ws, exact)
    if _better(_standing(ws), standing):
        return True
    _restore(ws, base)
    return False


def _saved(ws: Workspace) -> tuple[list[list[int]], dict, list[str]]:
    """The replica lists, reasons and notes, for `_restore`."""
    return [list(r) for r in ws.assign], dict(ws.reasons), list(ws.notes)


def _restore(ws: Workspace, base: tuple[list[list[int]], dict, list[str]]) -> None:
    """Put the plan back as `_saved` found it."""
    for p in ws.selected:
        ws.restore(p, base[0][p])
    ws.reasons.clear()
    ws.reasons.update(base[1])
    ws.notes[:] = base[2]


def prove_failover(ws: Workspace, reason: str) -> None:
    """Where an RF-2 evacuation onto two racks still misses the failover target, on a small
    cluster: the placement program's least within the forced copies (and its NOTE)."""
    figs = leader_figures(ws, ws.assign)
    if (not figs.shortfall().failover_excess or len(ws.selected) > PROGRAM_MAX_PARTITIONS
            or _movable(ws) is None):
        return
    place_for_leadership(ws, ws.copies_made(), reason, figs)

