"""kit/traffic.py's array helpers, which the traffic model, the copies, the bounds and the waves
read: `member` (a table over a short range, a binary search otherwise) answers as Python's
`in`; `dense_codes` as ``np.unique(..., return_inverse=True)``; `appearance_order` as a loop."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from kit.traffic import appearance_order, dense_codes, member, pair_keys

IDS = st.integers(-3, 40) | st.sampled_from([0, 1 << 31, (1 << 62) + 5, -(1 << 40)])


@settings(max_examples=300, deadline=None)
@given(st.lists(IDS, max_size=60), st.lists(IDS, max_size=60))
def test_member_is_pythons_in(keys, pool):
    got = member(np.array(keys, dtype=np.int64), np.array(pool, dtype=np.int64))
    assert got.tolist() == [k in set(pool) for k in keys]


def test_member_of_pair_keys_and_of_broker_ids():
    rng = np.random.default_rng(7)
    part, broker = np.repeat(np.arange(500), 3), rng.integers(0, 20, 1500)
    keys, pool = pair_keys(part, broker), pair_keys(part[::2], broker[::2])
    want = set(pool.tolist())
    assert member(keys, pool).tolist() == [k in want for k in keys.tolist()]  # the binary search
    ids = np.array([3, 5, 8, 13])
    assert member(broker, ids).tolist() == [b in {3, 5, 8, 13} for b in broker.tolist()]  # the table


@settings(max_examples=300, deadline=None)
@given(st.lists(IDS, max_size=60))
def test_dense_codes_is_uniques_inverse(values):
    a = np.array(values, dtype=np.int64)
    want_ids, want_pos = np.unique(a, return_inverse=True)
    ids, pos = dense_codes(a)
    assert ids.tolist() == want_ids.tolist() and pos.tolist() == want_pos.tolist()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 9), max_size=60))
def test_appearance_order_is_a_loops(pos):
    assert appearance_order(np.array(pos, dtype=np.int64), 10).tolist() == list(dict.fromkeys(pos))
