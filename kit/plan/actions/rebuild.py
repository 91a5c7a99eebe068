"""topicmappr's `rebuild`: keep what can stay, re-place what must move, or build afresh."""
from __future__ import annotations

from kit.errors import BadInput, Unsafe
from kit.model import Cluster, Plan
from kit.plan.pipeline import Stages, run
from kit.plan.select import broker_changes, check_replication, resolve_brokers, select_partitions
from kit.plan.steps.place import best_broker, place_orphans, set_replication
from kit.plan.steps.storage import StorageBook, balance_storage, place_fresh_by_storage, place_orphans_by_storage
from kit.plan.workspace import Workspace


def substitution_affinities(cluster: Cluster, leaving: list[int], new: list[int]) -> dict[int, int]:
    """Pair each leaving broker with a new broker in the same rack (topicmappr's --sub-affinity).

    Raises `Unsafe` when there are fewer new brokers than leaving ones, or when a leaving
    broker has no new broker in its rack.
    """
    if len(new) < len(leaving):
        raise Unsafe(f"Insufficient number of new brokers: {len(leaving)} to replace, {len(new)} new")
    free = list(new)
    out = {}
    for old in sorted(leaving):
        rack = cluster.rack_of(old)
        match = next((b for b in free if cluster.rack_of(b) == rack), None)
        if match is None:
            raise Unsafe(f"no new broker in rack {rack} to substitute for broker {old}")
        free.remove(match)
        out[old] = match
    return out


def plan_rebuild(cluster: Cluster, topics: str | None = None, exclude: str | None = None,
                 brokers: list[int] | None = None, force_rebuild: bool = False, sub_affinity: bool = False,
                 replication: int | None = None, min_rack_ids: int | None = None,
                 placement: str = "count", optimize: str = "distribution", size_factor: float = 1.0,
                 ignore_warns: bool = False) -> Plan:
    """Rebuild the selected topics' map over the target brokers.

    Without `force_rebuild` only replicas on brokers outside the targets move (to the
    least-loaded rack-safe broker, or with `sub_affinity` to the new broker in the same
    rack); with it every selected partition is placed afresh, evenly. With
    placement="storage", "least loaded" means least utilised disk (sizes times
    `size_factor`), largest partitions placed first; optimize="storage" then also evens
    out free storage with the fewest bytes moved.
    """
    if placement not in ("count", "storage") or optimize not in ("distribution", "storage"):
        raise BadInput(f"unknown --placement {placement!r} or --optimize {optimize!r}")
    if optimize == "storage" and placement != "storage":
        raise BadInput("--optimize storage needs --placement storage")
    selected = select_partitions(cluster, topics, exclude)
    targets = resolve_brokers(cluster, brokers, selected)
    rf_needed = replication or max(len(cluster.partitions[p].replicas) for p in selected)
    check_replication(targets, rf_needed)
    ws = Workspace(cluster, targets, selected, min_rack_ids)
    tset = set(targets)
    leaving = sorted({b for p in selected for b in cluster.partitions[p].replicas if b not in tset})
    in_map = set(cluster.map_brokers())
    new = sorted(b for b in targets if b not in in_map)
    changes = broker_changes(cluster, targets, replacing=leaving)
    by_storage = placement == "storage"

    def place(ws: Workspace) -> None:
        if force_rebuild:
            _place_afresh(ws, replication, by_storage, size_factor)
        else:
            _place_leaving(ws, leaving, new, sub_affinity, by_storage, size_factor, replication, ignore_warns)

    def storage_balance(ws: Workspace) -> None:
        balance_storage(ws, StorageBook(ws, size_factor), "storage rebalance")

    stages = Stages(place=place, balance=storage_balance if optimize == "storage" else None)
    return run(ws, stages, "rebuild" + (" (force)" if force_rebuild else ""), changes)


def _place_afresh(ws: Workspace, replication: int | None, by_storage: bool, size_factor: float) -> None:
    """Empty the selected map, then give every partition its replicas again: the least
    loaded rack-safe brokers (by count, or by storage, the largest partitions first)."""
    cluster = ws.cluster
    # Empty the selected map first, so placement sees only the load that stays.
    for p in ws.selected:
        for b in list(ws.assign[p]):
            ws.drop_replica(p, b, "rebuilt")
    if by_storage:
        book = StorageBook(ws, size_factor)
        for p in sorted(ws.selected, key=lambda p: (-book.size[p], p)):
            place_fresh_by_storage(ws, book, p, replication or len(cluster.partitions[p].replicas), "rebuilt")
        return
    for p in ws.selected:
        rf = replication or len(cluster.partitions[p].replicas)
        for _ in range(rf):
            b = best_broker(ws, p, ws.assign[p], rf)
            if b is None:
                raise Unsafe(f"{cluster.partitions[p].name}: no rack-safe broker left for a replica")
            ws.append_replica(p, b, "rebuilt")


def _place_leaving(ws: Workspace, leaving: list[int], new: list[int], sub_affinity: bool, by_storage: bool,
                   size_factor: float, replication: int | None, ignore_warns: bool) -> None:
    """Move only the replicas on brokers outside the targets (`leaving`): with
    `sub_affinity` to the new broker in the same rack, else to the least loaded rack-safe
    broker (by count or by storage); then set the replication factor if asked."""
    if sub_affinity and leaving:
        pairs = substitution_affinities(ws.cluster, leaving, new)
        for p in ws.selected:
            for pos, b in enumerate(list(ws.assign[p])):
                if b in pairs:
                    ws.replace_slot(p, pos, pairs[b], "replaced broker (substitution affinity)")
    if by_storage:
        place_orphans_by_storage(ws, StorageBook(ws, size_factor), "replaced broker", ignore_warns)
    else:
        place_orphans(ws, "replaced broker", allow_rack_violation=ignore_warns)
    if replication:
        set_replication(ws, replication, f"replication -> {replication}")
