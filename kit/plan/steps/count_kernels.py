"""The count balance's loop over arrays (`balance`): which pairs of brokers to try, a pick's
candidate search (`pick_partition`), a move's bookkeeping (`_move`); the moves it chooses
are logged for `count_balance` to make on the workspace.

Plain Python over numpy arrays in the subset numba compiles (`compiled`; numba is imported
when a balance makes enough moves to pay for it): a large rebalance makes a hundred thousand
moves of some twenty candidates each, about 120 us of Python a move, a few compiled. This
module is the reference for the rule (which pair, which partition, how a move updates the
state, which `count_balance.CountBalance` builds and describes); compiled and plain give the
same moves (tests/plan/test_count_balance.py): small clusters run `count_plain` (CPython over
lists), a large balance's first moves these uncompiled with `count_pick`'s search (`with_pick`).
"""
from __future__ import annotations

from types import FunctionType

import numpy as np

from kit import jit
from kit.plan.steps.count_topics import SEARCHED_TOPICS, topic_order

_COMPILED = _READY = None


def compiled():
    """(balance, bucket_orders) compiled by numba, cached on disk."""
    global _COMPILED, _READY
    if _COMPILED is None:
        # numba loads here (half a second: only a balance of many moves pays it back, kit.plan imports
        # nothing heavy, tests/test_imports.py); nogil: `count_balance.moves_aside` runs it aside.
        scope = jit.compiled_together(globals(), (
            ("topic_order", topic_order_by_loop), ("_ready", _ready),
            *((f.__name__, f) for f in (
                _sift_down, pick_partition, _in_list, breaks_racks, _spanned, loses_peers, _peers, _step,
                _next_reachable, _two_step, _pick, reaching, _may_reach, _count_reaching, _move, rerank,
                _bisect, _resort, _relink, _use_quotas, balance, bucket_orders))), cache=True, nogil=True)
        _COMPILED = scope["balance"], scope["bucket_orders"]
        _READY = scope["_ready"]
    return _COMPILED


def preload() -> None:
    """Import numba and load its compiler's state from the disk cache now (about 0.6 s the first
    compiled balance would spend before its first move; any kernel loads numba's registries,
    this is the smallest): free where `second_core.run_both` has other work."""
    compiled()
    _READY(0)


def _ready(x):
    return x + 1


def with_pick(pick):
    """`balance` as plain Python searching with `pick` (`count_pick`'s) for `pick_partition`."""
    scope = {**globals(), "pick_partition": pick}
    for f in (_pick, _step, _two_step, balance):
        scope[f.__name__] = FunctionType(f.__code__, scope, f.__name__)
    return scope["balance"]


def topic_order_by_loop(a, b, fresh, counts, quotas):
    """`count_topics.topic_order` (compiled, this is the one used) in one pass keeping the
    smallest keys in a heap; unless planned, a's topics in `ranked` order up to the first
    that cannot beat the kept ones."""
    scaled, scaled_t, nz, ranked, n_ranked = counts[0], counts[1], counts[3], counts[4], counts[5]
    use, leave, arrive, n_leave, n_arrive = quotas[0], quotas[3], quotas[4], quotas[5], quotas[6]
    n_topics = scaled.shape[1]
    planned = False
    if use and n_leave[a] > 0 and n_arrive[b] > 0:
        for t in range(n_topics):
            if leave[a, t] and arrive[b, t]:
                planned = True
                break
    limit = n_topics if fresh else min(SEARCHED_TOPICS, n_topics)
    heap = np.empty(limit, dtype=np.int64)  # the smallest keys so far, the largest on top
    n = 0
    for i in range(n_topics if planned else n_ranked[a]):
        t = i if planned else ranked[a, i]
        # A key is at least -scaled_t[a, t] (b holds none), which grows along `ranked`.
        if not planned and n == limit and -scaled_t[a, t] > heap[0]:
            break
        if not (leave[a, t] and arrive[b, t] if planned else nz[a, t]):
            continue
        key = scaled[b, t] - scaled_t[a, t]
        if n < limit:
            i = n
            n += 1
            while i > 0 and heap[(i - 1) // 2] < key:  # sift up
                heap[i] = heap[(i - 1) // 2]
                i = (i - 1) // 2
            heap[i] = key
        elif key < heap[0]:
            _sift_down(heap, n, key)
    for i in range(n):  # to -d * n_topics + topic, in place
        heap[i] += 2 * ((-heap[i]) % n_topics)
    heap[:n].sort()
    return heap[:n]


def _sift_down(heap, n, key):
    """Replace the top of the max-heap heap[:n] by `key`."""
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and heap[c + 1] > heap[c]:
            c += 1
        if heap[c] <= key:
            break
        heap[i] = heap[c]
        i = c
    heap[i] = key


def pick_partition(a, b, fresh, scan, floor, lists, counts, quotas, peers):
    """A movable partition on broker index `a` that may move to broker index `b`, or -1.

    Prefers the topic `a` holds most more of than `b` (per-topic balance comes with the count
    balance); among its partitions, the one whose other replicas `b` shares least with and
    `a` shares most with, so every pair of brokers keeps enough common partitions for
    leadership to fail over evenly (and no broker loses a peer). Partitions on `a` that an
    earlier move gave an underfull broker (`recent`) are looked at first: they are the only
    way for two underfull (often new) brokers to come to share partitions. The search looks
    at a few dozen candidates, `scan` = (in all, per topic, recently moved), unless
    exhaustive (`fresh`).
    """
    reps, topic, nxt, prv, head, tail, inlist, recent, n_recent, touched = lists
    scaled = counts[0]
    shared, is_target, rack, need = peers[0], peers[1], peers[3], peers[4]
    scan_all, scan_topic, scan_recent = scan
    n_topics = scaled.shape[1]
    width = reps.shape[1]
    # Within one rack a move never changes which racks a replica set spans.
    check_rack = rack[b] >= 0 and rack[b] != rack[a]
    best, key = -1, (0, 0, 0, 0)
    order = topic_order(a, b, fresh, counts, quotas)
    # Stay with topics that a holds clearly more of than b, once some candidate exists.
    least = min(-(order[0] // n_topics) - 2, 1)
    per_topic = reps.shape[0] if fresh else scan_topic
    last, seen = n_recent[a], 0
    # List -1 is the ring of recently moved partitions, then the topics' lists in `order`.
    # Each candidate is weighed in this one loop: a call per candidate took its arrays'
    # references atomically on entry and gave them back on exit, a fifth of the balance's time.
    for k in range(-1, order.size):
        node, d = last - min(last, scan_recent), 0  # the ring's first index
        if k >= 0:
            t, d = order[k] % n_topics, -(order[k] // n_topics)
            if best >= 0 and (d < least or seen >= scan_all):
                break
            node = head[a, t]
        # A few per topic spread the choice over topics; keep looking while nothing fits.
        n = 0
        while node >= 0 if k >= 0 else node < last:
            if k >= 0:
                p, node, n = node // width, nxt[node], n + 1
            else:
                p, node = recent[a, node % scan_recent], node + 1
                d = (scaled[a, topic[p]] - scaled[b, topic[p]]) // n_topics
                if d < 1 or not _in_list(p, a, reps, inlist):
                    continue
            # The move of p is allowed if b is not in its set yet, the rack rule holds, and no
            # target is left with fewer peers than the degree `floor`.
            rf, ok = 0, True
            for s in range(width):
                m = reps[p, s]
                if m < 0 or m == b:
                    ok = m < 0
                    break
                rf += 1
            if ok and check_rack:
                ok = not breaks_racks(p, a, rack[b], rf, reps, rack, need[rf])
            pairs = loss = 0
            for s in range(rf if ok else 0):
                j = reps[p, s]
                if j != a:
                    sa = shared[a, j]
                    pairs += shared[b, j] - sa
                    if sa == 1 and is_target[j]:
                        loss += 1
            if ok and not (loss and floor and loses_peers(a, p, rf, loss, floor, reps, peers)):
                # A move of topic t from a to b evens t out when a holds at least two more of it.
                new = (loss, 0 if d >= 2 else (1 if d == 1 else 2), pairs, -d)
                if best < 0 or new < key:
                    best, key = p, new
            if n >= per_topic and best >= 0:
                break
        seen += n
    return best


def _in_list(p, x, reps, inlist):
    """Whether partition p's replica on broker index x is in the pool."""
    width = reps.shape[1]
    for s in range(width):
        if reps[p, s] == x:
            return inlist[p * width + s]
    return False


def breaks_racks(p, a, rb, rf, reps, rack, need):
    """Whether a replica in rack `rb` may not take broker index a's place in p's set of `rf`
    (the rack rule, `racks.may_join`): rb is among the other members' racks and those do
    not span `need` racks."""
    among = False
    for s in range(rf):
        among = among or (reps[p, s] != a and rack[reps[p, s]] == rb)
    return among and _spanned(p, a, rf, reps, rack) < need


def _spanned(p, a, rf, reps, rack):
    """Racks p's members but broker index a span (`racks.spans`: one without a rack is its own)."""
    spanned = 0
    for s in range(rf):
        m = reps[p, s]
        if m == a:
            continue
        new = True
        if rack[m] >= 0:
            for u in range(s):
                if reps[p, u] != a and rack[reps[p, u]] == rack[m]:
                    new = False
        if new:
            spanned += 1
    return spanned


def loses_peers(a, p, rf, loss, floor, reps, peers):
    """Whether moving broker index a's replica out of p's set leaves a or one of the other
    members it shares nothing else with (`loss` of them) with fewer target peers than the
    degree floor."""
    shared, is_target, target_idx = peers[0], peers[1], peers[2]
    if _peers(a, shared, target_idx) - loss < floor:
        return True
    for s in range(rf):
        j = reps[p, s]
        if j != a and shared[a, j] == 1 and is_target[j] and _peers(j, shared, target_idx) - 1 < floor:
            return True
    return False


def _peers(x, shared, target_idx):
    """Target brokers broker index x shares some partition with."""
    n = 0
    for j in target_idx:
        if shared[x, j] > 0:
            n += 1
    return n


def balance(max_moves, own_pool, spread, scan, band, lists, counts, quotas, peers, targets, state, log):
    """Moves from the fullest target brokers to the emptiest until the spread is at most one,
    no allowed move narrows it, `max_moves` (-1: no limit) are made, or `log` is full; each
    logged as (partition, from, to) broker indices. Returns how many were logged; state[2]
    is 1 when the balance is done (else call again once the log is read).

    `band` = (lo, hi, degree floor); `state` = (searching thoroughly, moves made, done).
    """
    count, asc, desc, failed, reach = targets[:5]
    lo, hi = band[0], band[1]
    logged = 0
    while max_moves < 0 or state[1] < max_moves:
        if logged + 2 > log.shape[0]:
            return logged
        c_max, c_min = count[desc[0]], count[asc[0]]
        if c_max - c_min <= 1:
            break
        # Some target above hi / below lo: what a step asks, answered from the extremes.
        surplus, deficit = c_max > hi, c_min < lo
        done = 0
        for strict in (True, False):
            if not done:
                done = _step(strict, surplus, deficit, scan, band, lists, counts, quotas, peers, targets, state,
                             log, logged, spread)
        if not done and own_pool:
            done = _two_step(scan, band, lists, counts, quotas, peers, targets, state, log, logged, spread)
        if not done:
            if state[0]:
                break
            # The caches and the short search may hide a move: look once more, thoroughly,
            # so that planning again on the result finds nothing either.
            failed[:] = False
            reach[:] = -1
            state[0] = 1
            continue
        state[0] = 0
        state[1] += done
        logged += done
    state[2] = 1
    return logged


def _step(strict, surplus, deficit, scan, band, lists, counts, quotas, peers, targets, state, log, logged, spread):
    """One move from the fullest brokers to the emptiest; 1 if made, else 0."""
    count, asc, desc, by_group, sizes, at = targets[0], targets[1], targets[2], targets[5], targets[6], targets[7]
    rack, reach = peers[3], targets[4]
    lo, hi = band[0], band[1]
    c_least = count[asc[0]]
    for a in desc:
        ca = count[a]
        # Every copy should shrink the surplus and the deficit at once while both remain
        # (that is what makes the count minimal); failing that, at least one. `desc` and
        # `asc` go by count, so once a broker fails these, every later one does: the loops
        # stop there instead of trying every remaining pair (a quarter of a million pairs
        # per move at 500 brokers).
        if ca - c_least < 2 or (strict and surplus and ca <= hi):
            return 0
        at[:] = 0
        while True:
            b = _next_reachable(a, count, rack, reach, by_group, sizes, at)
            if b < 0:
                break
            cb = count[b]
            if ca - cb < 2 or (cb >= lo and (ca <= hi or (strict and deficit))):
                break
            p = _pick(a, b, scan, band, lists, counts, quotas, peers, targets, state)
            if p >= 0:
                _move(p, a, b, spread, lists, counts, quotas, peers, targets, log, logged)
                return 1
    return 0


def _next_reachable(a, count, rack, reach, by_group, sizes, at):
    """The next target (by count, index: `asc`'s order) that broker index a's replicas may
    reach, or -1; `at` holds each rack group's cursor, advanced past it.

    The rack groups' lists merged, leaving out the racks a's replicas are known not to reach
    (where a pick would only fail): at the end of a large balance most pairs are such, and
    walking `asc` past them cost most of its time (500 brokers: thousands per move)."""
    best, best_g = -1, -1
    for g in range(sizes.size):
        r = g - 1
        if at[g] >= sizes[g] or (r >= 0 and r != rack[a] and reach[a, r] == 0):
            continue
        b = by_group[g, at[g]]
        if best < 0 or (count[b], b) < (count[best], best):
            best, best_g = b, g
    if best_g >= 0:
        at[best_g] += 1
    return best


def _two_step(scan, band, lists, counts, quotas, peers, targets, state, log, logged, spread):
    """Two moves through a third broker, where the rack rule blocks the direct one (only for
    replicas this plan places anyway: moving one twice costs no copy); 2 or 0."""
    count, asc, desc = targets[0], targets[1], targets[2]
    order = asc.copy()
    for a in desc[:4].copy():
        for b in order[:4]:
            if count[a] - count[b] < 2:
                continue
            for c in order:
                if c == a or c == b:
                    continue
                p2 = _pick(c, b, scan, band, lists, counts, quotas, peers, targets, state)
                p1 = _pick(a, c, scan, band, lists, counts, quotas, peers, targets, state) if p2 >= 0 else -1
                if p1 >= 0 and p2 >= 0:
                    _move(p1, a, c, spread, lists, counts, quotas, peers, targets, log, logged)
                    _move(p2, c, b, spread, lists, counts, quotas, peers, targets, log, logged + 1)
                    return 2
    return 0


def _pick(a, b, scan, band, lists, counts, quotas, peers, targets, state):
    """A partition whose replica on broker index a may move to b, or -1 (remembered)."""
    failed, reach = targets[3], targets[4]
    if failed[a, b]:
        return -1
    rack = peers[3]
    rb = rack[b]
    if rb >= 0 and rb != rack[a]:
        if reach[a, rb] < 0:
            if targets[8][a, rb] < 0:
                targets[8][a, rb] = reaching(a, rb, lists, counts, peers)
            reach[a, rb] = targets[8][a, rb]
        if reach[a, rb] == 0:
            failed[a, b] = True
            return -1
    p = -1
    if counts[3][a].any():
        p = pick_partition(a, b, state[0] == 1, scan, band[2], lists, counts, quotas, peers)
    if p < 0:
        failed[a, b] = True
    return p


def reaching(a, rb, lists, counts, peers):
    """1 if some movable replica on broker index `a` (not in rack `rb`) may move to a broker in
    `rb`, else 0 (one replica per rack, RF = racks: none). Kept up by `_move`: the end of a
    balance asks again of every broker a move reached (at 1,000,000 partitions, a second)."""
    reps, nxt, head = lists[0], lists[2], lists[4]
    rack, need = peers[3], peers[4]
    width = reps.shape[1]
    for t in np.flatnonzero(counts[3][a]):
        node = head[a, t]
        while node >= 0:
            p = node // width
            node = nxt[node]
            if _may_reach(p, a, rb, reps, rack, need):
                return 1
    return 0


def _may_reach(p, x, r, reps, rack, need):
    """Whether partition p's replica on broker index x (a member) may move to a broker in rack r:
    no member is in r, or p has more members than racks to span and the others span them."""
    rf, in_r = 0, False
    for s in range(reps.shape[1]):
        m = reps[p, s]
        if m < 0:
            break
        rf += 1
        in_r = in_r or rack[m] == r
    return not in_r or (rf > need[rf] and _spanned(p, x, rf, reps, rack) >= need[rf])


def _count_reaching(p, only, step, lists, peers, kept):
    """p's replicas in the pool (or only the one on broker index `only`, if not -1) arrived (step 1:
    none becomes some) or leaving (-1: some becomes unknown, -1) in `reaching`'s answers `kept`."""
    reps, inlist = lists[0], lists[6]
    rack, need = peers[3], peers[4]
    width = reps.shape[1]
    for s in range(width):
        x = reps[p, s]
        if x < 0:
            break
        if inlist[p * width + s] and (only < 0 or x == only):
            for r in range(kept.shape[1]):
                if kept[x, r] == (step < 0) and _may_reach(p, x, r, reps, rack, need):  # else unchanged
                    kept[x, r] = 1 if step > 0 else -1


def _move(p, a, b, spread, lists, counts, quotas, peers, targets, log, at):
    """Partition p's replica moved from broker index a to b, logged at `at`: its slot, the
    pool's lists, the counters, the quotas, the recent rings, the targets' order and the
    caches. With `spread` the other members' nodes of p go to the back of their lists, so the
    candidates a search looks at first are partitions no move has touched yet (successive
    moves out of different brokers then do not keep landing on the same replica sets, which
    carries whole sets to the new brokers together, and a dead broker's leadership has only
    its few partners to go to)."""
    reps, topic, nxt, prv, head, tail, inlist, recent, n_recent, touched = lists
    scaled, scaled_t, movable, nz, ranked, n_ranked = counts
    shared = peers[0]
    count, asc, desc, failed, reach, by_group, sizes = targets[:7]
    rack = peers[3]
    log[at, 0], log[at, 1], log[at, 2] = p, a, b
    width = reps.shape[1]
    n_topics = scaled.shape[1]
    t = topic[p]
    # Within a rack p spans the same racks after: only the moved replica's count changes.
    within = rack[a] == rack[b]
    _count_reaching(p, a if within else -1, -1, lists, peers, targets[8])
    for s in range(width):
        if reps[p, s] == a:
            reps[p, s] = b
            _relink(p * width + s, a, b, t, nxt, prv, head, tail)
    _count_reaching(p, b if within else -1, 1, lists, peers, targets[8])
    for x, step in ((a, -1), (b, 1)):
        scaled[x, t] += step * n_topics
        scaled_t[x, t] += step * n_topics
        rerank(x, t, step * n_topics, scaled_t, ranked, n_ranked)
        movable[x, t] += step
        nz[x, t] = movable[x, t] != 0
        count[x] += step
        g = rack[x] + 1
        _resort(asc, 1, x, count, count[x] - step)
        _resort(desc, -1, x, count, count[x] - step)
        _resort(by_group[g, :sizes[g]], 1, x, count, count[x] - step)
    if quotas[0]:
        _use_quotas(t, a, b, movable, quotas)
    size = recent.shape[1]
    for s in range(width):
        j = reps[p, s]
        if j < 0:
            break
        if j == b:
            continue
        shared[a, j] -= 1
        shared[j, a] -= 1
        shared[b, j] += 1
        shared[j, b] += 1
        recent[j, n_recent[j] % size] = p
        n_recent[j] += 1
        if spread and inlist[p * width + s]:
            _relink(p * width + s, j, j, t, nxt, prv, head, tail)
            touched[j, t] = True
    # b gained a partition, so moves out of b may now exist; a only lost options.
    failed[b, :] = False
    reach[b, :] = -1


def _resort(order, sign, x, count, old):
    """Broker index x back in its place in `order` (by sign * count, index) after its count
    changed from `old` by one (found by bisection: the order is sorted with x at old)."""
    i, hi, was = 0, order.size, (sign * old, x)
    while i < hi:  # the first place not below x's old key: x's
        mid = (i + hi) // 2
        y = order[mid]
        if y != x and (sign * count[y], y) < was:
            i = mid + 1
        else:
            hi = mid
    key = (sign * count[x], x)
    while i > 0 and (sign * count[order[i - 1]], order[i - 1]) > key:
        order[i] = order[i - 1]
        i -= 1
    while i + 1 < order.size and (sign * count[order[i + 1]], order[i + 1]) < key:
        order[i] = order[i + 1]
        i += 1
    order[i] = x


def _relink(node, x, y, t, nxt, prv, head, tail):
    """Node out of list (x, t), onto the back of list (y, t)."""
    before, after = prv[node], nxt[node]
    if before >= 0:
        nxt[before] = after
    else:
        head[x, t] = after
    if after >= 0:
        prv[after] = before
    else:
        tail[x, t] = before
    last = tail[y, t]
    prv[node], nxt[node] = last, -1
    if last >= 0:
        nxt[last] = node
    else:
        head[y, t] = node
    tail[y, t] = node


def _use_quotas(t, a, b, movable, quotas):
    """A move of topic t from broker index a to b uses up one of each quota it follows."""
    use, q_leave, q_arrive, leave, arrive, n_leave, n_arrive = quotas
    q_leave[t, a] = max(0, q_leave[t, a] - 1)
    q_arrive[t, b] = max(0, q_arrive[t, b] - 1)
    for x in (a, b):
        ok = movable[x, t] != 0 and q_leave[t, x] > 0
        if leave[x, t] != ok:
            leave[x, t] = ok
            n_leave[x] += 1 if ok else -1
    if arrive[b, t] and not q_arrive[t, b] > 0:
        arrive[b, t] = False
        n_arrive[b] -= 1


def rerank(x, t, step, scaled_t, ranked, n_ranked):
    """Topic t in its place in broker index x's `ranked` after scaled_t[x, t] changed by `step`
    (found by bisection, the topics in between moved over by one), or back past the held ones
    (all above v then) and out once x holds none."""
    n, v, held = n_ranked[x], scaled_t[x, t], scaled_t.shape[1]  # held: scaled_t of one replica
    i = _bisect(x, t, v - step, 0, n, scaled_t, ranked) if v - step >= held else n
    j = _bisect(x, t, v, 0, i, scaled_t, ranked) if step > 0 else _bisect(x, t, v, i + 1, n, scaled_t, ranked) - 1
    if v < held or v - step < held:
        n_ranked[x] += 1 if step > 0 else -1
    while i < j:  # a loop per direction: LLVM moves them in blocks
        ranked[x, i] = ranked[x, i + 1]
        i += 1
    while i > j:
        ranked[x, i] = ranked[x, i - 1]
        i -= 1
    ranked[x, j] = t if v >= held else -1


def _bisect(x, t, v, lo, hi, scaled_t, ranked):
    """The first place in ranked[x, lo:hi] that holds t or a topic not above v."""
    while lo < hi:
        mid = (lo + hi) // 2
        if ranked[x, mid] != t and scaled_t[x, ranked[x, mid]] > v:
            lo = mid + 1
        else:
            hi = mid
    return lo


def bucket_orders(lists):
    """The lists a move reordered (`touched`), flattened: (broker, topic, end) per list,
    ends into the partitions, which follow one another list after list."""
    reps, topic, nxt, prv, head, tail, inlist, recent, n_recent, touched = lists
    width = reps.shape[1]
    where = np.argwhere(touched)
    ends = np.empty(where.shape[0], dtype=np.int64)
    size = 0
    for i in range(where.shape[0]):
        node = head[where[i, 0], where[i, 1]]
        while node >= 0:
            size += 1
            node = nxt[node]
        ends[i] = size
    parts = np.empty(size, dtype=np.int64)
    k = 0
    for i in range(where.shape[0]):
        node = head[where[i, 0], where[i, 1]]
        while node >= 0:
            parts[k] = node // width
            k += 1
            node = nxt[node]
    return where, ends, parts
