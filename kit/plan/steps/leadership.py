"""Leadership and first-follower order: free balance, no data moved.

Both are bounded assignment problems solved as max flows (`flow.py`): each
partition picks its leader among its replicas so that every broker leads an even
share overall and per topic; then, for each leader, its partitions pick their
first follower so that a dead leader's partitions spread evenly over the brokers
of the other racks. Bounds start tight (floor..ceil of an even split) and widen a
step at a time only when the replica sets leave no other way.

A new order is taken only when it ranks strictly better than the current one (`RANKING`:
the order changes only the leadership figures, `kit.plan.steps.leadership_figures`), so
planning again on a result changes nothing.
"""
from __future__ import annotations

import numpy as np

from kit import collector
from kit.array_ops import distinct
from kit.concurrency import second_core
from kit.plan.objectives import FAILOVER_EXCESS, LEADER_SPREAD, TOPIC_LEADER_EXCESS, Ranking
from kit.plan.solvers.exact_order import MAX_VARIABLES, best_order
from kit.plan.solvers.flow import EXACT_LIMIT, SPLIT_LIMIT, PartFlows, bounds_met, soft_assignment, water_fill
from kit.plan.steps.leadership_figures import (distinct_rows, followers_cannot_lower_failover, heirs_of, leader_figures,
                                              order_figures, replica_matrix)
from kit.plan.steps.order_notes import ORDER_NOTE, budget_note
from kit.plan.workspace import LARGE, Workspace

RANKING = Ranking(LEADER_SPREAD, TOPIC_LEADER_EXCESS, FAILOVER_EXCESS)


class _Frame:
    """Target positions, movable partitions and fixed load shared by the three stages.

    Orders are passed around as `replica_matrix`'s output (lens, mat), not as lists: a
    stage's result is a new matrix, so no list is converted twice."""

    def __init__(self, ws: Workspace, lens: np.ndarray, mat: np.ndarray):
        self.nt = nt = len(ws.target_idx)
        self.pos_of = np.full(len(ws.ids), -1, dtype=np.int64)
        self.pos_of[ws.target_idx] = np.arange(nt)
        pos = self.pos_matrix(mat)
        past_end = np.arange(pos.shape[1]) >= lens[:, None]
        on_targets = ((pos >= 0) | past_end).all(axis=1)
        selected = np.asarray(ws.selected, dtype=np.int64)
        self.item_rows = selected[on_targets[selected]]
        self.n_items = len(self.item_rows)
        is_item = np.zeros(len(lens), dtype=bool)
        is_item[self.item_rows] = True
        lead = pos[~is_item, 0]
        self.fixed_lead = np.bincount(lead[lead >= 0], minlength=nt)
        item_reps = pos[is_item][~past_end[is_item]]
        can_lead = np.bincount(item_reps, minlength=nt)
        # Even leadership, except that a broker cannot lead more partitions than it holds.
        total = self.n_items + int(self.fixed_lead.sum())
        self.lo, self.hi = water_fill(can_lead + self.fixed_lead, total)
        self.elig = np.zeros((nt, nt), dtype=bool)
        for k, x in enumerate(ws.target_idx):
            self.elig[k, self.pos_of[heirs_of(ws, x)]] = True
        self._first = (lens, mat)
        self._feasible = None
        self._sets = None
        self._set_of = None

    def pos_matrix(self, mat: np.ndarray) -> np.ndarray:
        """`replica_matrix`'s matrix in target positions: -1 for a broker off the targets and
        past the end."""
        return np.where(mat >= 0, self.pos_of[mat], -1)

    def positions(self, lens: np.ndarray, mat: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """The movable partitions' replicas as target positions, grouped by replication factor:
        [(item numbers, matrix items x RF)], so arcs can be built with array operations."""
        items = self.item_rows
        pos = self.pos_matrix(mat[items])
        lens = lens[items]
        out = []
        for k in distinct(lens):
            rows = np.flatnonzero(lens == k)
            out.append((rows, pos[rows, :k]))
        return out

    def replica_sets(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The movable partitions' replica sets in target positions, each once: (partitions
        per set, set of each arc, broker of each arc), for `bounds_met`. Which brokers a
        partition's leader may be on depends on its set only, not on the order (200,000
        partitions have some 15,000 sets on the benchmark's clusters)."""
        if self._sets is None:
            weight, it, br = [], [], []
            self._set_of = np.zeros(self.n_items, dtype=np.int64)  # see `set_of_item`
            for rows, pos in self.positions(*self._first):
                sets, counts, inverse = distinct_rows(np.sort(pos, axis=1), self.nt)
                offset = sum(map(len, weight))
                self._set_of[rows] = offset + inverse
                it.append(offset + np.repeat(np.arange(len(sets)), pos.shape[1]))
                weight.append(counts)
                br.append(sets.ravel())
            self._sets = tuple(np.concatenate(x).astype(np.int64) for x in (weight, it, br))
        return self._sets

    def set_of_item(self) -> np.ndarray:
        """The replica set (numbered as in `replica_sets`) of each movable partition."""
        self.replica_sets()
        return self._set_of

    def leaders_feasible(self) -> bool:
        """Whether the movable partitions can take leaders within `leader_bounds(0)`: one max
        flow, asked once per frame (reordering replicas leaves the answer as it is)."""
        if self._feasible is None:
            self._feasible = bounds_met(*self.replica_sets(), *self.leader_bounds(0))
        return self._feasible

    def leader_bounds(self, widen: int | None) -> tuple[np.ndarray, np.ndarray]:
        """Bounds on each broker's leaders among the movable partitions."""
        if widen is None:
            return np.zeros(self.nt, dtype=np.int64), np.full(self.nt, self.n_items)
        return (np.maximum(self.lo - widen - self.fixed_lead, 0),
                np.maximum(self.hi + widen - self.fixed_lead, 0))


# What a stage chose: (partitions, the replica to put first, the one to put second), broker
# indices; the other replicas keep their order behind them.
_Choice = tuple[np.ndarray, np.ndarray, np.ndarray]
_NONE: _Choice = (np.zeros(0, dtype=np.int64),) * 3


def _pair_bounds(avail: np.ndarray, elig: np.ndarray, total_lo, total_hi, fixed: np.ndarray):
    """Bounds per (leader, follower) group: water-filled shares of each leader's partitions over
    the brokers of the other racks, given how many candidates each pair has; other pairs free."""
    cap = np.where(elig, avail.reshape(elig.shape) + fixed.reshape(elig.shape), 0)
    lo, _ = water_fill(cap, np.asarray(total_lo))
    _, hi = water_fill(cap, np.asarray(total_hi))
    free = int(avail.sum()) + 1
    glo = np.where(elig, lo, 0).ravel()
    ghi = np.where(elig, hi, free).ravel()
    return np.maximum(glo - fixed, 0), np.maximum(ghi - fixed, 0)


def _choose_pairs(ws: Workspace, lens: np.ndarray, mat: np.ndarray, fr: _Frame) -> _Choice:
    """Leader and first follower together: even leaders overall and an even failover per leader."""
    # The pairs' leaders are bound to `leader_bounds(0)`, and any replica may lead: where
    # no choice of leaders alone meets those bounds, no choice of pairs does (one max flow
    # says so, instead of a min-cost flow or a widening sequence of max flows that all fail).
    if not fr.leaders_feasible():
        return _NONE
    nt = fr.nt
    it, gr, cost = [], [], []
    for rows, pos in fr.positions(lens, mat):
        k = pos.shape[1]
        if k == 1:
            it.append(rows)
            gr.append(pos[:, 0] * nt + pos[:, 0])
            cost.append(np.zeros(rows.size, dtype=np.int64))
            continue
        for a in range(k):
            for c in range(k):
                if a != c:
                    it.append(rows)
                    gr.append(pos[:, a] * nt + pos[:, c])
                    cost.append(np.full(rows.size, 0 if (a, c) == (0, 1) else (1 if a == 0 else 2)))
    it_a, gr_a, cost_a = np.concatenate(it), np.concatenate(gr), np.concatenate(cost)
    del it, gr, cost  # the pieces, not held through the flow (~100 MiB at 1,000,000 partitions)
    # Fixed partitions' inherited leadership counts against each pair's share.
    pos = fr.pos_matrix(mat)
    fixed = lens > 1
    fixed[fr.item_rows] = False
    follower = pos[:, 1] if pos.shape[1] > 1 else np.full(len(lens), -1)
    x, y = pos[fixed, 0], follower[fixed]
    both = (x >= 0) & (y >= 0)
    fixed_pair = np.bincount(x[both] * nt + y[both], minlength=nt * nt)
    parent = np.repeat(np.arange(nt), nt)
    avail = np.bincount(gr_a, minlength=nt * nt)
    plo, phi = fr.leader_bounds(0)
    base_lo, base_hi = _pair_bounds(avail, fr.elig, fr.lo, fr.hi, fixed_pair)
    # A partition's candidate pairs are those of its replica set, their costs set by its current
    # pair: partitions of one set and one current pair are interchangeable in the flow
    # (`soft_assignment`'s item_kind).
    first = pos[fr.item_rows, 0]
    second = np.where(lens[fr.item_rows] > 1, follower[fr.item_rows], first)
    kind = fr.set_of_item() * (nt * nt) + first * nt + second
    choice = soft_assignment(fr.n_items, it_a, gr_a, cost_a, base_lo, base_hi, avail, parent, plo, phi,
                             item_kind=kind)
    if choice is None:
        return _NONE
    return fr.item_rows, ws.target_idx[choice // nt], ws.target_idx[choice % nt]


def _choose_leaders(ws: Workspace, lens: np.ndarray, mat: np.ndarray, fr: _Frame) -> _Choice:
    """New leaders for even leadership overall and per topic, changing as few as possible."""
    nt = fr.nt
    if not fr.n_items:
        return _NONE
    topics, item_topic = np.unique(ws.topic[fr.item_rows], return_inverse=True)
    n_t = np.bincount(item_topic, minlength=len(topics))
    # Above EXACT_LIMIT arcs the flow prices nothing (`soft_assignment`): no costs are built
    # there (48 MB at 1,000,000 partitions, held through the flow's peak).
    priced = int(lens[fr.item_rows].sum()) <= EXACT_LIMIT
    it, gr, cost, tie = [], [], [], []
    for rows, pos in fr.positions(lens, mat):
        # How many of a partition's other replicas are heirs (`heirs_of`) of each candidate leader.
        n_heirs = fr.elig[pos[:, :, None], pos[:, None, :]].sum(axis=2) if priced else None
        for a in range(pos.shape[1]):
            it.append(rows)
            gr.append(item_topic[rows] * nt + pos[:, a])
            if priced:
                cost.append(np.full(rows.size, min(a, 2)))
                tie.append((a > 0) | (n_heirs[:, a] <= 1))
    it_a, gr_a = np.concatenate(it), np.concatenate(gr)
    cost_a, tie_a = (np.concatenate(cost), np.concatenate(tie).astype(np.int64)) if priced else (None, None)
    del it, gr, cost, tie, item_topic  # as in `_choose_pairs`
    parent = np.tile(np.arange(nt), len(topics))
    avail_t = np.bincount(gr_a, minlength=len(topics) * nt).reshape(len(topics), nt)
    t_lo, t_hi = water_fill(avail_t, n_t)

    # The overall bound does not depend on topics nor on the order: its probes group the
    # arcs by broker only (150 groups instead of one per topic and broker) and take each
    # replica set once, so each max flow is far smaller.
    own = np.arange(nt)
    s_weight, s_it, s_br = fr.replica_sets()
    s_hi = np.bincount(gr_a % nt, minlength=nt)

    def overall(lo, hi, cut=None):
        return bounds_met(s_weight, s_it, s_br, np.zeros(nt, dtype=np.int64), s_hi, own, lo, hi, cut=cut)

    # Leader balance overall is a hard bound (the tightest the replica sets allow); per
    # topic, deviations are penalised, so one min-cost flow settles both. Its optima tie by
    # the thousand; where it is solved by parts (`soft_assignment`'s split_limit) the one
    # taken has the fewest partitions that change leader or whose leader leaves
    # `_choose_followers` no choice of heir: many of those on one (leader, heir) pair are a
    # failover excess no follower choice undoes (az-loss, 200,000 partitions: 14 with the
    # fewest changes alone, 7 so). One unit per partition at most keeps the split's scaled
    # costs exact in a float (a sum of the two gave up there).
    found = _tightest_overall(overall, fr, fr.leaders_feasible())
    choice = soft_assignment(fr.n_items, it_a, gr_a, cost_a, t_lo.ravel(), t_hi.ravel(), avail_t.ravel(),
                             parent, *found, upward=True, split_limit=SPLIT_LIMIT, tie_cost=tie_a)
    if choice is None:
        return _NONE
    leader = ws.target_idx[choice % nt]
    old = mat[fr.item_rows, 0]
    new = leader != old
    return fr.item_rows[new], leader[new], old[new]


def _tightest_overall(solve, fr: _Frame, even_feasible: bool):
    """Flow bounds for the smallest leader count spread the replica sets allow.

    The water-filled shares (each broker at most what it can lead) are the ideal and
    usually feasible. Otherwise the least feasible maximum, then the largest minimum under
    it, are found by stepping along minimum cuts: a failed flow's cut names the brokers that
    lack room (or lack partitions) and how much they lack together, which rules out every
    bound up to the first one that could supply it, so the first bound that passes is the
    tightest. Fixed leaders count in every broker's total. `even_feasible`: whether the
    water-filled shares are (`_Frame.leaders_feasible`); `solve(lo, hi, cut)`: whether the
    movable partitions can take leaders within (lo, hi), filling `cut` when not (`bounds_met`).
    """
    items = fr.n_items
    if even_feasible:
        return fr.leader_bounds(0)
    cap = np.zeros(fr.nt, dtype=np.int64) + items  # flow-side ceiling per broker

    def bounds(m, big_m):
        return (np.maximum(np.minimum(m, fr.hi) - fr.fixed_lead, 0),
                np.minimum(np.maximum(big_m - fr.fixed_lead, 0), cap))

    def failed_cut(m, big_m):
        """None when (m, big_m) is feasible, else the cut certificate (or () without one)."""
        b_lo, b_hi = bounds(m, big_m)
        if not (b_lo.sum() <= items <= b_hi.sum() and (b_lo <= b_hi).all()):
            return ()
        cut: list = []
        return None if solve(b_lo, b_hi, cut) else (cut[0] if cut else ())

    top = int(fr.fixed_lead.max()) + items
    # No probe for (0, top): every broker may then take every movable partition it holds,
    # and each has a replica on the targets, so it always passes.
    # Upper side: cap(M) = what the short brokers may take under maximum M.
    best_max = int(fr.hi.max())
    while (c := failed_cut(0, best_max)) is not None:
        if not c or c[2]:
            best_max += 1
            continue
        short, ceiling = c[0], lambda big_m, side=c[1]: int(bounds(0, big_m)[1][side].sum())
        need = ceiling(best_max) + short
        best_max = _first(best_max + 1, top, lambda big_m: ceiling(big_m) >= need)
    # Lower side: the brokers off the source side cannot all get their minimum.
    best_min = int(fr.lo.min()) if fr.lo.size else 0
    while best_min > 0 and (c := failed_cut(best_min, best_max)) is not None:
        if not c or not c[2]:
            best_min -= 1
            continue
        short, floor = c[0], lambda m, side=~c[1]: int(bounds(m, best_max)[0][side].sum())
        allowed = floor(best_min) - short
        best_min = _last(0, best_min - 1, lambda m: floor(m) <= allowed)
    return bounds(best_min, best_max)


def _first(low: int, high: int, ok) -> int:
    """The least x in [low, high] with ok(x), ok monotone rising (high if none)."""
    while low < high:
        mid = (low + high) // 2
        if ok(mid):
            high = mid
        else:
            low = mid + 1
    return low


def _last(low: int, high: int, ok) -> int:
    """The greatest x in [low, high] with ok(x), ok monotone falling (low if none)."""
    while low < high:
        mid = (low + high + 1) // 2
        if ok(mid):
            low = mid
        else:
            high = mid - 1
    return low


def _choose_followers(ws: Workspace, lens: np.ndarray, mat: np.ndarray, fr: _Frame,
                      only: np.ndarray | None = None) -> _Choice:
    """New first followers so each leader's failover spreads evenly, changing as few as possible;
    `only`: a mask of the partitions that may change (default: every selected one)."""
    nt = fr.nt
    pos = fr.pos_matrix(mat)
    if pos.shape[1] < 2:
        return _NONE
    lead = pos[:, 0]
    led_by = (lens > 1) & (lead >= 0)
    led = np.bincount(lead[led_by], minlength=nt)
    # Candidates: the followers on the targets in another rack than the leader, in order.
    fol = pos[:, 1:]
    cand = led_by[:, None] & (fol >= 0) & fr.elig[lead[:, None], fol]
    movable = ws.is_selected & cand.any(axis=1) & (True if only is None else only)
    rows, cols = np.nonzero(cand & movable[:, None])  # row-major: by partition, then position
    items = np.flatnonzero(movable)
    if not items.size:
        return _NONE
    it_a = np.cumsum(movable)[rows] - 1
    gr_a = lead[rows] * nt + fol[rows, cols]
    cost_a = (cols > 0).astype(np.int64)
    keep = led_by & ~movable & cand[:, 0]
    fixed = np.bincount(lead[keep] * nt + fol[keep, 0], minlength=nt * nt)
    avail = np.bincount(gr_a, minlength=nt * nt)
    base_lo, base_hi = _pair_bounds(avail, fr.elig, led, led, fixed)
    # Each leader's partitions are a problem of their own: many small flows solve far
    # faster than one large one.
    # On large clusters this process solves the parts from the first up and the second process
    # from the last down, until they meet (`second_core.solve_from_both_ends`). The leaders are
    # dealt to the parts by size, largest first, alternately to either end: each process starts
    # on the largest flows, and they meet on the smallest, where the one that ends first waits
    # least for the other. A part's flow is the same whatever its number (its arcs in order,
    # its groups within the part), so the choice is the same.
    by_leader = gr_a // nt
    by_size = np.argsort(-np.bincount(by_leader, minlength=nt), kind="stable")
    leader_of_part = np.r_[by_size[0::2], by_size[1::2][::-1]]
    part_of_leader = np.empty(nt, dtype=np.int64)
    part_of_leader[leader_of_part] = np.arange(nt)
    part = part_of_leader[by_leader]
    gr_a = part * nt + gr_a % nt  # (part, follower) groups, in place of (leader, follower)
    del by_leader  # as the arcs: not held through the flows (1,000,000 partitions)
    order = np.argsort(part, kind="stable")

    def by_part(per_group):
        return per_group.reshape(nt, nt)[leader_of_part].ravel()

    flows = PartFlows(nt, len(items), order, np.searchsorted(part[order], np.arange(nt + 1)), it_a, gr_a, cost_a,
                      by_part(base_lo), by_part(base_hi), by_part(avail))
    del part
    choice = second_core.solve_from_both_ends(flows.solve, flows.starts)
    if choice is None:
        return _NONE
    follower = ws.target_idx[choice % nt]
    new = follower != mat[items, 1]
    rows = items[new]
    return rows, mat[rows, 0], follower[new]


def _pass_start(ws: Workspace, followers_of=None):
    """(lens, order, its figures, frame) for a pass over the current order; None where no pass
    could improve it (fewer than two targets, every figure met, no movable partition; for a
    pass over the followers of the partitions `followers_of` alone, where that provably cannot
    lower the failover excess: `followers_cannot_lower_failover`)."""
    if ws.target_idx.size < 2:
        return None
    lens, cur = replica_matrix(ws, ws.assign)
    before = order_figures(ws, lens, cur)
    if before.met() or followers_of is not None and followers_cannot_lower_failover(ws, lens, cur, followers_of):
        return None
    fr = _Frame(ws, lens, cur)
    return (lens, cur, before, fr) if fr.n_items else None


def _packed_if_large(ws: Workspace, rows=None) -> bool:
    """Whether the stage's flows are large (more than `LARGE` partitions: `rows`, default the
    selected ones); if so, what the leadership stages do not read waits packed
    (`Workspace.pack`) through them, their peaks being the plan's (1M az-loss with leadership
    kept: 2,025 MiB unpacked, 1,721 packed); a small flow (a remove's re-placed partitions)
    leaves the workspace as it is."""
    large = len(ws.selected if rows is None else rows) > LARGE
    if large:
        ws.pack()
    return large


def even_followers(ws: Workspace, rows) -> bool:
    """Reorder the followers of the partitions `rows` for even failover, their leaders kept and
    every other partition as it is (an evacuation with leadership kept: the partitions it
    changes anyway). Taken only when it ranks strictly better (`RANKING`); whether it was."""
    if not len(rows):
        return False
    _packed_if_large(ws, rows)
    start = _pass_start(ws, followers_of=rows)
    if start is None:
        return False
    lens, cur, before, fr = start
    only = np.zeros(len(lens), dtype=bool)
    only[np.asarray(rows, dtype=np.int64)] = True
    new = _reordered(lens, cur, _choose_followers(ws, lens, cur, fr, only))
    if not RANKING.key(ws, order_figures(ws, lens, new)) < RANKING.key(ws, before):
        return False
    _take(ws, lens, cur, new)
    return True


def _reordered(lens: np.ndarray, mat: np.ndarray, chosen: _Choice) -> np.ndarray:
    """Copy of `mat` with the chosen partitions' two replicas first (one if the partition has
    only one), the others behind them in their order.

    A new leader takes the old one as first follower; a new first follower keeps the leader;
    a chosen pair takes both places."""
    rows, first, second = chosen
    out = mat.copy()
    if not rows.size:
        return out
    width = mat.shape[1]
    sub = mat[rows]
    a = (sub == first[:, None]).argmax(axis=1)
    c = (sub == second[:, None]).argmax(axis=1)
    key = (lens[rows] * width + a) * width + c
    # One fancy-indexed copy per (replication factor, first place, second place).
    for kk in distinct(key).tolist():
        k, av, cv = kk // (width * width), kk // width % width, kk % width
        head = [av] if av == cv else [av, cv]
        idx = head + [i for i in range(k) if i not in head]
        sel = key == kk
        out[rows[sel], :k] = sub[sel][:, idx]
    return out


def balance_leadership(ws: Workspace, exact: bool = True) -> bool:
    """Reorder replicas for leader, per-topic and failover balance until a pass changes
    nothing (so planning again on the result changes nothing either).

    On large clusters (more than `LARGE` movable partitions) a pass takes seconds: there one is
    made, and planning again may still improve the order a little. Without `exact`, the flows
    alone (no integer program where they stop short). Returns True when the order changed.
    """
    changed = False
    large = _packed_if_large(ws)
    rounds = 1 if large else 12
    proved: list = []  # the order the integer program last gave with its proof (`_exact_pass`)
    for _ in range(rounds):
        # The integer program only where the flows stop; after it takes an order, the flows look
        # again, so the result is a fixed point of both and planning again on it changes nothing.
        if not (_leadership_pass(ws) or exact and _exact_pass(ws, proved)):
            break
        changed = True
    return changed


def _exact_pass(ws: Workspace, proved: list) -> bool:
    """Where the flows leave a target missed, settle all three figures at once by integer
    programming (small clusters only); taken only when strictly better. When the program
    proves that no order does better, the plan says so in a note.

    `proved` holds the order this program last took with its proof, in this
    `balance_leadership`: where the flows left it as it was, the program is not asked again.
    It proved that no order of these sets within its caps has lower shortfalls; asked again,
    its caps are these shortfalls (no wider), and its own order changes nothing (the least its
    second objective can be): the same order, not better, the same note (already there). On
    the runbooks' broker-replacement cluster, `kit plan leaders`: 0.26 of 1.16 CPU s."""
    if not ws.selected or ws.target_idx.size < 2 or len(ws.selected) > MAX_VARIABLES:
        return False
    before = leader_figures(ws, ws.assign)
    if before.met() or proved and proved[0] == ws.assign:
        return False
    found = best_order(ws, ws.assign, lambda x: heirs_of(ws, x), before.shortfall())
    if found is None:
        return False
    order, optimal = found
    figs = leader_figures(ws, order)
    better = RANKING.key(ws, figs) < RANKING.key(ws, before)
    final = figs if better else before
    # Only the last search's budget note holds: an earlier one spoke of an order since improved.
    ws.notes[:] = [n for n in ws.notes if not n.endswith(budget_note(""))]
    if not final.met():
        note = f"{final.missed()}{ORDER_NOTE}" if optimal else budget_note(final.missed())
        if note not in ws.notes:
            ws.notes.append(note)
    if not better:
        return False
    for p in ws.selected:
        if order[p] != ws.assign[p]:
            ws.reasons.setdefault(p, "leadership")
            ws.assign[p] = list(order[p])
    proved[:] = [[list(reps) for reps in ws.assign]] if optimal else []
    return True


# Two routes kept as closures over one best order so far.
def _leadership_pass(ws: Workspace) -> bool:
    """Reorder the selected partitions' replicas for leader, per-topic and failover balance.

    Nothing changes when every figure already meets its target. Otherwise two routes:
    leaders first (overall and per topic), then followers; or leader and first follower
    chosen together, then a per-topic pass, then followers. The best order found is kept,
    and only if it is strictly better than the current one. Returns True when the order
    changed.
    """
    start = _pass_start(ws) if ws.selected else None
    if start is None:
        return False
    lens, cur, before, fr = start
    best = (RANKING.key(ws, before), cur, before)

    def consider(order):
        nonlocal best
        figs = order_figures(ws, lens, order)
        key = RANKING.key(ws, figs)
        if key < best[0]:
            best = (key, order, figs)
        return figs

    # Both routes may ask a stage the same question: where `_choose_pairs` finds nothing (the
    # even leader shares are out of reach) the pair route goes on from the current order, as the
    # leader route did, so its leader and follower flows would be solved twice. Each stage is a
    # function of the order (the frame and workspace stay as they are through the pass), so an
    # answer is kept for the pass and given again. Not on large clusters: one route only there,
    # and no stage repeats within a route, so the kept matrices would only hold memory.
    asked: list = []

    def step(choose, order):
        for seen, before_step, after in asked:
            if seen is choose and np.array_equal(before_step, order):
                return after
        after = _reordered(lens, order, choose(ws, lens, order, fr))
        if fr.n_items <= LARGE:
            asked.append((choose, order, after))
        return after

    def leaders_first():
        trial = cur
        if before.shortfall().leader_spread or before.shortfall().topic_leader_excess:
            trial = step(_choose_leaders, cur)
            if not consider(trial).shortfall().failover_excess:
                return
        consider(step(_choose_followers, trial))

    def pairs_first():
        joint = step(_choose_pairs, cur)
        figs = consider(joint)
        if figs.shortfall().topic_leader_excess:
            joint = step(_choose_leaders, joint)
            figs = consider(joint)
        if figs.shortfall().failover_excess:
            consider(step(_choose_followers, joint))

    # Failover already fine: fixing leaders alone is cheapest. Otherwise leader and
    # first follower have to be chosen together; the other route is the fallback.
    routes = (pairs_first, leaders_first) if before.shortfall().failover_excess else (leaders_first, pairs_first)
    # On large clusters the second route costs seconds and rarely wins: one route only.
    if fr.n_items > LARGE:
        routes = routes[:1]
    for route in routes:
        route()
        if best[2].met():
            break
    if best[1] is cur:
        return False
    _take(ws, lens, cur, best[1])
    return True


def _take(ws: Workspace, lens: np.ndarray, old: np.ndarray, new: np.ndarray) -> None:
    """Write the partitions whose order differs between `old` and `new` (broker-index
    matrices) into `ws.assign` as broker ids, each with the reason "leadership"."""
    rows = np.flatnonzero((old != new).any(axis=1))
    ids = np.asarray(ws.ids, dtype=np.int64)
    width = new.shape[1]
    reasons, assign = ws.reasons, ws.assign  # each a property or attribute read once, not per partition
    with collector.paused():  # up to a list per partition, no cycles
        changed = rows.tolist()
        # The reasons the partitions first changed for, added in their order (as `setdefault` would).
        reasons.update({p: "leadership" for p in changed if p not in reasons})
        for p, reps, k in zip(changed, ids[new[rows]].tolist(), lens[rows].tolist()):
            assign[p] = reps if k == width else reps[:k]
