"""The split-and-repair solve of `soft_assignment`'s network (kit/plan/solvers/split_flow.py)
finds an optimum of the same cost as OR-Tools' solve of the whole network."""
from __future__ import annotations

import os
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order

from kit import jit
from kit.cli.plan import SHARE_MODULES
from kit.concurrency import second_core
from kit.plan.solvers import path_kernels
from kit.plan.solvers.flow import penalty_tiers, soft_assignment, water_fill
from kit.plan.solvers.split_flow import excess_pushed, repaired_assignment


@st.composite
def networks(draw):
    """Topics of items, each item choosing among 1-3 brokers (its group: topic x broker),
    costs 0-2; group bounds an even split of the topic, parent (broker) bounds around an
    even split of all items, sometimes too tight to meet."""
    nb = draw(st.integers(2, 6))
    nt = draw(st.integers(1, 5))
    it, gr, cost, topic_of_item = [], [], [], []
    for t in range(nt):
        for _ in range(draw(st.integers(1, 10))):
            i = len(topic_of_item)
            topic_of_item.append(t)
            brokers = draw(st.lists(st.integers(0, nb - 1), min_size=1, max_size=3, unique=True))
            for pos, b in enumerate(brokers):
                it.append(i)
                gr.append(t * nb + b)
                cost.append(draw(st.integers(0, 2)) if draw(st.booleans()) else pos)
    n = len(topic_of_item)
    it, gr, cost = np.array(it), np.array(gr), np.array(cost)
    avail = np.bincount(gr, minlength=nt * nb).reshape(nt, nb)
    lo, hi = water_fill(avail, np.bincount(topic_of_item, minlength=nt))
    plo, phi = water_fill(np.bincount(gr % nb, minlength=nb), n)
    slack = draw(st.integers(-1, 2))
    plo, phi = np.maximum(plo - max(slack, 0), 0), phi + slack
    return (n, it, gr, cost, lo.ravel(), hi.ravel(), avail.ravel(), np.tile(np.arange(nb), nt), plo, phi)


def _cost(args, choice, upward):
    n, it, gr, cost, lo, hi, cap = args[:7]
    count = np.bincount(choice, minlength=len(lo))
    total = int(cost[gr == choice[it]].sum())
    filled = np.zeros(len(lo), dtype=np.int64)
    for units, unit_cost in penalty_tiers(lo, hi, cap, upward):
        used = np.clip(count - filled, 0, units)
        total += int(used.sum()) * unit_cost
        filled += units
    return total


@settings(max_examples=150, deadline=None)
@given(networks(), st.booleans())
def test_the_repair_finds_an_optimum_of_the_whole_networks_cost(args, upward):
    whole = soft_assignment(*args, upward=upward)
    tiers = penalty_tiers(*args[4:7], upward)
    split = repaired_assignment(*args[:4], np.stack([c for c, _ in tiers], axis=1),
                                np.array([c for _, c in tiers]), *args[7:], max_rounds=10**6, max_excess=1.0)
    if whole is None:
        assert split is None
        return
    assert split is not None
    n, it, gr = args[:3]
    assert (np.bincount(it[gr == split[it]], minlength=n) == 1).all()  # each item on one of its groups
    parents = np.bincount(args[7][split], minlength=len(args[8]))
    assert ((parents >= args[8]) & (parents <= args[9])).all()
    assert _cost(args, split, upward) == _cost(args, whole, upward)
    # and through soft_assignment, the split path gives an answer of the same cost
    assert _cost(args, soft_assignment(*args, upward=upward, split_limit=0), upward) == _cost(args, whole, upward)


def _whole_and_repaired(args, upward, data):
    """Random tie costs, OR-Tools' whole solve of `args` and the repair's answer (unlimited rounds)."""
    it = args[1]
    tie = np.array(data.draw(st.lists(st.integers(0, 2), min_size=len(it), max_size=len(it))), dtype=np.int64)
    whole = soft_assignment(*args, upward=upward, split_limit=None)
    tiers = penalty_tiers(*args[4:7], upward)
    split = repaired_assignment(*args[:4], np.stack([c for c, _ in tiers], axis=1),
                                np.array([c for _, c in tiers]), *args[7:], max_rounds=10**6, max_excess=1.0,
                                tie_cost=tie)
    return tie, whole, split


@settings(max_examples=100, deadline=None)
@given(networks(), st.booleans(), st.data())
def test_among_the_optima_the_repair_takes_one_with_the_least_tie_cost(args, upward, data):
    tie, whole, split = _whole_and_repaired(args, upward, data)
    it, gr = args[1:3]
    if whole is None:
        assert split is None
        return
    assert _cost(args, split, upward) == _cost(args, whole, upward)
    # OR-Tools' answer is an optimum of the first cost too, so it cannot have a lesser tie cost.
    assert int(tie[gr == split[it]].sum()) <= int(tie[gr == whole[it]].sum())


@st.composite
def piled_networks(draw):
    """`networks` with every item standing (its cost-0 arc) on its lowest-numbered broker, the
    rest of its arcs costing 1-2: the items as they stand pile onto the first brokers, far
    over their bounds, so the components are solved with those parents priced."""
    n, it, gr, cost, *rest = draw(networks())
    nb = len(rest[-1])
    broker = gr % nb
    first = np.zeros(len(it), dtype=bool)
    for i in range(n):
        arcs = np.flatnonzero(it == i)
        first[arcs[np.argmin(broker[arcs])]] = True
    moved = np.array(draw(st.lists(st.integers(1, 2), min_size=len(it), max_size=len(it))), dtype=np.int64)
    return (n, it, gr, np.where(first, 0, moved), *rest)


@settings(max_examples=150, deadline=None)
@given(piled_networks(), st.booleans(), st.data())
def test_from_items_standing_far_over_the_bounds_the_priced_repair_finds_an_optimum(args, upward, data):
    tie, whole, split = _whole_and_repaired(args, upward, data)
    n, it, gr = args[:3]
    if whole is None:
        assert split is None
        return
    assert split is not None
    assert (np.bincount(it[gr == split[it]], minlength=n) == 1).all()
    parents = np.bincount(args[7][split], minlength=len(args[8]))
    assert ((parents >= args[8]) & (parents <= args[9])).all()
    assert _cost(args, split, upward) == _cost(args, whole, upward)
    assert int(tie[gr == split[it]].sum()) <= int(tie[gr == whole[it]].sum())


def test_items_standing_far_over_the_bounds_start_from_priced_components():
    # Ten items all standing (cost 0) on parent 0, whose bound is 2: eight units over. The
    # components pay a price into parent 0 that sheds them all, the repair brings two back:
    # the optimum the whole solve finds, from a start two units (a fifth of the items) off.
    n = 10
    it = np.repeat(np.arange(n), 2)
    gr = np.tile([0, 1], n)
    cost = np.tile([0, 1], n)
    tiers = penalty_tiers(np.zeros(2, dtype=np.int64), np.full(2, n), np.full(2, n), False)
    args = (n, it, gr, cost, np.stack([c for c, _ in tiers], axis=1), np.array([c for _, c in tiers]),
            np.array([0, 1]), np.array([0, 0]), np.array([2, n]))
    split = repaired_assignment(*args, max_rounds=2, max_excess=0.2)
    assert split is not None and (split == 0).sum() == 2
    whole = soft_assignment(n, it, gr, cost, np.zeros(2, dtype=np.int64), np.full(2, n), np.full(2, n),
                            np.array([0, 1]), np.array([0, 0]), np.array([2, n]))
    assert (whole == 0).sum() == 2


@settings(max_examples=150, deadline=None)
@given(st.one_of(networks(), piled_networks()), st.booleans())
def test_the_compiled_kernels_give_the_same_repair(args, upward):
    # The same answer, not only the same cost: the plans of large clusters stay byte-identical
    # (the shortest paths, the zero-cost arcs and those of them that reach a deficit, `path_kernels`).
    # (The rounds are bounded by the units over the bounds, fewer than 50 here: a broken kernel
    # fails the test rather than keeping it running.)
    tiers = penalty_tiers(*args[4:7], upward)
    solve = [repaired_assignment(*args[:4], np.stack([c for c, _ in tiers], axis=1), np.array([c for _, c in tiers]),
                                 *args[7:], max_rounds=1000, max_excess=1.0, compiled=compiled)
             for compiled in (False, True)]
    assert (solve[0] is None) == (solve[1] is None)
    if solve[0] is not None:
        assert np.array_equal(solve[0], solve[1])


@st.composite
def max_flows(draw):
    """(tail, head, cap, imb, size): a round's max flow, up to 14 nodes and 60 arcs without
    loops (parallel ones included), capacities 1-4, some nodes in excess and some in deficit;
    many arcs reach no deficit, as in the repair's rounds."""
    size = draw(st.integers(2, 14))
    node = st.integers(0, size - 1)
    arcs = draw(st.lists(st.tuples(node, node).filter(lambda a: a[0] != a[1]), max_size=60))
    tail = np.array([a for a, _ in arcs], dtype=np.int64)
    head = np.array([b for _, b in arcs], dtype=np.int64)
    cap = np.array(draw(st.lists(st.integers(1, 4), min_size=len(arcs), max_size=len(arcs))), dtype=np.int64)
    imb = np.array(draw(st.lists(st.integers(-3, 3), min_size=size, max_size=size)), dtype=np.int64)
    imb[draw(st.integers(0, size - 1))] = draw(st.integers(1, 5))
    return tail, head, cap, imb, size


@settings(max_examples=400, deadline=None)
@given(max_flows())
def test_the_max_flow_over_the_arcs_reaching_a_deficit_is_the_flow_over_all(network):
    tail, head, cap, imb, size = network
    reaching = path_kernels.compiled()[4]
    # The arcs kept are those whose tail reaches a deficit (scipy's search, as a check).
    dst = np.flatnonzero(imb < 0)
    back = csr_matrix((np.ones(tail.size), (head, tail)), shape=(size, size))
    reaches = np.zeros(size, dtype=bool)
    for v in dst:
        reaches[breadth_first_order(back, v, return_predecessors=False)] = True
    assert np.array_equal(reaching(tail, head, dst, size), np.flatnonzero(reaches[tail]))
    assert np.array_equal(excess_pushed(tail, head, cap, imb, size, reaching),
                          excess_pushed(tail, head, cap, imb, size))


@settings(max_examples=30, deadline=None)
@given(st.one_of(networks(), piled_networks()), st.booleans())
def test_where_numba_is_not_loaded_here_the_repair_is_the_second_processs_share(args, upward):
    # `kit plan`'s second process loads numba and the shortest paths' kernels ahead
    # (kit.cli.plan.SHARE_MODULES): a repair in a process that has not loaded numba is sent
    # there, and its answer is the one this process computes itself.
    if not second_core.available():
        pytest.skip("needs fork and two cores")
    tiers = penalty_tiers(*args[4:7], upward)
    network = (*args[:4], np.stack([c for c, _ in tiers], axis=1), np.array([c for _, c in tiers]), *args[7:])
    here = repaired_assignment(*network, max_rounds=1000, max_excess=1.0, compiled=False)
    sent = []
    run_both = second_core.run_both

    def recorded(mine, there, *rest, **options):
        sent.append(there.__name__)
        return run_both(mine, there, *rest, **options)

    env = {k: v for k, v in os.environ.items() if k != "KIT_PLAN_PROCESSES"}
    with mock.patch.dict(os.environ, env, clear=True), \
            second_core.second_process(ahead=SHARE_MODULES) as forked, \
            mock.patch.object(jit, "numba_loaded", lambda: False), \
            mock.patch.object(second_core, "run_both", recorded):
        assert forked
        there = repaired_assignment(*network, max_rounds=1000, max_excess=1.0)
    assert (here is None) == (there is None)
    if here is not None:
        assert np.array_equal(here, there)
        assert sent[-1] == "_repaired_where_compiled"  # the repair's share, after the components'
