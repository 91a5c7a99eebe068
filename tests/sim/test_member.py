"""`kit.traffic.member`, the membership test the traffic model, the copies and the bounds read:
its table over a short range and its binary search answer as Python's `in` does."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from kit.traffic import member, pair_keys

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
