"""The NOTEs of the exact leadership order and placement (integer programs): what a plan says the
program proved, or found within its budget, of its replica sets; kept or dropped as the
leadership stages and the spare copies change those sets."""
from __future__ import annotations

from kit.plan.solvers import exact_order
from kit.plan.workspace import Workspace

ORDER_NOTE = (": the least any order of these replica sets allows (proved by integer programming);"
              " only moving replicas to other brokers could lower it")


# The integer program's search is bounded (`exact_order.NODE_LIMIT`, a count of nodes, so the
# same input gives the same plan): where it ends before its proof, the plan keeps the best order
# found and says that a better one may exist.
BUDGET_NOTE = (": the best order the integer program found within its budget ({nodes:,} branch-and-bound"
               " nodes); not proved the least these replica sets allow")


def budget_note(missed: str) -> str:
    """The NOTE of an order the integer program kept without its proof (`BUDGET_NOTE`)."""
    return missed + BUDGET_NOTE.format(nodes=exact_order.NODE_LIMIT)


# The same for the placement program (`exact_order.best_placement`, replica sets and order).
PLACEMENT_BUDGET_NOTE = (": the best replica sets and order the integer program found within its budget ({nodes:,}"
                         " branch-and-bound nodes) where each partition moves at most one replica; not proved the"
                         " least such plans allow")


def placement_budget_note(missed: str) -> str:
    """The NOTE of a plan whose placement program ended before its proof (`PLACEMENT_BUDGET_NOTE`)."""
    return missed + PLACEMENT_BUDGET_NOTE.format(nodes=exact_order.NODE_LIMIT)


def drop_order_notes(ws: Workspace) -> None:
    """Forget what the integer programs proved, or found within their budget, of the replica
    sets (before they change)."""
    ws.notes[:] = [n for n in ws.notes if not n.endswith((ORDER_NOTE, budget_note(""), placement_budget_note("")))]
