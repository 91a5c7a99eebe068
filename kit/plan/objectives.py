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

One exception, bounded: where the copies a count balance chose leave a leadership target
missed, the spare-copies stage may spend up to 5% more copies than the fewest on it
(`kit.plan.steps.spare_copies`).
"""
from __future__ import annotations

from typing import NamedTuple


class Objective(NamedTuple):
    """One thing the planner aims for."""

    name: str
    target: int | None  # what kit promises; None: a hard limit, or as few as possible
    figure: str  # the key the report gives it under


RACK_RULE = Objective("rack rule", None, "rack_violations")
DEGREE_FLOOR = Objective("degree floor", None, "degree_min")
COUNT_SPREAD = Objective("replica count spread", 1, "replica_count_spread")
COPIES = Objective("replica additions", None, "replica_additions")
LEADER_SPREAD = Objective("leader count spread", 1, "leader_count_spread")
TOPIC_LEADER_EXCESS = Objective("topic leader excess", 1, "topic_leader_excess_spread_max")
FAILOVER_EXCESS = Objective("failover excess", 2, "failover_excess_spread_max")
CHANGES = Objective("partitions changed", None, "partitions_changed")

OBJECTIVES = (RACK_RULE, DEGREE_FLOOR, COUNT_SPREAD, COPIES, LEADER_SPREAD, TOPIC_LEADER_EXCESS,
              FAILOVER_EXCESS, CHANGES)


class LeaderFigures(NamedTuple):
    """The leadership figures of an assignment over the target brokers, as evaluate_plan
    defines them (`kit.plan.steps.leadership.leader_figures` computes them)."""

    leader_spread: int  # most minus fewest leaders on a target broker
    topic_leader_excess: int  # the worst topic's leader spread beyond the unavoidable 1
    failover_excess: int  # the worst broker's failover excess (`kit.plan.failover`)

    def shortfall(self) -> LeaderFigures:
        """How far each figure is above its target (0 where it is met)."""
        return LeaderFigures(*(max(0, v - t) for v, t in zip(self, LEADER_TARGETS)))

    def met(self) -> bool:
        """Whether every figure meets its target."""
        return not any(self.shortfall())

    def rank(self) -> tuple:
        """Sort key, lower is better: the shortfalls in order of priority, then the figures."""
        return tuple(self.shortfall()) + tuple(self)

    def missed(self) -> str:
        """The figures above their targets, named for a note: "failover excess 3"."""
        return ", ".join(f"{o.name} {v}" for o, v, s in zip(_LEADERSHIP, self, self.shortfall()) if s)


_LEADERSHIP = (LEADER_SPREAD, TOPIC_LEADER_EXCESS, FAILOVER_EXCESS)
LEADER_TARGETS = LeaderFigures(*(o.target for o in _LEADERSHIP))
