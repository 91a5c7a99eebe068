"""Leadership and first-follower order: free balance, no data moved.

Both are bounded assignment problems solved as max flows (`flow.py`): each
partition picks its leader among its replicas so that every broker leads an even
share overall and per topic; then, for each leader, its partitions pick their
first follower so that a dead leader's partitions spread evenly over the brokers
of the other racks. Bounds start tight (floor..ceil of an even split) and widen a
step at a time only when the replica sets leave no other way.

A new order is taken only when it is strictly better than the current one, so
planning again on a result changes nothing.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from .flow import bounded_assignment
from .workspace import Workspace


def leader_figures(ws: Workspace, assign: list[list[int]]) -> tuple[int, int, int]:
    """(leader count spread, worst per-topic leader excess, failover excess) over the targets,
    as evaluate_plan.py defines them."""
    idx = ws.index
    tidx = ws.target_idx
    n = len(ws.ids)
    lead_idx = np.fromiter((idx[r[0]] for r in assign), dtype=np.int64, count=len(assign))
    leaders = np.bincount(lead_idx, minlength=n)
    lspread = int(leaders[tidx].max() - leaders[tidx].min())
    t_lead = np.zeros((len(ws.topic_names), n), dtype=np.int64)
    np.add.at(t_lead, (ws.topic, lead_idx), 1)
    sub = t_lead[:, tidx]
    n_t = t_lead.sum(axis=1)
    ideal = (n_t % len(tidx) != 0).astype(np.int64)
    tex = max(0, int(((sub.max(axis=1) - sub.min(axis=1)) - ideal).max(initial=0)))
    return lspread, tex, _failover_excess(ws, _inherit_matrix(ws, assign))


def _inherit_matrix(ws: Workspace, assign: list[list[int]]) -> np.ndarray:
    """inherit[x, y]: partitions led by x whose first follower is y."""
    idx = ws.index
    n = len(ws.ids)
    pairs = np.array([(idx[r[0]], idx[r[1]]) for r in assign if len(r) > 1], dtype=np.int64).reshape(-1, 2)
    return np.bincount(pairs[:, 0] * n + pairs[:, 1], minlength=n * n).reshape(n, n)


def _failover_excess(ws: Workspace, inherit: np.ndarray) -> int:
    worst = 0
    for x in ws.target_idx:
        led = int(inherit[x].sum())
        if not led:
            continue
        elig = _eligible(ws, x)
        vals = inherit[x, elig]
        ideal = 0 if led % len(elig) == 0 else 1
        worst = max(worst, int(vals.max() - vals.min()) - ideal)
    return worst


def _eligible(ws: Workspace, x: int) -> np.ndarray:
    """Target brokers (indices) that should share broker x's leadership when it dies."""
    tidx = ws.target_idx
    others = tidx[tidx != x]
    if ws.n_racks and ws.rack[x] >= 0:
        cross = others[ws.rack[others] != ws.rack[x]]
        if cross.size:
            return cross
    return others


def _even(total, parts):
    """floor and ceiling of an even split."""
    return total // parts, -(-total // parts)


def _choose_leaders(ws: Workspace, assign: list[list[int]]) -> dict[int, int]:
    """New leader for each movable selected partition (all replicas on targets)."""
    idx = ws.index
    tidx = ws.target_idx
    nt = len(tidx)
    pos_of = np.full(len(ws.ids), -1, dtype=np.int64)
    pos_of[tidx] = np.arange(nt)
    items = [p for p in ws.selected if all(pos_of[idx[b]] >= 0 for b in assign[p])]
    if not items:
        return {}
    item_set = set(items)
    fixed = np.zeros(nt, dtype=np.int64)
    for p, reps in enumerate(assign):
        if p not in item_set and pos_of[idx[reps[0]]] >= 0:
            fixed[pos_of[idx[reps[0]]]] += 1
    topics = sorted({int(ws.topic[p]) for p in items})
    t_pos = {t: k for k, t in enumerate(topics)}
    n_t = np.zeros(len(topics), dtype=np.int64)
    it, gr = [], []
    for i, p in enumerate(items):
        k = t_pos[int(ws.topic[p])]
        n_t[k] += 1
        for b in assign[p]:
            it.append(i)
            gr.append(k * nt + pos_of[idx[b]])
    it_a, gr_a = np.array(it, dtype=np.int64), np.array(gr, dtype=np.int64)
    parent = np.tile(np.arange(nt), len(topics))
    lo, hi = _even(len(items) + int(fixed.sum()), nt)
    t_lo, t_hi = _even(n_t, nt)
    choice = None
    # Widen per-topic bounds first (leader balance overall matters more), then overall.
    for t_w, g_w in [(0, 0), (1, 0), (2, 0), (None, 0), (None, 1), (None, None)]:
        if t_w is None:
            glo, ghi = np.zeros_like(n_t), n_t
        else:
            glo, ghi = np.maximum(t_lo - t_w // 2, 0), t_hi + (t_w + 1) // 2
        if g_w is None:
            plo, phi = np.zeros(nt, dtype=np.int64), np.full(nt, len(items))
        else:
            plo = np.maximum(lo - g_w - fixed, 0)
            phi = np.maximum(hi + g_w - fixed, 0)
        choice = bounded_assignment(len(items), it_a, gr_a, np.repeat(glo, nt), np.repeat(ghi, nt),
                                    parent, plo, phi)
        if choice is not None:
            break
    if choice is None:
        return {}
    new = {}
    for i, p in enumerate(items):
        leader = ws.targets[int(choice[i] % nt)]
        if leader != assign[p][0]:
            new[p] = leader
    _undo_swaps(ws, assign, new)
    return new


def _undo_swaps(ws: Workspace, assign: list[list[int]], new: dict[int, int]) -> None:
    """Keep leadership where two changes in one topic cancel out (a->b and b->a)."""
    pending: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    for p in sorted(new):
        old, lead = assign[p][0], new[p]
        t = int(ws.topic[p])
        back = pending.get((t, lead, old))
        if back:
            q = back.pop()
            del new[p]
            del new[q]
            continue
        pending[(t, old, lead)].append(p)


def _choose_followers(ws: Workspace, assign: list[list[int]]) -> dict[int, int]:
    """New first follower for selected partitions so each leader's failover spreads evenly."""
    idx = ws.index
    n = len(ws.ids)
    elig = {int(x): _eligible(ws, x) for x in ws.target_idx}
    elig_pos = {}
    for x, e in elig.items():
        m = np.full(n, -1, dtype=np.int64)
        m[e] = np.arange(e.size)
        elig_pos[x] = m
    group0 = {}
    off = 0
    for x in sorted(elig):
        group0[x] = off
        off += elig[x].size
    led = np.zeros(n, dtype=np.int64)
    fixed = np.zeros(off, dtype=np.int64)
    items, it, gr = [], [], []
    for p, reps in enumerate(assign):
        if len(reps) < 2:
            continue
        x = idx[reps[0]]
        led[x] += 1
        if x not in elig:
            continue
        ep = elig_pos[x]
        cands = [ep[idx[b]] for b in reps[1:] if ep[idx[b]] >= 0]
        if ws.is_selected[p] and cands:
            i = len(items)
            items.append(p)
            for c in cands:
                it.append(i)
                gr.append(group0[x] + c)
        elif ep[idx[reps[1]]] >= 0:
            fixed[group0[x] + ep[idx[reps[1]]]] += 1
    if not items:
        return {}
    base_lo = np.zeros(off, dtype=np.int64)
    base_hi = np.zeros(off, dtype=np.int64)
    for x in sorted(elig):
        lo, hi = _even(int(led[x]), elig[x].size)
        base_lo[group0[x]:group0[x] + elig[x].size] = lo
        base_hi[group0[x]:group0[x] + elig[x].size] = hi
    it_a, gr_a = np.array(it, dtype=np.int64), np.array(gr, dtype=np.int64)
    choice = None
    for w_lo, w_hi in [(0, 0), (0, 1), (1, 1), (1, 2), (2, 2), (None, None)]:
        if w_lo is None:
            glo, ghi = np.zeros(off, dtype=np.int64), np.full(off, len(items))
        else:
            glo = np.maximum(base_lo - w_lo - fixed, 0)
            ghi = np.maximum(base_hi + w_hi - fixed, 0)
        choice = bounded_assignment(len(items), it_a, gr_a, glo, ghi)
        if choice is not None:
            break
    if choice is None:
        return {}
    gx = np.repeat(np.array(sorted(elig), dtype=np.int64), [elig[x].size for x in sorted(elig)])
    out = {}
    for i, p in enumerate(items):
        g = int(choice[i])
        x = int(gx[g])
        f = ws.ids[int(elig[x][g - group0[x]])]
        if f != assign[p][1]:
            out[p] = f
    return out


def _badness(figs: tuple[int, int, int]) -> tuple[int, int, int]:
    """How far each figure is above what kit promises (leader 1, topic excess 1, failover 2)."""
    return (max(0, figs[0] - 1), max(0, figs[1] - 1), max(0, figs[2] - 2))


def _move_to(reps: list[int], b: int, pos: int) -> None:
    reps.remove(b)
    reps.insert(pos, b)


def balance_leadership(ws: Workspace) -> bool:
    """Reorder the selected partitions' replicas for leader, per-topic and failover balance.

    Returns True when the order changed.
    """
    if not ws.selected or ws.target_idx.size < 2:
        return False
    before = leader_figures(ws, ws.assign)
    if _badness(before) == (0, 0, 0):
        return False
    trial = [list(r) for r in ws.assign]
    if before[0] > 1 or before[1] > 1:
        for p, b in _choose_leaders(ws, trial).items():
            _move_to(trial[p], b, 0)
    if leader_figures(ws, trial)[2] > 2:
        for p, b in _choose_followers(ws, trial).items():
            _move_to(trial[p], b, 1)
    after = leader_figures(ws, trial)
    if _badness(after) + after >= _badness(before) + before:
        return False
    for p in ws.selected:
        if trial[p] != ws.assign[p]:
            ws.reasons.setdefault(p, "leadership")
            ws.assign[p] = trial[p]
    return True
