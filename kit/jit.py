"""When kit runs a kernel compiled by numba: one rule for the planner's count balance
(`kit.plan.steps.count_kernels`), the leader flow's shortest paths
(`kit.plan.solvers.path_kernels`) and the copy physics' filling (`kit.physics.pair_rates`);
and how a kernel whose helpers are plain functions of its module is compiled (`compiled_together`).

Loading numba costs a process 0.71 CPU s before any kernel runs (bench/numba_cost.py, median
of 5 fresh processes: the import 0.28 s, the first call of a kernel from numba's disk cache
0.44 s, which loads numba's type registries and scipy.linalg with them; inside `kit plan` on a
3,000-partition az-loss 0.30 + 0.52 s). A small balance or estimate does not pay that back:
the compiled filling saves the duration estimate 0.20 s on a 3,000-partition az-loss and 0.45 s
on a 5,000-partition one (0.53 -> 0.34 s, 1.11 -> 0.66 s, numba loaded beforehand), and even a
compiled replay of the estimate's whole loop could save at most the 1.1 s that loop costs in
Python on the largest of the 18 small bench cases (issue 38). So a caller with a small job runs
its kernel compiled only when numba is loaded already (by a large plan's balance, or the
warm-up, scripts/warm_kernels.py): then the compiled kernel costs only its cache. Both forms
give the same results (tests/plan/test_count_balance.py, tests/sim/test_fill_kernel.py).
"""
from __future__ import annotations

import sys
from types import FunctionType


def numba_loaded() -> bool:
    """Whether numba is loaded already, so a kernel runs compiled for the price of its disk cache."""
    return "numba" in sys.modules


def compiled_together(scope: dict, functions, **options) -> dict:
    """`functions` ((name, function) pairs) compiled by numba (`numba.njit(**options)`), each
    over a copy of `scope` (its module's globals) in which the others are compiled too:
    compiled code calls compiled code only, while the module's own functions stay plain Python.
    Returns that copy, the compiled functions under their names. Imports numba (about half a
    second the first time)."""
    import numba

    jit = numba.njit(**options)
    names = dict(scope)
    for name, f in functions:
        names[name] = jit(FunctionType(f.__code__, names, name))
    return names
