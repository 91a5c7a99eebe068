"""Count balance: move replicas from the most- to the least-loaded target brokers.

Every move from a broker above the balanced band to one below it reduces both the excess
and the deficit, so the number of moves equals the lower bound max(excess, deficit)
whenever the rack rule lets the moves through. On small clusters, where it may not, the
exact refinement (`exact_refinement`) checks the result by min-cost flow.
"""
from __future__ import annotations

from bisect import bisect_left, insort
from itertools import repeat

import numpy as np

from kit.plan.racks import spans
from kit.plan.workspace import LARGE, Workspace

# Candidates looked at per move (in all, per topic, recently moved): wide enough on small
# clusters for every pair of brokers to keep common partitions, narrow on large ones,
# where the choice is rich anyway and a move must cost microseconds.
_SCAN_SMALL = (24, 8, 16)
_SCAN_LARGE = (12, 4, 8)


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
    return moves


class _CountBalance:
    """One count balance's state: which replicas may move (`pool`, and `movable` counted by
    broker and topic), what the search has learnt (pairs with no move, racks a broker's
    replicas cannot reach, partitions recently moved), and the balanced band [lo, hi].

    A move must cost microseconds (a large rebalance makes a hundred thousand), so the
    counters a pick reads are kept here as plain lists (element access on them is several
    times faster than on numpy), updated by `move` alongside the workspace's arrays, and the
    targets stay sorted by count instead of being sorted again for every move.
    """

    def __init__(self, ws: Workspace, reason: str, pool, quotas, spread_touched: bool):
        self.ws = ws
        self.reason = reason
        self.own_pool = pool is not None
        self.pool = ws.on_topic if pool is None else pool
        self.quotas = quotas
        self.spread_touched = spread_touched
        self.failed: dict[int, set[int]] = {}  # source -> destinations with no allowed move
        self.reach: dict[int, dict[int, bool]] = {}  # source -> rack -> some replica may move there
        self.recent: dict[int, list[int]] = {}
        self.fresh = False  # searching thoroughly, caches cleared
        self.scan = _SCAN_LARGE if len(ws.selected) > LARGE else _SCAN_SMALL
        self.rack = ws.rack.tolist()
        self.count = ws.count.tolist()
        tidx = ws.target_idx.tolist()
        # Targets as (count, index) and (-count, index), ascending: the emptiest and the
        # fullest first, ties by index.
        self.asc = sorted((self.count[x], x) for x in tidx)
        self.desc = sorted((-self.count[x], x) for x in tidx)
        # Broker-major: a pick reads the rows of two brokers. The numpy rows feed the one
        # vectorised part of a pick (ordering the topics), the lists everything else.
        tcount_t = np.ascontiguousarray(ws.tcount.T)
        n_topics = self.n_topics = tcount_t.shape[1]
        # A topic's key for a pick from a to b, -d * n_topics - topic, is one subtraction of
        # rows kept for it: count * n_topics for b, count * n_topics + topic for a.
        self.scaled = tcount_t * n_topics
        self.scaled_t = self.scaled + np.arange(n_topics)
        self.sc_rows, self.sct_rows = list(self.scaled), list(self.scaled_t)
        self.tc = tcount_t.tolist()
        self.shared = ws.shared.tolist()
        movable = np.zeros(tcount_t.shape, dtype=np.int64)
        for x, by_topic in enumerate(self.pool):
            for t, bucket in by_topic.items():
                movable[x, t] = len(bucket)
        self.movable = movable.tolist()
        self.nz = movable != 0  # topics with a movable replica, by broker
        self.nz_rows = list(self.nz)
        if quotas is not None:
            self.q_leave, self.q_arrive = (np.ascontiguousarray(q.T).tolist() for q in quotas)
            # Topics with a movable replica and a quota to leave, and topics with a quota to arrive.
            self.leave = self.nz & (quotas[0].T > 0)
            self.arrive = np.ascontiguousarray(quotas[1].T > 0)
            self.leave_rows, self.arrive_rows = list(self.leave), list(self.arrive)
            # How many topics each broker may send or receive under the quotas: a pick between
            # two brokers only looks for planned topics where both have some.
            self.n_leave = self.leave.sum(axis=1).tolist()
            self.n_arrive = self.arrive.sum(axis=1).tolist()
        self.movable_topics: dict[int, np.ndarray] = {}  # broker index -> nonzero(nz row), while it holds
        total = int(ws.count[ws.target_idx].sum())
        self.lo, self.hi = total // ws.target_idx.size, -(-total // ws.target_idx.size)
        self.floor = ws.degree_floor
        self.surplus = self.deficit = False  # some target above hi / below lo (set before each step)

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
        p = self.pick_partition(a, b)
        if p is None:
            self.failed.setdefault(a, set()).add(b)
        return p

    def topic_order(self, a: int, b: int) -> list[int]:
        """The topics a pick from broker index a to b looks at, in the order it looks, as
        -d * n_topics + topic (d: how many more of the topic a holds than b), ascending.

        The topics with a planned move (`quotas`: a quota to leave a and one to reach b) if
        any, else every topic with a movable replica on a; unless the search is exhaustive,
        only the 32 with the largest d (the highest topic numbers among equals).
        """
        cand_t = None
        if self.quotas is not None and self.n_leave[a] and self.n_arrive[b]:
            planned = (self.leave_rows[a] & self.arrive_rows[b]).nonzero()[0]
            if planned.size:
                cand_t = planned
        if cand_t is None:
            cand_t = self.movable_topics.get(a)
            if cand_t is None:
                cand_t = self.movable_topics[a] = self.nz_rows[a].nonzero()[0]
        # -d * n_topics - topic, by topic (the key names its topic: a gather keeps it).
        key = self.sc_rows[b] - self.sct_rows[a]
        if cand_t.size != key.size:
            key = key[cand_t]
        if cand_t.size > 32 and not self.fresh:
            # The 32 least (-d, -topic): one key per topic, unique, so the kept set does not
            # depend on how numpy's partition (SIMD code on some CPUs) orders equal values.
            # Among equal d the higher topic numbers are kept: on the 200k benchmark clusters
            # the lower ones left a rebalance's failover excess one higher than the old
            # arbitrary choice; this rule keeps it (and moves 0.14% more bytes, within bound).
            key = np.partition(key, 31)[:32]
        # To -d * n_topics + topic (topic = -key mod n_topics): the order in which a pick
        # looks, one int each (a sort of ints, not of pairs).
        n_topics = self.n_topics
        return sorted([k + 2 * (-k % n_topics) for k in key.tolist()])

    # One candidate scan kept whole (90 lines): the count balance's hot loop, its test inlined in `scan`.
    def pick_partition(self, a: int, b: int) -> int | None:
        """A movable partition on broker index `a` that may move to broker index `b`.

        Prefers the topic `a` holds most more of than `b` (per-topic balance comes with
        the count balance); among its partitions, the one whose other replicas `b` shares
        least with and `a` shares most with, so every pair of brokers keeps enough common
        partitions for leadership to fail over evenly (and no broker loses a peer).
        Partitions on `a` that an earlier move gave an underfull broker (`recent`) are
        looked at first: they are the only way for two underfull (often new) brokers to come
        to share partitions. The search looks at a few dozen candidates unless exhaustive
        (`fresh`). A move that would leave a target broker with fewer peers than the degree
        floor is never taken.
        """
        topics = self.pool[a]
        if not topics:
            return None
        ws = self.ws
        exhaustive, degree_floor = self.fresh, self.floor
        n_topics = self.n_topics
        order = self.topic_order(a, b)
        a_id, b_id = ws.ids[a], ws.ids[b]
        shared_a, shared_b = self.shared[a], self.shared[b]
        best = best_key = None

        index, assign, is_target = ws.index, ws.assign, ws.is_target_list
        # Within one rack a move never changes which racks a replica set spans (the rule's
        # `replaces`, asked once per pick instead of once per candidate).
        same_rack = self.rack[a] >= 0 and self.rack[a] == self.rack[b]
        rack_num_of, need = ws.rack_num_of, ws.need
        rb_num = rack_num_of[b_id]
        check_rack = not same_rack and rb_num is not None

        def scan(cands, limit: int) -> int:
            """Look at the (partition, d) in `cands` (the best so far kept in `best`) until
            `limit` are seen and some candidate fits; how many were seen. One call per topic,
            not per candidate: a call costs as much as the test."""
            nonlocal best, best_key
            p_best, k_best = best, best_key
            n = 0
            for p, d in cands:
                n += 1
                reps = assign[p]
                if b_id in reps or a_id not in reps:
                    pass
                # The rack rule (`Workspace.rack_ok`) inlined: asked for every candidate.
                elif check_rack and rb_num in (member_racks := [rack_num_of[m] for m in reps if m != a_id]) \
                        and not spans(member_racks, need(len(reps))):
                    pass
                else:
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
                    if not (loss and degree_floor and self.loses_peers(a, reps, loss)):
                        # A move of topic t from a to b evens t out when a holds at least two more of it.
                        key = (loss, 0 if d >= 2 else (1 if d == 1 else 2), pairs, -d)
                        if p_best is None or key < k_best:
                            p_best, k_best = p, key
                if n >= limit and p_best is not None:
                    break
            best, best_key = p_best, k_best
            return n

        scan_all, scan_topic, scan_recent = self.scan
        topic_of = ws.topic_list
        tc_a, tc_b = self.tc[a], self.tc[b]
        recent = []
        for p in self.recent.get(a, ())[-scan_recent:]:
            t = topic_of[p]
            d = tc_a[t] - tc_b[t]
            if d >= 1 and p in topics.get(t, ()):
                recent.append((p, d))
        if recent:
            scan(recent, len(recent))
        # Stay with topics that a holds clearly more of than b, once some candidate exists.
        least = min(-(order[0] // n_topics) - 2, 1)
        per_topic = len(ws.assign) if exhaustive else scan_topic
        seen = 0
        for key in order:
            neg_d, t = divmod(key, n_topics)
            d = -neg_d
            if best is not None and (d < least or seen >= scan_all):
                break
            # A few per topic spread the choice over topics; keep looking while nothing fits.
            seen += scan(zip(topics[t], repeat(d)), per_topic)
        return best

    def loses_peers(self, a: int, reps: list[int], loss: int) -> bool:
        """Whether moving broker index a's replica out of `reps` leaves a or one of the other
        members it shares nothing else with (`loss` of them) with fewer target peers than
        the degree floor."""
        ws = self.ws
        index, is_target, shared_a, tg = ws.index, ws.is_target_list, self.shared[a], ws.target_idx
        a_id = ws.ids[a]
        if int((ws.shared[a][tg] > 0).sum()) - loss < self.floor:
            return True
        lost = [index[m] for m in reps if m != a_id and shared_a[index[m]] == 1 and is_target[index[m]]]
        return any(int((ws.shared[j][tg] > 0).sum()) - 1 < self.floor for j in lost)

    def move(self, p: int, a: int, b: int) -> None:
        """Move partition p's replica from broker index a to b, and keep the state up."""
        ws, pool = self.ws, self.pool
        t = ws.topic_list[p]
        a_id, b_id = ws.ids[a], ws.ids[b]
        ws.replace_slot(p, ws.assign[p].index(a_id), b_id, self.reason)
        self._count_moved(a, b)
        n_topics = self.n_topics
        self.scaled[a, t] -= n_topics
        self.scaled_t[a, t] -= n_topics
        self.scaled[b, t] += n_topics
        self.scaled_t[b, t] += n_topics
        tc, movable = self.tc, self.movable
        tc[a][t] -= 1
        tc[b][t] += 1
        movable[a][t] -= 1
        movable[b][t] += 1
        if not movable[a][t]:
            self.nz[a, t] = False
            self.movable_topics.pop(a, None)
        if movable[b][t] == 1:
            self.nz[b, t] = True
            self.movable_topics.pop(b, None)
        if self.quotas is not None:
            self._use_quotas(t, a, b)
        if self.own_pool:
            bucket = pool[a][t]
            del bucket[p]
            if not bucket:
                del pool[a][t]
            pool[b].setdefault(t, {})[p] = None
        index, shared = ws.index, self.shared
        for m in ws.assign[p]:
            if m != b_id:
                j = index[m]
                shared[a][j] -= 1
                shared[j][a] -= 1
                shared[b][j] += 1
                shared[j][b] += 1
                self.recent.setdefault(j, []).append(p)
                # To the back of the other members' lists: the candidates a search looks
                # at first are then partitions no move has touched yet, so successive
                # moves out of different brokers do not keep landing on the same replica
                # sets (which carries whole sets to the new brokers together, and a dead
                # broker's leadership then has only its few partners to go to).
                bucket = pool[j].get(t) if self.spread_touched else None
                if bucket is not None and p in bucket:
                    del bucket[p]
                    bucket[p] = None
        # b gained a partition, so moves out of b may now exist; a only lost options.
        self.reach.pop(b, None)
        self.failed.pop(b, None)

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

    def _use_quotas(self, t: int, a: int, b: int) -> None:
        """A move of topic t from broker index a to b uses up one of each quota it follows."""
        leave, arrive = self.quotas
        q_leave, q_arrive, movable = self.q_leave, self.q_arrive, self.movable
        q_leave[a][t] = leave[t, a] = max(0, q_leave[a][t] - 1)
        q_arrive[b][t] = arrive[t, b] = max(0, q_arrive[b][t] - 1)
        for x, ok in ((a, movable[a][t] != 0 and q_leave[a][t] > 0), (b, movable[b][t] != 0 and q_leave[b][t] > 0)):
            if self.leave[x, t] != ok:
                self.leave[x, t] = ok
                self.n_leave[x] += 1 if ok else -1
        if self.arrive[b, t] and not q_arrive[b][t] > 0:
            self.arrive[b, t] = False
            self.n_arrive[b] -= 1

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

