"""kit/array_ops.py's integer-array helpers, which the traffic model, the copies, the bounds and
the waves read: `member` (a table over a short range, a binary search otherwise) answers as
Python's `in`; `dense_codes` as ``np.unique(..., return_inverse=True)``; `appearance_order` as a
loop; the running sums give a loop's floats."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from kit.array_ops import (Lists, appearance_order, dense_codes, distinct, fold_by_loop, fold_many, fold_sums, in_lists,
                           member, pair_keys, positions, row_entries)

FLOATS = st.floats(allow_nan=False, allow_infinity=False, width=64) | st.sampled_from([0.0, -0.0, 1e-300, 1e300, 0.1])
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
@given(st.lists(st.lists(IDS, max_size=40), max_size=4))
def test_distinct_is_the_union_of_uniques(arrays):
    # A table over a short range of ids, a sort over a wide one (IDS spans 2^62): numpy's answer.
    a = [np.array(x, dtype=np.int64) for x in arrays]
    want = np.unique(np.concatenate(a)) if a else np.empty(0, dtype=np.int64)
    got = distinct(*a)
    assert got.dtype == np.int64 and got.tolist() == want.tolist()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 9), max_size=60))
def test_appearance_order_is_a_loops(pos):
    assert appearance_order(np.array(pos, dtype=np.int64), 10).tolist() == list(dict.fromkeys(pos))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), FLOATS), max_size=80), st.lists(FLOATS, min_size=8, max_size=8))
def test_the_grid_of_running_sums_gives_the_loops_floats(entries, start):
    """`fold_sums` (a grid of running sums, or the loop when one position holds most entries)
    gives each position's start plus its values added one at a time, bit for bit, -0.0 too."""
    entries.sort(key=lambda e: e[0])  # sorted positions, entries in order within each
    pos = np.array([k for k, _ in entries], dtype=np.int64)
    values = np.array([v for _, v in entries], dtype=float)
    want = {}
    for k, v in entries:
        want[k] = want.get(k, start[k]) + v
    got = fold_sums(start, pos, values)
    assert list(got) == sorted(want)
    assert [np.float64(x).tobytes() for x in got.values()] == [np.float64(want[k]).tobytes() for k in sorted(want)]
    keys, first, counts = np.unique(pos, return_index=True, return_counts=True)
    assert fold_by_loop(start, keys, first, counts, values) == want


def test_sums_of_many_values_are_the_loops_on_the_grid_and_off_it():
    """Long rows of values that round differently in any other order: the grid (spread
    positions) and the loop (one position holding nearly all) both give the loop's floats."""
    rng = np.random.default_rng(3)
    for spread in (True, False):
        pos = np.sort(rng.integers(0, 150, 20_000) if spread else np.r_[np.zeros(19_990, int), np.arange(1, 11)])
        values = rng.standard_normal(20_000) * 10.0 ** rng.integers(-8, 9, 20_000)
        start = (rng.standard_normal(150) * 1e6).tolist()
        want = {}
        for k, v in zip(pos.tolist(), values.tolist()):
            want[k] = want.get(k, start[k]) + v
        assert fold_sums(start, pos, values) == want


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.integers(0, 30), st.lists(st.integers(0, 9), max_size=12, unique=True), max_size=12),
       st.lists(st.tuples(st.integers(0, 30), st.integers(0, 9)), max_size=60))
def test_in_lists_is_member_of_the_pair_keys(lists, entries):
    # Each (partition, broker) entry is in its partition's list (by a grid of the lists, or by
    # `member` when one list is much the longest): as `member` of the pair keys says.
    rows = np.array(list(lists), dtype=np.int64)
    l_row = np.repeat(np.arange(len(rows)), [len(v) for v in lists.values()]).astype(np.int64)
    l_id = np.array([b for v in lists.values() for b in v], dtype=np.int64)
    part = np.array([p for p, _ in entries], dtype=np.int64)
    ids = np.array([b for _, b in entries], dtype=np.int64)
    want = [b in lists.get(p, []) for p, b in entries]
    assert in_lists(part, ids, rows, l_row, l_id, 31).tolist() == want
    # The lists of every partition 0..30 in order (rows None), as a Layout's replicas.
    every = {p: lists.get(p, []) for p in range(31)}
    e_row = np.repeat(np.arange(31), [len(v) for v in every.values()]).astype(np.int64)
    e_id = np.array([b for v in every.values() for b in v], dtype=np.int64)
    assert in_lists(part, ids, None, e_row, e_id, 31).tolist() == want


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.integers(0, 30), st.lists(st.integers(0, 9), max_size=5), max_size=12), st.data())
def test_lists_are_the_dicts_lists_flat(lists, data):
    # Lists: each entry's list and broker in dict order, each list's first broker (-1: empty),
    # and a selection of lists as if made from the selected dict alone.
    flat = Lists.of(lists)
    assert flat.rows.tolist() == list(lists) and flat.lens.tolist() == [len(v) for v in lists.values()]
    assert [(int(flat.rows[r]), b) for r, b in zip(flat.row.tolist(), flat.id.tolist())] == \
        [(p, b) for p, v in lists.items() for b in v]
    assert flat.heads().tolist() == [v[0] if v else -1 for v in lists.values()]
    keep = data.draw(st.lists(st.booleans(), min_size=len(lists), max_size=len(lists)))
    some = flat.only(np.array(keep, dtype=bool))
    want = Lists.of({p: v for (p, v), k in zip(lists.items(), keep) if k})
    for a in ("rows", "lens", "row", "id"):
        assert getattr(some, a).tolist() == getattr(want, a).tolist()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 99), max_size=5), max_size=12), st.data())
def test_row_entries_take_the_rows_of_a_ragged_array(rows, data):
    # Rows laid end to end; any selection of them, in any order, repeats allowed.
    values = np.array([v for r in rows for v in r], dtype=np.int64)
    lengths = np.array([len(r) for r in rows], dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    pick = np.array(data.draw(st.lists(st.integers(0, max(len(rows) - 1, 0)), max_size=8 if rows else 0)),
                    dtype=np.int64)
    assert values[row_entries(starts[pick], lengths[pick])].tolist() == [v for i in pick.tolist() for v in rows[i]]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), FLOATS, FLOATS), max_size=80), st.lists(FLOATS, min_size=8, max_size=8),
       st.lists(FLOATS, min_size=8, max_size=8))
def test_fold_many_is_fold_sums_of_each_column(entries, start_a, start_b):
    # Two columns over the same positions (the grid's places worked out once): each column's
    # sums as `fold_sums` gives them alone, bit for bit.
    entries.sort(key=lambda e: e[0])
    pos = np.array([k for k, _, _ in entries], dtype=np.int64)
    a, b = (np.array([e[j] for e in entries], dtype=float) for j in (1, 2))
    got = fold_many([start_a, start_b], pos, [a, b])
    want = [fold_sums(start_a, pos, a), fold_sums(start_b, pos, b)]
    assert [[float(x).hex() for x in d.values()] for d in got] == [[float(x).hex() for x in d.values()] for d in want]
    assert [list(d) for d in got] == [list(d) for d in want]


@given(st.sets(st.integers(0, 5000) | st.sampled_from([1 << 40]), min_size=1, max_size=40), st.data())
def test_positions_is_searchsorted_among_the_ids(ids, data):
    ids = np.array(sorted(ids), dtype=np.int64)
    values = np.array(data.draw(st.lists(st.sampled_from(ids.tolist()), max_size=50)), dtype=np.int64)
    assert positions(ids, values).tolist() == np.searchsorted(ids, values).tolist()
