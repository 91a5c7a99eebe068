"""The assignment flows under the planners (kit/plan/flow.py), on instances small enough to
know the answer by hand."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kit.plan.solvers.flow import bounded_assignment, bounds_met, soft_assignment


def _ring(m: int):
    """One topic T with two partitions, both led by broker 0, that should split over
    brokers 0 and 1; moving one to broker 1 keeps the brokers' totals only if a ring of
    m - 1 filler partitions each shift one broker on (1 -> 2 -> ... -> m-1 -> 0).

    Groups: (T, 0), (T, 1), then per filler i (its own topic) (i, i) and (i, i + 1 mod m).
    Parents: brokers. Every change of leader costs 2; staying costs 0.
    """
    items, groups, costs = [], [], []
    parent = [0, 1]
    lo, hi = [1, 1], [1, 1]
    for t in (0, 1):  # the topic's two partitions
        items += [t, t]
        groups += [0, 1]
        costs += [0, 2]
    for i in range(1, m):
        g = len(parent)
        parent += [i, (i + 1) % m]
        lo += [0, 0]
        hi += [1, 1]
        items += [i + 1, i + 1]
        groups += [g, g + 1]
        costs += [0, 2]
    n_items = m + 1
    load = np.array([2] + [1] * (m - 1))  # every broker keeps its total
    return (n_items, np.array(items), np.array(groups), np.array(costs), np.array(lo), np.array(hi),
            np.full(len(lo), 2), np.array(parent), load, load)


@pytest.mark.parametrize("m", [3, 10, 20])
def test_upward_splits_a_topic_even_when_the_fix_takes_a_long_chain(m):
    args = _ring(m)
    choice = soft_assignment(*args, upward=True)
    assert sorted(choice[:2].tolist()) == [0, 1]  # one leader each on brokers 0 and 1
    parents = args[7][choice]
    assert np.bincount(parents, minlength=m).tolist() == args[8].tolist()


def test_without_upward_a_long_chain_costs_more_than_one_over_and_one_short():
    # The trade the symmetric penalty makes (and why the leader flow asks for `upward`):
    # a chain of 10 changes costs more than 1 over plus 1 short, so the topic stays 2/0.
    args = _ring(10)
    choice = soft_assignment(*args)
    assert choice[:2].tolist() == [0, 0]
    # a short chain is still taken
    assert sorted(soft_assignment(*_ring(3))[:2].tolist()) == [0, 1]


def test_a_failed_flow_names_the_brokers_short_of_room_and_by_how_much():
    # Four items that can only go to brokers 0 and 1 (groups = brokers, one parent each),
    # with room for 1 each: 2 short, and both brokers on the source side of the cut.
    it = np.array([0, 0, 1, 1, 2, 2, 3, 3, 4])
    gr = np.array([0, 1, 0, 1, 0, 1, 0, 1, 2])
    zeros = np.zeros(3, dtype=np.int64)
    cut: list = []
    got = bounded_assignment(5, it, gr, zeros, np.full(3, 5), np.arange(3), zeros, np.array([1, 1, 5]), cut=cut)
    assert got is None
    shortfall, source_side, sink_on_source_side = cut[0]
    assert shortfall == 2
    assert source_side.tolist() == [True, True, False]
    assert not sink_on_source_side
    # with the room the cut asks for, it fits
    assert bounded_assignment(5, it, gr, zeros, np.full(3, 5), np.arange(3), zeros, np.array([2, 2, 5])) is not None


def test_items_with_the_same_candidates_counted_once_give_the_same_answer_and_cut():
    # The same four items (candidates 0 and 1) listed once with weight 4, beside the item
    # that can only go to 2: the same shortfall and the same brokers on the source side.
    it = np.array([0, 0, 1])
    gr = np.array([0, 1, 2])
    weight = np.array([4, 1])
    zeros = np.zeros(3, dtype=np.int64)
    cut: list = []
    assert not bounds_met(weight, it, gr, zeros, np.full(3, 5), np.arange(3), zeros, np.array([1, 1, 5]), cut=cut)
    shortfall, source_side, sink_on_source_side = cut[0]
    assert shortfall == 2
    assert source_side.tolist() == [True, True, False]
    assert not sink_on_source_side
    assert bounds_met(weight, it, gr, zeros, np.full(3, 5), np.arange(3), zeros, np.array([2, 2, 5]))
    # too few partitions for broker 2's minimum: short on the other side
    cut = []
    assert not bounds_met(weight, it, gr, zeros, np.full(3, 5), np.arange(3), np.array([0, 0, 2]),
                          np.array([5, 5, 5]), cut=cut)
    assert cut[0][0] == 1 and cut[0][2]


@pytest.mark.parametrize("seed", range(20))
def test_bounds_met_agrees_with_the_items_listed_one_by_one(seed):
    rng = np.random.default_rng(seed)
    n_sets, n_par = 6, 4
    sets = [rng.choice(n_par, size=int(rng.integers(1, 4)), replace=False) for _ in range(n_sets)]
    weight = rng.integers(1, 5, n_sets)
    lo = rng.integers(0, 4, n_par)
    hi = lo + rng.integers(0, 5, n_par)
    s_it = np.concatenate([np.full(len(s), i) for i, s in enumerate(sets)])
    s_gr = np.concatenate(sets)
    copies = np.repeat(np.arange(n_sets), weight)
    it = np.concatenate([np.full(len(sets[c]), k) for k, c in enumerate(copies)])
    gr = np.concatenate([sets[c] for c in copies])
    zeros = np.zeros(n_par, dtype=np.int64)
    cap = np.full(n_par, int(weight.sum()))
    one: list = []
    each = bounded_assignment(len(copies), it, gr, zeros, cap, np.arange(n_par), lo, hi, cut=one)
    once: list = []
    assert bounds_met(weight, s_it, s_gr, zeros, cap, np.arange(n_par), lo, hi, cut=once) == (each is not None)
    if one:
        assert one[0][0] == once[0][0]
        assert one[0][1].tolist() == once[0][1].tolist() and one[0][2] == once[0][2]


@pytest.mark.parametrize("base, k", [(150, 3), (7, 1), (10, 5), (2 ** 21, 3)])
def test_replica_sets_are_the_distinct_rows_in_order_with_their_counts_and_inverse(base, k):
    # Leadership's replica sets for `bounds_met`: rows read as numbers where they fit,
    # np.unique over rows where they do not (2**21 ** 3 is over 62 bits); the same answer.
    from kit.plan.steps.leadership_figures import distinct_rows

    rows = np.sort(np.random.default_rng(k).integers(0, min(base, 12), (500, k)), axis=1)
    got, counts, inverse = distinct_rows(rows, base)
    want, want_inverse, want_counts = np.unique(rows, axis=0, return_inverse=True, return_counts=True)
    assert got.tolist() == want.tolist() and counts.tolist() == want_counts.tolist()
    assert inverse.tolist() == want_inverse.reshape(-1).tolist()


def _widened_by_hand(n, it, gr, lo, hi, cap, parent, plo, phi):
    """`soft_assignment`'s widened path as specified: hard bounds widened by w = 0, 1, 2, 4, ...,
    one max flow per width, until one is met."""
    lo = np.minimum(lo, cap)
    hi = np.minimum(np.maximum(hi, lo), cap)
    w = 0
    while True:
        choice = bounded_assignment(n, it, gr, np.maximum(lo - w, 0), np.minimum(hi + w, cap), parent, plo, phi)
        if choice is not None or (lo - w <= 0).all() and (hi + w >= cap).all():
            return choice
        w = w + 1 if w < 2 else w * 2


@pytest.mark.parametrize("seed", range(40))
def test_the_widened_path_reaches_the_same_width_and_choice_as_one_flow_per_width(seed):
    # Its shortcuts (a failed flow's cut priced at later widths; interchangeable items merged,
    # which the odd seeds allow by drawing candidates from few sets) must not change the answer.
    rng = np.random.default_rng(seed)
    n, it, gr, lo, hi, cap, parent, plo, phi = _leader_flow(rng, 6, 3, int(rng.integers(20, 80)),
                                                            5 if seed % 2 else 200, tight=False)
    args = (n, it, gr, np.zeros(len(it), dtype=np.int64), lo, hi, cap, parent, plo, phi)
    got = soft_assignment(*args, exact_limit=0)
    want = _widened_by_hand(n, it, gr, lo, hi, cap, args[7], plo, phi)
    assert (got is None) == (want is None)
    if want is not None:
        assert got.tolist() == want.tolist()
    # There no cost is read: the leader flow builds none above the limit (leadership._choose_leaders).
    unpriced = soft_assignment(*args[:3], None, *args[4:], exact_limit=0, tie_cost=None)
    assert (unpriced is None) == (want is None) and (want is None or unpriced.tolist() == want.tolist())


def _leader_flow(rng, n_brokers, n_topics, n, n_sets, tight):
    """A random leader-like flow: items of topics with a candidate set of brokers each, a group
    per (topic, broker) under its broker; `tight` draws narrow groups and uneven broker
    bounds, so that widths fail, some of them by a broker's groups alone."""
    pool = [rng.choice(n_brokers, size=int(rng.integers(1, min(n_brokers, 3) + 1)), replace=False)
            for _ in range(n_sets)]
    sets = [pool[int(rng.integers(len(pool)))] for _ in range(n)]
    topic = rng.integers(0, n_topics, n)
    it = np.concatenate([np.full(len(s), i) for i, s in enumerate(sets)])
    gr = np.concatenate([topic[i] * n_brokers + s for i, s in enumerate(sets)])
    shuffle = rng.permutation(len(it))
    it, gr = it[shuffle], gr[shuffle]
    cap = np.bincount(gr, minlength=n_brokers * n_topics)
    lo = rng.integers(0, 2 if tight else 4, cap.size)
    hi = lo + rng.integers(0, 2, cap.size)
    share = n // n_brokers
    if tight:
        plo = np.maximum(share + rng.integers(-2, 4, n_brokers), 0)
        phi = plo + rng.integers(0, 3, n_brokers)
    else:
        plo = np.full(n_brokers, max(share - int(rng.integers(0, 3)), 0))
        phi = np.full(n_brokers, share + int(rng.integers(1, 4)))
    return n, it, gr, lo, hi, cap, np.tile(np.arange(n_brokers), n_topics), plo, phi


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.booleans(), st.booleans(), st.booleans())
def test_the_widened_path_probing_out_of_order_finds_the_first_width_and_its_choice(seed, few_sets, tight, parents):
    # The widths are probed out of order (bisection, a broker's groups alone ruling a width
    # out, cuts priced at wider widths): the first width that meets the bounds, and the choice
    # of its flow, are those of one flow per width in order.
    rng = np.random.default_rng(seed)
    n, it, gr, lo, hi, cap, parent, plo, phi = _leader_flow(rng, int(rng.integers(2, 7)), int(rng.integers(1, 4)),
                                                            int(rng.integers(5, 60)), 4 if few_sets else 200, tight)
    if not parents:
        parent = plo = phi = None
    got = soft_assignment(n, it, gr, None, lo, hi, cap, parent, plo, phi, exact_limit=0)
    want = _widened_by_hand(n, it, gr, lo, hi, cap, parent, plo, phi)
    assert (got is None) == (want is None)
    if want is not None:
        assert got.tolist() == want.tolist()


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.integers(0, 4))
def test_a_width_its_parents_rule_out_has_no_assignment(seed, w):
    from kit.plan.solvers.flow import _parents_block

    rng = np.random.default_rng(seed)
    n, it, gr, lo, hi, cap, parent, plo, phi = _leader_flow(rng, 4, 2, int(rng.integers(5, 40)), 200, True)
    w_lo, w_hi = np.maximum(lo - w, 0), np.minimum(np.maximum(hi, lo) + w, cap)
    if _parents_block(w_lo, w_hi, (parent, plo, phi)):
        assert bounded_assignment(n, it, gr, w_lo, w_hi, parent, plo, phi) is None


def test_the_widened_path_solves_no_flow_at_a_width_a_parents_groups_rule_out(monkeypatch):
    # Four items, each may go to broker 0 or 1 (one topic: groups 0 and 1 under brokers 0 and
    # 1), two each at w = 0; broker 0 must take all four. Its groups hold at most 2 at w = 0 and
    # 3 at w = 1, 4 at w = 2: flows are solved at w = 2 only (the four items merged, then whole).
    from kit.plan.solvers import flow

    solved = []
    real = flow._bounded_flow

    def counted(weight, item_of_arc, group_of_arc, group_lo, group_hi, *rest):
        solved.append(group_hi.tolist())
        return real(weight, item_of_arc, group_of_arc, group_lo, group_hi, *rest)

    monkeypatch.setattr(flow, "_bounded_flow", counted)
    it, gr = np.repeat(np.arange(4), 2), np.tile([0, 1], 4)
    choice = soft_assignment(4, it, gr, None, np.array([2, 2]), np.array([2, 2]), np.array([4, 4]),
                             np.array([0, 1]), np.array([4, 0]), np.array([4, 4]), exact_limit=0)
    assert choice.tolist() == [0, 0, 0, 0]
    assert solved and all(hi == [4, 4] for hi in solved)
