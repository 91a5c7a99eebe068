"""Solvers the stages hand their problems to: bounded assignment as flows (`flow`), and
replica order and sets by integer programming (`exact_order`).

OR-Tools' graph solvers are made here, the one place that imports them, and only when a flow
is really solved: importing them costs some 0.2-0.3 CPU s, as much as a whole small plan
(issue 38), and many small plans solve none.
"""
from __future__ import annotations

from kit import collector

# From this many arcs a solver's own arrays take hundreds of MiB (some 55 bytes an arc for
# OR-Tools' max flow, once solved), most of them in blocks too large for the holes numpy's freed
# arrays leave in the C heap: those holes are handed back first (`before_solve`).
TRIM_ARCS = 1_000_000


def before_solve(n_arcs: int) -> None:
    """Before a solve over `n_arcs` arcs: from `TRIM_ARCS` on, the C heap's free pages handed
    back (`collector.memory_returned`), so the solver's new pages add to what is live, not to
    what is live plus the heap's holes (the 1,000,000-partition leader flow: 150-160 MiB)."""
    if n_arcs >= TRIM_ARCS:
        collector.memory_returned()


def new_max_flow():
    """A new OR-Tools `SimpleMaxFlow` (OR-Tools imported on first use)."""
    from ortools.graph.python import max_flow
    return max_flow.SimpleMaxFlow()


def new_min_cost_flow():
    """A new OR-Tools `SimpleMinCostFlow` (OR-Tools imported on first use)."""
    from ortools.graph.python import min_cost_flow
    return min_cost_flow.SimpleMinCostFlow()
