"""What the planner aims for, by priority, written once (as Cruise Control lists its goals
in ``goalsByPriority``).

Every stage of the pipeline (`kit.plan.pipeline`) ranks what it may choose by these
objectives, the first before the next: it never gives up one for those after it. The first
two are hard limits; the others are lowered, each down to the target kit promises:

=====================  ==========  =========================================================
objective              target      figure in the report (`kit.report.figures.plan_report`)
=====================  ==========  =========================================================
rack rule              hard        ``rack_violations`` (`kit.plan.racks`)
degree floor           hard        ``degree_min`` never below where the plan started
replica count spread   1           ``replica_count_spread``
replica additions      fewest      ``replica_additions`` (movement)
leader count spread    1           ``leader_count_spread``
topic leader excess    1           ``topic_leader_excess_spread_max``
failover excess        2           ``failover_excess_spread_max`` (`kit.plan.failover`)
partitions changed     fewest      ``partitions_changed`` (movement)
=====================  ==========  =========================================================

A stage ranks by the objectives it can change, a subset in the table's order, declared once
as its `Ranking` (``RANKING`` in the stage's module); the sort key is built from this table.
Objectives with targets next to each other in the table are lowered together: first each
down to its target, in order, then each further, in order (a leader count spread of 0
rather than 1 never costs the topic leader excess its target). The hard limits are kept by
every move a stage makes, not ranked.

One exception, bounded: where the copies a count balance chose leave a leadership target
missed, the spare-copies stage may spend up to 5% more copies than the fewest on it
(`kit.plan.steps.spare_copies`).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

# An objective's value for a workspace (`kit.plan.workspace.Workspace`) and its leadership
# figures (`LeaderFigures`), lower is better.
Measure = Callable[[Any, "LeaderFigures"], int]


class Objective(NamedTuple):
    """One thing the planner aims for."""

    name: str
    target: int | None  # what kit promises; None: a hard limit, or as few as possible
    figure: str  # the key the report gives it under
    measure: Measure | None = None  # None: no stage ranks by it (a hard limit, or what moves cost)


RACK_RULE = Objective("rack rule", None, "rack_violations")
DEGREE_FLOOR = Objective("degree floor", None, "degree_min")
COUNT_SPREAD = Objective("replica count spread", 1, "replica_count_spread", lambda ws, figs: ws.count_spread())
COPIES = Objective("replica additions", None, "replica_additions", lambda ws, figs: ws.copies_made())
LEADER_SPREAD = Objective("leader count spread", 1, "leader_count_spread", lambda ws, figs: figs.leader_spread)
TOPIC_LEADER_EXCESS = Objective("topic leader excess", 1, "topic_leader_excess_spread_max",
                                lambda ws, figs: figs.topic_leader_excess)
FAILOVER_EXCESS = Objective("failover excess", 2, "failover_excess_spread_max", lambda ws, figs: figs.failover_excess)
CHANGES = Objective("partitions changed", None, "partitions_changed")

OBJECTIVES = (RACK_RULE, DEGREE_FLOOR, COUNT_SPREAD, COPIES, LEADER_SPREAD, TOPIC_LEADER_EXCESS,
              FAILOVER_EXCESS, CHANGES)


class Ranking:
    """How one stage ranks what it may choose: by `objectives` (a subset of `table`, in its
    order), then, where they all tie, by `ties` (a stage's own finer measure, or None).

    `key(ws, figs)` is the sort key, lower is better: per group of objectives with targets
    next to each other in the table, the shortfalls (how far each is above its target), then
    the values; an objective without a target by its value. Built once, here.
    """

    def __init__(self, *objectives: Objective, ties: Callable[[Any, LeaderFigures], tuple] | None = None,
                 table: tuple[Objective, ...] = OBJECTIVES):
        at = [table.index(o) for o in objectives]
        if at != sorted(set(at)):
            raise ValueError(f"not in the table's order: {[o.name for o in objectives]}")
        if any(o.measure is None for o in objectives):
            raise ValueError(f"not measured, so not ranked: {[o.name for o in objectives if o.measure is None]}")
        self.objectives = objectives
        self.ties = ties
        # Where each key entry comes from: (index into `objectives`, target or None for the value).
        entries: list[tuple[int, int | None]] = []
        for group in _groups(table):
            ranked = [objectives.index(o) for o in group if o in objectives]
            entries += [(i, objectives[i].target) for i in ranked if objectives[i].target is not None]
            entries += [(i, None) for i in ranked]
        self.entries = tuple(entries)

    def key(self, ws, figs: LeaderFigures) -> tuple:
        """The sort key of a workspace `ws` whose leadership figures are `figs`."""
        values = [o.measure(ws, figs) for o in self.objectives]
        key = tuple(values[i] if t is None else max(0, values[i] - t) for i, t in self.entries)
        return key if self.ties is None else key + self.ties(ws, figs)


def allowance_key(figs: LeaderFigures, copies: int) -> tuple:
    """The table's one exception as a sort key, lower is better: the leadership shortfalls,
    then the copies. Only for the spare copies' replica sets chosen within the allowance
    (`kit.plan.steps.spare_copies.place_for_leadership`): there a target met is worth copies."""
    return (*figs.shortfall(), copies)


def _groups(table: tuple[Objective, ...]) -> list[list[Objective]]:
    """The table cut into groups: objectives with targets next to each other together, every
    other objective alone."""
    groups: list[list[Objective]] = []
    for o in table:
        if o.target is not None and groups and groups[-1][-1].target is not None:
            groups[-1].append(o)
        else:
            groups.append([o])
    return groups


class LeaderFigures(NamedTuple):
    """The leadership figures of an assignment over the target brokers, as evaluate_plan
    defines them (`kit.plan.steps.leadership_figures.leader_figures` computes them)."""

    leader_spread: int  # most minus fewest leaders on a target broker
    topic_leader_excess: int  # the worst topic's leader spread beyond the unavoidable 1
    failover_excess: int  # the worst broker's failover excess (`kit.plan.failover`)

    def shortfall(self) -> LeaderFigures:
        """How far each figure is above its target (0 where it is met)."""
        return LeaderFigures(*(max(0, v - t) for v, t in zip(self, LEADER_TARGETS)))

    def met(self) -> bool:
        """Whether every figure meets its target."""
        return not any(self.shortfall())

    def missed(self) -> str:
        """The figures above their targets, named for a note: "failover excess 3"."""
        return ", ".join(f"{o.name} {v}" for o, v, s in zip(_LEADERSHIP, self, self.shortfall()) if s)


_LEADERSHIP = (LEADER_SPREAD, TOPIC_LEADER_EXCESS, FAILOVER_EXCESS)
LEADER_TARGETS = LeaderFigures(*(o.target for o in _LEADERSHIP))
