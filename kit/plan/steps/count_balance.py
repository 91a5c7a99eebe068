"""Count balance: move replicas from the most- to the least-loaded target brokers.

Every move from a broker above the balanced band to one below it reduces both the excess
and the deficit, so the number of moves equals the lower bound max(excess, deficit)
whenever the rack rule lets the moves through. On small clusters, where it may not, the
exact refinement (`exact_refinement`) checks the result by min-cost flow.
"""
from __future__ import annotations

from bisect import bisect_left, insort
from itertools import chain

import numpy as np

from kit.plan.racks import spans
from kit.plan.steps import count_kernels
from kit.plan.workspace import LARGE, Workspace

# Candidates looked at per move (in all, per topic, recently moved): wide enough on small
# clusters for every pair of brokers to keep common partitions, narrow on large ones,
# where the choice is rich anyway and a move must cost microseconds.
_SCAN_SMALL = (24, 8, 16)
_SCAN_LARGE = (12, 4, 8)
# Moves ahead from which a balance runs its kernels compiled: importing numba and loading
# the cached kernels costs about as much as this many moves in plain Python.
_COMPILE_FROM = 2000


def _reaches_rack(ws: Workspace, a: int, rack: int, pool) -> bool:
    """Whether some movable replica on broker index `a` (not in `rack`) may move to a broker
    in `rack`.

    In the common layout (one replica per rack, RF = racks) none can: this answers that
    with one pass over the broker's partitions instead of one failed search per broker pair.
    The rack rule (`may_join` for a broker with a rack) is inlined: this pass reads every
    partition on the broker, and the calls were most of its time.
    """
    a_id, assign, rack_num_of, need = ws.ids[a], ws.assign, ws.rack_num_of, ws.need
    # The brokers in `rack`: a replica set with none of them (a is not one) may take one.
    in_rack = {m for m, r in rack_num_of.items() if r == rack}
    needs: dict[int, int] = {}
    for bucket in pool[a].values():
        for p in bucket:
            reps = assign[p]
            if in_rack.isdisjoint(reps):
                return True
            n = len(reps)
            n_need = needs.get(n)
            if n_need is None:
                n_need = needs[n] = need(n)
            # Fewer other members than racks needed cannot span them (spans would say no);
            # the list of them is made only where they may.
            if n > n_need or (n == n_need and a_id not in reps):
                member_racks = [rack_num_of[m] for m in reps if m != a_id]
                if len(member_racks) >= n_need and spans(member_racks, n_need):
                    return True
    return False


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
    if ws.target_idx.size < 2:
        return 0
    run = _CountBalance(ws, reason, pool, quotas, spread_touched)
    asc, desc = run.asc, run.desc
    moves = 0
    while max_moves is None or moves < max_moves:
        c_max, c_min = -desc[0][0], asc[0][0]
        if c_max - c_min <= 1:
            break
        # Some target above hi / below lo: what step asks, answered from the extremes.
        run.surplus, run.deficit = c_max > run.hi, c_min < run.lo
        done = run.step(True) or run.step(False)
        if not done and run.own_pool:
            done = run.two_step()
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
    run.finish()
    return moves


class _CountBalance:
    """One count balance's state: which replicas may move (`pool`), what the search has learnt
    (pairs with no move, racks a broker's replicas cannot reach), the balanced band [lo, hi],
    and the arrays the kernels (`count_kernels`) search and keep up.

    A move must cost microseconds (a large rebalance makes a hundred thousand): the search
    and a move's bookkeeping run compiled where many moves are ahead, and the targets stay
    sorted by count instead of being sorted again for every move.
    """

    def __init__(self, ws: Workspace, reason: str, pool, quotas, spread_touched: bool):
        self.ws = ws
        self.reason = reason
        self.own_pool = pool is not None
        self.pool = ws.on_topic if pool is None else pool
        self.spread_touched = spread_touched
        self.failed: dict[int, set[int]] = {}  # source -> destinations with no allowed move
        self.reach: dict[int, dict[int, bool]] = {}  # source -> rack -> some replica may move there
        self.fresh = False  # searching thoroughly, caches cleared
        self.scan = _SCAN_LARGE if len(ws.selected) > LARGE else _SCAN_SMALL
        self.rack = ws.rack.tolist()
        self.count = ws.count.tolist()
        tidx = ws.target_idx.tolist()
        # Targets as (count, index) and (-count, index), ascending: the emptiest and the
        # fullest first, ties by index.
        self.asc = sorted((self.count[x], x) for x in tidx)
        self.desc = sorted((-self.count[x], x) for x in tidx)
        total = int(ws.count[ws.target_idx].sum())
        self.lo, self.hi = total // ws.target_idx.size, -(-total // ws.target_idx.size)
        self.floor = ws.degree_floor
        self.surplus = self.deficit = False  # some target above hi / below lo (set before each step)
        self.lists, movable = self._lists()
        self.counts = self._counts(movable)
        self.quotas = self._quotas(quotas)
        width = self.lists[0].shape[1]
        self.peers = (ws.shared, ws.is_target, ws.target_idx, ws.rack,
                      np.array([ws.need(rf) for rf in range(width + 1)], dtype=np.int64))
        # Compiled only where enough moves are ahead to pay for numba's import (about half a
        # second); the same functions run as they are otherwise.
        ahead = max(sum(max(0, self.count[x] - self.hi) for x in tidx), sum(max(0, self.lo - self.count[x]) for x in tidx))
        if ahead >= _COMPILE_FROM:
            self.k_pick, self.k_move, self.k_orders = count_kernels.compiled()
        else:
            self.k_pick, self.k_move, self.k_orders = (count_kernels.pick_partition, count_kernels.move,
                                                       count_kernels.bucket_orders)

    def _lists(self):
        """The kernels' `lists` (see `count_kernels`): replica sets as broker indices, the pool
        as linked lists in its dicts' order; and the movable replicas by broker and topic."""
        ws = self.ws
        n, n_topics, n_parts = len(ws.ids), len(ws.topic_names), len(ws.assign)
        lens = np.fromiter(map(len, ws.assign), dtype=np.int64, count=n_parts)
        width = max(int(lens.max(initial=0)), 1)
        ids = np.array(ws.ids, dtype=np.int64)
        by_id = np.argsort(ids, kind="stable")
        flat_ids = np.fromiter(chain.from_iterable(ws.assign), dtype=np.int64, count=int(lens.sum()))
        row = np.repeat(np.arange(n_parts), lens)
        reps = np.full((n_parts, width), -1, dtype=np.int64)
        reps[row, np.arange(row.size) - (np.cumsum(lens) - lens)[row]] = by_id[np.searchsorted(ids[by_id], flat_ids)]
        owners, topics, sizes, parts = [], [], [], []
        for x, by_topic in enumerate(self.pool):
            for t, bucket in by_topic.items():
                if bucket:
                    owners.append(x)
                    topics.append(t)
                    sizes.append(len(bucket))
                    parts.extend(bucket)
        part = np.array(parts, dtype=np.int64)
        owner = np.repeat(np.array(owners, dtype=np.int64), sizes)
        node = part * width + np.argmax(reps[part] == owner[:, None], axis=1) if part.size else part
        nxt = np.full(n_parts * width, -1, dtype=np.int64)
        prv = np.full(n_parts * width, -1, dtype=np.int64)
        inlist = np.zeros(n_parts * width, dtype=bool)
        inlist[node] = True
        ends = np.cumsum(np.array(sizes, dtype=np.int64))
        starts = ends - sizes
        nxt[node[:-1]], prv[node[1:]] = node[1:], node[:-1]
        nxt[node[ends - 1]], prv[node[starts]] = -1, -1
        head = np.full((n, n_topics), -1, dtype=np.int64)
        tail = np.full((n, n_topics), -1, dtype=np.int64)
        movable = np.zeros((n, n_topics), dtype=np.int64)
        head[owners, topics], tail[owners, topics], movable[owners, topics] = node[starts], node[ends - 1], sizes
        recent = np.zeros((n, self.scan[2]), dtype=np.int64)
        lists = (reps, ws.topic, nxt, prv, head, tail, inlist, recent, np.zeros(n, dtype=np.int64),
                 np.zeros((n, n_topics), dtype=bool))
        return lists, movable

    def _counts(self, movable: np.ndarray):
        """The kernels' `counts`: broker-major, a topic's key for a pick from a to b,
        -d * n_topics - topic, is one subtraction of the rows kept for it."""
        tcount_t = np.ascontiguousarray(self.ws.tcount.T)
        n_topics = tcount_t.shape[1]
        scaled = tcount_t * n_topics
        return scaled, scaled + np.arange(n_topics), movable, movable != 0

    def _quotas(self, quotas):
        """The kernels' `quotas` (placeholders without any): the quota arrays themselves, used
        up as the moves follow them, and by broker the topics that may leave / arrive."""
        if quotas is None:
            no = np.zeros((1, 1), dtype=np.int64)
            return (False, no, no.copy(), no > 0, no > 0, np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64))
        q_leave, q_arrive = quotas
        # Topics with a movable replica and a quota to leave, and topics with a quota to arrive.
        leave = self.counts[3] & (q_leave.T > 0)
        arrive = np.ascontiguousarray(q_arrive.T > 0)
        return (True, q_leave, q_arrive, leave, arrive, leave.sum(axis=1), arrive.sum(axis=1))

    def pick(self, a: int, b: int) -> int | None:
        """A partition whose replica on broker index a may move to b, or None (remembered)."""
        if b in self.failed.get(a, ()):
            return None
        rb = self.rack[b]
        if rb >= 0 and rb != self.rack[a]:
            by_rack = self.reach.setdefault(a, {})
            if rb not in by_rack:
                by_rack[rb] = _reaches_rack(self.ws, a, rb, self.pool)
            if not by_rack[rb]:
                self.failed.setdefault(a, set()).add(b)
                return None
        p = -1
        if self.pool[a]:
            p = int(self.k_pick(a, b, self.fresh, self.scan, self.floor, self.lists, self.counts, self.quotas,
                                self.peers))
        if p < 0:
            self.failed.setdefault(a, set()).add(b)
            return None
        return p

    def move(self, p: int, a: int, b: int) -> None:
        """Move partition p's replica from broker index a to b, and keep the state up."""
        ws, pool = self.ws, self.pool
        ws.replace_slot(p, ws.assign[p].index(ws.ids[a]), ws.ids[b], self.reason)
        self._count_moved(a, b)
        self.k_move(p, a, b, self.spread_touched, self.lists, self.counts, self.quotas)
        if self.own_pool:  # (the workspace keeps its own pool, `on_topic`)
            t = ws.topic_list[p]
            bucket = pool[a][t]
            del bucket[p]
            if not bucket:
                del pool[a][t]
            pool[b].setdefault(t, {})[p] = None
        # b gained a partition, so moves out of b may now exist; a only lost options.
        self.reach.pop(b, None)
        self.failed.pop(b, None)

    def finish(self) -> None:
        """Reorder the pool's dicts as the moves reordered its lists (`spread_touched`)."""
        where, ends, parts = self.k_orders(self.lists)
        parts = parts.tolist()
        start = 0
        for (x, t), end in zip(where.tolist(), ends.tolist()):
            if t in self.pool[x]:
                self.pool[x][t] = dict.fromkeys(parts[start:end])
            start = end

    def _count_moved(self, a: int, b: int) -> None:
        """One replica fewer on broker index a, one more on b: the counts and the sorted targets."""
        count, asc, desc = self.count, self.asc, self.desc
        ca, cb = count[a], count[b]
        count[a], count[b] = ca - 1, cb + 1
        del asc[bisect_left(asc, (ca, a))]
        insort(asc, (ca - 1, a))
        del asc[bisect_left(asc, (cb, b))]
        insort(asc, (cb + 1, b))
        del desc[bisect_left(desc, (-ca, a))]
        insort(desc, (1 - ca, a))
        del desc[bisect_left(desc, (-cb, b))]
        insort(desc, (-cb - 1, b))

    def step(self, strict: bool) -> int:
        """One move from the fullest brokers to the emptiest; 1 if made, else 0."""
        lo, hi = self.lo, self.hi
        surplus, deficit = self.surplus, self.deficit
        asc = self.asc
        c_least = asc[0][0]
        for neg_ca, a in self.desc:
            ca = -neg_ca
            if ca - c_least < 2:
                return 0
            for cb, b in asc:
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
                    self.move(p, a, b)  # ends the loops over asc and desc, which it reorders
                    return 1
        return 0

    def two_step(self) -> int:
        """Two moves through a third broker, where the rack rule blocks the direct one (only
        for replicas this plan places anyway: moving one twice costs no copy); 2 or 0."""
        count = self.count
        asc = [x for _, x in self.asc]
        for _, a in self.desc[:4]:
            for b in asc[:4]:
                if count[a] - count[b] < 2:
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

