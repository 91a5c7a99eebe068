"""An availability zone is gone: re-place every replica it held on the other racks."""
from __future__ import annotations

from kit.errors import BadInput
from kit.model import Cluster, Plan
from kit.plan import LEADERSHIP_MODES
from kit.plan.actions.remove import evacuate
from kit.plan.select import resolve_brokers, select_partitions


def plan_az_loss(cluster: Cluster, rack: str, topics: str | None = None, exclude: str | None = None,
                 brokers: list[int] | None = None, ignore_warns: bool = False,
                 leadership: str = LEADERSHIP_MODES[0]) -> Plan:
    """Treat every broker of `rack` as gone and move their replicas to the remaining racks;
    leadership balanced, or kept as it stands (`leadership`: `remove.evacuate`).

    Read from ZooKeeper, a lost rack's brokers are just missing: Kafka keeps no record of a dead
    broker's rack. When `rack` names no known broker and no live broker is without a rack, the
    dead brokers of unknown rack are taken as the rack's (said in the plan's notes)."""
    lost = [b.id for b in cluster.brokers.values() if b.rack == rack]
    inferred = False
    if not lost:
        lost = sorted(b.id for b in cluster.brokers.values() if not b.alive and b.rack is None)
        inferred = bool(lost)
    if not lost:
        racks = sorted({b.rack for b in cluster.brokers.values() if b.rack})
        raise BadInput(f"--rack {rack!r} names no broker's rack (racks: {', '.join(racks) or 'none'})")
    selected = select_partitions(cluster, topics, exclude)
    targets = [b for b in resolve_brokers(cluster, brokers, selected) if b not in set(lost)]
    if not targets:
        raise BadInput(f"no target brokers outside rack {rack}")
    plan = evacuate(cluster, targets, selected, "az-loss", f"rack {rack} lost", removed=lost,
                    ignore_warns=ignore_warns, leadership=leadership)
    if inferred:
        plan.notes.append(f"no registered broker is in rack {rack}: taking the {len(lost)} dead broker(s) "
                             f"{','.join(map(str, lost))} as its brokers")
    return plan
