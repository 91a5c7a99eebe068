"""Planners: cluster in, plan out, no I/O. One module per action."""
from .az_loss import plan_az_loss
from .leaders import plan_leaders
from .rebalance import plan_rebalance, plan_scale_out
from .rebuild import plan_rebuild
from .remove import plan_remove
from .replace import plan_replace
from .rf import plan_rf

__all__ = ["plan_az_loss", "plan_leaders", "plan_rebalance", "plan_scale_out", "plan_rebuild",
           "plan_remove", "plan_replace", "plan_rf"]
