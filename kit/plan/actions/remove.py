"""Evacuate brokers: every replica they hold moves, balanced over the rest; nothing else moves."""
from __future__ import annotations

from kit.errors import BadInput
from kit.model import Cluster, Plan
from kit.plan import LEADERSHIP_MODES
from kit.plan.pipeline import Stages, run
from kit.plan.select import broker_changes, resolve_brokers, select_partitions
from kit.plan.steps.exact_refinement import exact_evacuate
from kit.plan.steps.leadership import even_followers
from kit.plan.steps.pair_balance import lead_then_even_pairs, prove_failover
from kit.plan.steps.place import place_orphans
from kit.plan.steps.spare_copies import place_within_copies
from kit.plan.workspace import Workspace


# What an evacuation does with leadership (`kit plan remove/az-loss --leadership`, one of
# kit.plan.LEADERSHIP_MODES): "balance" reorders replicas for even leadership overall, per topic
# and after a failover (the contract's "balanced over the rest"); "keep" changes only the
# partitions that lose a replica, a new replica taking the slot of the one it replaces (as
# topicmappr's rebuild without --optimize-leadership does), and reorders their followers where
# that lowers the worst failover excess (`leadership.even_followers`): no leader moves but into a
# leaving one's slot.
KEPT_NOTE = ("leadership kept (--leadership keep): only the partitions that lose a replica change, the new replica "
             "in the slot of the one it replaces (the first slot too), their followers reordered only where that "
             "lowers the worst failover excess")


def evacuate(cluster: Cluster, targets: list[int], selected: list[int], action: str, reason: str,
             removed=(), min_rack_ids: int | None = None, ignore_warns: bool = False,
             leadership: str = LEADERSHIP_MODES[0]) -> Plan:
    """Re-place exactly the selected replicas that sit outside `targets`, then balance leadership
    unless `leadership` is "keep" (`remove`, `az-loss` and the doctor's healing; the default
    is "balance")."""
    if leadership not in LEADERSHIP_MODES:
        raise BadInput(f"--leadership {leadership!r}: expected one of {', '.join(LEADERSHIP_MODES)}")
    ws = Workspace(cluster, targets, selected, min_rack_ids)
    rf_max = max((len(ws.assign[p]) for p in ws.selected), default=0)
    if rf_max > len(targets):
        raise BadInput(f"replication factor {rf_max} is larger than the {len(targets)} target brokers available")
    # No count balance: only the replicas that must move do (placing them evens out where
    # they land, the exact refinement further); the spare copies spend no copy beyond them.
    stages = Stages(place=lambda ws: place_orphans(ws, reason, allow_rack_violation=ignore_warns),
                    exact_refinement=lambda ws: exact_evacuate(ws, reason),
                    leadership=lambda ws: lead_then_even_pairs(ws, reason),
                    spare_copies=lambda ws: (place_within_copies(ws, reason), prove_failover(ws, reason)))
    notes = ()
    if leadership == "keep":
        # Only the partitions placed anew (those with a reason) may take another follower
        # order, and the spare copies have no leadership target to serve.
        stages = stages._replace(leadership=lambda ws: even_followers(ws, sorted(ws.reasons)), spare_copies=None)
        notes = (KEPT_NOTE,)
    return run(ws, stages, action, broker_changes(cluster, targets, removed=removed), notes)


def plan_remove(cluster: Cluster, remove: list[int], topics: str | None = None, exclude: str | None = None,
                brokers: list[int] | None = None, ignore_warns: bool = False,
                leadership: str = LEADERSHIP_MODES[0]) -> Plan:
    """Move every replica off the brokers in `remove`, with the fewest additions and even counts;
    leadership balanced, or kept as it stands (`leadership`: `evacuate`)."""
    if not remove:
        raise BadInput("--remove needs at least one broker id")
    for b in remove:
        if b not in cluster.brokers:
            raise BadInput(f"--remove names broker {b}, which the cluster does not have")
    selected = select_partitions(cluster, topics, exclude)
    targets = [b for b in resolve_brokers(cluster, brokers, selected) if b not in set(remove)]
    if not targets:
        raise BadInput("no target brokers left after --remove")
    return evacuate(cluster, targets, selected, "remove", "broker removed", removed=remove, ignore_warns=ignore_warns,
                    leadership=leadership)
