"""DescribeLogDirs: the answering broker's one log dir, its replicas' sizes and its disk.

Sizes are the partition sizes kit sim start laid out (the store's `held`); a new replica
still copying holds what it has copied so far (the simulated controller's record of the bytes
left). Total and usable bytes (v4+) come from the snapshot's storage figures
(`kit sim seed`'s facts): total less other files less the replicas held.
"""
from __future__ import annotations

import struct

from kafka.protocol.admin import DescribeLogDirsResponse
from kafka.protocol.schemas.fields.codecs import Int32, String, UnsignedVarInt32

from kit.sim.kraft.context import NONE, Context, encode_entry, encoded_with, fields, spliced

RESULT = DescribeLogDirsResponse.fields["results"].array_of  # the schema of a log dir's entry
NAME = String("utf-8")
# A DescribeLogDirsPartition: PartitionIndex int32, PartitionSize int64, OffsetLag int64,
# IsFutureKey bool, in every version.
PARTITION = struct.Struct(">iqq?")
NO_TAGGED_FIELDS = UnsignedVarInt32.encode(0)


def log_dir(broker: int) -> str:
    """The simulated broker's log dir path (one per broker)."""
    return f"/var/lib/kafka/kit-sim-{broker}"


def describe_log_dirs(ctx: Context, req, version: int):
    """DescribeLogDirs: this broker's replicas (all, or of the partitions asked for) with their
    sizes in one log dir; its total and usable bytes where the snapshot said. The answer for
    all of them is kept, encoded, until the replicas this broker holds or their sizes change
    (a client asks every broker in turn; a change elsewhere leaves this broker's answer)."""
    if req.topics is None:
        return ctx.store.broker_kept(("logdirs", version), ctx.broker_id, lambda: _encoded(ctx, version))
    return _describe(ctx, {(t.topic, p) for t in req.topics for p in t.partitions}, version)


def _encoded(ctx: Context, version: int):
    """The answer for all partitions, encoded: its one result with kafka-python's generated
    encoder, its topics (thousands of replicas a broker) packed here, as `_describe`'s would
    encode them (`topic_entry`)."""
    held, topics = _replicas(ctx, None)
    result = _result(ctx, held, [])
    flexible = DescribeLogDirsResponse.flexible_version_q(version)
    entry = spliced(RESULT.fields, result, encode_entry(DescribeLogDirsResponse, "results", result, version), version,
                    flexible, "topics", [topic_entry(t, ps, flexible) for t, ps in sorted(topics.items())])
    return encoded_with(DescribeLogDirsResponse(version=version, throttle_time_ms=0, error_code=NONE, results=[]),
                        version, "results", [entry])


def topic_entry(name: str, partitions: list[tuple[int, int]], flexible: bool) -> bytes:
    """One DescribeLogDirsTopic encoded: its name and its (partition, size) replicas, with no
    offset lag and none a future log. Its fields and theirs are the same in every version
    (Kafka's DescribeLogDirsResponse.json); a flexible version has compact strings and arrays
    and each entry ends with its (empty) tagged fields."""
    end = NO_TAGGED_FIELDS if flexible else b""
    count = UnsignedVarInt32.encode(len(partitions) + 1) if flexible else Int32.encode(len(partitions))
    return b"".join([NAME.encode(name, compact=flexible), count,
                     *[PARTITION.pack(p, size, 0, False) + end for p, size in partitions], end])


def _replicas(ctx: Context, asked: set | None) -> tuple[int, dict[str, list[tuple[int, int]]]]:
    """The bytes this broker's replicas hold, and the (partition, size) of those `asked` (all
    when None) by topic."""
    held, topics = 0, {}
    for topic, partition, whole, left in ctx.store.held(ctx.broker_id):
        size = max(int(whole - left), 0) if left else whole  # a new replica holds what is copied so far
        held += size
        if asked is None or (topic, partition) in asked:
            topics.setdefault(topic, []).append((partition, size))
    return held, topics


def _result(ctx: Context, held: int, topics: list):
    """This broker's one log dir: `topics` and its disk's total and usable bytes."""
    me = ctx.broker_id
    facts = (ctx.store.facts().get("brokers") or {}).get(str(me)) or {}
    total = facts.get("storage_total")
    usable = int(total - (facts.get("other_bytes") or 0) - held) if total is not None else -1
    return fields(error_code=NONE, log_dir=log_dir(me), topics=topics,
                  total_bytes=int(total) if total is not None else -1, usable_bytes=max(usable, 0) if total else -1)


def _describe(ctx: Context, asked: set | None, version: int):
    held, topics = _replicas(ctx, asked)
    result = _result(ctx, held, [fields(name=t, partitions=[fields(partition_index=p, partition_size=size, offset_lag=0,
                                                                   is_future_key=False) for p, size in ps])
                                 for t, ps in sorted(topics.items())])
    return DescribeLogDirsResponse(version=version, throttle_time_ms=0, error_code=NONE, results=[result])
