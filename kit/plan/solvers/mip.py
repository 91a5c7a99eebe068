"""Integer programs for the planner's exact passes, solved by HiGHS through its own API (highspy).

One place decides how every program is searched: one thread, a fixed random seed, and the work
bounded by counts (branch-and-bound nodes), never by time, so the same input gives the same
plan on any machine at any load. The settings below the defaults were measured on the
placement program of tests/plan/test_plan_properties.py (3,893 variables): see `SEARCH`.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

# HiGHS's settings beyond the limits each program passes. On the placement program of
# test_rebalance_chooses_replica_sets_for_leadership[args0] (3,893 variables) HiGHS's default root
# heuristics (sub-MIPs "L", restarts) took 33 CPU s and 335 nodes; with no heuristic effort and no
# RINS or RENS it is proved in 12-16 CPU s and 42 nodes (scipy's milp, HiGHS 1.12: 27-30 CPU s).
# Turning off the feasibility jump or the root reduced-cost heuristic as well, or the restarts,
# made it slower (20-28 CPU s); so did a start solution from the plan so far (22 CPU s), so none
# is given.
SEARCH = {
    "threads": 1,
    "random_seed": 0,
    "presolve": "on",
    "mip_heuristic_effort": 0.0,
    "mip_heuristic_run_rins": False,
    "mip_heuristic_run_rens": False,
}


class SparseRows:
    """The program's constraints, a sparse row at a time: low <= sum(value * x[col]) <= high."""

    def __init__(self):
        self.rows, self.cols, self.vals, self.lo, self.hi = [], [], [], [], []

    def add(self, entries, low, high) -> None:
        r = len(self.lo)
        for c, v in entries:
            self.rows.append(r)
            self.cols.append(c)
            self.vals.append(v)
        self.lo.append(low)
        self.hi.append(high)

    def compressed(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(starts, columns, values) by row, columns ascending, repeated entries summed."""
        key = np.asarray(self.rows, dtype=np.int64) * n + np.asarray(self.cols, dtype=np.int64)
        uniq, inverse = np.unique(key, return_inverse=True)
        vals = np.bincount(inverse, weights=np.asarray(self.vals, dtype=np.float64), minlength=uniq.size)
        starts = np.searchsorted(uniq // n, np.arange(len(self.lo) + 1))
        return starts.astype(np.int32), (uniq % n).astype(np.int32), vals


@dataclass(frozen=True)
class Result:
    """A program's best solution found (`x`, rounded), the search's dual bound (no solution
    has a lower objective) and whether the search ended by itself rather than at a limit."""

    x: np.ndarray
    dual_bound: float
    finished: bool


# The answers of the programs solved within `answers_kept`, by their input's digest; None outside.
_kept: dict[bytes, Result | None] | None = None


@contextmanager
def answers_kept() -> Iterator[None]:
    """Within: a program solved again with the same input (costs, bounds, rows, node limit, gap)
    gets its first answer without a second search. The same input gives HiGHS's same answer
    (`SEARCH`: one thread, a fixed seed, limits by count), so nothing a caller sees changes but
    the time. `count_rebalance`'s placements often reach the same replica sets, whose leadership
    then asks the same programs (tests/plan/test_mip.py). Nested calls share the outer memory."""
    global _kept
    outer = _kept
    if outer is None:
        _kept = {}
    try:
        yield
    finally:
        _kept = outer


def solve(cost, rows: SparseRows, lower, upper, node_limit: int, gap: float | None = None) -> Result | None:
    """Minimise cost @ x over integer x within the bounds and `rows`, searching at most
    `node_limit` branch-and-bound nodes; `gap`: the relative gap at which the search may stop
    (None: HiGHS's default). None when no solution was found. Within `answers_kept`, a
    program asked before is answered from memory."""
    n = len(cost)
    program = (np.asarray(cost, dtype=np.float64), np.asarray(lower, dtype=np.float64),
               np.asarray(upper, dtype=np.float64), np.asarray(rows.lo, dtype=np.float64),
               np.asarray(rows.hi, dtype=np.float64), *rows.compressed(n))
    if _kept is None:
        return _search(program, node_limit, gap)
    # hashlib loads with the first program asked, as highspy does (`_search`): a plan that asks
    # none, as every small cluster's, does without it (2.5 CPU ms).
    import hashlib

    digest = hashlib.sha256(repr((n, len(rows.lo), int(node_limit), gap)).encode())
    for part in program:
        digest.update(part.tobytes())
    key = digest.digest()
    if key not in _kept:
        _kept[key] = _search(program, node_limit, gap)
    return _kept[key]


def _search(program, node_limit: int, gap: float | None) -> Result | None:
    """HiGHS's search on `program` = (cost, lower, upper, row lower, row upper, starts, columns,
    values), as `solve` describes."""
    # highspy loads here, not at the top: everything that imports kit.plan (the CLI, the
    # runbooks, the report) would pay for it, and only small clusters' exact passes use it.
    import highspy

    cost, lower, upper, row_lo, row_hi, starts, cols, vals = program
    n, m = len(cost), len(row_lo)
    # The constructor of highspy.Highs prints HiGHS's banner on stdout before any option can
    # silence it, which would corrupt a plan written there; the core class it wraps does not.
    h = highspy._Highs()
    options = {"output_flag": False, **SEARCH, "mip_max_nodes": int(node_limit)}
    if gap is not None:
        options["mip_rel_gap"] = float(gap)
    for name, value in options.items():
        # HiGHS ignores an option it does not know, with a status: a bound silently lost would
        # make the search unbounded again.
        if h.setOptionValue(name, value) != highspy.HighsStatus.kOk:
            raise RuntimeError(f"HiGHS refused its option {name} = {value!r}")
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n, m
    lp.col_cost_ = cost
    lp.col_lower_, lp.col_upper_ = lower, upper
    lp.row_lower_, lp.row_upper_ = row_lo, row_hi
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = n, m
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = starts, cols, vals
    lp.integrality_ = [highspy.HighsVarType.kInteger] * n
    h.passModel(lp)
    h.run()
    info = h.getInfo()
    if info.primal_solution_status != highspy.kSolutionStatusFeasible:
        return None
    status = h.getModelStatus()
    x = np.round(np.asarray(h.getSolution().col_value)).astype(np.int64)
    x.flags.writeable = False  # an answer kept by `answers_kept` may be handed out again
    return Result(x, float(info.mip_dual_bound), status == highspy.HighsModelStatus.kOptimal)
