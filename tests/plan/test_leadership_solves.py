"""Fewer leadership solves, the same answers: `soft_assignment` answers without a solve where
its answer is forced (`flow.kept_choice`), and a leadership pass asks no stage the same
question twice."""
from __future__ import annotations

import hashlib
from pathlib import Path
from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kit import plan as planners
from kit.plan.solvers import flow
from kit.plan.solvers.flow import kept_choice, soft_assignment, water_fill
from kit.plan.steps import leadership

from test_plan_properties import clusters

ROOT = Path(__file__).resolve().parents[2]


@st.composite
def kept_networks(draw):
    """Items each with one arc of cost 0 (the group they are in now) and up to two dearer ones;
    group ranges either around the current counts (the answer is forced) or an even split
    (mostly not); sometimes parents, with bounds around the current totals or tighter."""
    n_groups = draw(st.integers(1, 6))
    n = draw(st.integers(1, 14))
    it, gr, cost, now = [], [], [], []
    for i in range(n):
        groups = draw(st.lists(st.integers(0, n_groups - 1), min_size=1, max_size=3, unique=True))
        now.append(groups[0])
        for k, g in enumerate(groups):
            it.append(i)
            gr.append(g)
            cost.append(0 if k == 0 else draw(st.integers(1, 2)))
    it, gr, cost = np.array(it), np.array(gr), np.array(cost)
    cap = np.bincount(gr, minlength=n_groups)
    count = np.bincount(now, minlength=n_groups)
    if draw(st.booleans()):
        lo = np.maximum(count - draw(st.integers(0, 1)), 0)
        hi = count + draw(st.integers(0, 1))
    else:
        lo, hi = water_fill(cap, n)
    parents = (None, None, None)
    if draw(st.booleans()):
        n_par = draw(st.integers(1, n_groups))
        parent = np.array([draw(st.integers(0, n_par - 1)) for _ in range(n_groups)])
        total = np.bincount(parent, weights=count, minlength=n_par).astype(np.int64)
        slack = draw(st.integers(-1, 1))
        parents = (parent, np.maximum(total - max(slack, 0), 0), total + slack)
    return (n, it, gr, cost, lo, hi, cap, *parents)


def _full_solve(args, upward):
    """`soft_assignment`'s own min-cost flow, the shortcut turned off."""
    with mock.patch.object(flow, "kept_choice", lambda *a, **k: None):
        return soft_assignment(*args, upward=upward)


@settings(max_examples=300, deadline=None)
@given(kept_networks(), st.booleans())
def test_a_kept_choice_is_the_full_solves_answer(args, upward):
    kept = kept_choice(*args)
    full = _full_solve(args, upward)
    if kept is not None:
        np.testing.assert_array_equal(kept, full)
    got = soft_assignment(*args, upward=upward)
    if full is None:
        assert got is None
    else:
        np.testing.assert_array_equal(got, full)


def test_the_current_choice_is_kept_only_where_it_is_forced():
    # Items 0-3; item i now in group i % 2 (cost 0), also a candidate of the other (cost 1).
    it = np.repeat(np.arange(4), 2)
    gr = np.array([0, 1, 1, 0, 0, 1, 1, 0])
    cost = np.array([0, 1, 0, 1, 0, 1, 0, 1])
    cap = np.array([4, 4])
    even = (np.array([2, 2]), np.array([2, 2]), cap)
    np.testing.assert_array_equal(kept_choice(4, it, gr, cost, *even), [0, 1, 0, 1])
    # A group below its range: the solve may move an item there.
    assert kept_choice(4, it, gr, cost, np.array([3, 0]), np.array([4, 4]), cap) is None
    # Parents: both groups in one parent, whose total must be 4 (kept) or at most 3 (not).
    parent = np.array([0, 0])
    assert kept_choice(4, it, gr, cost, *even, parent, np.array([4]), np.array([4])) is not None
    assert kept_choice(4, it, gr, cost, *even, parent, np.array([0]), np.array([3])) is None
    # Two free arcs for item 0, or none for item 1: not forced.
    assert kept_choice(4, it, gr, np.array([0, 0, 0, 1, 0, 1, 0, 1]), *even) is None
    assert kept_choice(4, it, gr, np.array([0, 1, 1, 1, 0, 1, 0, 1]), *even) is None


def test_a_pass_asks_no_stage_the_same_question_twice():
    """Where the pair stage finds nothing, the pair route went on from the current order as the
    leader route had, and solved its leader and follower flows again (a drifted 600-partition
    cluster: 10 stage solves, 4 of them repeats; now 6)."""
    from test_plan_properties import generate

    c = generate(brokers=12, racks=3, partitions=600, topics=8, seed=1, scenario="drift")
    asked, pairs_found_nothing = [], []

    def recording(choose):
        def wrapped(ws, lens, mat, fr):
            answer = choose(ws, lens, mat, fr)
            asked.append((choose.__name__, fr, hashlib.sha256(mat.tobytes()).hexdigest()))
            if choose is real_pairs and not answer[0].size:
                pairs_found_nothing.append(True)
            return answer
        return wrapped

    real_pairs = leadership._choose_pairs
    with mock.patch.object(leadership, "_choose_leaders", recording(leadership._choose_leaders)), \
            mock.patch.object(leadership, "_choose_followers", recording(leadership._choose_followers)), \
            mock.patch.object(leadership, "_choose_pairs", recording(real_pairs)):
        planners.plan_leaders(c)
    assert pairs_found_nothing  # the case where both routes meet
    keys = [(name, id(fr), digest) for name, fr, digest in asked]
    assert len(keys) == len(set(keys))


def _full_exact_pass(real):
    """`_exact_pass` with no memory of what the program proved: it is asked every time."""
    return lambda ws, proved: real(ws, [])


def test_the_program_is_not_asked_again_about_the_order_it_proved():
    """The runbooks' broker-replacement cluster, `leaders`: the program took an order with its
    proof, the flows left it as it was, and the program was asked again from it (0.26 of 1.16
    CPU s), only to find the same order. Now it is not, and the plan and its notes are the same."""
    from kit.formats import load_snapshot

    c = load_snapshot(str(ROOT / "runbooks" / "clusters" / "broker_replacement.json"))
    asked, proved = [], []
    real_best = leadership.best_order

    def recording(ws, assign, eligible, caps):
        found = real_best(ws, assign, eligible, caps)
        asked.append([list(r) for r in assign])
        if found is not None and found[1]:
            proved.append(found[0])
        return found

    with mock.patch.object(leadership, "best_order", recording):
        plan = planners.plan_leaders(c)
    assert proved  # the case: the program proved an order
    assert not any(a == p for a in asked for p in proved)
    with mock.patch.object(leadership, "_exact_pass", _full_exact_pass(leadership._exact_pass)):
        full = planners.plan_leaders(c)
    assert plan.after == full.after and plan.notes == full.notes


@settings(max_examples=12, deadline=None)
@given(clusters(scenarios=("replace", "scale-out", "drift", "skewed-leaders")))
def test_the_program_kept_from_its_proof_gives_the_full_passes_plan(case):
    _, c = case
    plan = planners.plan_leaders(c)
    with mock.patch.object(leadership, "_exact_pass", _full_exact_pass(leadership._exact_pass)):
        full = planners.plan_leaders(c)
    assert plan.after == full.after and plan.notes == full.notes


def test_the_follower_flows_are_dealt_largest_first_to_either_end():
    """The follower flows (a part per leader) are taken from the first part up here and from
    the last down in the second process, until they meet. A drifted cluster's leaders of racks
    that hold more partitions lay together in broker order; dealt by size, largest first,
    alternately to either end, each process starts on the largest flows and they meet on the
    smallest: the parts' sizes fall from either end to the middle."""
    from test_plan_properties import generate

    c = generate(brokers=12, racks=3, partitions=600, topics=8, seed=1, scenario="drift")
    dealt = []
    real = leadership.second_core.solve_from_both_ends

    def recording(solve, starts):
        dealt.append(np.diff(starts))
        return real(solve, starts)

    with mock.patch.object(leadership.second_core, "solve_from_both_ends", recording):
        planners.plan_leaders(c)
    assert dealt
    for sizes in dealt:
        first, last = sizes[:(sizes.size + 1) // 2], sizes[(sizes.size + 1) // 2:][::-1]
        assert (np.diff(first) <= 0).all() and (np.diff(last) <= 0).all(), sizes
        assert sorted(sizes)[-2:] == sorted([first[0], last[0]])


@settings(max_examples=120, deadline=None)
@given(clusters(), st.data())
def test_a_followers_pass_is_skipped_only_where_no_follower_order_lowers_the_worst_failover(case, data):
    """`followers_cannot_lower_failover` lets `even_followers` (an evacuation with leadership
    kept) skip its flow: it must be a proof. Every order of the chosen partitions' followers,
    leaders kept, is tried: where it says none lowers the worst failover excess, none does."""
    from itertools import permutations, product

    from kit.plan.steps.leadership_figures import (failover_excess_by_broker, followers_cannot_lower_failover,
                                                   inherit_matrix, order_figures, replica_matrix)
    from kit.plan.workspace import Workspace

    _, cluster = case
    live = [b for b, broker in cluster.brokers.items() if broker.alive]
    ws = Workspace(cluster, live, range(len(cluster.partitions)))
    lens, mat = replica_matrix(ws, ws.assign)
    if mat.shape[1] < 2 or ws.target_idx.size < 2:
        return
    on_targets = [p for p in range(len(lens)) if lens[p] > 1 and ws.is_target[mat[p, :lens[p]]].all()]
    if not on_targets:
        return
    worst = order_figures(ws, lens, mat).failover_excess
    # Mostly partitions led by a worst broker: the only ones whose order can matter.
    by_worst = [p for p in on_targets if failover_excess_by_broker(ws, inherit_matrix(ws, ws.assign)).get(
        int(mat[p, 0])) == worst]
    rows = sorted(data.draw(st.sets(st.sampled_from(by_worst or on_targets), min_size=1, max_size=9))
                  | data.draw(st.sets(st.sampled_from(on_targets), max_size=2)))
    best = worst
    for orders in product(*(permutations(mat[p, 1:lens[p]].tolist()) for p in rows)):
        tried = mat.copy()
        for p, order in zip(rows, orders):
            tried[p, 1:lens[p]] = order
        best = min(best, order_figures(ws, lens, tried).failover_excess)
    if followers_cannot_lower_failover(ws, lens, mat, rows):
        assert best == worst, (rows, worst, best)
