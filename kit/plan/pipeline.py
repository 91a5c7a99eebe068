"""The planner's pipeline, written once: the stages an action runs, and their order.

    place → balance → exact refinement → leadership → spare copies → finish

=================  =============================================  ==============================
stage              what it does                                   where (kit/plan/)
=================  =============================================  ==============================
place              fill the replica slots that must be filled     steps/place.py, steps/storage.py
                   (orphans, new replicas, a rebuilt map)
balance            even out replica counts (or free storage)      steps/count_balance.py,
                   with the fewest moves                          steps/topic_quotas.py,
                                                                  steps/storage.py
exact refinement   small clusters: redo the placement as a        steps/exact_refinement.py
                   min-cost flow where it needs fewer copies
leadership         replica order: leaders even overall and per    steps/leadership.py
                   topic, failover even (flows, then an           (solvers/flow.py,
                   integer program where they stop short);        solvers/exact_order.py),
                   an RF-2 evacuation onto two racks re-places    steps/pair_balance.py
                   its moved replicas for even failover
spare copies       other replica sets, and up to 5% more copies,  steps/spare_copies.py,
                   where no order meets a leadership target       steps/pair_balance.py
finish             the workspace becomes a Plan                   select.py
=================  =============================================  ==============================

Each stage is a function of the `Workspace`. An action says which stages it runs
(`Stages`, by name); `run` runs them in this order and skips the ones left out. What every
stage aims for, first things first, is `kit.plan.objectives.OBJECTIVES`; each stage that ranks
declares its `Ranking` (`RANKING` here ranks whole pipelines' results against each other).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from kit.model import Plan
from kit.plan.objectives import COPIES, COUNT_SPREAD, FAILOVER_EXCESS, LEADER_SPREAD, TOPIC_LEADER_EXCESS, Ranking
from kit.plan.select import finish
from kit.plan.steps.leadership import balance_leadership
from kit.plan.steps.leadership_figures import leader_figures
from kit.plan.workspace import Workspace

Stage = Callable[[Workspace], object]


class Stages(NamedTuple):
    """The stages one action runs, in pipeline order; None leaves a stage out. Leadership
    runs unless an action leaves it out."""

    place: Stage | None = None
    balance: Stage | None = None
    exact_refinement: Stage | None = None
    leadership: Stage | None = balance_leadership
    spare_copies: Stage | None = None


STAGES = (*Stages._fields, "finish")


def run_stages(ws: Workspace, stages: Stages) -> Workspace:
    """Run the stages that are there, in pipeline order, on `ws` (changed in place)."""
    for name, stage in zip(Stages._fields, stages):
        if stage is None:
            continue
        stage(ws)
    return ws


def run(ws: Workspace, stages: Stages, action: str, changes: dict[str, list[int]], notes=()) -> Plan:
    """Run the stages on `ws`, then finish: the Plan (`select.finish`)."""
    return finish(run_stages(ws, stages), action, changes, notes)


# Every objective a stage chooses by: the hard limits are kept by every stage's moves.
RANKING = Ranking(COUNT_SPREAD, COPIES, LEADER_SPREAD, TOPIC_LEADER_EXCESS, FAILOVER_EXCESS)


def rank(ws: Workspace) -> tuple:
    """How a workspace stands against the objectives, as a sort key (lower is better): `RANKING`."""
    return RANKING.key(ws, leader_figures(ws, ws.assign))
