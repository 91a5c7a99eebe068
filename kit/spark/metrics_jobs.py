"""The metrics pipeline as pure DataFrame transforms: samples in, figures out, no I/O.

Inputs follow the sample schema in the README (issue 6): replica samples (one row per
replica per sample instant) and broker samples (one row per broker per instant). The
functions here take DataFrames and return DataFrames; reading files, writing outputs and
ZooKeeper live in `kit/metrics/edge.py`, so the same transforms run in tests on tiny hand-made
frames, in the batch job and on any Spark master.
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (BooleanType, DoubleType, IntegerType, LongType, StringType, StructField,
                               StructType)

#: Replica samples as they are read from JSON lines (`ts` is an ISO-8601 string).
REPLICA_SCHEMA = StructType([
    StructField("ts", StringType()),
    StructField("broker", LongType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("leader", BooleanType()),
    StructField("size_bytes", LongType()),
    StructField("bytes_in_per_sec", DoubleType()),
    StructField("bytes_out_per_sec", DoubleType()),
    StructField("reassigning", BooleanType()),
])

#: Broker samples as they are read from JSON lines.
BROKER_SCHEMA = StructType([
    StructField("ts", StringType()),
    StructField("broker", LongType()),
    StructField("rack", StringType()),
    StructField("instance_type", StringType()),
    StructField("net_rx_bytes_per_sec", DoubleType()),
    StructField("net_tx_bytes_per_sec", DoubleType()),
    StructField("storage_total_bytes", LongType()),
    StructField("storage_free_bytes", LongType()),
])

#: Columns a row must have for it to count. Traffic is null on followers by design (Kafka
#: measures it on leaders only), and a broker may not know its disks, so those may be null.
REPLICA_REQUIRED = ("ts", "broker", "topic", "partition", "leader", "size_bytes", "reassigning")
BROKER_REQUIRED = ("ts", "broker", "net_rx_bytes_per_sec", "net_tx_bytes_per_sec")

#: Samples taken while a partition was reassigning, and this long after each, are not
#: representative of its client traffic (DoctorKafka's rule): copies inflate the rates.
COOLDOWN_SECONDS = 30 * 60

#: A replica belongs to a partition's current placement when its own latest sample of the
#: partition is at most this much older than the partition's newest sample: brokers are
#: scraped at slightly different instants, and a replica moved away stops being reported.
PLACEMENT_SLACK_SECONDS = 5 * 60

CORRUPT = "_corrupt_record"


def _epoch(ts: Column, kind: str = "string") -> Column:
    """`ts` as whole epoch seconds; null when it does not parse.

    ISO-8601 text goes through `try_to_timestamp` rather than a cast: with ANSI SQL
    (Spark 4's default) a bad cast fails the whole job, and one bad row must only be
    counted. A column that is already a timestamp (Parquet written with a timestamp
    type) is converted directly: formatting it as text only to parse it back costs a
    full pass of string work on every read. `timestamp_ntz` is read as UTC (the session
    time zone) like the text path does.
    """
    if kind == "timestamp":
        return F.unix_timestamp(ts)
    if kind == "timestamp_ntz":
        return F.unix_timestamp(ts.cast("timestamp"))
    return F.unix_timestamp(F.try_to_timestamp(ts.cast("string")))


def typed_samples(raw: DataFrame, schema: StructType, required: tuple[str, ...]) -> DataFrame:
    """Raw rows as typed samples with `ts` in epoch seconds and a `malformed` flag.

    `raw` has the columns of `schema` (wrong-typed values already null, as Spark's JSON
    reader leaves them; `ts` may be ISO-8601 text or a timestamp) and optionally
    `_corrupt_record` (set on lines that did not parse). A row is malformed when it did
    not parse, its `ts` is not ISO-8601, or a required column is null.
    """
    cols = [F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields if f.name != "ts"]
    out = raw.select(_epoch(F.col("ts"), raw.schema["ts"].dataType.simpleString()).alias("ts"), *cols,
                     (F.col(CORRUPT).isNotNull() if CORRUPT in raw.columns else F.lit(False)).alias("_bad"))
    bad = F.col("_bad")
    for name in required:
        bad = bad | F.col(name).isNull()
    return out.withColumn("malformed", bad).drop("_bad")


#: Bits of the one-pass latest-sample key (`replica_latest` with `span`): a sample's age
#: below the newest in seconds (2^23 s, 97 days) above its size in bytes (2^40, 1 TiB).
_AGE_BITS, _SIZE_BITS = 23, 40


def replica_latest(replicas: DataFrame, span: tuple | None = None) -> DataFrame:
    """Each replica's latest sample: `topic, partition, broker, ts, size, leader`.

    `size` and `leader` are those of the replica's newest sample; two samples at that same
    instant are resolved by the larger value (and `leader` true), so the answer does not
    depend on the order Spark read the rows in.

    Not `max_by` over a struct: a struct in the aggregation buffer forces Spark into a
    sort-based aggregation over every sample, several times slower on tens of millions of
    rows. With `span` = (oldest ts, newest ts, smallest size, largest size) of the samples,
    when ages fit in 23 bits and sizes in 40, each sample's newness and size are packed in
    one long whose maximum is the answer: one hash aggregation over the samples. Otherwise
    two hash aggregations and a broadcast join: each replica's newest `ts`, then size and
    leader at that instant.
    """
    key = ["topic", "partition", "broker"]
    if span is not None and None not in span:
        oldest, newest, smallest, largest = span
        if newest - oldest < (1 << _AGE_BITS) and smallest >= 0 and largest < (1 << _SIZE_BITS):
            newness = F.lit((1 << _AGE_BITS) - 1 - newest) + F.col("ts")  # larger is newer
            by_size = F.max(F.shiftleft(newness, _SIZE_BITS) + F.col("size_bytes")).alias("by_size")
            by_leader = F.max(F.shiftleft(newness, 1) + F.col("leader").cast("long")).alias("by_leader")
            return (replicas.groupBy(*key).agg(by_size, by_leader)
                    .select(*key,
                            (F.shiftright("by_size", _SIZE_BITS) - ((1 << _AGE_BITS) - 1 - newest)).alias("ts"),
                            (F.col("by_size").bitwiseAND((1 << _SIZE_BITS) - 1)).alias("size"),
                            (F.col("by_leader").bitwiseAND(1) == 1).alias("leader")))
    last = replicas.groupBy(*key).agg(F.max("ts").alias("ts"))
    return (replicas.join(F.broadcast(last), key + ["ts"])
            .groupBy(*key).agg(F.max("ts").alias("ts"), F.max("size_bytes").alias("size"),
                               F.max("leader").alias("leader")))


def latest_sizes(replicas: DataFrame, latest: DataFrame | None = None) -> DataFrame:
    """Partition sizes as kafka-kit's partitionmeta wants them: `topic, partition, size`.

    Each replica's latest `size_bytes`, then the largest over the partition's replicas: a
    replica still being copied is smaller than the partition, and an old sample of a
    partition that has grown is stale. `latest` is `replica_latest(replicas)` when the
    caller already has it.
    """
    per_replica = replica_latest(replicas) if latest is None else latest
    return per_replica.groupBy("topic", "partition").agg(F.max("size").alias("size"))


def latest_broker_samples(brokers: DataFrame) -> DataFrame:
    """Each broker's latest sample: `broker, ts, rack, instance_type, rx, tx, storage`.

    Ties at the same instant are broken by the larger row values so the answer does not
    depend on the order Spark read the rows in.
    """
    fields = ["ts", "rack", "instance_type", "net_rx_bytes_per_sec", "net_tx_bytes_per_sec",
              "storage_total_bytes", "storage_free_bytes"]
    latest = F.max_by(F.struct(*fields), F.struct(*fields))
    return brokers.groupBy("broker").agg(latest.alias("s")).select("broker", *[F.col(f"s.{f}").alias(f) for f in fields])


def newest_ts(replicas: DataFrame) -> int | None:
    """The newest sample instant (epoch seconds), or None when there are no samples."""
    return replicas.agg(F.max("ts")).first()[0]


def replica_traffic(replicas: DataFrame, window_seconds: int, stat: str = "max",
                    newest: int | None = None) -> DataFrame:
    """Per-partition client traffic by DoctorKafka's method: `topic, partition, bytes_in, bytes_out`.

    Over the window ending at the newest replica sample (`ts > newest - window`), the max
    (or the exact p95, linear interpolation) of the leader's `bytes_in_per_sec` and
    `bytes_out_per_sec`, leaving out every sample taken while the partition was reassigning
    and in the 30 minutes after each reassigning sample. Followers carry no rates and do
    not count. A partition with no eligible leader sample in the window is absent.
    `newest` is `newest_ts(replicas)` when the caller already has it.
    """
    if stat not in ("max", "p95"):
        raise ValueError(f"stat must be max or p95, got {stat!r}")
    if newest is None:
        newest = newest_ts(replicas)
    if newest is None:
        return replicas.sparkSession.createDataFrame(
            [], "topic string, partition int, bytes_in double, bytes_out double")
    # A leader sample at t is left out when some reassigning sample of its partition (any
    # replica's) lies in [t - cooldown, t]. Those samples are few, so they are merged into
    # runs [first, last + cooldown] (consecutive samples at most a cooldown apart overlap)
    # and anti-joined by broadcast: no sort of the leader samples, unlike a window over them.
    # Reassigning samples older than window + cooldown cannot reach into the window.
    moves = (replicas.where(F.col("reassigning") & (F.col("ts") > newest - window_seconds - COOLDOWN_SECONDS))
             .select("topic", "partition", "ts").distinct())
    by_time = Window.partitionBy("topic", "partition").orderBy("ts")
    gap = F.col("ts") - F.lag("ts").over(by_time)
    runs = (moves.withColumn("first", F.when(gap.isNull() | (gap > COOLDOWN_SECONDS), 1).otherwise(0))
            .withColumn("run", F.sum("first").over(by_time.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
            .groupBy("topic", "partition", "run")
            .agg(F.min("ts").alias("move_from"), (F.max("ts") + COOLDOWN_SECONDS).alias("move_to"))
            .select(F.col("topic").alias("move_topic"), F.col("partition").alias("move_partition"),
                    "move_from", "move_to"))
    leaders = replicas.where(F.col("leader") & ~F.col("reassigning") & (F.col("ts") > newest - window_seconds))
    cooled = ((F.col("topic") == F.col("move_topic")) & (F.col("partition") == F.col("move_partition"))
              & F.col("ts").between(F.col("move_from"), F.col("move_to")))
    eligible = leaders.join(F.broadcast(runs), cooled, "left_anti")
    if stat == "max":
        agg_in, agg_out = F.max("bytes_in_per_sec"), F.max("bytes_out_per_sec")
    else:
        agg_in, agg_out = F.percentile("bytes_in_per_sec", 0.95), F.percentile("bytes_out_per_sec", 0.95)
    return (eligible.groupBy("topic", "partition")
            .agg(agg_in.cast("double").alias("bytes_in"), agg_out.cast("double").alias("bytes_out"))
            .where(F.col("bytes_in").isNotNull() | F.col("bytes_out").isNotNull()))


def placement(replicas: DataFrame, latest: DataFrame | None = None) -> DataFrame:
    """Each partition's current replicas from the newest samples: `topic, partition, broker, leader`.

    A replica counts when its latest sample of the partition is within
    PLACEMENT_SLACK_SECONDS of the partition's newest sample; it leads when that latest
    sample says so. `latest` is `replica_latest(replicas)` when the caller already has it.
    """
    per_replica = replica_latest(replicas) if latest is None else latest
    newest = Window.partitionBy("topic", "partition")
    return (per_replica.withColumn("newest", F.max("ts").over(newest))
            .where(F.col("ts") >= F.col("newest") - PLACEMENT_SLACK_SECONDS)
            .select("topic", "partition", "broker", "leader"))


def broker_load(replicas: DataFrame, traffic: DataFrame, brokers: DataFrame,
                latest: DataFrame | None = None) -> DataFrame:
    """Expected and measured network load per broker.

    Columns: `broker, replicas, leaders, expected_bytes_in, expected_bytes_out,
    measured_rx_bytes_per_sec, measured_tx_bytes_per_sec`.
    Every replica takes the partition's bytes in (the leader from producers, a follower by
    fetching from the leader). A leader sends the consumers' bytes out plus one copy of the
    bytes in to each follower: the replication egress that DoctorKafka's estimate leaves out.
    Brokers with samples but no replicas appear with zero expected load. `latest` is
    `replica_latest(replicas)` when the caller already has it.
    """
    place = placement(replicas, latest)
    width = place.groupBy("topic", "partition").agg(F.count("*").alias("rf"))
    t = traffic.select("topic", "partition", F.coalesce("bytes_in", F.lit(0.0)).alias("bin"),
                       F.coalesce("bytes_out", F.lit(0.0)).alias("bout"))
    per_replica = (place.join(width, ["topic", "partition"]).join(t, ["topic", "partition"], "left")
                   .select("broker", "leader",
                           F.coalesce("bin", F.lit(0.0)).alias("load_in"),
                           F.when(F.col("leader"), F.coalesce("bout", F.lit(0.0))
                                  + F.coalesce("bin", F.lit(0.0)) * (F.col("rf") - 1))
                           .otherwise(F.lit(0.0)).alias("load_out")))
    expected = per_replica.groupBy("broker").agg(
        F.count("*").alias("replicas"),
        F.sum(F.col("leader").cast("long")).alias("leaders"),
        F.sum("load_in").alias("expected_bytes_in"),
        F.sum("load_out").alias("expected_bytes_out"))
    measured = latest_broker_samples(brokers).select(
        "broker", F.col("net_rx_bytes_per_sec").alias("measured_rx_bytes_per_sec"),
        F.col("net_tx_bytes_per_sec").alias("measured_tx_bytes_per_sec"))
    return (expected.join(measured, "broker", "full")
            .select("broker",
                    F.coalesce("replicas", F.lit(0)).cast("long").alias("replicas"),
                    F.coalesce("leaders", F.lit(0)).cast("long").alias("leaders"),
                    F.coalesce("expected_bytes_in", F.lit(0.0)).alias("expected_bytes_in"),
                    F.coalesce("expected_bytes_out", F.lit(0.0)).alias("expected_bytes_out"),
                    "measured_rx_bytes_per_sec", "measured_tx_bytes_per_sec"))


def broker_rate_windows(brokers: DataFrame, window_seconds: int) -> DataFrame:
    """Per-broker network rate sums in tumbling windows of typed broker samples:
    `broker, window_end, rx_sum, tx_sum, samples` (window_end in epoch seconds).

    Sums and counts rather than averages, so that micro-batches of a stream that fall in
    the same window add up exactly; the average is `rx_sum / samples`.
    """
    span = int(window_seconds)
    end = (F.floor(F.col("ts") / span) + 1) * span
    return (brokers.withColumn("window_end", end.cast("long"))
            .groupBy("broker", "window_end")
            .agg(F.sum("net_rx_bytes_per_sec").alias("rx_sum"), F.sum("net_tx_bytes_per_sec").alias("tx_sum"),
                 F.count("*").alias("samples")))
