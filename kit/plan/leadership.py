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


class _Frame:
    """Target positions, movable partitions and fixed load shared by the three stages."""

    def __init__(self, ws: Workspace, assign: list[list[int]]):
        idx = ws.index
        self.nt = nt = len(ws.target_idx)
        self.pos_of = np.full(len(ws.ids), -1, dtype=np.int64)
        self.pos_of[ws.target_idx] = np.arange(nt)
        self.items = [p for p in ws.selected if all(self.pos_of[idx[b]] >= 0 for b in assign[p])]
        item_set = set(self.items)
        self.fixed_lead = np.zeros(nt, dtype=np.int64)
        for p, reps in enumerate(assign):
            j = self.pos_of[idx[reps[0]]]
            if p not in item_set and j >= 0:
                self.fixed_lead[j] += 1
        self.lo, self.hi = _even(len(self.items) + int(self.fixed_lead.sum()), nt)

    def tpos(self, ws: Workspace, b: int) -> int:
        return int(self.pos_of[ws.index[b]])


def _choose_pairs(ws: Workspace, assign: list[list[int]], fr: _Frame) -> dict[int, tuple[int, int]]:
    """Leader and first follower together: even leaders overall and an even failover per leader."""
    nt = fr.nt
    tg = ws.targets
    cross = np.ones((nt, nt), dtype=bool)
    np.fill_diagonal(cross, False)
    if ws.n_racks:
        r = ws.rack[ws.target_idx]
        same = (r[:, None] == r[None, :]) & (r[:, None] >= 0)
        has_cross = (~same & cross).any(axis=1)
        cross &= ~(same & has_cross[:, None])
    n_elig = cross.sum(axis=1)
    it, gr, cost = [], [], []
    for i, p in enumerate(fr.items):
        reps = assign[p]
        pos = [fr.tpos(ws, b) for b in reps]
        if len(reps) == 1:
            it.append(i)
            gr.append(pos[0] * nt + pos[0])
            cost.append(0)
            continue
        for a, x in enumerate(pos):
            for c, y in enumerate(pos):
                if x != y:
                    it.append(i)
                    gr.append(x * nt + y)
                    cost.append(0 if (a, c) == (0, 1) else (1 if a == 0 else 2))
    it_a, gr_a, cost_a = np.array(it), np.array(gr), np.array(cost)
    # Fixed partitions' inherited leadership counts against each pair's share.
    fixed_pair = np.zeros(nt * nt, dtype=np.int64)
    item_set = set(fr.items)
    for p, reps in enumerate(assign):
        if p in item_set or len(reps) < 2:
            continue
        x, y = fr.tpos(ws, reps[0]), fr.tpos(ws, reps[1])
        if x >= 0 and y >= 0:
            fixed_pair[x * nt + y] += 1
    share_lo = (fr.lo // np.maximum(n_elig, 1))[:, None] * cross
    share_hi = (-(-fr.hi // np.maximum(n_elig, 1)))[:, None] * cross
    big = len(fr.items) + 1
    parent = np.repeat(np.arange(nt), nt)
    plo = np.maximum(fr.lo - fr.fixed_lead, 0)
    phi = np.maximum(fr.hi - fr.fixed_lead, 0)
    avail = np.bincount(gr_a, minlength=nt * nt)
    for w in (0, 1, 2, 3, 5, 8):
        glo = np.minimum(np.where(cross, np.maximum(share_lo - w, 0), 0).ravel(), avail)
        ghi = np.where(cross, share_hi + w, big).ravel()
        glo = np.maximum(glo - fixed_pair, 0)
        ghi = np.maximum(ghi - fixed_pair, 0)
        choice = bounded_assignment(len(fr.items), it_a, gr_a, glo, ghi, parent, plo, phi, arc_cost=cost_a)
        if choice is not None:
            return {p: (tg[int(choice[i]) // nt], tg[int(choice[i]) % nt]) for i, p in enumerate(fr.items)}
    return {}


def _choose_leaders(ws: Workspace, assign: list[list[int]], fr: _Frame, steer_rounds: int = 0) -> dict[int, int]:
    """New leaders for even leadership overall and per topic, changing as few as possible.

    With `steer_rounds`, the choice is made again with a reward for leading partitions
    that hold brokers the leader rarely leads for (each broker's failover needs a fair
    number of partitions with every broker of the other racks as a possible follower).
    """
    nt = fr.nt
    items = fr.items
    if not items:
        return {}
    topics = sorted({int(ws.topic[p]) for p in items})
    t_pos = {t: k for k, t in enumerate(topics)}
    n_t = np.zeros(len(topics), dtype=np.int64)
    width = max(len(assign[p]) for p in items)
    it, gr, cost, lead, others = [], [], [], [], []
    for i, p in enumerate(items):
        k = t_pos[int(ws.topic[p])]
        n_t[k] += 1
        pos = [fr.tpos(ws, b) for b in assign[p]]
        for a, x in enumerate(pos):
            it.append(i)
            gr.append(k * nt + x)
            cost.append(min(a, 2))
            lead.append(x)
            row = [y for y in pos if y != x]
            others.append(row + [-1] * (width - 1 - len(row)))
    it_a, gr_a, base_cost = np.array(it), np.array(gr), np.array(cost, dtype=np.int64)
    lead_a = np.array(lead, dtype=np.int64)
    others_a = np.array(others, dtype=np.int64).reshape(len(lead), max(width - 1, 0))
    parent = np.tile(np.arange(nt), len(topics))
    t_lo, t_hi = _even(n_t, nt)

    def solve(t_w, g_w, arc_cost):
        if t_w is None:
            glo, ghi = np.zeros_like(n_t), n_t
        else:
            glo, ghi = np.maximum(t_lo - t_w // 2, 0), t_hi + (t_w + 1) // 2
        plo = np.maximum(fr.lo - g_w - fr.fixed_lead, 0)
        phi = np.maximum(fr.hi + g_w - fr.fixed_lead, 0)
        return bounded_assignment(len(items), it_a, gr_a, np.repeat(glo, nt), np.repeat(ghi, nt),
                                  parent, plo, phi, arc_cost=arc_cost)

    choice = None
    for t_w, g_w in [(0, 0), (1, 0), (2, 0), (None, 0), (None, 1)]:
        choice = solve(t_w, g_w, base_cost)
        if choice is not None:
            break
    if choice is None:
        return {}
    if steer_rounds and others_a.shape[1]:
        elig = np.zeros((nt, nt), dtype=bool)
        for k, x in enumerate(ws.target_idx):
            elig[k, fr.pos_of[_eligible(ws, x)]] = True
        n_elig = np.maximum(elig.sum(axis=1), 1)
        scarce = np.zeros((nt, nt), dtype=bool)
        valid = others_a >= 0
        for _ in range(steer_rounds):
            chosen = np.zeros(len(lead_a), dtype=bool)
            chosen_gr = choice[it_a]
            chosen = chosen_gr == gr_a
            cover = np.zeros((nt, nt), dtype=np.int64)
            xs = np.repeat(lead_a[chosen], others_a.shape[1])
            ys = others_a[chosen].ravel()
            ok = ys >= 0
            np.add.at(cover, (xs[ok], ys[ok]), 1)
            led = np.bincount(lead_a[chosen], minlength=nt)
            scarce |= elig & (cover < 1.5 * (led / n_elig)[:, None])
            reward = (scarce[lead_a[:, None], np.where(valid, others_a, 0)] & valid).sum(axis=1)
            again = solve(t_w, g_w, base_cost - 3 * reward)
            if again is None:
                break
            choice = again
    out = {}
    for i, p in enumerate(items):
        leader = ws.targets[int(choice[i] % nt)]
        if leader != assign[p][0]:
            out[p] = leader
    return out


def _choose_followers(ws: Workspace, assign: list[list[int]]) -> dict[int, int]:
    """New first followers so each leader's failover spreads evenly, changing as few as possible."""
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
    items, it, gr, cost = [], [], [], []
    for p, reps in enumerate(assign):
        if len(reps) < 2:
            continue
        x = idx[reps[0]]
        led[x] += 1
        if x not in elig:
            continue
        ep = elig_pos[x]
        cands = [(a, ep[idx[b]]) for a, b in enumerate(reps) if a > 0 and ep[idx[b]] >= 0]
        if ws.is_selected[p] and cands:
            i = len(items)
            items.append(p)
            for a, c in cands:
                it.append(i)
                gr.append(group0[x] + c)
                cost.append(0 if a == 1 else 1)
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
    it_a, gr_a, cost_a = np.array(it, dtype=np.int64), np.array(gr, dtype=np.int64), np.array(cost)
    # A pair cannot get more than its candidates: asking for more would sink the whole flow.
    avail = np.bincount(gr_a, minlength=off)
    for w_lo, w_hi in [(0, 0), (0, 1), (1, 1), (1, 2), (2, 2), (3, 3), (5, 5)]:
        glo = np.minimum(np.maximum(base_lo - w_lo - fixed, 0), avail)
        ghi = np.maximum(base_hi + w_hi - fixed, 0)
        choice = bounded_assignment(len(items), it_a, gr_a, glo, ghi, arc_cost=cost_a)
        if choice is not None:
            gx = np.repeat(np.array(sorted(elig), dtype=np.int64), [elig[x].size for x in sorted(elig)])
            out = {}
            for i, p in enumerate(items):
                g = int(choice[i])
                x = int(gx[g])
                f = ws.ids[int(elig[x][g - group0[x]])]
                if f != assign[p][1]:
                    out[p] = f
            return out
    return {}


def _badness(figs: tuple[int, int, int]) -> tuple[int, int, int]:
    """How far each figure is above what kit promises (leader 1, topic excess 1, failover 2)."""
    return (max(0, figs[0] - 1), max(0, figs[1] - 1), max(0, figs[2] - 2))


def _move_to(reps: list[int], b: int, pos: int) -> None:
    reps.remove(b)
    reps.insert(pos, b)


def _with_leaders(assign, chosen: dict[int, int]) -> list[list[int]]:
    """Copy of `assign` with new leaders; the old leader becomes the first follower."""
    out = [list(r) for r in assign]
    for p, b in chosen.items():
        reps = out[p]
        old = reps[0]
        reps.remove(b)
        reps.insert(0, b)
        if len(reps) > 2:
            reps.remove(old)
            reps.insert(1, old)
    return out


def _with_followers(assign, chosen: dict[int, int]) -> list[list[int]]:
    out = [list(r) for r in assign]
    for p, b in chosen.items():
        reps = out[p]
        reps.remove(b)
        reps.insert(1, b)
    return out


def _with_pairs(assign, chosen: dict[int, tuple[int, int]]) -> list[list[int]]:
    out = [list(r) for r in assign]
    for p, (x, y) in chosen.items():
        reps = out[p]
        if reps[0] == x and (len(reps) == 1 or reps[1] == y):
            continue
        rest = [b for b in reps if b not in (x, y)]
        out[p] = [x] + ([y] if y != x else []) + rest
    return out


def balance_leadership(ws: Workspace) -> bool:
    """Reorder the selected partitions' replicas for leader, per-topic and failover balance.

    Tries the cheapest fix first (followers only, then leaders only), then leader and
    first follower chosen together followed by a per-topic pass; keeps the best order
    found, and only if it is strictly better than the current one. Returns True when the
    order changed.
    """
    if not ws.selected or ws.target_idx.size < 2:
        return False
    fr = _Frame(ws, ws.assign)
    if not fr.items:
        return False
    before = leader_figures(ws, ws.assign)
    best = (_badness(before) + before, ws.assign)

    def consider(assign):
        nonlocal best
        figs = leader_figures(ws, assign)
        key = _badness(figs) + figs
        if key < best[0]:
            best = (key, assign)
        return figs

    cur = ws.assign

    def leaders_first():
        trial = cur
        if before[0] > 1 or before[1] > 1:
            trial = _with_leaders(cur, _choose_leaders(ws, cur, fr))
            if consider(trial)[2] <= 2:
                return
        consider(_with_followers(trial, _choose_followers(ws, trial)))

    def pairs_first():
        joint = _with_pairs(cur, _choose_pairs(ws, cur, fr))
        figs = consider(joint)
        if figs[1] > 1:
            joint = _with_leaders(joint, _choose_leaders(ws, joint, fr))
            figs = consider(joint)
        if figs[2] > 2:
            consider(_with_followers(joint, _choose_followers(ws, joint)))

    # Failover already fine: fixing leaders alone is cheapest. Otherwise leader and
    # first follower have to be chosen together; the other route is the fallback.
    routes = (leaders_first, pairs_first) if before[2] <= 2 else (pairs_first, leaders_first)
    for route in routes:
        route()
        if best[0][:3] == (0, 0, 0):
            break
    if best[1] is ws.assign:
        return False
    for p in ws.selected:
        if best[1][p] != ws.assign[p]:
            ws.reasons.setdefault(p, "leadership")
            ws.assign[p] = best[1][p]
    return True
