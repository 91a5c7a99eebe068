"""Planners: cluster in, plan out, no I/O. One module per action."""
from typing import Callable, NamedTuple

from kit.model import Plan
from kit.plan.actions.az_loss import plan_az_loss
from kit.plan.actions.leaders import plan_leaders
from kit.plan.actions.rebalance import plan_rebalance
from kit.plan.actions.rebuild import plan_rebuild
from kit.plan.actions.remove import plan_remove
from kit.plan.actions.replace import plan_replace
from kit.plan.actions.rf import plan_rf
from kit.plan.actions.scale_out import plan_scale_out

__all__ = ["plan_az_loss", "plan_leaders", "plan_rebalance", "plan_scale_out", "plan_rebuild",
           "plan_remove", "plan_replace", "plan_rf"]

# --------------------------------------------------------------------------- the actions, in one map
# `kit plan ACTION` declares its subcommands from this map and runs them through it
# (kit/cli/plan.py spells each input as an option).


class Input(NamedTuple):
    """One of an action's own inputs: the planner's keyword, whether the action cannot do
    without it, and what it means (None: the option's name says it)."""
    name: str
    required: bool = False
    help: str | None = None


class Action(NamedTuple):
    """A `kit plan` action: its planner, one line on what it does, and what the planner takes
    besides the cluster and the topic selection (topics, exclude)."""
    planner: Callable[..., Plan]
    summary: str
    inputs: tuple[Input, ...] = ()
    warns: bool = True  # the planner can raise warnings, and takes ignore_warns
    swaps: bool = False  # one for one: its targets are the live brokers with OLD swapped for NEW (no brokers)


SIZE_FACTOR = Input("size_factor", help="multiply partition sizes by F for storage placement (headroom for growth)")
ACTIONS: dict[str, Action] = {
    "replace": Action(plan_replace, "OLD's replica slots go to NEW, nothing else moves",
                      (Input("pairs", required=True),), swaps=True),
    "remove": Action(plan_remove, "evacuate brokers, balanced over the rest", (Input("remove", required=True),)),
    "az-loss": Action(plan_az_loss, "every replica in the lost rack re-placed on the others",
                      (Input("rack", required=True),)),
    "scale-out": Action(plan_scale_out, "move the minimum onto new/underfull brokers until balanced"),
    "rf": Action(plan_rf, "change the replication factor of the selected topics",
                 (Input("replication", required=True),), warns=False),
    "rebalance": Action(plan_rebalance, "in place, minimal movement, to balance", (
        Input("placement", help="balance replica counts (default) or free storage by utilisation"), SIZE_FACTOR)),
    "leaders": Action(plan_leaders, "leadership and follower order only; no data moves", warns=False),
    "rebuild": Action(plan_rebuild, "topicmappr's rebuild", (
        Input("placement"),
        Input("optimize", help="with --placement storage: also even out free storage (moves more data)"),
        SIZE_FACTOR,
        Input("sub_affinity", help="replace each leaving broker by the new one in its rack"),
        Input("force_rebuild", help="place every selected partition afresh"),
        Input("replication", help="set the replication factor"),
        Input("min_rack_ids", help="distinct racks each replica set must span (0 = as many as possible)"))),
}
__all__ += ["ACTIONS", "Action", "Input"]
