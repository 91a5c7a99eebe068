"""The count balance's hot loops over arrays: a pick's candidate search (`pick_partition`)
and a move's bookkeeping (`move`), for `count_balance.balance_counts`.

They are plain Python over numpy arrays, written in the subset numba compiles: a large
rebalance makes a hundred thousand picks of some twenty candidates each, about 120 us of
Python per move, and compiled they take a few. `compiled` returns them compiled (numba is
imported there, only when a balance has enough moves ahead to pay for its import); small
balances run them as they are. Both give the same moves (tests/plan/test_count_balance.py).

The state, built by `count_balance._CountBalance` and kept up by `move`:

- `lists`: (reps, topic, nxt, prv, head, tail, inlist, recent, n_recent, touched). `reps`
  holds each partition's replicas as broker indices (-1 pads to the widest set). The movable
  replicas of broker x and topic t are a linked list of nodes p * width + slot, from
  head[x, t] to tail[x, t] through nxt / prv (-1 ends), in the order the pool's dicts keep
  them; inlist marks the nodes in the pool. recent[x] is a ring of the last partitions a
  move shared with x (n_recent[x] pushed in all); touched marks the lists a move reordered
  (the pool's dicts are reordered once at the end, from these lists).
- `counts`: (scaled, scaled_t, movable, nz), by broker and topic: count * n_topics,
  count * n_topics + topic, the movable replicas, and whether there are some.
- `quotas`: (use, q_leave, q_arrive, leave, arrive, n_leave, n_arrive): the topic quotas
  (topic x broker) and, by broker and topic, whether a replica may leave / arrive under
  them, and how many topics may per broker.
- `peers`: (shared, is_target, target_idx, rack, need): co-replica counts, the targets,
  rack numbers (-1: none), racks a set of each size must span.
"""
from __future__ import annotations

from types import FunctionType

import numpy as np

SEARCHED_TOPICS = 32  # topics a pick looks at unless the search is exhaustive

_COMPILED = None


def compiled():
    """(pick_partition, move, bucket_orders) compiled by numba, cached on disk."""
    global _COMPILED
    if _COMPILED is None:
        # Imported here: numba takes about half a second to load, which only a balance with
        # many moves ahead pays back (kit.plan imports no heavy dependency: tests/test_imports.py).
        import numba
        jit = numba.njit(cache=True)
        # Compiled code calls compiled code only: each kernel is compiled over a copy of this
        # module's names in which the helpers it calls are compiled too (the module's own
        # names stay plain Python, for the small balances).
        scope = dict(globals())
        for f in (topic_order, _in_list, _consider, _breaks_racks, _loses_peers, _peers, _relink, _use_quotas,
                  pick_partition, move, bucket_orders):
            scope[f.__name__] = jit(FunctionType(f.__code__, scope, f.__name__))
        _COMPILED = scope["pick_partition"], scope["move"], scope["bucket_orders"]
    return _COMPILED


def topic_order(a, b, fresh, counts, quotas):
    """The topics a pick from broker index a to b looks at, in the order it looks, as
    -d * n_topics + topic (d: how many more of the topic a holds than b), ascending.

    The topics with a planned move (a quota to leave a and one to reach b) if any, else every
    topic with a movable replica on a; unless the search is exhaustive (`fresh`), only the 32
    with the largest d (the highest topic numbers among equals: on the 200k benchmark
    clusters the lower ones left a rebalance's failover excess one higher).
    """
    scaled, scaled_t, movable, nz = counts
    use, q_leave, q_arrive, leave, arrive, n_leave, n_arrive = quotas
    n_topics = scaled.shape[1]
    cand = np.flatnonzero(nz[a])
    if use and n_leave[a] > 0 and n_arrive[b] > 0:
        planned = np.flatnonzero(leave[a] & arrive[b])
        if planned.size:
            cand = planned
    # -d * n_topics - topic: one key per topic, unique, so the 32 kept do not depend on
    # how a partition orders equal values.
    key = scaled[b][cand] - scaled_t[a][cand]
    if cand.size > SEARCHED_TOPICS and not fresh:
        key = np.partition(key, SEARCHED_TOPICS - 1)[:SEARCHED_TOPICS]
    # To -d * n_topics + topic (topic = -key mod n_topics): one int each, sorted.
    return np.sort(key + 2 * ((-key) % n_topics))


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
    scan_all, scan_topic, scan_recent = scan
    n_topics = scaled.shape[1]
    width = reps.shape[1]
    rack = peers[3]
    # Within one rack a move never changes which racks a replica set spans.
    check_rack = rack[b] >= 0 and rack[b] != rack[a]
    best, key = -1, (0, 0, 0, 0)
    last = n_recent[a]
    for i in range(last - min(last, scan_recent), last):
        p = recent[a, i % scan_recent]
        t = topic[p]
        d = (scaled[a, t] - scaled[b, t]) // n_topics
        if d >= 1 and _in_list(p, a, reps, inlist):
            best, key = _consider(p, d, a, b, best, key, check_rack, floor, reps, peers)
    order = topic_order(a, b, fresh, counts, quotas)
    # Stay with topics that a holds clearly more of than b, once some candidate exists.
    least = min(-(order[0] // n_topics) - 2, 1)
    per_topic = reps.shape[0] if fresh else scan_topic
    seen = 0
    for k in range(order.size):
        t = order[k] % n_topics
        d = -(order[k] // n_topics)
        if best >= 0 and (d < least or seen >= scan_all):
            break
        # A few per topic spread the choice over topics; keep looking while nothing fits.
        node, n = head[a, t], 0
        while node >= 0:
            n += 1
            best, key = _consider(node // width, d, a, b, best, key, check_rack, floor, reps, peers)
            if n >= per_topic and best >= 0:
                break
            node = nxt[node]
        seen += n
    return best


def _in_list(p, x, reps, inlist):
    """Whether partition p's replica on broker index x is in the pool."""
    width = reps.shape[1]
    for s in range(width):
        if reps[p, s] == x:
            return inlist[p * width + s]
    return False


def _consider(p, d, a, b, best, key, check_rack, floor, reps, peers):
    """The better of (best, key) and partition p moving from broker index a to b (its topic
    d more on a than on b), if that move is allowed: b not in the set yet, the rack rule,
    no target left with fewer peers than the degree `floor`."""
    shared, is_target, target_idx, rack, need = peers
    rf = 0
    for s in range(reps.shape[1]):
        m = reps[p, s]
        if m < 0:
            break
        if m == b:
            return best, key
        rf += 1
    if check_rack and _breaks_racks(p, a, rack[b], rf, reps, rack, need[rf]):
        return best, key
    pairs = loss = 0
    for s in range(rf):
        j = reps[p, s]
        if j != a:
            sa = shared[a, j]
            pairs += shared[b, j] - sa
            if sa == 1 and is_target[j]:
                loss += 1
    if loss and floor and _loses_peers(a, p, rf, loss, floor, reps, peers):
        return best, key
    # A move of topic t from a to b evens t out when a holds at least two more of it.
    new = (loss, 0 if d >= 2 else (1 if d == 1 else 2), pairs, -d)
    if best < 0 or new < key:
        return p, new
    return best, key


def _breaks_racks(p, a, rb, rf, reps, rack, need):
    """Whether a replica in rack `rb` may not take broker index a's place in p's set of `rf`
    (the rack rule, `racks.may_join`): rb is among the other members' racks and those do
    not span `need` racks (a member without a rack counts as one of its own)."""
    among = False
    spanned = 0
    for s in range(rf):
        m = reps[p, s]
        if m == a:
            continue
        r = rack[m]
        among = among or r == rb
        new = True
        if r >= 0:
            for u in range(s):
                if reps[p, u] != a and rack[reps[p, u]] == r:
                    new = False
        if new:
            spanned += 1
    return among and spanned < need


def _loses_peers(a, p, rf, loss, floor, reps, peers):
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


def move(p, a, b, spread, lists, counts, quotas):
    """Partition p's replica moved from broker index a to b (the workspace already says so):
    its slot, the pool's lists, the counters, the quotas, the recent rings. With `spread`
    the other members' nodes of p go to the back of their lists, so the candidates a search
    looks at first are partitions no move has touched yet (successive moves out of different
    brokers then do not keep landing on the same replica sets, which carries whole sets to
    the new brokers together, and a dead broker's leadership has only its few partners to go
    to)."""
    reps, topic, nxt, prv, head, tail, inlist, recent, n_recent, touched = lists
    scaled, scaled_t, movable, nz = counts
    width = reps.shape[1]
    n_topics = scaled.shape[1]
    t = topic[p]
    for s in range(width):
        if reps[p, s] == a:
            reps[p, s] = b
            _relink(p * width + s, a, b, t, nxt, prv, head, tail)
    for x, step in ((a, -1), (b, 1)):
        scaled[x, t] += step * n_topics
        scaled_t[x, t] += step * n_topics
        movable[x, t] += step
        nz[x, t] = movable[x, t] != 0
    if quotas[0]:
        _use_quotas(t, a, b, movable, quotas)
    size = recent.shape[1]
    for s in range(width):
        j = reps[p, s]
        if j < 0:
            break
        if j == b:
            continue
        recent[j, n_recent[j] % size] = p
        n_recent[j] += 1
        if spread and inlist[p * width + s]:
            _relink(p * width + s, j, j, t, nxt, prv, head, tail)
            touched[j, t] = True


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
