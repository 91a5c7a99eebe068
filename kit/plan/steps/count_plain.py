"""The count balance as plain Python written for CPython (`balance`), for the balances that run
uncompiled (`count_balance.CountBalance.run`: small clusters, numba not loaded).

`count_kernels.balance` is the reference: it defines the rule (which pair of brokers, which
partition, how a move updates the state) and is what numba compiles. This module makes the same
moves in the same order and leaves the kernels' arrays as that kernel leaves them
(tests/plan/test_count_plain.py runs both on random workspaces and compares the moves and every
array). Only the execution differs: the arrays are copied into Python lists once and written back
once, since the kernel's scalar loops read numpy scalars (a read costs four times a list's item,
and their arithmetic more): run uncompiled, the kernel took 170-275 us a move on the 3,000- and
5,000-partition bench clusters (its search batched by `count_pick`), this 60-100 us (the same
loaded 2-core machine, alternating runs). Copying costs a few milliseconds at 5,000 partitions,
so a balance of one or two moves costs more here than over the arrays (1 -> 4 ms).
"""
from __future__ import annotations

import bisect

import numpy as np

from kit.plan.steps import count_kernels
from kit.plan.steps.count_topics import SEARCHED_TOPICS, topic_ranks


def balance(max_moves, own_pool, spread, scan, band, lists, counts, quotas, peers, targets, state,
            rows=-1) -> tuple[list[tuple[int, int, int]], tuple]:
    """`count_kernels.balance` with the same arguments, a log of `rows` moves (-1: unlimited)
    instead of its array: the moves (partition, from, to), broker indices, and the lists they
    reordered as `count_kernels.bucket_orders` gives them; the arrays and `state` are updated
    as the kernel updates them."""
    count, asc, desc = targets[0], targets[1], targets[2]
    if (rows < 0 or rows >= 2) and (count[desc[0]] - count[asc[0]] <= 1 or 0 <= max_moves <= state[1]):
        state[2] = 1  # the kernel's loop ends before it reads anything else
        return [], count_kernels.bucket_orders(lists)
    run = _Run(own_pool, spread, scan, band, lists, counts, quotas, peers, targets, state)
    run.balance(max_moves, rows)
    run.write_back()
    return run.log, run.bucket_orders()


class _Run:
    """The kernels' arrays as Python lists (see `count_kernels` for what each holds) and the
    kernel's functions over them. Differences of representation: `rows[p]` is partition p's
    replica set without the -1 padding (slot s of p is still node p * width + s); `tc` holds
    the topic counts (`counts`' scaled rows divided by the number of topics); `nz` is read
    from `movable`."""

    def __init__(self, own_pool, spread, scan, band, lists, counts, quotas, peers, targets, state):
        self.arrays = lists, counts, quotas, peers, targets, state
        reps, topic, nxt, prv, head, tail, inlist, recent, n_recent, touched = lists
        self.own_pool, self.spread = bool(own_pool), bool(spread)
        self.scan = tuple(int(x) for x in scan)
        self.lo, self.hi, self.floor = (int(x) for x in band)
        self.width = reps.shape[1]
        self.n_parts = reps.shape[0]
        rows = reps.tolist()
        padded = bool(reps.size) and reps.min() < 0  # sets of several sizes
        self.rows = [[m for m in row if m >= 0] for row in rows] if padded else rows
        self.topic = topic.tolist()
        self.nxt, self.prv, self.inlist = nxt.tolist(), prv.tolist(), inlist.tolist()
        self.head, self.tail = head.tolist(), tail.tolist()
        self.recent, self.n_recent, self.touched = recent.tolist(), n_recent.tolist(), touched.tolist()
        self.ring_size = recent.shape[1]
        self.n_topics = counts[0].shape[1]
        self.tc = (counts[0] // max(self.n_topics, 1)).tolist()
        self.movable = counts[2].tolist()
        self.use = bool(quotas[0])
        self.q_leave, self.q_arrive, self.leave, self.arrive, self.n_leave, self.n_arrive = (
            q.tolist() for q in quotas[1:])
        shared, is_target, target_idx, rack, need = peers
        self.shared, self.is_target, self.target_idx = shared.tolist(), is_target.tolist(), target_idx.tolist()
        self.rack, self.need = rack.tolist(), need.tolist()
        count, asc, desc, failed, reach, by_group, sizes, at = targets[:8]
        self.count = count.tolist()
        n = len(self.count)
        self.asc, self.desc = _Order(asc.tolist(), 1, self.count, n), _Order(desc.tolist(), -1, self.count, n)
        self.failed, self.reach, self.kept = failed.tolist(), reach.tolist(), targets[8].tolist()
        self.no_failed, self.no_reach = [False] * failed.shape[1], [-1] * reach.shape[1]
        self.sizes, self.at = sizes.tolist(), at.tolist()
        # Each group's targets only (the row's -1 filler after them is never read).
        self.by_group = [_Order(row[:size], 1, self.count, n) for row, size in zip(by_group.tolist(), self.sizes)]
        self.thorough, self.moves, self.done = (int(x) for x in state)
        self.log: list[tuple[int, int, int]] = []

    def write_back(self) -> None:
        """The lists into the kernels' arrays, as the kernel would have left them (without a
        move, only its caches changed)."""
        lists, counts, quotas, peers, targets, state = self.arrays
        state[:] = self.thorough, self.moves, self.done
        for arr, new in ((targets[3], self.failed), (targets[4], self.reach), (targets[7], self.at),
                         (targets[8], self.kept)):
            if arr.size:
                arr[...] = new
        if not self.log:
            return
        reps, topic, nxt, prv, head, tail, inlist, recent, n_recent, touched = lists
        width = self.width
        moved = sorted({p for p, _, _ in self.log})
        reps[moved] = [self.rows[p] + [-1] * (width - len(self.rows[p])) for p in moved]
        for arr, new in ((nxt, self.nxt), (prv, self.prv), (head, self.head),
                         (tail, self.tail), (recent, self.recent), (n_recent, self.n_recent),
                         (touched, self.touched), (counts[2], self.movable), (peers[0], self.shared),
                         (targets[0], self.count), (targets[1], self.asc.items), (targets[2], self.desc.items)):
            if arr.size:
                arr[...] = new
        n_topics = self.n_topics
        scaled = np.array(self.tc, dtype=np.int64).reshape(counts[0].shape) * n_topics
        counts[0][...] = scaled
        counts[1][...] = scaled + np.arange(n_topics)
        counts[3][...] = counts[2] != 0
        counts[4][...], counts[5][...] = topic_ranks(counts[1])
        if self.use:
            for arr, new in zip(quotas[1:], (self.q_leave, self.q_arrive, self.leave, self.arrive, self.n_leave,
                                             self.n_arrive)):
                arr[...] = new
        for g, order in enumerate(self.by_group):
            targets[5][g, :len(order.items)] = order.items

    def bucket_orders(self) -> tuple:
        """`count_kernels.bucket_orders`: the lists a move reordered, as partitions."""
        touched = np.array(self.touched, dtype=bool).reshape(self.arrays[0][9].shape)
        where = np.argwhere(touched)
        nxt, width, head = self.nxt, self.width, self.head
        ends, parts = [], []
        for x, t in where.tolist():
            node = head[x][t]
            while node >= 0:
                parts.append(node // width)
                node = nxt[node]
            ends.append(len(parts))
        return where, np.array(ends, dtype=np.int64), np.array(parts, dtype=np.int64)

    def balance(self, max_moves: int, rows: int) -> None:
        """`count_kernels.balance`."""
        count, asc, desc = self.count, self.asc.items, self.desc.items
        lo, hi = self.lo, self.hi
        while max_moves < 0 or self.moves < max_moves:
            if rows >= 0 and len(self.log) + 2 > rows:
                return
            c_max, c_min = count[desc[0]], count[asc[0]]
            if c_max - c_min <= 1:
                break
            surplus, deficit = c_max > hi, c_min < lo
            done = self.step(True, surplus, deficit) or self.step(False, surplus, deficit)
            if not done and self.own_pool:
                done = self.two_step()
            if not done:
                if self.thorough:
                    break
                for row in self.failed:
                    row[:] = self.no_failed
                for row in self.reach:
                    row[:] = self.no_reach
                self.thorough = 1
                continue
            self.thorough = 0
            self.moves += done
        self.done = 1

    def step(self, strict: bool, surplus: bool, deficit: bool) -> int:
        """`count_kernels._step`: one move from the fullest brokers to the emptiest; 1 if made."""
        count, lo, hi, at = self.count, self.lo, self.hi, self.at
        c_least = count[self.asc.items[0]]
        for a in self.desc.items:
            ca = count[a]
            if ca - c_least < 2 or (strict and surplus and ca <= hi):
                return 0
            at[:] = [0] * len(at)
            while True:
                b = self.next_reachable(a)
                if b < 0:
                    break
                cb = count[b]
                if ca - cb < 2 or (cb >= lo and (ca <= hi or (strict and deficit))):
                    break
                p = self.pick(a, b)
                if p >= 0:
                    self.move(p, a, b)
                    return 1
        return 0

    def next_reachable(self, a: int) -> int:
        """`count_kernels._next_reachable`."""
        count, at, sizes, by_group = self.count, self.at, self.sizes, self.by_group
        reach_a, rack_a = self.reach[a], self.rack[a]
        best, best_g = -1, -1
        for g in range(len(sizes)):
            r = g - 1
            if at[g] >= sizes[g] or (r >= 0 and r != rack_a and reach_a[r] == 0):
                continue
            b = by_group[g].items[at[g]]
            if best < 0 or (count[b], b) < (count[best], best):
                best, best_g = b, g
        if best_g >= 0:
            at[best_g] += 1
        return best

    def two_step(self) -> int:
        """`count_kernels._two_step`: two moves through a third broker; 2 or 0."""
        count = self.count
        order = list(self.asc.items)
        for a in self.desc.items[:4]:
            for b in order[:4]:
                if count[a] - count[b] < 2:
                    continue
                for c in order:
                    if c == a or c == b:
                        continue
                    p2 = self.pick(c, b)
                    p1 = self.pick(a, c) if p2 >= 0 else -1
                    if p1 >= 0 and p2 >= 0:
                        self.move(p1, a, c)
                        self.move(p2, c, b)
                        return 2
        return 0

    def pick(self, a: int, b: int) -> int:
        """`count_kernels._pick`: a partition whose replica on a may move to b, or -1 (remembered)."""
        failed_a = self.failed[a]
        if failed_a[b]:
            return -1
        rb = self.rack[b]
        if rb >= 0 and rb != self.rack[a]:
            reach_a = self.reach[a]
            if reach_a[rb] < 0:
                kept_a = self.kept[a]
                if kept_a[rb] < 0:
                    kept_a[rb] = self.reaching(a, rb)
                reach_a[rb] = kept_a[rb]
            if reach_a[rb] == 0:
                failed_a[b] = True
                return -1
        p = self.pick_partition(a, b, self.thorough == 1) if any(self.movable[a]) else -1
        if p < 0:
            failed_a[b] = True
        return p

    def topic_order(self, a: int, b: int, fresh: bool) -> list[int]:
        """`count_topics.topic_order`: the same values, -d * n_topics + topic, ascending."""
        n_topics, ta, tb = self.n_topics, self.tc[a], self.tc[b]
        # d * n_topics + topic: one int per topic, unique; the kernel keeps the smallest negatives.
        keys = None
        if self.use and self.n_leave[a] > 0 and self.n_arrive[b] > 0:
            leave_a, arrive_b = self.leave[a], self.arrive[b]
            keys = [(ta[t] - tb[t]) * n_topics + t for t in range(n_topics) if leave_a[t] and arrive_b[t]]
        if not keys:
            mov_a = self.movable[a]
            keys = [(ta[t] - tb[t]) * n_topics + t for t in range(n_topics) if mov_a[t]]
        if len(keys) > SEARCHED_TOPICS and not fresh:
            keys.sort(reverse=True)
            del keys[SEARCHED_TOPICS:]
        return sorted([2 * (k % n_topics) - k for k in keys])

    def pick_partition(self, a: int, b: int, fresh: bool) -> int:
        """`count_kernels.pick_partition`: of the same candidates (`candidates`), the same one,
        weighed by its key."""
        rows, rack, need, floor = self.rows, self.rack, self.need, self.floor
        shared_a, rb = self.shared[a], rack[b]
        # Within one rack a move never changes which racks a replica set spans.
        check_rack = rb >= 0 and rb != rack[a]
        # Per member j: the pairs it gains b and loses a (summed over the members but a), and
        # whether a would lose j as a target peer; usually no j would, and no key counts them.
        gain = [sb - sa for sa, sb in zip(shared_a, self.shared[b])]
        gain_a = gain[a]
        # Usually a shares two or more partitions with every broker: no member is lossy, as
        # one look for a 1 says without building the list.
        any_lossy = False
        if 1 in shared_a:
            lossy = [sa == 1 and target for sa, target in zip(shared_a, self.is_target)]
            lossy[a] = False
            any_lossy = any(lossy)
        best, best_key = [-1], None
        for p, d in self.candidates(a, b, fresh, best):
            row = rows[p]
            if b in row or (check_rack and self.breaks_racks(row, a, rb, need[len(row)])):
                continue
            loss = 0
            if any_lossy:
                for j in row:
                    if lossy[j]:
                        loss += 1
                if loss and floor and self.loses_peers(a, row, loss):
                    continue
            pairs = -gain_a
            for j in row:
                pairs += gain[j]
            # A move of topic t from a to b evens t out when a holds at least two more of it.
            key = (loss, 0 if d >= 2 else (1 if d == 1 else 2), pairs, -d)
            if best[0] < 0 or key < best_key:
                best[0], best_key = p, key
        return best[0]

    def candidates(self, a: int, b: int, fresh: bool, best: list[int]):
        """The candidates `count_kernels.pick_partition` looks at, in its order, as (partition,
        its topic's d): the recently moved partitions, then each topic's list; how far it goes
        depends on whether some candidate fits yet (best[0] >= 0, kept up by the caller)."""
        rows, topic, nxt, inlist, width, n_topics = (self.rows, self.topic, self.nxt, self.inlist, self.width,
                                                     self.n_topics)
        scan_all, scan_topic, scan_recent = self.scan
        ta, tb = self.tc[a], self.tc[b]
        last = self.n_recent[a]
        ring = self.recent[a]
        for i in range(last - min(last, scan_recent), last):
            p = ring[i % scan_recent]
            d = ta[topic[p]] - tb[topic[p]]
            if d >= 1:
                row = rows[p]
                if a in row and inlist[p * width + row.index(a)]:
                    yield p, d
        order = self.topic_order(a, b, fresh)
        # Stay with topics that a holds clearly more of than b, once some candidate exists.
        least = min(-(order[0] // n_topics) - 2, 1)
        per_topic = self.n_parts if fresh else scan_topic
        head_a = self.head[a]
        seen = 0
        for v in order:
            d = -(v // n_topics)
            if best[0] >= 0 and (d < least or seen >= scan_all):
                return
            node, n = head_a[v % n_topics], 0
            while node >= 0:
                n += 1
                yield node // width, d
                if n >= per_topic and best[0] >= 0:
                    break
                node = nxt[node]
            seen += n

    def breaks_racks(self, row: list[int], a: int, rb: int, need: int) -> bool:
        """`count_kernels.breaks_racks`: whether a replica in rack rb may not take a's place in row."""
        rack = self.rack
        for m in row:
            if m != a and rack[m] == rb:
                return self.spanned(row, a) < need
        return False

    def spanned(self, row: list[int], a: int) -> int:
        """`count_kernels._spanned`: racks row's members but a span (one without a rack is its own)."""
        racks = [self.rack[m] for m in row if m != a]
        return len({r for r in racks if r >= 0}) + racks.count(-1)

    def loses_peers(self, a: int, row: list[int], loss: int) -> bool:
        """`count_kernels.loses_peers`."""
        shared_a, floor = self.shared[a], self.floor
        if self.peers(a) - loss < floor:
            return True
        return any(j != a and shared_a[j] == 1 and self.is_target[j] and self.peers(j) - 1 < floor for j in row)

    def peers(self, x: int) -> int:
        """`count_kernels._peers`: target brokers x shares some partition with."""
        shared_x = self.shared[x]
        return sum(1 for j in self.target_idx if shared_x[j] > 0)

    def reaching(self, a: int, rb: int) -> int:
        """`count_kernels.reaching`: 1 if some movable replica on a may move to a broker in rb."""
        rows, nxt, head_a, mov_a = self.rows, self.nxt, self.head[a], self.movable[a]
        for t in range(self.n_topics):
            node = head_a[t] if mov_a[t] else -1
            while node >= 0:
                if self.may_reach(rows[node // self.width], a, rb):
                    return 1
                node = nxt[node]
        return 0

    def may_reach(self, row: list[int], x: int, r: int) -> bool:
        """`count_kernels._may_reach`: whether row's replica on x may move to a broker in rack r."""
        rack, need, rf = self.rack, self.need, len(row)
        return all(rack[m] != r for m in row) or (rf > need[rf] and self.spanned(row, x) >= need[rf])

    def count_reaching(self, p: int, only: int, step: int) -> None:
        """`count_kernels._count_reaching`: p's replicas in the pool (or the one on `only`)
        arrived (step 1) or leaving (-1), in the known answers."""
        row, width = self.rows[p], self.width
        for s, x in enumerate(row):
            if self.inlist[p * width + s] and only in (-1, x):
                kept_x = self.kept[x]
                for r, n in enumerate(kept_x):
                    if n == (step < 0) and self.may_reach(row, x, r):
                        kept_x[r] = 1 if step > 0 else -1

    def move(self, p: int, a: int, b: int) -> None:
        """`count_kernels._move`: p's replica moved from a to b, logged."""
        self.log.append((p, a, b))
        width, t, row = self.width, self.topic[p], self.rows[p]
        within = self.rack[a] == self.rack[b]
        self.count_reaching(p, a if within else -1, -1)
        for s, m in enumerate(row):
            if m == a:
                row[s] = b
                self.relink(p * width + s, a, b, t)
        self.count_reaching(p, b if within else -1, 1)
        rack, count, by_group = self.rack, self.count, self.by_group
        for x, step in ((a, -1), (b, 1)):
            self.tc[x][t] += step
            self.movable[x][t] += step
            count[x] += step
            g = rack[x] + 1
            for order in (self.asc, self.desc, by_group[g]):
                order.moved(x, count[x] - step, count[x])
        if self.use:
            self.use_quotas(t, a, b)
        shared, recent, n_recent, inlist = self.shared, self.recent, self.n_recent, self.inlist
        size = self.ring_size
        for s, j in enumerate(row):
            if j == b:
                continue
            shared[a][j] -= 1
            shared[j][a] -= 1
            shared[b][j] += 1
            shared[j][b] += 1
            recent[j][n_recent[j] % size] = p
            n_recent[j] += 1
            if self.spread and inlist[p * width + s]:
                self.relink(p * width + s, j, j, t)
                self.touched[j][t] = True
        self.failed[b][:] = self.no_failed
        self.reach[b][:] = self.no_reach

    def relink(self, node: int, x: int, y: int, t: int) -> None:
        """`count_kernels._relink`: node out of list (x, t), onto the back of list (y, t)."""
        nxt, prv, head, tail = self.nxt, self.prv, self.head, self.tail
        before, after = prv[node], nxt[node]
        if before >= 0:
            nxt[before] = after
        else:
            head[x][t] = after
        if after >= 0:
            prv[after] = before
        else:
            tail[x][t] = before
        last = tail[y][t]
        prv[node], nxt[node] = last, -1
        if last >= 0:
            nxt[last] = node
        else:
            head[y][t] = node
        tail[y][t] = node

    def use_quotas(self, t: int, a: int, b: int) -> None:
        """`count_kernels._use_quotas`."""
        q_leave, q_arrive, leave, arrive = self.q_leave, self.q_arrive, self.leave, self.arrive
        q_leave[t][a] = max(0, q_leave[t][a] - 1)
        q_arrive[t][b] = max(0, q_arrive[t][b] - 1)
        for x in (a, b):
            ok = self.movable[x][t] != 0 and q_leave[t][x] > 0
            if leave[x][t] != ok:
                leave[x][t] = ok
                self.n_leave[x] += 1 if ok else -1
        if arrive[b][t] and not q_arrive[t][b] > 0:
            arrive[b][t] = False
            self.n_arrive[b] -= 1


class _Order:
    """Broker indices by (sign * count, index) (`count_kernels._resort` keeps them so), with
    each one's key sign * count * n + index beside it, so that a broker whose count changed is
    put back by bisection (the kernel shifts it along its equals, often every target)."""

    def __init__(self, items: list[int], sign: int, count: list[int], n: int):
        self.items, self.sign, self.n = items, sign, n
        self.keys = [sign * count[x] * n + x for x in items]

    def moved(self, x: int, old: int, new: int) -> None:
        """x's count went from old to new."""
        keys, items = self.keys, self.items
        i = bisect.bisect_left(keys, self.sign * old * self.n + x)
        del keys[i], items[i]
        key = self.sign * new * self.n + x
        i = bisect.bisect_left(keys, key)
        keys.insert(i, key)
        items.insert(i, x)
