"""Planners: cluster in, plan out, no I/O. One module per action.

Importing this package imports no planner: `kit plan --help` declares its subcommands from
ACTIONS, and the planners load numpy (and OR-Tools once they solve a flow: kit.plan.solvers;
most of a second together). `plan_X` is imported from its module in kit.plan.actions the
first time it is read, here or through its Action.
"""
from __future__ import annotations

import importlib
from typing import Callable, NamedTuple

from kit.model import Plan

__all__ = ["plan_az_loss", "plan_leaders", "plan_rebalance", "plan_scale_out", "plan_rebuild",
           "plan_remove", "plan_replace", "plan_rf"]


def __getattr__(name: str):
    # PEP 562: reached only for names the module does not define, i.e. the planners.
    if name in __all__:
        return getattr(importlib.import_module(f"kit.plan.actions.{name.removeprefix('plan_')}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------- the actions, in one map
# `kit plan ACTION` declares its subcommands from this map and runs them through it
# (kit/cli/plan.py spells each input as an option).


class Input(NamedTuple):
    """One of an action's own inputs: the planner's keyword, whether the action cannot do
    without it, what it means (None: the option's name says it), and the values it takes
    where the planner names them (the first the default)."""
    name: str
    required: bool = False
    help: str | None = None
    choices: tuple[str, ...] = ()


class Action(NamedTuple):
    """A `kit plan` action: its module in kit.plan.actions (which defines `plan_<module>`), one
    line on what it does, and what the planner takes besides the cluster and the topic selection
    (topics, exclude)."""
    module: str
    summary: str
    inputs: tuple[Input, ...] = ()
    warns: bool = True  # the planner can raise warnings, and takes ignore_warns
    swaps: bool = False  # one for one: its targets are the live brokers with OLD swapped for NEW (no brokers)

    @property
    def planner(self) -> Callable[..., Plan]:
        """The action's planner (its module imported on first use)."""
        return __getattr__(f"plan_{self.module}")


# An evacuation's leadership (kit.plan.actions.remove.evacuate), the first the default.
LEADERSHIP_MODES = ("balance", "keep")
LEADERSHIP = Input("leadership", help="balance (default): reorder replicas for even leadership overall, per topic "
                   "and after a failover; keep: change only the partitions that lose a replica, no leader moved "
                   "but into a leaving one's slot (as topicmappr's rebuild without --optimize-leadership), their "
                   "followers reordered where that lowers the worst failover excess", choices=LEADERSHIP_MODES)
SIZE_FACTOR = Input("size_factor", help="multiply partition sizes by F for storage placement (headroom for growth)")
ACTIONS: dict[str, Action] = {
    "replace": Action("replace", "OLD's replica slots go to NEW, nothing else moves",
                      (Input("pairs", required=True),), swaps=True),
    "remove": Action("remove", "evacuate brokers, balanced over the rest",
                     (Input("remove", required=True), LEADERSHIP)),
    "az-loss": Action("az_loss", "every replica in the lost rack re-placed on the others",
                      (Input("rack", required=True), LEADERSHIP)),
    "scale-out": Action("scale_out", "move the minimum onto new/underfull brokers until balanced"),
    "rf": Action("rf", "change the replication factor of the selected topics",
                 (Input("replication", required=True),), warns=False),
    "rebalance": Action("rebalance", "in place, minimal movement, to balance", (
        Input("placement", help="balance replica counts (default) or free storage by utilisation"), SIZE_FACTOR)),
    "leaders": Action("leaders", "leadership and follower order only; no data moves", warns=False),
    "rebuild": Action("rebuild", "topicmappr's rebuild", (
        Input("placement"),
        Input("optimize", help="with --placement storage: also even out free storage (moves more data)"),
        SIZE_FACTOR,
        Input("sub_affinity", help="replace each leaving broker by the new one in its rack"),
        Input("force_rebuild", help="place every selected partition afresh"),
        Input("replication", help="set the replication factor"),
        Input("min_rack_ids", help="distinct racks each replica set must span (0 = as many as possible)"))),
}
__all__ += ["ACTIONS", "Action", "Input", "LEADERSHIP_MODES"]
