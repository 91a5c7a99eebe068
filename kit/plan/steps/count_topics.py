"""Which topics a count balance's pick looks at, and in what order (`topic_order`), and the
two lists the compiled pick finds them with, kept up move by move (`rerank`, `relist`):

- `counts`' ranked (broker x topic): each broker's topics by (count, topic) descending. A
  pick walks broker a's topics from the most held and stops once none further can beat the
  ones it keeps (a topic's d is at most its count on a), so it reads some 60 topics instead
  of all (1,000 at 200,000 partitions, 5,000 at 1,000,000), which was about half of the
  compiled balance's time.
- `quotas`' leaving (broker x topic): the topics that may leave each broker under the
  quotas (`leave`), ascending, -1 after the first n_leave; the planned topics are among them.

Both are a function of the arrays they index (`topic_ranks`, `leaving_topics`), so a balance
that does not keep them up (`count_plain`) writes them anew. The compiled pick runs
`topic_order_by_loop`; `topic_order` is the reference, in numpy's whole-array steps.
"""
from __future__ import annotations

import numpy as np

SEARCHED_TOPICS = 32  # topics a pick looks at unless the search is exhaustive


def topic_order(a, b, fresh, counts, quotas):
    """The topics a pick from broker index a to b looks at, in the order it looks, as
    -d * n_topics + topic (d: how many more of the topic a holds than b), ascending.

    The topics with a planned move (a quota to leave a and one to reach b) if any, else every
    topic with a movable replica on a; unless the search is exhaustive (`fresh`), only the 32
    with the largest d (the highest topic numbers among equals: on the 200k benchmark
    clusters the lower ones left a rebalance's failover excess one higher).
    """
    scaled, scaled_t, nz = counts[0], counts[1], counts[3]
    use, leave, arrive, n_leave, n_arrive = quotas[0], quotas[3], quotas[4], quotas[5], quotas[6]
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


def topic_order_by_loop(a, b, fresh, counts, quotas):
    """`topic_order`, in one pass that keeps the smallest keys in a heap: the same topics in
    the same order, without numpy's temporary arrays (compiled, this is the one used). The
    planned topics are looked for among a's `leaving`, the others in a's `ranked` order up to
    the first topic that cannot beat the kept ones."""
    scaled, scaled_t, nz, ranked = counts[0], counts[1], counts[3], counts[4]
    use, arrive, n_leave, n_arrive, leaving = quotas[0], quotas[4], quotas[5], quotas[6], quotas[7]
    n_topics = scaled.shape[1]
    planned = False
    if use and n_leave[a] > 0 and n_arrive[b] > 0:
        for i in range(n_leave[a]):
            if arrive[b, leaving[a, i]]:
                planned = True
                break
    limit = n_topics if fresh else min(SEARCHED_TOPICS, n_topics)
    heap = np.empty(limit, dtype=np.int64)  # the smallest keys so far, the largest on top
    n = 0
    for i in range(n_leave[a] if planned else n_topics):
        if planned:
            t = leaving[a, i]
            if not arrive[b, t]:
                continue
        else:
            t = ranked[a, i]
            # A key is at least -scaled_t[a, t] (b holds none), which grows along `ranked`.
            if n == limit and -scaled_t[a, t] > heap[0]:
                break
            if not nz[a, t]:
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
            sift_down(heap, n, key)
    kept = heap[:n]
    return np.sort(kept + 2 * ((-kept) % n_topics))


def sift_down(heap, n, key):
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


def topic_ranks(scaled_t: np.ndarray) -> np.ndarray:
    """`ranked` of `scaled_t` (count * n_topics + topic, unique per broker): each row's topics
    by it descending."""
    # Unique keys: any sort gives the same order; timsort is quick on the runs of topics
    # (ascending within each count).
    return np.ascontiguousarray(np.argsort(scaled_t, axis=1, kind="stable")[:, ::-1])


def leaving_topics(leave: np.ndarray) -> np.ndarray:
    """Each row's true columns of `leave`, ascending, then -1."""
    order = np.argsort(~leave, axis=1, kind="stable")
    return np.where(np.arange(leave.shape[1]) < leave.sum(axis=1)[:, None], order, -1)


def rerank(x, t, step, scaled_t, ranked):
    """Topic t back in its place in broker index x's `ranked` after scaled_t[x, t] changed by
    `step`. Its place is searched for (a move carries a topic past some 1,800 others on
    1,000,000 partitions' brokers: a place kept per topic cost more to keep up than the
    search), the topics in between moved over by one."""
    row, order, v = scaled_t[x], ranked[x], scaled_t[x, t]
    old = v - step
    # t where `old` sits in the order, which is sorted but for t's own value.
    lo, hi = 0, order.size
    while lo < hi:
        mid = (lo + hi) // 2
        if order[mid] != t and row[order[mid]] > old:
            lo = mid + 1
        else:
            hi = mid
    i = lo
    if step > 0:  # forward, before the first of order[:i] below v
        lo, hi = 0, i
        while lo < hi:
            mid = (lo + hi) // 2
            if row[order[mid]] > v:
                lo = mid + 1
            else:
                hi = mid
        for k in range(i, lo, -1):
            order[k] = order[k - 1]
    else:  # back, after the last of order[i + 1:] above v
        lo, hi = i + 1, order.size
        while lo < hi:
            mid = (lo + hi) // 2
            if row[order[mid]] > v:
                lo = mid + 1
            else:
                hi = mid
        lo -= 1
        for k in range(i, lo):
            order[k] = order[k + 1]
    order[lo] = t


def relist(x, t, ok, leaving, n):
    """Topic t into (`ok`) or out of broker index x's `leaving`, of n topics before."""
    i = 0
    while i < n and leaving[x, i] < t:
        i += 1
    if ok:
        for j in range(n, i, -1):
            leaving[x, j] = leaving[x, j - 1]
        leaving[x, i] = t
    else:
        for j in range(i, n - 1):
            leaving[x, j] = leaving[x, j + 1]
        leaving[x, n - 1] = -1
