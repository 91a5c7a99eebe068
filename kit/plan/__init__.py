"""Planners: cluster in, plan out, no I/O. One module per action."""
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
