"""One review of a plan, for every caller that shows or applies one: `kit plan`, the
runbooks and the doctor see the same figures, the same estimate and the same verdict."""
from __future__ import annotations

from kit.errors import Unsafe
from kit.model import Plan
from kit.report import figures
from kit.report.waves import Move, duration_report
from kit.throttle.decide import Settings


class PlanRefused(Unsafe):
    """A plan that failed its own checks (exit code 3); `report` holds the figures that say why."""

    def __init__(self, report: dict):
        super().__init__(f"the plan failed its own checks: {report['problems'][0]}")
        self.report = report


def review_plan(plan: Plan, waves: list[list[Move]] | None = None, throttle: float | str | None = None,
                client_load: float | None = None, settings: Settings | None = None,
                first_decision_s: float = 0.0, stage=None, arrays: figures.PlanArrays | None = None) -> dict:
    """The plan's figures before and after, its duration estimate, and the verdict.

    Parameters
    ----------
    plan : Plan
        The plan to review.
    waves : list of list of Move, optional
        The plan's waves (`kit.report.waves.split_waves`); with them the report carries the
        duration estimate (``duration``, see `kit.report.waves.duration_report` for
        `throttle`, `client_load`, `settings` and `first_decision_s`).
    stage : callable, optional
        Called with the name of each stage as it starts (a progress display).
    arrays : kit.report.figures.PlanArrays, optional
        The plan as arrays, when the caller has them (to give `kit.report.summary.summary_text` too).

    Returns
    -------
    dict
        `kit.report.figures.plan_report`'s answer, with ``duration`` when `waves` are given.

    Raises
    ------
    PlanRefused
        When the plan failed its own checks (``problem_count`` not zero).
    """
    if stage:
        stage("figures before and after")
    arrays = arrays or figures.PlanArrays(plan)
    report = figures.plan_report(plan, arrays)
    if waves is not None:
        if stage:
            stage("waves and the duration estimate")
        report["duration"] = duration_report(plan, waves, throttle, client_load, settings, first_decision_s=first_decision_s,
                                             arrays=arrays)
    if report["problem_count"]:
        raise PlanRefused(report)
    return report
