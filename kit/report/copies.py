"""The copies under way of a running reassignment (pure): the bytes each has left by the replica
samples, and the time they take at the throttles now by the duration estimate's physics.

The one rule for an ETA from the bytes left per copy: the dashboard's (`kit.dashboard.poller`)
and the runbook's progress line (`kit.runbook.change`) both call `time_left_now`.
"""
from __future__ import annotations

from kit.errors import BadInput
from kit.model import Cluster
from kit.report.estimate import time_left
from kit.traffic import leader_of


def copies_under_way(cluster: Cluster, running: dict | None) -> dict[tuple[str, int, int], int]:
    """Each copy the running reassignment still makes: ``{(topic, partition, destination):
    bytes to copy}``, a target replica not in its partition's ISR, its partition's size."""
    current = {p.key: p for p in cluster.partitions}
    out = {}
    for m in (running or {}).get("partitions", []):
        p = current.get((m["topic"], int(m["partition"])))
        if p is None:
            continue
        for d in m["replicas"]:
            if int(d) not in p.isr:
                out[(p.topic, p.partition, int(d))] = int(p.size)
    return out


def bytes_left(to_copy: dict, sampled: dict) -> dict | None:
    """Bytes left per copy: its bytes to copy less what its destination's replica holds in the
    newest samples (`sampled`, same keys); None unless the samples describe every copy (one
    copy of unknown progress would make the time left wrong, not rough)."""
    if any(k not in sampled for k in to_copy):
        return None
    return {k: v - min(sampled[k], v) for k, v in to_copy.items()}


def time_left_now(cluster: Cluster, running: dict, copies: dict | None, throttles: dict,
                  nic: dict) -> tuple[float | None, str]:
    """Seconds until the running reassignment ends with every broker held at the rate its
    throttles (or, unthrottled, its NIC) allow now: the duration estimate's physics
    (`kit.report.estimate.time_left`: each copy from its partition's leader, a broker's copies
    sharing its caps, a broker that finishes freeing its share) on the bytes each copy has left.

    Parameters
    ----------
    cluster : Cluster
        The cluster as read now (in-sync replicas and leaders).
    running : dict
        The reassignment in flight (Kafka's ``partitions`` list).
    copies : dict or None
        `bytes_left`: bytes left per (topic, partition, destination), None when the samples do
        not give them all.
    throttles, nic : dict
        As `copy_bound` takes them.

    Returns
    -------
    (float or None, str)
        The seconds (on the clock the bytes left were sampled on) and "", or None and why not.
    """
    if copies is None:
        return None, "the replica samples do not give every copy's bytes left"
    live = {b.id for b in cluster.brokers.values() if b.alive}
    index = {p.key: i for i, p in enumerate(cluster.partitions)}
    targets = {index[(m["topic"], int(m["partition"]))]: [int(b) for b in m["replicas"]]
               for m in running.get("partitions", []) if (m["topic"], int(m["partition"])) in index}
    rows = []
    for (topic, partition, dest), left in sorted(copies.items()):
        i = index.get((topic, partition))
        source = leader_of(cluster.partitions[i], live) if i is not None else None
        if source is None:
            return None, f"{topic}-{partition} has no live in-sync replica to copy from"
        rows.append((source, dest, left, i))
    caps = []
    for role in ("leader", "follower"):
        cap = {}
        for b in {r[0] if role == "leader" else r[1] for r in rows}:
            known = [float(v) for v in ((throttles.get(b) or {}).get(role), nic.get(b)) if v is not None]
            if known:
                cap[b] = min(known)
        caps.append(cap)
    try:
        return time_left(cluster, targets, *zip(*rows), *caps) if rows else 0.0, ""
    except BadInput as e:
        return None, str(e)
