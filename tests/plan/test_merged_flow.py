"""The leader-pair flow above the exact limit (kit/plan/solvers/merged_flow.py): items of one
kind merged into one node, solved by successive shortest paths, then split back. Its cost is
the optimum of OR-Tools' min-cost flow over the items one by one, and its choice a valid
assignment within the parents' bounds."""
from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kit import plan as planners
from kit.formats import load_snapshot
from kit.plan.solvers import merged_flow
from kit.plan.solvers.flow import penalty_tiers, soft_assignment, water_fill
from kit.plan.steps import leadership


@st.composite
def pair_networks(draw):
    """Partitions of a few replica sets (RF 1-3 over nb brokers), each choosing its (leader,
    first follower) pair as `leadership._choose_pairs` builds them: cost 0 for its current pair,
    1 to keep its leader only, 2 otherwise; groups are pairs with bounds around an even split
    per leader, parents are leaders with bounds around an even split, sometimes too tight."""
    nb = draw(st.integers(2, 5))
    sets = draw(st.lists(st.lists(st.integers(0, nb - 1), min_size=1, max_size=3, unique=True), min_size=1,
                         max_size=5))
    it, gr, cost, kind = [], [], [], []
    for i in range(draw(st.integers(1, 40))):
        s = draw(st.sampled_from(range(len(sets))))
        order = draw(st.permutations(sets[s]))
        kind.append((s, order[0], order[-1] if len(order) == 1 else order[1]))
        if len(order) == 1:
            it.append(i), gr.append(order[0] * nb + order[0]), cost.append(0)
        for a in range(len(order)):
            for c in range(len(order)):
                if a != c:
                    it.append(i), gr.append(order[a] * nb + order[c])
                    cost.append(0 if (a, c) == (0, 1) else (1 if a == 0 else 2))
    n = len(kind)
    it, gr, cost = np.array(it), np.array(gr), np.array(cost)
    avail = np.bincount(gr, minlength=nb * nb)
    lo, hi = water_fill(avail.reshape(nb, nb), np.bincount(gr // nb, minlength=nb) * n // len(it) + 1)
    lo, hi = np.maximum(lo.ravel() - draw(st.integers(0, 1)), 0), hi.ravel()
    plo, phi = water_fill(np.bincount(gr // nb, minlength=nb), n)
    slack = draw(st.integers(-1, 2))
    plo, phi = np.maximum(plo - max(slack, 0), 0), phi + slack
    # The kind: its replica set and its current pair, numbered as `_choose_pairs` does.
    item_kind = np.array([(s * nb + a) * nb + c for s, a, c in kind])
    return (n, it, gr, cost, lo, hi, avail, np.repeat(np.arange(nb), nb), plo, phi), item_kind


def _cost(args, choice):
    """The network's cost of a choice: its arcs' costs and its groups' penalty tiers."""
    n, it, gr, cost, lo, hi, cap = args[:7]
    count = np.bincount(choice, minlength=len(lo))
    total = int(cost[gr == choice[it]].sum())
    filled = np.zeros(len(lo), dtype=np.int64)
    for units, unit_cost in penalty_tiers(lo, hi, cap, False):
        total += int(np.clip(count - filled, 0, units).sum()) * unit_cost
        filled += units
    return total


@settings(max_examples=300, deadline=None)
@given(pair_networks())
def test_the_merged_flow_costs_what_the_items_one_by_one_cost_and_is_a_valid_assignment(network):
    args, item_kind = network
    n, it, gr = args[:3]
    parent, plo, phi = args[7:]
    whole = soft_assignment(*args)  # below the exact limit: OR-Tools over every item
    merged = soft_assignment(*args, exact_limit=0, item_kind=item_kind)
    assert (merged is None) == (whole is None)
    if whole is None:
        return
    # Each item on one of its own arcs, the parents within their hard bounds.
    assert set(zip(range(n), merged.tolist())) <= set(zip(it.tolist(), gr.tolist()))
    per_parent = np.bincount(parent[merged], minlength=plo.size)
    assert ((plo <= per_parent) & (per_parent <= phi)).all()
    assert _cost(args, merged) == _cost(args, whole)


def test_the_split_is_deterministic_and_gives_each_kind_its_arcs_in_order():
    # Four interchangeable items (one kind) over two groups of capacity 2 each: the first two
    # items take the kind's first arc with flow, the next two the second; the same call, the
    # same answer.
    n, it = 4, np.repeat(np.arange(4), 2)
    gr = np.tile([0, 1], 4)
    args = (n, it, gr, np.zeros(8, dtype=np.int64), np.array([2, 2]), np.array([2, 2]), np.array([4, 4]))
    got = soft_assignment(*args, exact_limit=0, item_kind=np.zeros(4, dtype=np.int64))
    assert got.tolist() == [0, 0, 1, 1]
    assert soft_assignment(*args, exact_limit=0, item_kind=np.zeros(4, dtype=np.int64)).tolist() == got.tolist()


@pytest.mark.parametrize("scenario, plan", [
    ("scale-out", lambda c: planners.plan_scale_out(c)),
    ("az-loss", lambda c: planners.plan_az_loss(c, "rack-c")),
    ("replace", lambda c: planners.plan_rebalance(c)),
])
def test_the_pair_flows_kinds_merge_only_partitions_with_the_same_arcs(snapshots, scenario, plan):
    # `_choose_pairs` merges partitions by replica set and current pair; on the small clusters
    # (below the exact limit) each of its flows is solved both ways: the merged flow must cost
    # what OR-Tools' flow over the partitions one by one costs (kinds by replica set alone,
    # whose partitions differ in their current pair, cost more on these clusters).
    costs = []

    def both(*args, **kw):
        whole = soft_assignment(*args, **kw)
        if kw.get("item_kind") is not None and whole is not None:
            merged = soft_assignment(*args, **{**kw, "exact_limit": 0})
            costs.append((_cost(args, merged), _cost(args, whole)))
        return whole

    with mock.patch.object(leadership, "soft_assignment", both):
        plan(load_snapshot(str(snapshots[scenario])))
    assert costs, "no leader-pair flow ran"
    assert all(merged == whole for merged, whole in costs), costs


@settings(max_examples=150, deadline=None)
@given(pair_networks())
def test_the_rounds_compiled_and_by_scipy_give_the_same_choice(network):
    # With numba loaded, the rounds' shortest paths run compiled over the residual network
    # (`path_kernels.residual_kernels`); without, by scipy over the arcs listed each round:
    # the same distances, so the same flow and the same choice.
    args, item_kind = network
    got = []
    for loaded in (False, True):
        with mock.patch("kit.jit.numba_loaded", return_value=loaded):
            got.append(soft_assignment(*args, exact_limit=0, item_kind=item_kind))
    assert (got[0] is None) == (got[1] is None)
    if got[0] is not None:
        assert got[0].tolist() == got[1].tolist()


@settings(max_examples=150, deadline=None)
@given(pair_networks())
def test_the_imbalances_carried_through_the_rounds_are_those_of_the_flow(network):
    # The start flow's imbalances, and each round's update of them from the arcs its max flow
    # moved units on, are every node's supply plus inflow less outflow (`_Network.imbalance`)
    # of the flow at that point: the rounds start from the same excess and deficit nodes.
    args, item_kind = network
    seen = []
    start_flow, round_ = merged_flow._Network.start_flow, merged_flow._Network.round

    def checked_start(net):
        flow, pot, imb = start_flow(net)
        seen.append(np.array_equal(imb, net.imbalance(flow)))
        return flow, pot, imb

    def checked_round(net, flow, pot, imb):
        step = round_(net, flow, pot, imb)
        if step:
            seen.append(np.array_equal(imb, net.imbalance(flow)))
        return step

    with mock.patch.object(merged_flow._Network, "start_flow", checked_start), \
            mock.patch.object(merged_flow._Network, "round", checked_round):
        soft_assignment(*args, exact_limit=0, item_kind=item_kind)
    assert all(seen)
