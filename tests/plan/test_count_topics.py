"""A pick's topics (`count_topics`): the compiled loop keeps the reference's topics in its order,
and the ranked topics it walks stay what a recount gives after every move."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import skewed_cluster
from kit.plan.steps import count_kernels
from kit.plan.steps.count_balance import CountBalance
from kit.plan.steps.count_kernels import rerank, topic_order_by_loop
from kit.plan.steps.count_topics import SEARCHED_TOPICS, topic_order, topic_ranks
from kit.plan.steps.topic_quotas import topic_quotas
from kit.plan.workspace import Workspace


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 80), st.integers(0, 2 ** 32 - 1), st.booleans(), st.booleans())
def test_the_compiled_topic_order_loop_keeps_the_same_topics_in_the_same_order(n_topics, seed, fresh, use):
    # The compiled balance chooses each pick's topics by one loop over a heap
    # (`topic_order_by_loop`) that walks the ranked topics and stops early, the plain one by
    # numpy's whole-array steps: the same topics, in the same order, with or without the
    # quotas' planned topics and an exhaustive search.
    rng = np.random.default_rng(seed)
    n_brokers = 4
    count = rng.integers(0, rng.integers(1, 8), (n_brokers, n_topics))
    count[0, rng.integers(n_topics)] += 1  # broker 0 always holds a topic, and it is movable
    nz = (count > 0) & ((rng.random((n_brokers, n_topics)) < 0.7) | (count == count.max()))
    scaled = count * n_topics
    scaled_t = scaled + np.arange(n_topics)
    leave, arrive = rng.random((2, n_brokers, n_topics)) < rng.random()
    quotas = (use, None, None, leave, arrive, leave.sum(axis=1), arrive.sum(axis=1))
    counts = (scaled, scaled_t, None, nz, *topic_ranks(scaled_t))
    for b in (1, 2, 3):
        want = topic_order(0, b, fresh, counts, quotas)
        got = topic_order_by_loop(0, b, fresh, counts, quotas)
        assert got.tolist() == want.tolist()
        assert fresh or len(got) <= SEARCHED_TOPICS


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 60), st.integers(0, 2 ** 32 - 1))
def test_a_topic_counted_one_up_or_down_is_ranked_as_a_recount_ranks_it(n_topics, seed):
    rng = np.random.default_rng(seed)
    scaled_t = rng.integers(0, 5, (2, n_topics)) * n_topics + np.arange(n_topics)
    ranked, n_ranked = topic_ranks(scaled_t)
    for _ in range(20):
        x, t = rng.integers(2), rng.integers(n_topics)
        step = n_topics if scaled_t[x, t] < n_topics or rng.random() < 0.5 else -n_topics
        scaled_t[x, t] += step
        rerank(x, t, step, scaled_t, ranked, n_ranked)
        want = topic_ranks(scaled_t)
        assert (ranked.tolist(), n_ranked.tolist()) == (want[0].tolist(), want[1].tolist())


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.booleans(), st.booleans())
def test_every_move_keeps_the_ranked_topics_as_a_recount_gives_them(seed, quotas, spread):
    # `_move` keeps ranked up (fails if it forgets): after every step of a balance (run as
    # plain Python, a log of two rows returns after each), it equals a recount.
    cluster = skewed_cluster(seed, most_brokers=12, rack_choices=[["a", "b", "c"], ["a", "b"], [None]],
                             topics=(1, 30), partitions=(1, 20), most_rf=3)
    ws = Workspace(cluster, targets=sorted(cluster.brokers), selected=range(len(cluster.partitions)))
    if ws.target_idx.size < 2:
        return
    cb = CountBalance(ws, "balance", None, spread)
    if quotas:
        cb.quotas = cb.quota_arrays(topic_quotas(ws))
    state = np.zeros(3, dtype=np.int64)
    args = (-1, cb.own_pool, spread, cb.scan, cb.band, cb.lists, cb.counts, cb.quotas, cb.peers, cb.targets, state)
    moved = 0
    while not state[2]:
        moved += count_kernels.balance(*args, np.empty((2, 3), dtype=np.int64))
        want = topic_ranks(cb.counts[1])
        assert (cb.counts[4].tolist(), cb.counts[5].tolist()) == (want[0].tolist(), want[1].tolist())
    assert moved == state[1]
