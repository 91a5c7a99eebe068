"""Which topics a count balance's pick looks at, and in what order: `topic_order`, the
reference (the compiled pick runs `count_kernels.topic_order_by_loop`), and `counts`'
ranked (broker x topic), each broker's topics by (count, topic) descending, the first
n_ranked[x] those it holds, then -1 (`topic_ranks`): a move that gives a broker its first
replica of a topic moves no topic it holds none of (at 1,000,000 partitions a move carried
a topic past some 1,800 others with them, 700 without).

The compiled pick walks broker a's topics in that order and stops at the first that cannot
beat the ones it keeps (a topic's d is at most its count on a): on the 1,000,000-partition
drift rebalance it reads some 60 topics per pick early in the balance and 500 late, of
5,000 (the scan of every topic was about half of the compiled balance's time).
`count_kernels._move` keeps ranked up move by move (the kernels stay in that one file:
numba's disk cache of a compiled function is renewed when its own file changes, not when
a function it calls from another file does); `count_plain` writes it anew.
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


def topic_ranks(scaled_t: np.ndarray):
    """(ranked, n_ranked) of `scaled_t` (count * n_topics + topic, unique per broker): each
    row's held topics (count >= 1) by it descending, then -1; how many per row."""
    n_topics = scaled_t.shape[1]
    # Unique keys: any sort gives the same order; timsort is quick on the runs of topics
    # (ascending within each count).
    ranked = np.ascontiguousarray(np.argsort(scaled_t, axis=1, kind="stable")[:, ::-1])
    held = np.take_along_axis(scaled_t, ranked, axis=1) >= n_topics
    # int32: half the bytes a move shifts along a broker's ranked topics (~700 at 1,000,000 partitions).
    return np.where(held, ranked, -1).astype(np.int32), held.sum(axis=1)
