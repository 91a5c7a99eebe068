"""DescribeLogDirs: the answering broker's one log dir, its replicas' sizes and its disk.

Sizes are the partition sizes kit sim start laid out (the store's cluster); a new replica
still copying holds what it has copied so far (the simulated controller's record of the bytes
left). Total and usable bytes (v4+) come from the snapshot's storage figures
(`kit sim seed`'s facts): total less other files less the replicas held.
"""
from __future__ import annotations

from kafka.protocol.admin import DescribeLogDirsResponse

from kit.sim.kraft.context import NONE, Context


def log_dir(broker: int) -> str:
    """The simulated broker's log dir path (one per broker)."""
    return f"/var/lib/kafka/kit-sim-{broker}"


def _left(doc: dict | None) -> dict[tuple[str, int, int], float]:
    """Bytes still to copy per (topic, partition, new replica), as the controller last recorded."""
    doc = doc or {}
    try:
        return {(t, int(p), int(d)): float(n) for t, parts in (doc.get("left") or {}).items()
                for p, dests in parts.items() for d, n in dests.items()}
    except (AttributeError, TypeError, ValueError):
        return {}


def describe_log_dirs(ctx: Context, req, version: int):
    """DescribeLogDirs: this broker's replicas (all, or of the partitions asked for) with their
    sizes in one log dir; its total and usable bytes where the snapshot said."""
    me = ctx.broker_id
    cluster, left, brokers = ctx.store.cluster(), _left(ctx.store.progress()), ctx.store.facts().get("brokers") or {}
    asked = None if req.topics is None else {(t.topic, p) for t in req.topics for p in t.partitions}
    held, topics = 0, {}
    Res = DescribeLogDirsResponse.DescribeLogDirsResult
    for p in cluster.partitions:
        if me not in p.replicas:
            continue
        size = max(int(p.size - left.get((p.topic, p.partition, me), 0.0)), 0)
        held += size
        if asked is None or p.key in asked:
            topics.setdefault(p.topic, []).append(Res.DescribeLogDirsTopic.DescribeLogDirsPartition(
                partition_index=p.partition, partition_size=size, offset_lag=0, is_future_key=False))
    facts = brokers.get(str(me)) or {}
    total = facts.get("storage_total")
    usable = int(total - (facts.get("other_bytes") or 0) - held) if total is not None else -1
    result = Res(error_code=NONE, log_dir=log_dir(me),
                 topics=[Res.DescribeLogDirsTopic(name=t, partitions=ps) for t, ps in sorted(topics.items())],
                 total_bytes=int(total) if total is not None else -1, usable_bytes=max(usable, 0) if total else -1)
    return DescribeLogDirsResponse(version=version, throttle_time_ms=0, error_code=NONE, results=[result])
