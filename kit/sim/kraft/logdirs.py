"""DescribeLogDirs: the answering broker's one log dir, its replicas' sizes and its disk.

Sizes are the partition sizes kit sim start laid out (the store's `held`); a new replica
still copying holds what it has copied so far (the simulated controller's record of the bytes
left). Total and usable bytes (v4+) come from the snapshot's storage figures
(`kit sim seed`'s facts): total less other files less the replicas held.
"""
from __future__ import annotations

import collections

import numpy
from kafka.protocol.admin import DescribeLogDirsResponse
from kafka.protocol.schemas.fields.codecs import Int32, String, UnsignedVarInt32

from kit.sim.kraft.context import NONE, Context, encode_entry, encoded_with, fields, spliced

RESULT = DescribeLogDirsResponse.fields["results"].array_of  # the schema of a log dir's entry
NAME = String("utf-8")
NO_TAGGED_FIELDS = UnsignedVarInt32.encode(0)
# A DescribeLogDirsPartition (PartitionIndex int32, PartitionSize int64, OffsetLag int64,
# IsFutureKey bool, in every version: Kafka's DescribeLogDirsResponse.json) as a numpy record,
# big-endian and unpadded as the wire has it, without and with the empty tagged fields that end
# each entry of a flexible version (compact strings and arrays there); offset lag 0, none a future log.
PACKED = {flexible: numpy.dtype([("partition", ">i4"), ("size", ">i8"), ("lag", ">i8"), ("future", "?")]
                                + ([("tagged", "u1")] if flexible else []))
          for flexible in (False, True)}


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
    encoder, its topics (thousands of replicas a broker, 600,000 in all at real sizes) packed
    here at once, as kafka-python's encoder encodes `_describe`'s."""
    rows = ctx.store.held(ctx.broker_id)  # by topic, then partition
    names, numbers, wholes, lefts = zip(*rows) if rows else ((), (), (), ())
    # A new replica holds what is copied so far (`_replicas`); with nothing copying, all of it.
    sizes = [w if not left else max(int(w - left), 0) for w, left in zip(wholes, lefts)] if any(lefts) else wholes
    result = _result(ctx, sum(sizes), [])
    flexible = DescribeLogDirsResponse.flexible_version_q(version)
    # Every replica's DescribeLogDirsPartition in one buffer (PACKED), cut by topic below.
    packed = numpy.zeros(len(rows), dtype=PACKED[flexible])
    packed["partition"] = numbers
    packed["size"] = sizes
    raw, width = packed.tobytes(), PACKED[flexible].itemsize
    topics, at = [], 0
    for name, n in collections.Counter(names).items():  # first seen first: the topics in order
        topics.append(_topic_bytes(name, n, raw[at * width:(at + n) * width], flexible))
        at += n
    entry = spliced(RESULT.fields, result, encode_entry(DescribeLogDirsResponse, "results", result, version), version,
                    flexible, "topics", topics)
    return encoded_with(DescribeLogDirsResponse(version=version, throttle_time_ms=0, error_code=NONE, results=[]),
                        version, "results", [entry])


def _topic_bytes(name: str, count: int, partitions: bytes, flexible: bool) -> bytes:
    """A DescribeLogDirsTopic of `count` partitions encoded already (`partitions`)."""
    return b"".join([NAME.encode(name, compact=flexible),
                     UnsignedVarInt32.encode(count + 1) if flexible else Int32.encode(count), partitions,
                     NO_TAGGED_FIELDS if flexible else b""])


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
