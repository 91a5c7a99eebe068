"""What the runbooks do, step by step: the notebooks in runbooks/ are a parameters cell and
calls into this module, each followed by a table or a chart.

A runbook starts a `Run` (`start`: its `Record`, with the parameters as its parameters cell
declares them, and its workdir), opens an `Environment` (the cluster's ZooKeeper, a KRaft
cluster's brokers through the Admin API, or, by default, a simulated cluster set up for the
situation: on a local ZooKeeper, or with `cluster="kraft"` the simulated KRaft cluster of `kit
sim start --kraft`), shows the situation, runs pre-checks (`Checks`: a visible PASS/FAIL line
each; a failure raises `CheckFailed` and stops the runbook), shows the plan, waits at the gate
(`apply`), applies with the auto-throttle, monitors until done, verifies, and keeps the record
(JSON beside the executed notebook).

The steps live by concern in this package (record, environment, checks, planning, gate,
change, display, charts, replay); this module is the notebooks' one entry point to them.
"""
from __future__ import annotations

import contextlib

from kit.model import Cluster, Plan
from kit.runbook.catalog import RUNBOOKS, declared_defaults
from kit.runbook.change import (STEADY_LOOKS, STEADY_WINDOW, apply_and_monitor, apply_plan, change_and_report,
                                progress_line, steady_rate)
from kit.runbook.charts import Chart, distribution_chart, storage_chart, throttle_chart
from kit.runbook.checks import Checks, common_checks, lost_rack, replacement_pairs
from kit.runbook.display import broker_table, brokers_text, events_table, live_notebook, under_replicated_table
from kit.runbook.environment import (SIMULATED_MARKER, Environment, check_address, open_environment, rollback_path,
                                     simulated_address, stop_simulated)
from kit.runbook.gate import finish, finish_unapplied, gate
from kit.runbook.planning import after_cluster, plan_summary, write_moves, write_plan
from kit.runbook.record import (HEADLINE_TAG, CheckFailed, Headline, Record, command_line, default_workdir, headline,
                                live_record_path, outcome_line, outcome_text, record_notebook, run_workdir)
from kit.runbook.replay import ChangeResult, floor_time, simulated_copy_seconds
from kit.text import hm

__all__ = [
    "RUNBOOKS", "Run", "start",
    # the record
    "Record", "Headline", "headline", "HEADLINE_TAG", "outcome_line", "outcome_text", "command_line",
    "default_workdir", "live_record_path", "record_notebook",
    # the environment
    "Environment", "open_environment", "check_address", "stop_simulated", "simulated_address", "rollback_path",
    "SIMULATED_MARKER",
    # the situation and the checks
    "broker_table", "under_replicated_table", "distribution_chart", "storage_chart", "Chart",
    "Checks", "CheckFailed", "common_checks", "replacement_pairs", "lost_rack",
    # the plan, the gate, the change
    "plan_summary", "after_cluster", "write_plan", "write_moves",
    "gate", "live_notebook", "finish", "finish_unapplied",
    "change_and_report", "apply_and_monitor", "apply_plan", "ChangeResult", "progress_line", "steady_rate",
    "STEADY_LOOKS", "STEADY_WINDOW",
    # the change's events, on the cluster's clock
    "throttle_chart", "events_table", "floor_time", "simulated_copy_seconds", "brokers_text", "hm",
]


class Run:
    """One run of a runbook: its record, its parameters, its workdir and, once the situation is
    read, its environment. The notebook's cells call its steps, each followed by a table or a
    chart; every parameter is read from the parameters cell once (`start`), never retyped."""

    def __init__(self, runbook: str, parameters: dict, record_path: str = ""):
        self.runbook = runbook
        # A live notebook keeps its record from the start, so one that stops early says why.
        record_path = record_path or live_record_path(runbook)
        self.workdir = run_workdir(parameters, runbook, record_path)
        self.parameters = {**parameters, "workdir": self.workdir}
        self.record = Record(record_path, runbook, self.parameters)
        self.env: Environment | None = None

    def step(self, name: str):
        """Time one step into the record (`Record.step`): with run.step("plan"): ..."""
        return self.record.step(name)

    def situation(self) -> Cluster:
        """Open the environment (`open_environment`: the cluster given, or the simulated one in
        this runbook's situation) and read the cluster, as the step "situation"."""
        p = self.parameters
        with self.step("situation"):
            self.env = open_environment(p["zk"], self.runbook, self.workdir, p["cap_map"], p["bootstrap"],
                                        p["cluster"], p["speed"], p["client_load"])
            cluster, _ = self.env.read()
        return cluster

    @contextlib.contextmanager
    def pre_checks(self):
        """The step "pre-checks": the checks every runbook makes (`common_checks`), then the
        runbook's own in the with block, then a stop if any failed:
        with run.pre_checks() as (checks, cluster): checks.check(...)"""
        checks = Checks(self.record)
        with self.step("pre-checks"):
            cluster, _ = common_checks(self.env, checks)
            yield checks, cluster
            checks.stop_if_failed()

    def record_plan(self, plan: Plan) -> dict:
        """Print the plan's summary with the duration estimate of the run this runbook makes
        (`plan_summary`), write the plan to the workdir and keep its figures in the record."""
        p = self.parameters
        figures = plan_summary(plan, p["throttle"], self.env, p["speed"], p["client_load"])
        self.record.put("plan", {"file": write_plan(plan, self.workdir), **figures})
        return figures

    def gate(self, plan: Plan | list[dict]) -> bool:
        """`gate`: True when the runbook may change the cluster now; in a live notebook an Apply
        button that makes the change (`change`) when pressed."""
        return gate(self.parameters["apply"], lambda: self.change(plan), self.record, self.env)

    def change(self, plan: Plan | list[dict]) -> ChangeResult:
        """`change_and_report` with this run's parameters: apply, monitor, verify, report, close."""
        p = self.parameters
        return change_and_report(self.env, plan, self.record, p["throttle"], p["speed"], p["client_load"],
                                 p["max_wait_s"], p["throttle_metrics"])

    def finish(self, outcome: str, reason: str | None = None) -> dict:
        """Close the record with `outcome` and the environment (`finish`)."""
        return finish(self.record, self.env, outcome, reason)

    def finish_unapplied(self, reason: str = "apply=False: the plan was not applied") -> dict:
        """The gate said no (`finish_unapplied`)."""
        return finish_unapplied(self.record, self.env, reason)


def start(runbook: str, namespace: dict) -> Run:
    """Start a run of `runbook` with its parameters as they stand in `namespace` (the notebook's
    `globals()`, after papermill's injected cell): the names its parameters cell declares
    (`declared_defaults`), so a parameter is written once, in that cell."""
    names = [k for k in declared_defaults(runbook) if k != "record_path" and k in namespace]
    return Run(runbook, {k: namespace[k] for k in names}, namespace.get("record_path") or "")
