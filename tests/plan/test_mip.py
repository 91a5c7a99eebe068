"""The planner's integer programs through HiGHS (`kit.plan.solvers.mip`): rows as HiGHS reads
them, and a search bounded by a count of nodes whose result says whether it ended at the limit."""
from __future__ import annotations

import contextlib
import hashlib
import subprocess
import sys

import highspy
import numpy as np
import pytest

from kit.formats import plan_text
from kit.plan import plan_rebalance
from kit.plan.actions import rebalance
from kit.plan.solvers.mip import SparseRows, answers_kept, solve

from test_plan_properties import generate


def test_compressed_rows_hold_every_entry_summed_per_row_and_column():
    rng = np.random.default_rng(3)
    rows, dense = SparseRows(), np.zeros((40, 25))
    for r in range(40):
        # Repeated columns in a row (HiGHS rejects them; they add up), and empty rows.
        entries = [(int(c), float(v)) for c, v in zip(rng.integers(0, 25, rng.integers(0, 12)), rng.normal(size=12))]
        for c, v in entries:
            dense[r, c] += v
        rows.add(entries, 0, 1)
    starts, cols, vals = rows.compressed(25)
    assert starts[0] == 0 and starts[-1] == cols.size and np.all(np.diff(starts) >= 0)
    rebuilt = np.zeros_like(dense)
    for r in range(40):
        at = slice(starts[r], starts[r + 1])
        assert np.all(np.diff(cols[at]) > 0)  # ascending, each column once
        rebuilt[r, cols[at]] = vals[at]
    assert np.allclose(rebuilt, dense)


def market_split(m: int = 3, n: int = 24, seed: int = 0):
    """Cornuejols and Dawande's market split: m rows of random weights over n binaries, each
    to hit half its total, the misses minimised. The LP bound is 0 and branch and bound needs
    many thousands of nodes to prove the least miss."""
    a = np.random.default_rng(seed).integers(0, 100, size=(m, n))
    rows = SparseRows()
    for i in range(m):
        half = int(a[i].sum()) // 2
        rows.add([(j, float(a[i, j])) for j in range(n)] + [(n + 2 * i, 1.0), (n + 2 * i + 1, -1.0)], half, half)
    cost = np.r_[np.zeros(n), np.ones(2 * m)]
    return cost, rows, np.zeros(n + 2 * m), np.r_[np.ones(n), np.full(2 * m, np.inf)]


def test_a_search_stopped_by_its_node_limit_says_so_and_gives_the_same_answer_twice():
    cost, rows, lower, upper = market_split()
    first = solve(cost, rows, lower, upper, node_limit=1)
    assert first is not None and not first.finished
    # The dual bound is below the solution kept: nothing proved, as the caller must say.
    assert first.dual_bound < cost @ first.x
    again = solve(cost, rows, lower, upper, node_limit=1)
    assert again.x.tobytes() == first.x.tobytes() and again.dual_bound == first.dual_bound


def test_a_search_that_ends_by_itself_proves_its_answer():
    cost, rows, lower, upper = market_split(m=1, n=8)
    found = solve(cost, rows, lower, upper, node_limit=2_000)
    assert found is not None and found.finished
    assert found.dual_bound >= cost @ found.x - 1e-6


def test_a_plan_whose_replica_sets_the_placement_program_chose_is_the_same_bytes_in_two_processes(
        make_snapshot, tmp_path):
    """One thread, a fixed seed and counted limits: `kit plan` in two processes writes the same
    plan. On this cluster best_placement settles failover (without it, above 2:
    test_rebalance_chooses_replica_sets_for_leadership, third case)."""
    snapshot = make_snapshot("--brokers", "5", "--racks", "2", "--rf", "2", "--scenario", "replace", "--topics",
                             "5", "--partitions", "379", "--dead", "1", "--add", "1", "--seed", "7313")
    plans = []
    for run in range(2):
        out = tmp_path / f"plan-{run}.json"
        subprocess.run([sys.executable, "-m", "kit", "plan", "rebalance", "--snapshot", str(snapshot), "--out", str(out)],
                       check=True, capture_output=True, timeout=600)
        plans.append(out.read_bytes())
    assert plans[0] == plans[1] and b'"replicas"' in plans[0]


@pytest.fixture
def searches(monkeypatch):
    """The digest of every program HiGHS is handed from now on, in order."""
    seen = []

    class Counted(highspy._Highs):
        def passModel(self, lp):
            parts = (lp.col_cost_, lp.col_lower_, lp.col_upper_, lp.row_lower_, lp.row_upper_,
                     lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_)
            seen.append(hashlib.sha256(b"".join(np.asarray(a).tobytes() for a in parts)).hexdigest())
            return super().passModel(lp)

    monkeypatch.setattr(highspy, "_Highs", Counted)
    return seen


def test_a_program_asked_again_while_answers_are_kept_is_answered_without_a_search(searches):
    cost, rows, lower, upper = market_split(m=1, n=8)
    first = solve(cost, rows, lower, upper, node_limit=2_000)
    with answers_kept():
        again = solve(cost, rows, lower, upper, node_limit=2_000)
        with answers_kept():  # nested: the outer memory
            third = solve(cost, rows, lower, upper, node_limit=2_000)
        other = solve(cost, rows, lower, upper, node_limit=1)  # another limit: another program
    assert len(searches) == 3 and searches[0] == searches[1] == searches[2]
    for found in (again, third):
        assert found.x.tobytes() == first.x.tobytes() and found.dual_bound == first.dual_bound
        assert found.finished == first.finished
    assert other is not None
    solve(cost, rows, lower, upper, node_limit=2_000)  # outside, nothing is kept
    assert len(searches) == 4


def test_a_rebalance_searches_each_program_once_and_plans_as_it_would_searching_each_again(searches, monkeypatch):
    # Its placements reach the same replica sets, whose leadership asks the same program twice.
    cluster = generate(brokers=10, racks=2, rf=2, scenario="drift", topics=5, partitions=21, seed=5725, add=2)
    plan = plan_rebalance(cluster)
    assert searches and len(set(searches)) == len(searches)
    monkeypatch.setattr(rebalance, "answers_kept", contextlib.nullcontext)
    searches.clear()
    again = plan_rebalance(cluster)
    assert len(set(searches)) < len(searches)
    assert plan_text(again) == plan_text(plan) and again.notes == plan.notes
