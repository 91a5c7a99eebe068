"""What a planner may touch: topics by regex, the target broker set, and the finished Plan."""
from __future__ import annotations

import re

from kit.errors import BadInput
from kit.model import Cluster, Plan
from kit.plan.workspace import Workspace


def _compile(pattern: str, flag: str) -> re.Pattern:
    try:
        return re.compile(pattern)
    except re.error as e:
        raise BadInput(f"{flag} {pattern!r} is not a valid regular expression ({e})") from None


def select_partitions(cluster: Cluster, topics: str | None = None, exclude: str | None = None) -> list[int]:
    """Indices of the partitions whose topic matches `topics` (whole name) and not `exclude`."""
    inc = _compile(topics, "--topics") if topics else None
    exc = _compile(exclude, "--exclude-topics") if exclude else None
    out = [
        i for i, p in enumerate(cluster.partitions)
        if (inc is None or inc.fullmatch(p.topic)) and (exc is None or not exc.fullmatch(p.topic))
    ]
    if not out and (topics or exclude):
        raise BadInput(f"no topic matches --topics {topics!r}" + (f" --exclude-topics {exclude!r}" if exclude else ""))
    if not cluster.partitions:
        raise BadInput("the cluster has no partitions")
    return out


def resolve_brokers(cluster: Cluster, brokers: list[int] | None, selected: list[int]) -> list[int]:
    """The target broker set: explicit ids, -1 = brokers in the selected topics' map, -2 = all live brokers.

    Without `brokers`, every live broker."""
    if not brokers:
        return cluster.live_ids
    out: set[int] = set()
    for b in brokers:
        if b == -1:
            out.update(r for i in selected for r in cluster.partitions[i].replicas)
        elif b == -2:
            out.update(cluster.live_ids)
        elif b not in cluster.brokers or not cluster.brokers[b].known:
            raise BadInput(f"--brokers names broker {b}, which the cluster does not have")
        elif not cluster.brokers[b].alive:
            raise BadInput(f"--brokers names broker {b}, which is not live (nothing can be placed on it)")
        else:
            out.add(b)
    return sorted(out)


def check_replication(targets: list[int], rf: int, what: str = "replication factor") -> None:
    if rf > len(targets):
        raise BadInput(f"{what} {rf} is larger than the {len(targets)} target brokers available")
    if rf < 1:
        raise BadInput(f"{what} must be at least 1, got {rf}")


def broker_changes(cluster: Cluster, targets: list[int], removed=(), replacing=()) -> dict[str, list[int]]:
    """Which brokers leave, join and are missing, for the summary."""
    in_map = set(cluster.map_brokers())
    tset = set(targets)
    return {
        "removed": sorted(set(removed)),
        "replacing": sorted(set(replacing)),
        "added": sorted(b for b in tset if b not in in_map),
        "missing": sorted(b for b in in_map if not cluster.brokers[b].alive),
        "leaving": sorted(b for b in in_map if b not in tset),
    }


def offline_warning(count: int) -> str:
    """The plan's warning for `count` offline partitions it leaves out (the warning policy,
    ``--ignore-warns``, decides whether such a plan is written)."""
    return (f"{count} offline partition(s) left out of the plan: no live in-sync replica to copy from "
            "(listed under Offline partitions, with what brings each back)")


def finish(ws: Workspace, action: str, changes: dict[str, list[int]], notes=()) -> Plan:
    """Turn a workspace into a Plan; the offline partitions it left out come first in the warnings."""
    return Plan(
        cluster=ws.cluster,
        action=action,
        after=ws.assign,
        targets=ws.targets,
        selected=ws.selected,
        warnings=([offline_warning(len(ws.offline))] if ws.offline else []) + list(ws.warnings),
        notes=list(notes) + ws.notes,
        reasons=dict(ws.reasons),
        broker_changes=changes,
        offline=list(ws.offline),
    )
