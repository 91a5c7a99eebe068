"""When kit runs a kernel compiled by numba: one rule for the planner's count balance
(`kit.plan.steps.count_kernels`) and the copy physics' filling (`kit.physics.pair_rates`).

Importing numba costs about half a second and each kernel's first call loads it from numba's
disk cache; a small balance or a short estimate does not pay that back. So a caller with a
small job runs its kernel compiled only when numba is loaded already (by a large plan's
balance, or the warm-up, scripts/warm_kernels.py): then the compiled kernel costs only its
cache. Both forms give the same results (tests/plan/test_count_balance.py,
tests/sim/test_fill_kernel.py).
"""
from __future__ import annotations

import sys


def numba_loaded() -> bool:
    """Whether numba is loaded already, so a kernel runs compiled for the price of its disk cache."""
    return "numba" in sys.modules
