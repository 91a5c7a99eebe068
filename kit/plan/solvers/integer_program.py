"""The planner's integer programs, solved by OR-Tools' CP-SAT within a budget of work.

Both programs (`exact_order`, `pair_balance`) are written as sparse rows over integer
variables with integer weights and solved here, so the budget and how it is counted live in
one place. The budget is CP-SAT's deterministic time (`max_deterministic_time`): a count of
the solver's work, in its own unit ("deterministic seconds"), not a clock, so the same input
gives the same plan on any machine at any load; one worker, for the same reason. Where the
budget ends before the search does, the best solution found comes back with the best bound
proved, and the caller says what that bound proves.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# CP-SAT's deterministic seconds per program, about 2 CPU s each on this project's 2-core
# machine (2026-11). At 5 the 3,893-variable placement program of
# test_rebalance_chooses_replica_sets_for_leadership[args0] finds, in 11.8 CPU s, the optimum
# HiGHS took 33 to prove (docs/benchmarks.md, "The integer programs' budget").
WORK_BUDGET = 5.0


def budget_text(budget: float | None = None) -> str:
    """The budget as a NOTE names it, with its unit: "1 deterministic second of CP-SAT's
    work (a count of work, not a clock)"."""
    b = WORK_BUDGET if budget is None else budget
    return f"{b:g} deterministic second{'' if b == 1 else 's'} of CP-SAT's work (a count of work, not a clock)"


@dataclass
class Solution:
    """What the search found: `x` (int per variable), the objective's value, the best lower
    bound proved on it, whether the search ended by proving `x` optimal (False: its budget ran
    out first), and the work it took (CP-SAT's deterministic seconds)."""

    x: np.ndarray
    value: int
    bound: float
    optimal: bool
    work: float


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


def _integral(values) -> list[int]:
    """`values` as Python ints; the programs build them as whole numbers (floats or not)."""
    out = [int(round(v)) for v in values]
    if any(o != v for o, v in zip(out, values)):
        raise ValueError("integer programs take whole-number weights only")
    return out


def minimise(cost, rows: SparseRows, lower, upper, hint: dict[int, int] | None = None,
             budget: float | None = None) -> Solution | None:
    """The least `cost @ x` over integer `x` within `lower..upper` that meets every row.

    Parameters
    ----------
    cost, lower, upper : sequences of whole numbers
        Per variable; bounds must be finite.
    rows : SparseRows
        The constraints; a row's low or high may be infinite (that side is open).
    hint : dict, optional
        Variable -> value of a known solution (or part of one), where the search starts.
    budget : float, optional
        CP-SAT's deterministic time (`budget_text`); `WORK_BUDGET` by default.

    Returns
    -------
    Solution or None
        None when the budget ends with no solution found, or none exists.
    """
    # cp_model loads here, not at the top: plans that never need a program do not pay for it.
    from ortools.sat.python import cp_model

    model = cp_model.CpModel()
    xs = [model.new_int_var(lo, hi, "") for lo, hi in zip(_integral(lower), _integral(upper))]
    order = np.argsort(np.asarray(rows.rows, dtype=np.int64), kind="stable")
    starts = np.searchsorted(np.asarray(rows.rows, dtype=np.int64)[order], np.arange(len(rows.lo) + 1))
    cols = np.asarray(rows.cols, dtype=np.int64)[order].tolist()
    vals = _integral(np.asarray(rows.vals, dtype=float)[order])
    for r, (low, high) in enumerate(zip(rows.lo, rows.hi)):
        a, b = int(starts[r]), int(starts[r + 1])
        expr = cp_model.LinearExpr.weighted_sum([xs[c] for c in cols[a:b]], vals[a:b])
        if np.isfinite(low):
            model.add(expr >= int(low))
        if np.isfinite(high):
            model.add(expr <= int(high))
    model.minimize(cp_model.LinearExpr.weighted_sum(xs, _integral(cost)))
    for v, value in sorted((hint or {}).items()):
        model.add_hint(xs[v], int(value))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1  # one search, the same on every machine
    solver.parameters.max_deterministic_time = WORK_BUDGET if budget is None else budget
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    x = np.array([solver.value(v) for v in xs], dtype=np.int64)
    return Solution(x, int(solver.objective_value), float(solver.best_objective_bound), status == cp_model.OPTIMAL,
                    float(solver.response_proto.deterministic_time))
