"""DescribeLogDirs: the answering broker's one log dir, its replicas' sizes and its disk.

Sizes are the partition sizes kit sim start laid out (the store's cluster); a new replica
still copying holds what it has copied so far (the simulated controller's record of the bytes
left). Total and usable bytes (v4+) come from the snapshot's storage figures
(`kit sim seed`'s facts): total less other files less the replicas held.
"""
from __future__ import annotations

from kafka.protocol.admin import DescribeLogDirsResponse

from kit.sim.kraft.context import NONE, Context, encode_entry, encoded_with, fields


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


def held_by_broker(cluster) -> dict[int, list]:
    """Each broker's replicas (its partitions, in the cluster's order): made once per state of
    the cluster, so that each broker asked looks at its own replicas only."""
    out: dict[int, list] = {}
    for p in cluster.partitions:
        for b in p.replicas:
            out.setdefault(b, []).append(p)
    return out


def describe_log_dirs(ctx: Context, req, version: int):
    """DescribeLogDirs: this broker's replicas (all, or of the partitions asked for) with their
    sizes in one log dir; its total and usable bytes where the snapshot said. The answer for
    all of them is kept, encoded, until the cluster changes (a client asks every broker in
    turn)."""
    if req.topics is None:
        return ctx.store.cached(("logdirs", ctx.broker_id, version), lambda: _encoded(ctx, version))
    return _describe(ctx, {(t.topic, p) for t in req.topics for p in t.partitions}, version)


def _encoded(ctx: Context, version: int):
    """The answer for all partitions, encoded (its one result with kafka-python's generated
    encoder for the entry: thousands of replicas a broker)."""
    resp = _describe(ctx, None, version)
    (result,) = resp.results
    resp.results = []
    return encoded_with(resp, version, "results", [encode_entry(DescribeLogDirsResponse, "results", result, version)])


def _describe(ctx: Context, asked: set | None, version: int):
    me = ctx.broker_id
    mine = ctx.store.cached(("held",), lambda: held_by_broker(ctx.store.cluster())).get(me, [])
    left, brokers = _left(ctx.store.progress()), ctx.store.facts().get("brokers") or {}
    held, topics = 0, {}
    for p in mine:
        size = max(int(p.size - left.get((p.topic, p.partition, me), 0.0)), 0)
        held += size
        if asked is None or p.key in asked:
            topics.setdefault(p.topic, []).append(fields(partition_index=p.partition, partition_size=size,
                                                         offset_lag=0, is_future_key=False))
    facts = brokers.get(str(me)) or {}
    total = facts.get("storage_total")
    usable = int(total - (facts.get("other_bytes") or 0) - held) if total is not None else -1
    result = fields(error_code=NONE, log_dir=log_dir(me),
                    topics=[fields(name=t, partitions=ps) for t, ps in sorted(topics.items())],
                    total_bytes=int(total) if total is not None else -1, usable_bytes=max(usable, 0) if total else -1)
    return DescribeLogDirsResponse(version=version, throttle_time_ms=0, error_code=NONE, results=[result])
