"""Replace brokers one for one: NEW takes OLD's replica slots, in the same positions."""
from __future__ import annotations

from kit.errors import BadInput, Unsafe
from kit.model import Cluster, Plan
from kit.plan.pipeline import Stages, run
from kit.plan.select import broker_changes, select_partitions
from kit.plan.workspace import Workspace


def plan_replace(cluster: Cluster, pairs: list[tuple[int, int]], topics: str | None = None,
                 exclude: str | None = None, ignore_warns: bool = False) -> Plan:
    """Substitute each OLD broker by its NEW one in every selected partition; nothing else moves.

    Leadership is left exactly where it was (NEW leads what OLD led), which is what an
    operator replacing hardware expects; run `leaders` afterwards to rebalance it.
    """
    if not pairs:
        raise BadInput("--replace needs at least one OLD:NEW pair")
    olds = [o for o, _ in pairs]
    news = [n for _, n in pairs]
    for b in olds + news:
        # A new broker must be registered; an old one may be known only from replica lists.
        if b not in cluster.brokers or (b in news and not cluster.brokers[b].known):
            raise BadInput(f"--replace names broker {b}, which the cluster does not have")
    if len(set(olds)) != len(olds) or len(set(news)) != len(news) or set(olds) & set(news):
        raise BadInput("--replace pairs must name each broker once")
    for n in news:
        if not cluster.brokers[n].alive:
            raise BadInput(f"--replace: new broker {n} is not alive")
    selected = select_partitions(cluster, topics, exclude)
    targets = sorted((set(cluster.live_ids) - set(olds)) | set(news))
    notes = []
    for o, n in pairs:
        if cluster.rack_of(o) is None and cluster.rack_of(n) is not None:
            # Neither ZooKeeper (the registration goes with the broker) nor the Admin API (live
            # brokers only) gives a dead broker's rack: unknown, not another rack. The rack rule
            # is still checked slot by slot.
            notes.append(f"broker {n} (rack {cluster.rack_of(n)}) replaces {o}, whose rack is unknown (the cluster "
                         "reports no rack for a dead broker); the rack rule is checked partition by partition")
        elif cluster.rack_of(o) != cluster.rack_of(n):
            notes.append(f"broker {n} (rack {cluster.rack_of(n) or 'unknown'}) replaces {o} "
                         f"from another rack ({cluster.rack_of(o) or 'unknown'})")
    # Unlike every other action, no leadership stage: NEW leads what OLD led.
    stages = Stages(place=lambda ws: _substitute(ws, dict(pairs), ignore_warns), leadership=None)
    changes = broker_changes(cluster, targets, replacing=olds)
    # No counter is read: made on first read, they are never made.
    return run(Workspace(cluster, targets, selected, made_on_read=True), stages, "replace", changes, notes)


def _substitute(ws: Workspace, mapping: dict[int, int], ignore_warns: bool) -> None:
    """Put each NEW broker in its OLD broker's slot in every selected partition (`mapping`
    OLD -> NEW); a slot that breaks the rack rule is refused, or with `ignore_warns` warned of."""
    cluster = ws.cluster
    olds = mapping.keys()
    for p in ws.selected:
        reps = ws.assign[p]
        if olds.isdisjoint(reps):
            continue  # most partitions: one test in C, not a look-up per replica
        for pos, b in enumerate(list(reps)):
            new = mapping.get(b)
            if new is None:
                continue
            if new in reps:
                raise Unsafe(f"{cluster.partitions[p].name}: broker {new} already holds a replica; "
                             f"cannot replace {b} with it")
            members = [m for m in reps if m != b]
            if not ws.rack_ok(new, members, len(reps)):
                msg = (f"{cluster.partitions[p].name}: replacing {b} with {new} puts two replicas "
                       f"in rack {cluster.rack_of(new)}")
                if not ignore_warns:
                    raise Unsafe(msg + " (use --ignore-warns to accept)")
                ws.warnings.append(msg)
            ws.replace_slot(p, pos, new, "replaced broker")
