"""Evacuate brokers: every replica they hold moves, balanced over the rest; nothing else moves."""
from __future__ import annotations

from kit.errors import BadInput
from kit.model import Cluster, Plan
from kit.plan.steps.exact_refinement import exact_evacuate
from kit.plan.steps.place import place_orphans
from kit.plan.steps.leadership import balance_leadership, leader_figures
from kit.plan.select import broker_changes, finish, resolve_brokers, select_partitions
from kit.plan.steps.spare_copies import PROGRAM_MAX_PARTITIONS, place_for_leadership
from kit.plan.workspace import Workspace


def evacuate(cluster: Cluster, targets: list[int], selected: list[int], action: str, reason: str,
             removed=(), min_rack_ids: int | None = None, ignore_warns: bool = False) -> Plan:
    """Re-place exactly the selected replicas that sit outside `targets`, then balance leadership."""
    ws = Workspace(cluster, targets, selected, min_rack_ids)
    rf_max = max((len(ws.assign[p]) for p in selected), default=0)
    if rf_max > len(targets):
        raise BadInput(f"replication factor {rf_max} is larger than the {len(targets)} target brokers available")
    place_orphans(ws, reason, allow_rack_violation=ignore_warns)
    exact_evacuate(ws, reason)
    balance_leadership(ws)
    # Leader or topic balance (failover is no target here) still short and no order can fix
    # it: the moved replicas may land elsewhere, chosen with the order; no more copies. Only
    # where the program may run: the figures alone take ~0.5 s at 200,000 partitions.
    if len(ws.selected) <= PROGRAM_MAX_PARTITIONS:
        figs = leader_figures(ws, ws.assign)
        if figs.shortfall().leader_spread or figs.shortfall().topic_leader_excess:
            place_for_leadership(ws, ws.copies_made(), reason, figs)
    return finish(ws, action, broker_changes(cluster, targets, removed=removed))


def plan_remove(cluster: Cluster, remove: list[int], topics: str | None = None, exclude: str | None = None,
                brokers: list[int] | None = None, ignore_warns: bool = False) -> Plan:
    """Move every replica off the brokers in `remove`, with the fewest additions and even counts."""
    if not remove:
        raise BadInput("--remove needs at least one broker id")
    for b in remove:
        if b not in cluster.brokers:
            raise BadInput(f"--remove names broker {b}, which the cluster does not have")
    selected = select_partitions(cluster, topics, exclude)
    targets = [b for b in resolve_brokers(cluster, brokers, selected) if b not in set(remove)]
    if not targets:
        raise BadInput("no target brokers left after --remove")
    return evacuate(cluster, targets, selected, "remove", "broker removed", removed=remove, ignore_warns=ignore_warns)
