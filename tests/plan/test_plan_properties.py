"""Planner invariants over random clusters (hypothesis), judged with kit.report.figures, which
tests/report/test_figures.py holds equal to shared/tools/evaluate_plan.py.

Clusters come from shared/tools/gen_cluster.py (Kafka's own rack-aware layout plus a
scenario), run in-process with hypothesis choosing size, racks, replication and seed.
"""
from __future__ import annotations

import importlib.util
import io
import os
import json
from contextlib import redirect_stdout
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
import numpy as np

from kit import plan as planners
from kit.plan.actions import remove as remove_action
from kit.plan.steps.leadership import balance_leadership
from kit.plan.steps.pair_balance import even_pairs
from kit.plan.solvers.mip import answers_kept
from kit.report.figures import assignment_figures, movement_figures
from kit.formats import cluster_from_snapshot, plan_text, snapshot_doc

from conftest import SHARED

_GEN = SHARED / "tools" / "gen_cluster.py"
pytestmark = pytest.mark.skipif(not _GEN.exists(), reason=f"gen_cluster.py not found under {SHARED}")


@pytest.fixture(autouse=True, scope="module")
def _programs_searched_once():
    """Every integer program the planner asks HiGHS in this module is searched once: asked again
    (a test planning twice, an example hypothesis draws again), it gets the first answer from
    `answers_kept`, which is the answer a second search gives (one thread, a fixed seed, limits
    by count; tests/plan/test_mip.py holds it to that, in one process and in two). HiGHS was most
    of this module's CPU, and programs asked before took a fifth of it (CI=true, the 7 slowest
    tests: 14.4 of 75 CPU s; the determinism test's second plan 8.7 of 17.3, remove's 5.6 of 14.9)."""
    with answers_kept():
        yield


def _gen_module():
    spec = importlib.util.spec_from_file_location("gen_cluster", _GEN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_gen = _gen_module() if _GEN.exists() else None


def generate(**kw):
    """A Cluster from gen_cluster.py with the given options (in-process, no files)."""
    argv = []
    for k, v in kw.items():
        argv += [f"--{k.replace('_', '-')}", str(v)]
    buf = io.StringIO()
    with redirect_stdout(buf):
        _gen.main(argv + ["--out", "-"])
    return cluster_from_snapshot(json.loads(buf.getvalue()))


@st.composite
def clusters(draw, scenarios=("balanced", "replace", "az-loss", "scale-out", "drift", "skewed-leaders")):
    racks = draw(st.sampled_from([0, 2, 3, 4]))
    rf = draw(st.integers(1, 3))
    scenario = draw(st.sampled_from(scenarios))
    if scenario == "az-loss" and racks < 2:
        racks = 3
    brokers = draw(st.integers(max(rf + 2, racks * 2, 4), 18))
    args = dict(
        brokers=brokers, racks=racks, rf=rf, scenario=scenario,
        rf2_share=draw(st.sampled_from([0.0, 0.3])) if rf == 3 else 0.0,
        topics=draw(st.integers(1, 12)), partitions=draw(st.integers(20, 400)),
        dead=draw(st.integers(1, 2)), add=draw(st.integers(1, 3)), seed=draw(st.integers(0, 10_000)),
    )
    return Case(scenario, generate(**args), args)


class Case(tuple):
    """(scenario, cluster) that prints as the gen_cluster.py options that make it."""

    def __new__(cls, scenario, cluster, args):
        self = super().__new__(cls, (scenario, cluster))
        self.args = args
        return self

    def __repr__(self):
        return "gen_cluster.py " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in self.args.items())


def figures(plan):
    before = plan.cluster.assignment()
    return (assignment_figures(plan.cluster, before, plan.targets),
            assignment_figures(plan.cluster, plan.after, plan.targets),
            movement_figures(plan.cluster, before, plan.after, plan.targets))


def assert_valid(plan, rf_of=None):
    """Invariant 1: distinct brokers, only targets, RF kept (or as asked), rack-safe where it can be."""
    c = plan.cluster
    tset = set(plan.targets)
    racks = {c.rack_of(b) for b in plan.targets} - {None}
    for i in plan.changed():
        reps = plan.after[i]
        assert len(set(reps)) == len(reps), (c.partitions[i].name, reps)
        assert set(reps) <= tset, (c.partitions[i].name, reps)
        want = rf_of(i) if rf_of else len(c.partitions[i].replicas)
        assert len(reps) == want
        rs = [c.rack_of(b) for b in reps]
        if racks and None not in rs:
            assert len(set(rs)) >= min(len(reps), len(racks)), (c.partitions[i].name, reps, rs)


def independent_offline(c) -> set[int]:
    """The partitions with no replica both on a live broker and in the ISR (Kafka elects a
    leader only among those), worked out here without kit: no plan may change them."""
    live = set(c.live_ids)
    return {i for i, p in enumerate(c.partitions) if not any(b in live and b in p.isr for b in p.replicas)}


def forced_but_offline(plan) -> int:
    """Replicas off the targets that no plan may move: those of offline partitions (the
    figures' forced additions count them)."""
    tset = set(plan.targets)
    return sum(b not in tset for i in independent_offline(plan.cluster) for b in plan.cluster.partitions[i].replicas)


def additions_bound(plan, mv, before):
    """evaluate_plan's lower bound, or where racks pin each rack's total (every replica set
    spans every rack), the same bound taken inside each rack."""
    c = plan.cluster
    if not racks_pin_totals(c, plan.targets):
        return mv["additions_lower_bound_count_balanced"]
    by_rack = {}
    for b in plan.targets:
        by_rack.setdefault(c.rack_of(b), []).append(sum(b in p.replicas for p in c.partitions))
    bound = 0
    for counts in by_rack.values():
        lo, hi = sum(counts) // len(counts), -(-sum(counts) // len(counts))
        bound += max(sum(max(0, x - hi) for x in counts), sum(max(0, lo - x) for x in counts))
    return max(bound, mv["additions_lower_bound_count_balanced"])


def _placement_milp(plan, objective):
    """Best placement of the plan's partitions over its targets by a MILP (SciPy/HiGHS),
    independent of kit's planners: every partition keeps its replication factor and the
    rack rule. objective="additions": fewest copies with every count in the range this
    plan reached (per rack where racks pin totals). objective="spread": smallest count
    spread when only the replicas on non-target brokers may move."""
    from scipy.optimize import LinearConstraint, milp
    from scipy.sparse import coo_matrix

    c = plan.cluster
    targets = plan.targets
    tset = set(targets)
    nt = len(targets)
    counts = np.zeros(nt)
    col = {b: k for k, b in enumerate(targets)}
    for reps in plan.after:
        for b in reps:
            counts[col[b]] += 1
    racks = [c.rack_of(b) for b in targets]
    n_racks = len(set(racks) - {None})
    parts = c.partitions
    n = len(parts) * nt + 2  # placements, then the smallest and the largest count
    rows, cols, vals, b_lo, b_hi = [], [], [], [], []
    var_lo = np.zeros(n)
    var_hi = np.r_[np.ones(n - 2), [len(parts) * 4] * 2]
    r = 0
    for i, p in enumerate(parts):
        rows += [r] * nt
        cols += list(range(i * nt, (i + 1) * nt))
        vals += [1.0] * nt
        b_lo.append(len(p.replicas))
        b_hi.append(len(p.replicas))
        r += 1
        if objective == "spread":
            for b in p.replicas:
                if b in tset:
                    var_lo[i * nt + col[b]] = 1  # only replicas on leaving brokers move
        if n_racks:
            for rack in set(racks):
                ks = [k for k in range(nt) if racks[k] == rack]
                rows += [r] * len(ks)
                cols += [i * nt + k for k in ks]
                vals += [1.0] * len(ks)
                b_lo.append(0)
                b_hi.append(-(-len(p.replicas) // n_racks) if rack is not None else len(p.replicas))
                r += 1
    pinned = racks_pin_totals(c, targets)
    for k in range(nt):
        ks = [i * nt + k for i in range(len(parts))]
        if objective == "additions":
            lo, hi = counts.min(), counts.max()
            if pinned:
                m = np.array([x == racks[k] for x in racks])
                lo, hi = counts[m].min(), counts[m].max()
            rows += [r] * len(ks)
            cols += ks
            vals += [1.0] * len(ks)
            b_lo.append(lo)
            b_hi.append(hi)
            r += 1
        else:  # count - min >= 0, max - count >= 0
            rows += [r] * len(ks) + [r] + [r + 1] * len(ks) + [r + 1]
            cols += ks + [n - 2] + ks + [n - 1]
            vals += [1.0] * len(ks) + [-1.0] + [-1.0] * len(ks) + [1.0]
            b_lo += [0.0, 0.0]
            b_hi += [np.inf, np.inf]
            r += 2
    a = coo_matrix((vals, (rows, cols)), shape=(r, n)).tocsr()
    if objective == "additions":
        cost = np.r_[[0.0 if b in p.replicas else 1.0 for p in parts for b in targets], 0.0, 0.0]
    else:
        cost = np.r_[np.zeros(n - 2), -1.0, 1.0]
    res = milp(cost, constraints=LinearConstraint(a, b_lo, b_hi), integrality=np.ones(n),
               bounds=(var_lo, var_hi))
    assert res.status == 0, res.message
    if objective == "additions":
        x = np.round(res.x[:-2]).reshape(len(parts), nt)
        return round(res.fun), [[targets[k] for k in np.flatnonzero(row)] for row in x]
    return round(res.fun)


def optimal_additions(plan):
    """The fewest copies any rack-safe plan needs to reach the balance this plan reached,
    and the placement that achieves it."""
    return _placement_milp(plan, "additions")


def degree_min(plan, assignment):
    return assignment_figures(plan.cluster, assignment, plan.targets)["degree_min"]


def best_forced_spread(plan):
    """The smallest replica count spread reachable by moving only the replicas that must move."""
    return _placement_milp(plan, "spread")


def best_leader_spread(plan):
    """The smallest leader count spread any order of the plan's replica sets allows: a MILP
    (SciPy/HiGHS) choosing one leader per partition, independent of kit's flows."""
    from scipy.optimize import LinearConstraint, milp
    from scipy.sparse import coo_matrix

    targets = plan.targets
    col = {b: k for k, b in enumerate(targets)}
    # A partition with a replica off the targets keeps its leader, as kit keeps it.
    arcs = [(i, col[b]) for i, reps in enumerate(plan.after)
            for b in (reps if all(x in col for x in reps) else reps[:1]) if b in col]
    n = len(arcs) + 2  # the last two variables: the smallest and the largest count
    rows, cols, vals, lo, hi = [], [], [], [], []
    for k, (i, _) in enumerate(arcs):
        rows.append(i)
        cols.append(k)
        vals.append(1.0)
    r = len(plan.after)
    lo += [float(reps[0] in col) for reps in plan.after]
    hi += [1.0] * r
    for b in range(len(targets)):
        ks = [k for k, (_, x) in enumerate(arcs) if x == b]
        # count - min >= 0 and max - count >= 0
        rows += [r] * len(ks) + [r]
        cols += ks + [n - 2]
        vals += [1.0] * len(ks) + [-1.0]
        rows += [r + 1] * len(ks) + [r + 1]
        cols += ks + [n - 1]
        vals += [-1.0] * len(ks) + [1.0]
        lo += [0.0, 0.0]
        hi += [np.inf, np.inf]
        r += 2
    a = coo_matrix((vals, (rows, cols)), shape=(r, n)).tocsr()
    cost = np.zeros(n)
    cost[-2], cost[-1] = -1.0, 1.0
    res = milp(cost, constraints=LinearConstraint(a, lo, hi), integrality=np.ones(n),
               bounds=(np.zeros(n), np.r_[np.ones(n - 2), len(plan.after), len(plan.after)]))
    assert res.status == 0, res.message
    return round(res.fun)


def racks_pin_totals(c, targets):
    """When every replica set spans every rack, each rack's replica total is fixed:
    balance can then only be asked of the brokers inside each rack."""
    racks = {c.rack_of(b) for b in targets}
    return None not in racks and len(racks) >= 2 and all(len(p.replicas) == len(racks) for p in c.partitions)


SETTINGS = settings(max_examples=int(os.environ.get("KIT_HYPOTHESIS_EXAMPLES", "30")), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(clusters(("replace", "balanced", "drift")))
def test_remove_moves_exactly_the_forced_replicas_and_balances(case):
    _, c = case
    live = c.live_ids
    gone = [b for b in c.map_brokers() if b in live][:1]
    if len(live) - len(gone) < max(len(p.replicas) for p in c.partitions):
        return
    plan = planners.plan_remove(c, gone, ignore_warns=True)
    assert_valid(plan)
    before, after, mv = figures(plan)
    assert mv["replica_additions"] == mv["forced_additions"] - forced_but_offline(plan)
    assert after["rack_violations"] <= before["rack_violations"]
    assert after["leader_count_spread"] <= max(1, best_leader_spread(plan))
    if not independent_offline(c):
        # Offline partitions stay where they are, fixed load the figures count: an RF-1 cluster
        # with two brokers dead keeps their partitions there, and only the removed broker's
        # spread over the rest (hypothesis: 4 brokers, seed 0, leader spread 4, no order better).
        assert_targets_met_or_proved_least(plan, after, failover=False)


# Found by hypothesis (session 6): remove on this drifted RF-3/RF-2 cluster ends at topic leader
# excess 34, the least these replica sets allow, but said nothing: HiGHS stopped at its default
# relative gap (1e-4 of an objective of millions), short of the proof. The order program now
# closes the gap.
def test_remove_on_a_drifted_mixed_cluster_meets_leadership_targets_or_proves_them():
    c = generate(brokers=8, racks=3, rf=3, scenario="drift", rf2_share=0.3, topics=7, partitions=383,
                 dead=1, add=1, seed=9821)
    plan = planners.plan_remove(c, [b for b in c.map_brokers() if b in c.live_ids][:1], ignore_warns=True)
    assert_valid(plan)
    _, after, _ = figures(plan)
    assert_targets_met_or_proved_least(plan, after, failover=False)


def test_remove_after_the_integer_programs_moves_exactly_the_forced_replicas():
    # Found by hypothesis in CI: the order program gave interchangeable partitions one shared
    # replica list, and the placement program's move of one of them moved the other too.
    c = generate(brokers=9, racks=4, rf=2, scenario="drift", rf2_share=0.0, topics=8, partitions=394,
                 dead=1, add=1, seed=2900)
    plan = planners.plan_remove(c, [b for b in c.map_brokers() if b in c.live_ids][:1], ignore_warns=True)
    assert_valid(plan)
    _, _, mv = figures(plan)
    assert mv["replica_additions"] == mv["forced_additions"]


@SETTINGS
@given(clusters(("az-loss",)))
def test_az_loss_replaces_every_replica_of_the_rack_and_nothing_else(case):
    _, c = case
    lost = sorted({b.rack for b in c.brokers.values() if not b.alive and b.rack})[0]
    plan = planners.plan_az_loss(c, lost, ignore_warns=True)
    assert_valid(plan)
    before, after, mv = figures(plan)
    assert mv["replica_additions"] == mv["forced_additions"] - forced_but_offline(plan)
    if racks_pin_totals(c, plan.targets):
        assert after["replica_count_spread_within_racks"] <= max(1, before["replica_count_spread_within_racks"])
    elif after["replica_count_spread"] > max(1, before["replica_count_spread"]):
        assert after["replica_count_spread"] <= best_forced_spread(plan)
    if min(len(p.replicas) for p in c.partitions) >= 2:  # a lone replica's leadership cannot move
        # Only the lost rack's replicas move, so the replica sets may leave no order with
        # leader spread 1 (hypothesis found 7 brokers in 3 racks, RF 2: spread 2 at best).
        assert after["leader_count_spread"] <= max(1, best_leader_spread(plan))


# The case above that hypothesis found (in CI): the least spread its replica sets allow is 2.
def test_az_loss_leader_spread_is_the_least_the_replica_sets_allow():
    c = generate(brokers=7, racks=3, rf=2, scenario="az-loss", rf2_share=0.0, topics=11, partitions=20,
                 dead=1, add=1, seed=152)
    lost = sorted({b.rack for b in c.brokers.values() if not b.alive and b.rack})[0]
    plan = planners.plan_az_loss(c, lost, ignore_warns=True)
    _, after, _ = figures(plan)
    assert after["leader_count_spread"] == best_leader_spread(plan) == 2
    assert any("leader count spread 2" in n for n in plan.notes)


@SETTINGS
@given(clusters(("replace",)))
def test_replace_gives_new_broker_exactly_the_old_slots(case):
    _, c = case
    dead = sorted(b.id for b in c.brokers.values() if not b.alive and b.id in c.map_brokers())
    new = sorted(b for b in c.live_ids if b not in c.map_brokers())
    pairs = list(zip(dead, new))
    if not pairs:
        return
    plan = planners.plan_replace(c, pairs, ignore_warns=True)
    mapping = dict(pairs)
    offline = independent_offline(c)  # RF 1 on a dead broker: left where it is
    for i, p in enumerate(c.partitions):
        assert plan.after[i] == (list(p.replicas) if i in offline else [mapping.get(b, b) for b in p.replicas])
    _, _, mv = figures(plan)
    assert mv["replica_additions"] == sum(1 for i, p in enumerate(c.partitions) for b in p.replicas
                                          if b in mapping and i not in offline)


REBALANCE_SCENARIOS = ("scale-out", "drift", "balanced", "skewed-leaders")


# One test per scenario, each with its share of the examples: the exact placement programs make
# this the suite's slowest test, and split this way the workers run its parts side by side. (CI's
# 6th scale-out example took ~46 s alone until the programs' smallest counts got tight bounds.)
@pytest.mark.parametrize("scenario", REBALANCE_SCENARIOS)
@settings(SETTINGS, max_examples=max(1, SETTINGS.max_examples // len(REBALANCE_SCENARIOS) + 1))
@given(data=st.data())
def test_rebalance_is_near_minimal_balanced_and_idempotent(scenario, data):
    _, c = data.draw(clusters((scenario,)), label="cluster")
    plan = planners.plan_scale_out(c) if scenario == "scale-out" else planners.plan_rebalance(c)
    assert_valid(plan)
    before, after, mv = figures(plan)
    bound = additions_bound(plan, mv, before)
    if mv["replica_additions"] > 1.05 * bound:
        # The bound is not always reachable (racks, few brokers): then no more copies than the
        # optimum for the same balance, unless that optimum would leave some broker with fewer
        # peers than before (kit keeps degree; the MILP knows nothing of it).
        best, placement = optimal_additions(plan)
        if degree_min(plan, placement) >= before["degree_min"]:
            assert mv["replica_additions"] <= best
    if racks_pin_totals(c, plan.targets):
        assert after["replica_count_spread_within_racks"] <= max(1, before["replica_count_spread_within_racks"])
    else:
        assert after["replica_count_spread"] <= max(1, before["replica_count_spread"])
    assert after["rack_violations"] <= before["rack_violations"]
    assert after["degree_min"] >= before["degree_min"]
    assert_targets_met_or_proved_least(plan, after)
    # Planning again on the result changes nothing.
    again = planners.plan_rebalance(cluster_from_snapshot(_snapshot_after(plan)))
    assert again.changed() == []


def assert_targets_met_or_proved_least(plan, after, failover=True):
    """Leader spread 1, topic leader excess 1 and (if asked) failover excess 2, or a NOTE
    that integer programming proved the figures the least possible (of any plan within the
    copies allowance, or of any order of the replica sets)."""
    if (after["leader_count_spread"] > 1 or after["topic_leader_excess_spread_max"] > 1
            or (failover and after["failover_excess_spread_max"] > 2)):
        assert any("the least any plan within" in n or "the least any order" in n for n in plan.notes), plan.notes


@SETTINGS
@given(clusters())
def test_leaders_moves_no_data_never_worsens_and_is_idempotent(case):
    _, c = case
    plan = planners.plan_leaders(c)
    before, after, mv = figures(plan)
    assert mv["replica_additions"] == 0
    for i in plan.changed():
        assert sorted(plan.after[i]) == sorted(c.partitions[i].replicas)
    # "Worse" as kit ranks orders: first how far each figure is above its target (leader spread 1,
    # topic excess 1, failover 2), then the figures themselves.
    def rank(f):
        figs = (f["leader_count_spread"], f["topic_leader_excess_spread_max"], f["failover_excess_spread_max"])
        return (max(0, figs[0] - 1), max(0, figs[1] - 1), max(0, figs[2] - 2)) + figs
    assert rank(after) <= rank(before)
    # The tightest leader spread the replica sets allow (kit finds it by stepping along
    # minimum cuts; the MILP here knows nothing of flows).
    assert after["leader_count_spread"] <= max(1, best_leader_spread(plan))
    assert planners.plan_leaders(cluster_from_snapshot(_snapshot_after(plan))).changed() == []


@SETTINGS
@given(clusters(("balanced", "drift")), st.integers(1, 3))
def test_rf_adds_or_drops_only_what_the_change_needs(case, rf):
    _, c = case
    if rf > len(c.live_ids):
        return
    plan = planners.plan_rf(c, rf)
    assert_valid(plan, rf_of=lambda i: rf)
    _, _, mv = figures(plan)
    growth = sum(max(0, rf - len(p.replicas)) for p in c.partitions)
    assert mv["replica_additions"] == growth
    for i, p in enumerate(c.partitions):
        if len(p.replicas) >= rf:
            assert set(plan.after[i]) <= set(p.replicas)
        else:
            assert set(p.replicas) <= set(plan.after[i])


@SETTINGS
@given(clusters(("scale-out", "replace", "drift")))
def test_plans_are_deterministic(case):
    """The same bytes from the cluster and from a copy rebuilt from its snapshot (no object,
    list or dict shared with the first). HiGHS's answers come from memory the second time
    (`_programs_searched_once`): the programs asked must be byte for byte the same to get them."""
    scenario, c = case
    make = planners.plan_scale_out if scenario != "replace" else planners.plan_rebalance
    assert plan_text(make(c)) == plan_text(make(cluster_from_snapshot(snapshot_doc(c))))


def _snapshot_after(plan):
    doc = snapshot_doc(plan.cluster, plan.after)
    # The dead stay dead; only the layout changes.
    return doc


# The reference cluster of design.md: 24 brokers, 3 racks, 3,000 RF-3 partitions.
REFERENCE = dict(brokers=24, racks=3, partitions=3000)


@pytest.mark.parametrize("scenario,action", [
    ("replace", "remove"), ("az-loss", "az-loss"), ("scale-out", "scale-out"),
    ("drift", "rebalance"), ("skewed-leaders", "leaders"), ("balanced", "leaders"),
])
def test_reference_cluster_meets_every_target(scenario, action):
    c = generate(scenario=scenario, dead=2, add=3, seed=1, **REFERENCE)
    if action == "remove":
        plan = planners.plan_remove(c, [b.id for b in c.brokers.values() if not b.alive])
    elif action == "az-loss":
        plan = planners.plan_az_loss(c, "rack-c")
    elif action == "scale-out":
        plan = planners.plan_scale_out(c)
    elif action == "rebalance":
        plan = planners.plan_rebalance(c)
    else:
        plan = planners.plan_leaders(c)
    assert_valid(plan)
    before, after, mv = figures(plan)
    if action in ("remove", "az-loss"):
        assert mv["replica_additions"] == mv["forced_additions"]
    elif action != "leaders":
        assert mv["replica_additions"] <= 1.05 * mv["additions_lower_bound_count_balanced"]
    else:
        assert mv["replica_additions"] == 0
    if action in ("remove", "az-loss"):
        # Only forced moves: the survivors' own imbalance (Kafka's layout) stays.
        held = [b for b in plan.targets if b in c.map_brokers()]
        counts = [sum(b in p.replicas for p in c.partitions) for b in held]
        assert after["replica_count_spread"] <= max(1, max(counts) - min(counts))
    elif action != "leaders":
        assert after["replica_count_spread"] <= 1
    assert after["leader_count_spread"] <= 1
    assert after["topic_leader_excess_spread_max"] <= 1
    assert after["failover_excess_spread_max"] <= 2
    assert after["rack_violations"] == 0
    assert after["degree_min"] >= before["degree_min"]


def _shortfall(f):
    return (max(0, f["leader_count_spread"] - 1), max(0, f["topic_leader_excess_spread_max"] - 1),
            max(0, f["failover_excess_spread_max"] - 2))


@st.composite
def tiny_clusters(draw):
    """Clusters small enough to try every order of every replica list."""
    rf = draw(st.integers(2, 3))
    args = dict(brokers=draw(st.integers(rf + 1, 6)), racks=draw(st.sampled_from([0, 2, 3])), rf=rf,
                scenario=draw(st.sampled_from(["balanced", "skewed-leaders", "drift"])),
                topics=draw(st.integers(1, 3)), partitions=draw(st.integers(3, 11 if rf == 2 else 5)),
                seed=draw(st.integers(0, 10_000)))
    if args["racks"] > args["brokers"]:
        args["racks"] = 0
    return Case(args["scenario"], generate(**args), args)


@SETTINGS
@given(tiny_clusters())
def test_leaders_reaches_the_best_order_any_search_finds(case):
    """Leader, per-topic and failover balance together are no flow problem; kit settles them
    exactly on small clusters. Checked against every order of every replica list."""
    assert_best_order(case[1])


# Clusters where the flows alone stop short of the best order (found by random search).
@pytest.mark.parametrize("args", [
    dict(brokers=5, racks=2, rf=2, scenario="drift", topics=3, partitions=11, seed=5513),
    dict(brokers=5, racks=2, rf=2, scenario="drift", topics=2, partitions=8, seed=8049),
    dict(brokers=3, racks=2, rf=2, scenario="skewed-leaders", topics=3, partitions=11, seed=4942),
])
def test_leaders_finds_the_best_order_where_flows_stop_short(args):
    assert_best_order(generate(**args))


def assert_best_order(c):
    import itertools

    plan = planners.plan_leaders(c)
    targets = plan.targets
    got = _shortfall(assignment_figures(c, plan.after, targets))
    best = None
    for orders in itertools.product(*(itertools.permutations(p.replicas) for p in c.partitions)):
        s = _shortfall(assignment_figures(c, [list(o) for o in orders], targets))
        if best is None or s < best:
            best = s
            if best == (0, 0, 0):
                break
    assert got == best


@SETTINGS
@given(clusters(("drift", "skewed-leaders", "replace")))
def test_leader_flow_reaches_the_tightest_spread_the_replica_sets_allow(case):
    """The leader flow alone (no integer program behind it) finds the least leader count
    spread: where the even shares cannot be met, its bounds come from minimum cuts."""
    from kit.plan.steps.leadership import _choose_leaders, _Frame, _reordered
    from kit.plan.steps.leadership_figures import order_figures, replica_matrix
    from kit.plan.workspace import Workspace

    _, c = case
    plan = planners.plan_leaders(c)
    tset = set(plan.targets)
    movable = [p for p in range(len(c.partitions)) if all(b in tset for b in c.partitions[p].replicas)]
    ws = Workspace(c, plan.targets, movable)
    lens, mat = replica_matrix(ws, ws.assign)
    fr = _Frame(ws, lens, mat)
    if not fr.n_items:
        return
    order = _reordered(lens, mat, _choose_leaders(ws, lens, mat, fr))
    assert order_figures(ws, lens, order)[0] <= max(1, best_leader_spread(plan))


# Clusters where the copies the count balance chose leave failover (RF 2) or a topic's
# leaders (a drifted topic on 3 of 5 brokers) short and no order of the replica sets can
# fix it (kit proves that); other replica sets, within the 5% allowance, can.
@pytest.mark.parametrize("args, figure", [
    (dict(brokers=8, racks=4, rf=2, scenario="replace", topics=5, partitions=281, dead=1, add=2, seed=6634),
     "failover_excess_spread_max"),
    (dict(brokers=5, racks=0, rf=3, rf2_share=0.3, scenario="drift", topics=5, partitions=391, dead=1, add=3,
          seed=5246), "topic_leader_excess_spread_max"),
    # Two racks of 3 and 2 brokers pin the counts; the local search got failover to 8.
    (dict(brokers=5, racks=2, rf=2, scenario="replace", topics=5, partitions=379, dead=1, add=1, seed=7313),
     "failover_excess_spread_max"),
])
def test_rebalance_chooses_replica_sets_for_leadership(args, figure, monkeypatch):
    import kit.plan.actions.rebalance as rebalance

    # The plan as it stands when the spare copies step is called: what the same plan would be
    # without that step (every stage before it runs alike; planning it again without the step
    # only repeated them).
    spend, unspent = rebalance.spend_copies_on_leadership, []

    def recorded(ws, *a, **k):
        unspent.append([list(reps) for reps in ws.assign])
        return spend(ws, *a, **k)

    monkeypatch.setattr(rebalance, "spend_copies_on_leadership", recorded)
    c = generate(**args)
    plan = planners.plan_rebalance(c, ignore_warns=True)
    assert_valid(plan)
    before, after, mv = figures(plan)
    assert after["failover_excess_spread_max"] <= 2
    assert mv["replica_additions"] <= 1.05 * additions_bound(plan, mv, before)
    assert after["degree_min"] >= before["degree_min"]
    assert after["leader_count_spread"] <= 1 and after["topic_leader_excess_spread_max"] <= 1
    # Without that step the same plan falls short.
    assert len(unspent) <= 1
    short = assignment_figures(c, unspent[0] if unspent else plan.after, plan.targets)
    assert short[figure] > (2 if figure == "failover_excess_spread_max" else 1)


def test_rebalance_does_not_stop_a_step_short_of_balance():
    # Hypothesis found it: the topic quotas' placement met every leadership target with the
    # counts still 11/9, and the next placement was not tried; planning again then moved.
    c = generate(brokers=4, racks=0, rf=2, scenario="balanced", rf2_share=0.0, topics=10, partitions=20,
                 dead=1, add=1, seed=1)
    plan = planners.plan_rebalance(c)
    _, after, mv = figures(plan)
    assert after["replica_count_spread"] <= 1
    assert mv["replica_additions"] == mv["additions_lower_bound_count_balanced"]
    assert planners.plan_rebalance(cluster_from_snapshot(_snapshot_after(plan))).changed() == []


def test_rebalance_narrows_the_count_spread_the_greedy_pass_left():
    # Hypothesis found it (outside CI's draws): with RF 3 and RF 2 over 3 racks of 8 brokers
    # every greedy placement stopped at spread 2 after the fewest copies (211), the exact
    # flow kept that range, and planning again on the result moved 3 copies to reach 1.
    c = generate(brokers=8, racks=3, rf=3, scenario="drift", rf2_share=0.3, topics=7, partitions=258,
                 dead=1, add=1, seed=4749)
    plan = planners.plan_rebalance(c)
    _, after, _ = figures(plan)
    assert after["replica_count_spread"] <= 1
    assert_targets_met_or_proved_least(plan, after)
    assert planners.plan_rebalance(cluster_from_snapshot(_snapshot_after(plan))).changed() == []


@st.composite
def tiny_rf2_clusters(draw):
    """RF-2 clusters small enough to try every replica set (kept, or one replica moved) and
    order of every partition within a budget of two copies."""
    args = dict(brokers=draw(st.integers(3, 6)), racks=draw(st.sampled_from([0, 2, 3])), rf=2,
                scenario=draw(st.sampled_from(["balanced", "skewed-leaders", "drift"])),
                topics=draw(st.integers(1, 2)), partitions=draw(st.integers(3, 5)),
                seed=draw(st.integers(0, 10_000)))
    if args["racks"] > args["brokers"]:
        args["racks"] = 0
    return Case(args["scenario"], generate(**args), args)


@SETTINGS
@given(tiny_rf2_clusters(), st.integers(0, 2), st.booleans(), st.integers(0, 1))
def test_replica_sets_for_leadership_match_every_plan_a_search_finds(case, budget, even, more_peers):
    """`best_placement` against every choice of replica set and order: what it returns keeps
    the counts, copies, racks and degree, and no choice has lower shortfalls when it says so.
    (`more_peers` raises the degree floor, so that it binds on these tiny clusters too.)"""
    import itertools

    from kit.plan.solvers.exact_order import best_placement
    from kit.plan.steps.leadership_figures import heirs_of
    from kit.plan.workspace import Workspace

    c = case[1]
    targets = sorted(c.brokers)
    ws = Workspace(c, targets, range(len(c.partitions)))
    ws.degree_floor = min(ws.degree_floor + more_peers, len(targets) - 1)
    held = [sum(b in p.replicas for p in c.partitions) for b in targets]
    total = sum(held)
    lo, hi = ((total // len(targets), -(-total // len(targets))) if even else (min(held), max(held)))
    caps = _shortfall(assignment_figures(c, ws.assign, targets))

    def allowed(assign):
        counts = [sum(b in reps for reps in assign) for b in targets]
        copies = sum(len(set(r) - set(p.replicas)) for r, p in zip(assign, c.partitions))
        peers = {b: {m for reps in assign if b in reps for m in reps if m != b} for b in targets}
        return (all(lo <= n <= hi for n in counts) and copies <= budget
                and min(len(v) for v in peers.values()) >= ws.degree_floor
                and all(ws.rack_ok(m, [o for o in reps if o != m], 2) for reps in assign for m in reps))

    def sets_of(p):
        had = list(p.replicas)
        return [had] + [[d if m == b else m for m in had] for b in had for d in targets if d not in had]

    best = None
    for sets in itertools.product(*(sets_of(p) for p in c.partitions)):
        if not allowed(sets):
            continue
        for orders in itertools.product(*((s, s[::-1]) for s in sets)):
            short = _shortfall(assignment_figures(c, [list(o) for o in orders], targets))
            if all(a <= b for a, b in zip(short, caps)) and (best is None or short < best):
                best = short
    found = best_placement(ws, lambda x: heirs_of(ws, x), caps, budget, [lo] * len(targets), [hi] * len(targets))
    if best is None:  # the cluster as it is breaks the limits drawn, and so does every choice
        assert found is None
        return
    assign, proved = found
    assert allowed(assign)
    assert proved
    assert _shortfall(assignment_figures(c, assign, targets)) == best


@st.composite
def rf2_az_loss_clusters(draw):
    """RF-2 clusters over three racks that lose one: two racks are left, and where each
    re-placed replica lands decides failover (`kit.plan.steps.pair_balance`)."""
    args = dict(brokers=draw(st.integers(6, 12)), racks=3, rf=2, scenario="az-loss",
                topics=draw(st.integers(1, 4)), partitions=draw(st.integers(20, 150)),
                seed=draw(st.integers(0, 10_000)))
    return Case("az-loss", generate(**args), args)


@settings(SETTINGS, max_examples=max(1, SETTINGS.max_examples // 3))
@given(rf2_az_loss_clusters())
def test_rf2_az_loss_meets_failover_target_or_proves_the_least(case):
    """Issue 19: an RF-2 AZ loss moves exactly the forced replicas and ends with failover
    excess 2 at most, or a NOTE proving the least, which the plan then reaches; planning
    again changes nothing."""
    _, c = case
    lost = sorted({b.rack for b in c.brokers.values() if not b.alive and b.rack})[0]
    plan = planners.plan_az_loss(c, lost)
    assert_valid(plan)
    _, after, mv = figures(plan)
    assert mv["replica_additions"] == mv["forced_additions"]
    assert after["rack_violations"] == 0
    failover = after["failover_excess_spread_max"]
    if failover > 2:
        proofs = [n for n in plan.notes if n.startswith("failover excess") or ", failover excess" in n]
        assert any(f"failover excess {failover}:" in n and "proved by integer programming" in n for n in proofs), \
            plan.notes
    assert_targets_met_or_proved_least(plan, after)
    assert planners.plan_az_loss(cluster_from_snapshot(_snapshot_after(plan)), lost).changed() == []


@settings(SETTINGS, max_examples=max(1, SETTINGS.max_examples // 3))
@given(rf2_az_loss_clusters())
def test_rf2_az_loss_leaves_the_program_out_only_for_a_plan_meeting_every_target(case):
    """`lead_then_even_pairs` skips the integer program on the placement before `even_pairs`
    only when the re-placed order meets every leadership target; otherwise its plan is the
    one of the sequence it shortcuts (the program where the flows stop, then `even_pairs`)."""
    _, c = case
    lost = sorted({b.rack for b in c.brokers.values() if not b.alive and b.rack})[0]
    plan = planners.plan_az_loss(c, lost)

    def program_first(ws, reason):
        balance_leadership(ws)
        even_pairs(ws, reason)

    with mock.patch.object(remove_action, "lead_then_even_pairs", program_first):
        reference = planners.plan_az_loss(c, lost)
    if plan.after != reference.after:
        _, after, mv = figures(plan)
        assert after["leader_count_spread"] <= 1 and after["topic_leader_excess_spread_max"] <= 1
        assert after["failover_excess_spread_max"] <= 2
        assert mv["replica_additions"] == figures(reference)[2]["replica_additions"]
    else:
        assert plan.notes == reference.notes
