"""Count balance: move replicas from the most- to the least-loaded target brokers.

Every move from a broker above the balanced band to one below it reduces both the excess
and the deficit, so the number of moves equals the lower bound max(excess, deficit)
whenever the rack rule lets the moves through. On small clusters, where it may not, the
exact refinement (`exact_refinement`) checks the result by min-cost flow.
"""
from __future__ import annotations

import numpy as np

from kit.plan.racks import spans
from kit.plan.workspace import LARGE, Workspace

# Candidates looked at per move (in all, per topic, recently moved): wide enough on small
# clusters for every pair of brokers to keep common partitions, narrow on large ones,
# where the choice is rich anyway and a move must cost microseconds.
_SCAN_SMALL = (24, 8, 16)
_SCAN_LARGE = (12, 4, 8)


def _reaches_rack(ws: Workspace, a: int, rack: int, pool) -> bool:
    """Whether some movable replica on broker index `a` may move to a broker in `rack`.

    In the common layout (one replica per rack, RF = racks) none can: this answers that
    with one pass over the broker's partitions instead of one failed search per broker pair.
    The rack rule (`may_join` for a broker with a rack) is inlined: this pass reads every
    partition on the broker, and the calls were most of its time.
    """
    a_id, assign, rack_num_of, need = ws.ids[a], ws.assign, ws.rack_num_of, ws.need
    for bucket in pool[a].values():
        for p in bucket:
            reps = assign[p]
            member_racks = [rack_num_of[m] for m in reps if m != a_id]
            if rack not in member_racks:
                return True
            # Fewer other members than racks needed cannot span them (spans would say no).
            n_need = need(len(reps))
            if len(member_racks) >= n_need and spans(member_racks, n_need):
                return True
    return False


# One candidate scan kept whole (101 lines): the count balance's hot loop, its test inlined in `consider`.
def _pick_partition(ws: Workspace, a: int, b: int, pool, movable: np.ndarray, recent: list[int] = (),
                    exhaustive: bool = False, degree_floor: int = 0, quotas=None, tcount_t=None) -> int | None:
    """A movable partition on broker index `a` that may move to broker index `b`.

    Prefers the topic `a` holds most more of than `b` (per-topic balance comes with
    the count balance); among its partitions, the one whose other replicas `b` shares
    least with and `a` shares most with, so every pair of brokers keeps enough common
    partitions for leadership to fail over evenly (and no broker loses a peer).
    `recent` are partitions on `a` that an earlier move gave an underfull broker: they are
    the only way for two underfull (often new) brokers to come to share partitions.
    The search looks at a few dozen candidates unless `exhaustive`. A move that would
    leave a target broker with fewer peers than `degree_floor` is never taken.
    `movable[x, t]` counts the pool's partitions of topic t on broker x.
    `quotas` = (leave, arrive), per (broker index, topic) the moves a topic flow planned:
    when some topic has both a quota to leave `a` and one to reach `b`, only those are tried.
    `tcount_t` is `ws.tcount` broker-major (rows are read per pick; default: transposed here).
    """
    topics = pool[a]
    if not topics:
        return None
    if tcount_t is None:
        tcount_t = ws.tcount.T
    # Broker-major rows, masked whole: the same ascending topics as gathering columns, cheaper.
    cand_t = None
    if quotas is not None:
        planned = np.flatnonzero((movable[a] != 0) & (quotas[0][a] > 0) & (quotas[1][b] > 0))
        if planned.size:
            cand_t = planned
    if cand_t is None:
        cand_t = np.flatnonzero(movable[a])
    row_a, row_b = tcount_t[a], tcount_t[b]
    diff = (row_a - row_b)[cand_t]
    if cand_t.size > 32 and not exhaustive:
        # Only the topics with the largest differences can be chosen: sort just those.
        keep = np.argpartition(-diff, 31)[:32]
        cand_t, diff = cand_t[keep], diff[keep]
    order = np.lexsort((cand_t, -diff))
    a_id, b_id = ws.ids[a], ws.ids[b]
    # Plain lists: element access on them is several times faster than on numpy rows.
    shared_a, shared_b = ws.shared[a].tolist(), ws.shared[b].tolist()
    best = None
    seen = 0
    top = int(diff[order[0]])

    index, assign, is_target = ws.index, ws.assign, ws.is_target_list
    # Within one rack a move never changes which racks a replica set spans (the rule's
    # `replaces`, asked once per pick instead of once per candidate).
    same_rack = ws.rack[a] >= 0 and ws.rack[a] == ws.rack[b]
    rack_num_of, need = ws.rack_num_of, ws.need
    rb_num = rack_num_of[b_id]
    check_rack = not same_rack and rb_num is not None

    def consider(p, d):
        nonlocal best
        reps = assign[p]
        if b_id in reps or a_id not in reps:
            return
        # The rack rule (`Workspace.rack_ok`) inlined: asked for every candidate.
        if check_rack:
            member_racks = [rack_num_of[m] for m in reps if m != a_id]
            if rb_num in member_racks and not spans(member_racks, need(len(reps))):
                return
        pairs = 0
        loss = 0
        for m in reps:  # the other members (a list of them only where a move loses a peer)
            if m == a_id:
                continue
            j = index[m]
            sa = shared_a[j]
            pairs += shared_b[j] - sa
            if sa == 1 and is_target[j]:
                loss += 1
        if loss and degree_floor:
            members = [m for m in reps if m != a_id]
            tg = ws.target_idx
            if int((ws.shared[a][tg] > 0).sum()) - loss < degree_floor:
                return
            lost = [index[m] for m in members if shared_a[index[m]] == 1 and is_target[index[m]]]
            if any(int((ws.shared[j][tg] > 0).sum()) - 1 < degree_floor for j in lost):
                return
        # A move of topic t from a to b evens t out when a holds at least two more of it.
        key = (loss, 0 if d >= 2 else (1 if d == 1 else 2), pairs, -d)
        if best is None or key < best[0]:
            best = (key, p)

    scan = _SCAN_LARGE if len(ws.selected) > LARGE else _SCAN_SMALL
    topic_of = ws.topic_list
    for p in recent[-scan[2]:]:
        t = topic_of[p]
        d = int(row_a[t] - row_b[t])
        if d >= 1 and p in topics.get(t, ()):
            consider(p, d)
    for t, d in zip(cand_t[order].tolist(), diff[order].tolist()):
        # Stay with topics that a holds clearly more of than b, once some candidate exists.
        if best is not None and (d < min(top - 2, 1) or seen >= scan[0]):
            break
        in_topic = 0
        for p in topics[t]:
            consider(p, d)
            seen += 1
            in_topic += 1
            # A few per topic spread the choice over topics; keep looking while nothing fits.
            if in_topic >= scan[1] and best is not None and not exhaustive:
                break
    return None if best is None else best[1]


def balance_counts(ws: Workspace, reason: str = "balance", max_moves: int | None = None, pool=None,
                   quotas=None, spread_touched: bool = False) -> int:
    """Move replicas from the most- to the least-loaded target brokers until the spread is at
    most one or no allowed move narrows it. Returns the number of moves.

    `pool` (per broker index: topic -> partitions) limits which replicas may move; by
    default every selected one. With a pool of replicas this plan places anyway, moving
    one twice costs no copy, so two-step moves through a third broker are tried as well
    where the rack rule blocks the direct one. `quotas` (from `topic_quotas.topic_quotas`)
    steer which topics the moves carry; each move uses up its topic's quotas. With
    `spread_touched` a moved partition goes to the back of its other brokers' candidate
    lists, so the moves spread over many replica sets instead of several moves landing on
    one set.
    """
    tidx = ws.target_idx
    if tidx.size < 2:
        return 0
    run = _CountBalance(ws, reason, pool, quotas, spread_touched)
    moves = 0
    while max_moves is None or moves < max_moves:
        c = ws.count[tidx]
        c_max, c_min = int(c.max()), int(c.min())
        if c_max - c_min <= 1:
            break
        desc = tidx[np.lexsort((tidx, -c))].tolist()
        asc = tidx[np.lexsort((tidx, c))].tolist()
        # Some target above hi / below lo: what step asks, answered from the extremes.
        run.surplus, run.deficit = c_max > run.hi, c_min < run.lo
        done = run.step(desc, asc, True) or run.step(desc, asc, False)
        if not done and run.own_pool:
            done = run.two_step(desc, asc)
        if not done:
            if run.fresh:
                break
            # The caches and the short search may hide a move: look once more, thoroughly,
            # so that planning again on the result finds nothing either.
            run.failed.clear()
            run.reach.clear()
            run.fresh = True
            continue
        run.fresh = False
        moves += done
    return moves


class _CountBalance:
    """One count balance's state: which replicas may move (`pool`, and `movable` counted by
    broker and topic), what the search has learnt (pairs with no move, racks a broker's
    replicas cannot reach, partitions recently moved), and the balanced band [lo, hi]."""

    def __init__(self, ws: Workspace, reason: str, pool, quotas, spread_touched: bool):
        self.ws = ws
        self.reason = reason
        self.own_pool = pool is not None
        self.pool = ws.on_topic if pool is None else pool
        self.quotas = quotas
        # Broker-major copies of the quotas and of ws.tcount, kept up by `move`: each pick
        # reads the rows of two brokers, and a row is cheaper to read than a column.
        self.quotas_t = None if quotas is None else tuple(np.ascontiguousarray(q.T) for q in quotas)
        self.tcount_t = np.ascontiguousarray(ws.tcount.T)
        self.spread_touched = spread_touched
        self.failed: dict[int, set[int]] = {}  # source -> destinations with no allowed move
        self.reach: dict[int, dict[int, bool]] = {}  # source -> rack -> some replica may move there
        self.recent: dict[int, list[int]] = {}
        self.fresh = False  # searching thoroughly, caches cleared
        self.movable = np.zeros(ws.tcount.shape[::-1], dtype=np.int64)  # broker-major: rows are read per pick
        for x, by_topic in enumerate(self.pool):
            for t, bucket in by_topic.items():
                self.movable[x, t] = len(bucket)
        total = int(ws.count[ws.target_idx].sum())
        self.lo, self.hi = total // ws.target_idx.size, -(-total // ws.target_idx.size)
        self.floor = ws.degree_floor
        self.surplus = self.deficit = False  # some target above hi / below lo (set before each step)

    def pick(self, a: int, b: int) -> int | None:
        """A partition whose replica on broker index a may move to b, or None (remembered)."""
        ws = self.ws
        if b in self.failed.get(a, ()):
            return None
        rb = int(ws.rack[b])
        if rb >= 0 and rb != ws.rack[a]:
            by_rack = self.reach.setdefault(a, {})
            if rb not in by_rack:
                by_rack[rb] = _reaches_rack(ws, a, rb, self.pool)
            if not by_rack[rb]:
                self.failed.setdefault(a, set()).add(b)
                return None
        p = _pick_partition(ws, a, b, self.pool, self.movable, self.recent.get(a, ()), exhaustive=self.fresh,
                            degree_floor=self.floor, quotas=self.quotas_t, tcount_t=self.tcount_t)
        if p is None:
            self.failed.setdefault(a, set()).add(b)
        return p

    def move(self, p: int, a: int, b: int) -> None:
        """Move partition p's replica from broker index a to b, and keep the state up."""
        ws, pool, quotas, quotas_t = self.ws, self.pool, self.quotas, self.quotas_t
        t = int(ws.topic[p])
        pos = ws.assign[p].index(ws.ids[a])
        ws.replace_slot(p, pos, ws.ids[b], self.reason)
        if quotas is not None:
            quotas[0][t, a] = max(0, quotas[0][t, a] - 1)
            quotas[1][t, b] = max(0, quotas[1][t, b] - 1)
            quotas_t[0][a, t] = quotas[0][t, a]
            quotas_t[1][b, t] = quotas[1][t, b]
        self.movable[a, t] -= 1
        self.movable[b, t] += 1
        self.tcount_t[a, t] -= 1
        self.tcount_t[b, t] += 1
        if self.own_pool:
            bucket = pool[a][t]
            del bucket[p]
            if not bucket:
                del pool[a][t]
            pool[b].setdefault(t, {})[p] = None
        for m in ws.assign[p]:
            if m != ws.ids[b]:
                self.recent.setdefault(ws.index[m], []).append(p)
                # To the back of the other members' lists: the candidates a search looks
                # at first are then partitions no move has touched yet, so successive
                # moves out of different brokers do not keep landing on the same replica
                # sets (which carries whole sets to the new brokers together, and a dead
                # broker's leadership then has only its few partners to go to).
                bucket = pool[ws.index[m]].get(t) if self.spread_touched else None
                if bucket is not None and p in bucket:
                    del bucket[p]
                    bucket[p] = None
        # b gained a partition, so moves out of b may now exist; a only lost options.
        self.reach.pop(b, None)
        self.failed.pop(b, None)

    def step(self, desc: list[int], asc: list[int], strict: bool) -> int:
        """One move from the fullest brokers (`desc`) to the emptiest (`asc`); 1 if made, else 0."""
        ws, lo, hi = self.ws, self.lo, self.hi
        surplus, deficit = self.surplus, self.deficit
        count = ws.count.tolist()  # unchanged until the one move this makes
        for a in desc:
            ca = count[a]
            if ca - count[asc[0]] < 2:
                return 0
            for b in asc:
                cb = count[b]
                if ca - cb < 2:
                    break
                # Every copy should shrink the surplus and the deficit at once while both
                # remain (that is what makes the count minimal); failing that, at least one.
                if strict and ((surplus and ca <= hi) or (deficit and cb >= lo)):
                    continue
                if ca <= hi and cb >= lo:
                    continue
                p = self.pick(a, b)
                if p is not None:
                    self.move(p, a, b)
                    return 1
        return 0

    def two_step(self, desc: list[int], asc: list[int]) -> int:
        """Two moves through a third broker, where the rack rule blocks the direct one (only
        for replicas this plan places anyway: moving one twice costs no copy); 2 or 0."""
        ws = self.ws
        for a in desc[:4]:
            for b in asc[:4]:
                if int(ws.count[a]) - int(ws.count[b]) < 2:
                    continue
                for c in asc:
                    if c in (a, b):
                        continue
                    p2 = self.pick(c, b)
                    p1 = self.pick(a, c) if p2 is not None else None
                    if p1 is not None and p2 is not None:
                        self.move(p1, a, c)
                        self.move(p2, c, b)
                        return 2
        return 0


def count_range(ws: Workspace, counts: np.ndarray, lo_all: int, hi_all: int):
    """Per-target bounds [lo, hi]: global, or per rack where racks pin each rack's total
    (every selected replica set spans every rack); per-rack bounds keep the rack's own
    spread within that of `counts`."""
    racks = ws.rack[ws.target_idx]
    rack_ids = sorted({int(r) for r in racks})
    pinned = (ws.n_racks >= 2 and -1 not in rack_ids
              and all(len(ws.assign[p]) == ws.n_racks for p in ws.selected))
    lo = np.full(counts.size, lo_all, dtype=np.int64)
    hi = np.full(counts.size, hi_all, dtype=np.int64)
    if pinned:
        for r in rack_ids:
            m = racks == r
            lo[m], hi[m] = counts[m].min(), counts[m].max()
    return lo, hi, pinned

