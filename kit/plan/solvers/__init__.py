"""Solvers the stages hand their problems to: bounded assignment as flows (`flow`), and
replica order and sets by integer programming (`exact_order`).

OR-Tools' graph solvers are made here, the one place that imports them, and only when a flow
is really solved: importing them costs some 0.2-0.3 CPU s, as much as a whole small plan
(issue 38), and many small plans solve none.
"""
from __future__ import annotations


def new_max_flow():
    """A new OR-Tools `SimpleMaxFlow` (OR-Tools imported on first use)."""
    from ortools.graph.python import max_flow
    return max_flow.SimpleMaxFlow()


def new_min_cost_flow():
    """A new OR-Tools `SimpleMinCostFlow` (OR-Tools imported on first use)."""
    from ortools.graph.python import min_cost_flow
    return min_cost_flow.SimpleMinCostFlow()
