"""`kit metrics`: the thin edge around the PySpark metrics jobs (kit/spark/metrics_jobs.py).

Reads replica and broker samples (JSON lines or Parquet, files or directories), runs the
pure transforms, and writes kafka-kit's partitionmeta/brokermetrics figures, the replica
traffic and broker load tables, optionally the figures in the cluster itself (the backend's
`write_metrics`: kafka-kit's two znodes on ZooKeeper) and an enriched snapshot. Bad input
is found before anything is written.
"""
from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
import warnings
from typing import Any

from kit.cluster.backend import ClusterAddress, open_backend
from kit.errors import BadInput
from kit.formats import dumps, load_snapshot, snapshot_doc
from kit.files import write_atomic
from kit.metrics import BROKER_LOAD, BROKER_METRICS, BROKER_RATES, PARTITION_META, REPLICA_TRAFFIC

# PySpark (and kit/spark/, whose jobs import it) and pyarrow are the `spark` extra, and PySpark takes
# seconds to import: both are imported inside the functions that use them, so this module loads
# (and checks its options) without them.

WINDOW_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}

# Spark's own logging at ERROR only: its INFO/WARN start-up chatter would bury kit's one-line
# messages on stderr, and the progress bar is turned off separately.
_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def parse_window(text: str) -> int:
    """A duration such as 48h, 90m, 2d or 3600s (a bare number is seconds) in seconds."""
    m = re.fullmatch(r"\s*(\d+)\s*([smhd]?)\s*", text or "")
    if not m or int(m.group(1)) <= 0:
        raise BadInput(f"--window {text!r}: expected a positive duration such as 48h, 90m or 3600s")
    return int(m.group(1)) * WINDOW_UNITS[m.group(2) or "s"]


# The driver runs on this machine (PySpark's client mode) and its launcher hands the memory to
# the JVM verbatim as -Xmx: digits and k, m, g or t (either case). The JVM takes bare digits as
# bytes where Spark's documentation says MiB, and refuses a "b"/"mb" suffix, so a unit is asked for.
_DRIVER_MEMORY = re.compile(r"([0-9]{1,15})([kmgt])", re.IGNORECASE)
_MEMORY_UNITS = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
# Spark refuses to start with less heap than 1.5 x its 300 MiB reserve (UnifiedMemoryManager).
MIN_DRIVER_MEMORY = 450 * 2**20
# Spark's master URLs (SparkContext, SparkSubmit): local[N] threads, local[N,F] with F failures.
_LOCAL = re.compile(r"local(?:\[(\*|[0-9]{1,9})(?:\s*,\s*([0-9]{1,9}))?\])?")
_HOST_PORT = re.compile(r"([A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})|\[[0-9A-Fa-f:.]+\]):([0-9]{1,5})")
_URL_REST = re.compile(r"[A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=%-]+")


def check_driver_memory(text: str, where: str = "--driver-memory") -> str:
    """spark.driver.memory as the driver's JVM takes it (e.g. 512m, 4g), at least 450 MiB (Spark's
    floor) and at most this machine's memory (the driver runs here); `BadInput` names `where`."""
    m = _DRIVER_MEMORY.fullmatch(text or "")
    if not m:
        raise BadInput(f"{where} {text[:40]!r}: expected digits and a unit k, m, g or t, e.g. 512m or 4g")
    size = int(m.group(1)) * _MEMORY_UNITS[m.group(2).lower()]
    if size < MIN_DRIVER_MEMORY:
        raise BadInput(f"{where} {text!r}: Spark's driver needs at least 450m")
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        ram = None  # not known here: the JVM says
    if ram and size > ram:
        raise BadInput(f"{where} {text!r}: more than this machine's {ram / 2**30:.0f} GiB of memory "
                       "(the driver runs here)")
    return text


def check_master(text: str, where: str = "--master") -> str:
    """A Spark master URL: local, local[N], local[*], local[N,F], spark://host:port[,host:port],
    yarn, k8s://... or mesos://...; `BadInput` names `where`."""
    text = text or ""
    m = _LOCAL.fullmatch(text)
    if m:
        for n, what in ((m.group(1), "threads"), (m.group(2), "task failures")):
            if n not in (None, "*") and int(n) < 1:
                raise BadInput(f"{where} {text!r}: local mode needs at least 1 of its {what}")
        return text
    if text == "yarn":
        return text
    if text.startswith("spark://"):
        for hp in text[len("spark://"):].split(","):
            p = _HOST_PORT.fullmatch(hp)
            if not p or not 1 <= int(p.group(2)) <= 65535:
                raise BadInput(f"{where} {text[:60]!r}: expected spark://host:port[,host:port...]")
        return text
    for scheme in ("k8s://", "mesos://"):
        if text.startswith(scheme) and _URL_REST.fullmatch(text[len(scheme):]):
            return text
    raise BadInput(f"{where} {text[:60]!r}: not a Spark master (local, local[N], local[*], local[N,F], "
                   "spark://host:port, yarn, k8s://..., mesos://...)")


def check_spark_options(master: str | None, memory: str | None) -> None:
    """`check_master` and `check_driver_memory` of what a session would get ($SPARK_MASTER when no
    master is given), before anything is started or written."""
    if master is not None:
        check_master(master)
    elif os.environ.get("SPARK_MASTER"):
        check_master(os.environ["SPARK_MASTER"], "$SPARK_MASTER")
    if memory is not None:
        check_driver_memory(memory)


def spark_session(master: str | None = None, shuffle_partitions: int | None = None,
                  driver_memory: str | None = None, app: str = "kit-metrics"):
    """A quiet SparkSession: `master` (default $SPARK_MASTER, else local[*]), UTC, no UI, no progress bar."""
    from pyspark.sql import SparkSession

    conf_dir = os.path.join(tempfile.gettempdir(), "kit-spark")
    os.makedirs(conf_dir, exist_ok=True)
    log_conf = os.path.join(conf_dir, "log4j2.properties")
    if not os.path.exists(log_conf):
        with open(log_conf, "w") as f:
            f.write(_LOG4J2)
    b = (SparkSession.builder.master(master or os.environ.get("SPARK_MASTER") or "local[*]").appName(app)
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log_conf}")
         .config("spark.sql.shuffle.partitions", str(shuffle_partitions or 8))
         # JSON-lines samples are parsed once and cached (read_samples). Compressing that
         # cache cost ~7 s more than it saved on 30M samples on 2 cores (39 s against 32 s
         # to parse and cache); uncompressed it held 509 MB.
         .config("spark.sql.inMemoryColumnarStorage.compressed", "false"))
    if driver_memory:
        b = b.config("spark.driver.memory", driver_memory)
    # The JVM inherits stderr and prints start-up notices there before any log4j setting
    # applies; it starts with stderr pointed at a log file instead, and keeps writing there.
    log_path = os.path.join(conf_dir, f"spark-{os.getpid()}.log")
    saved = os.dup(2)
    try:
        with open(log_path, "ab") as log, warnings.catch_warnings():
            # pyspark warns about pandas versions on import; kit's Spark path does not use pandas.
            warnings.simplefilter("ignore", FutureWarning)
            sys.stderr.flush()
            os.dup2(log.fileno(), 2)
            spark = b.getOrCreate()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    spark.sparkContext.setLogLevel("ERROR")
    if spark.conf.get("spark.sql.files.minPartitionNum", None) is None:
        # Spark packs sample files into about one read task per core; with that few, a
        # task that lands on a busy core holds up the whole stage. Four per core keeps
        # every core busy to the end of each scan.
        spark.conf.set("spark.sql.files.minPartitionNum", str(4 * spark.sparkContext.defaultParallelism))
    return spark


def _sample_files(path: str, what: str) -> tuple[list[str], list[str]]:
    """JSON-lines and Parquet files at `path` (a file, or a directory searched recursively)."""
    if not os.path.exists(path):
        raise BadInput(f"{what} {path}: no such file or directory")
    if os.path.isfile(path):
        files = [path]
    else:
        files = []
        for root, dirs, names in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
            files += [os.path.join(root, n) for n in sorted(names) if not n.startswith((".", "_"))]
    parquet = [f for f in files if f.endswith(".parquet")]
    jsonl = [f for f in files if f.endswith((".jsonl", ".json", ".ndjson"))]
    if os.path.isfile(path) and not parquet and not jsonl:
        jsonl = [path]  # a single file named otherwise is taken as JSON lines
    if not parquet and not jsonl:
        raise BadInput(f"{what} {path}: no .jsonl/.json or .parquet files")
    return jsonl, parquet


_KINDS = {"string": ("string",), "bigint": ("tinyint", "smallint", "int", "bigint"),
          "int": ("tinyint", "smallint", "int", "bigint"), "boolean": ("boolean",),
          "double": ("tinyint", "smallint", "int", "bigint", "float", "double")}


def read_samples(spark, path: str, kind: str, keep: list | None = None,
                 stats: dict | None = None):
    """Typed, valid samples of `kind` ('replica' or 'broker') from `path`, and the count of
    malformed rows skipped. BadInput when the path holds nothing or a column is of the wrong
    type (or missing) throughout.

    Parameters
    ----------
    keep : list, optional
        When given and the input includes JSON lines, the typed samples are persisted (the
        validation pass fills the cache) and the persisted frame is appended here for the
        caller to `unpersist()` when done. Every later job would otherwise parse the JSON
        text again. Parquet is not cached: a column-pruned Parquet scan is cheaper than
        building Spark's in-memory cache of every column (measured on 30M samples: a
        full cache build took ~12 s on 2 cores, a rescan of the columns a job needs 1-2 s).
    stats : dict, optional
        When given, `stats["newest"]` is set to the newest valid sample's `ts` (epoch
        seconds), and for replica samples `stats["span"]` to (oldest ts, newest ts, smallest
        size, largest size), found in the validation pass rather than by more scans.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    from kit.spark.metrics_jobs import (BROKER_REQUIRED, BROKER_SCHEMA, CORRUPT, REPLICA_REQUIRED, REPLICA_SCHEMA,
                                    typed_samples)

    schema, required = (REPLICA_SCHEMA, REPLICA_REQUIRED) if kind == "replica" else (BROKER_SCHEMA, BROKER_REQUIRED)
    what = f"--{kind}-samples"
    jsonl, parquet = _sample_files(path, what)
    frames = []
    if jsonl:
        with_corrupt = StructType(schema.fields + [StructField(CORRUPT, StringType())])
        frames.append(spark.read.schema(with_corrupt).option("mode", "PERMISSIVE")
                      .option("columnNameOfCorruptRecord", CORRUPT).json(jsonl))
    if parquet:
        frames.append(_parquet_samples(spark, parquet, schema, required, f"{what} {path}"))
    raw = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
    typed = typed_samples(raw, schema, required)
    if jsonl and keep is not None:
        from pyspark import StorageLevel

        typed = typed.persist(StorageLevel.MEMORY_AND_DISK)
        keep.append(typed)
    # One pass for the row counts and, per required column, how many rows have it at all.
    counts = typed.agg(F.count("*").alias("rows"), F.sum(F.col("malformed").cast("long")).alias("bad"),
                       F.max(F.when(~F.col("malformed"), F.col("ts"))).alias("_newest"),
                       F.min(F.when(~F.col("malformed"), F.col("ts"))).alias("_oldest"),
                       *([F.min(F.when(~F.col("malformed"), F.col("size_bytes"))).alias("_smallest"),
                          F.max(F.when(~F.col("malformed"), F.col("size_bytes"))).alias("_largest")]
                         if kind == "replica" else []),
                       *[F.count(c).alias(c) for c in required]).first()
    if stats is not None:
        stats["newest"] = counts["_newest"]
        if kind == "replica":
            stats["span"] = (counts["_oldest"], counts["_newest"], counts["_smallest"], counts["_largest"])
    if not counts["rows"]:
        raise BadInput(f"{what} {path}: no samples")
    for c in required:
        if counts[c] == 0:
            raise BadInput(f"{what} {path}: column {c} is missing or not a valid "
                           f"{'ISO-8601 time' if c == 'ts' else dict(zip(schema.names, schema.fields))[c].dataType.simpleString()}"
                           " in every row")
    return typed.where(~F.col("malformed")).drop("malformed"), int(counts["bad"] or 0)


def _parquet_samples(spark, files: list[str], schema, required: list[str], where: str):
    """Parquet sample files as a frame of `schema`'s columns (an optional one missing: null)
    and an empty corrupt-record column; `BadInput` names `where` for an unreadable file or a
    column of the wrong type (or a required one missing)."""
    from pyspark.sql import functions as F

    from kit.spark.metrics_jobs import CORRUPT

    try:
        pq = spark.read.parquet(*files)
    except Exception as e:  # noqa: BLE001  (an unreadable file is the user's input, not a crash)
        raise BadInput(f"{where}: not readable Parquet ({type(e).__name__})") from None
    types = dict(pq.dtypes)
    cols = []
    for f in schema.fields:
        t = types.get(f.name)
        ok = _KINDS[f.dataType.simpleString()] + (("timestamp", "timestamp_ntz") if f.name == "ts" else ())
        if t is None and f.name not in required:
            cols.append(F.lit(None).cast(f.dataType).alias(f.name))
        elif t is None or t not in ok:
            raise BadInput(f"{where}: column {f.name} is {t or 'missing'}, expected {f.dataType.simpleString()}")
        else:
            cols.append(F.col(f.name))
    return pq.select(*cols, F.lit(None).cast("string").alias(CORRUPT))


def compute(spark, replica_path: str, broker_path: str, window_s: int, stat: str) -> dict[str, Any]:
    """Every figure of the batch job as plain Python data, sorted (nothing written).

    Returns a dict with `partition_meta`, `broker_metrics` (kafka-kit shapes), `replica_traffic`
    and `broker_load` (lists of row dicts), and `malformed` (rows skipped).
    """
    from kit.spark.metrics_jobs import broker_load, latest_broker_samples, latest_sizes, replica_latest, replica_traffic

    cached: list = []
    try:
        stats: dict = {}
        replicas, bad_r = read_samples(spark, replica_path, "replica", keep=cached, stats=stats)
        brokers, bad_b = read_samples(spark, broker_path, "broker", keep=cached)
        # Each replica's latest sample feeds both the sizes and the placement in broker_load,
        # and the traffic feeds its own table and broker_load: both are small (one row per
        # replica or partition), so they are cached rather than recomputed from every sample.
        latest = replica_latest(replicas, stats["span"]).cache()
        cached.append(latest)
        traffic = replica_traffic(replicas, window_s, stat, newest=stats["newest"]).cache()
        cached.append(traffic)
        sizes = sorted((r["topic"], r["partition"], r["size"]) for r in latest_sizes(replicas, latest).collect())
        latest_b = sorted((r["broker"], r["storage_free_bytes"]) for r in latest_broker_samples(brokers).collect())
        traffic_rows = sorted((r.asDict() for r in traffic.collect()), key=lambda r: (r["topic"], r["partition"]))
        load_rows = sorted((r.asDict() for r in broker_load(replicas, traffic, brokers, latest).collect()),
                           key=lambda r: r["broker"])
    finally:
        for df in cached:
            df.unpersist()
    meta: dict[str, dict[str, dict[str, int]]] = {}
    for topic, part, size in sizes:
        meta.setdefault(topic, {})[str(part)] = {"Size": int(size)}
    return {"partition_meta": meta,
            "broker_metrics": {str(b): {"StorageFree": int(free)} for b, free in latest_b if free is not None},
            "replica_traffic": traffic_rows, "broker_load": load_rows, "malformed": bad_r + bad_b}


_TRAFFIC_COLUMNS = [("topic", "string"), ("partition", "int32"), ("bytes_in", "float64"), ("bytes_out", "float64")]
_LOAD_COLUMNS = [("broker", "int64"), ("replicas", "int64"), ("leaders", "int64"), ("expected_bytes_in", "float64"),
                 ("expected_bytes_out", "float64"), ("measured_rx_bytes_per_sec", "float64"),
                 ("measured_tx_bytes_per_sec", "float64")]


def _write_parquet(path: str, rows: list[dict], columns: list[tuple[str, str]]) -> None:
    """One Parquet file (not Spark's directory of parts), written beside and renamed into place."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({name: pa.array([r[name] for r in rows], type=getattr(pa, t)()) for name, t in columns})
    tmp = path + ".tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def write_outputs(out_dir: str, figures: dict[str, Any]) -> list[str]:
    """Write the four outputs into `out_dir` (created if needed); the paths written."""
    os.makedirs(out_dir, exist_ok=True)
    paths = [os.path.join(out_dir, n) for n in (PARTITION_META, BROKER_METRICS, REPLICA_TRAFFIC, BROKER_LOAD)]
    write_atomic(paths[0], json.dumps(figures["partition_meta"], separators=(",", ":")) + "\n")
    write_atomic(paths[1], json.dumps(figures["broker_metrics"], separators=(",", ":")) + "\n")
    _write_parquet(paths[2], figures["replica_traffic"], _TRAFFIC_COLUMNS)
    _write_parquet(paths[3], figures["broker_load"], _LOAD_COLUMNS)
    return paths


def enrich_snapshot(doc: dict, figures: dict[str, Any]) -> dict:
    """A Snapshot v1 document with `size`, `bytes_in`, `bytes_out` and `storage_free` from the
    figures wherever they have a value; everything else is kept as it was."""
    traffic = {(r["topic"], r["partition"]): r for r in figures["replica_traffic"]}
    for p in doc["partitions"]:
        size = figures["partition_meta"].get(p["topic"], {}).get(str(p["partition"]))
        if size is not None:
            p["size"] = size["Size"]
        t = traffic.get((p["topic"], p["partition"]))
        if t is not None:
            p["bytes_in"] = t["bytes_in"] if t["bytes_in"] is not None else p.get("bytes_in", 0.0)
            p["bytes_out"] = t["bytes_out"] if t["bytes_out"] is not None else p.get("bytes_out", 0.0)
    for b in doc["brokers"]:
        m = figures["broker_metrics"].get(str(b["id"]))
        if m is not None:
            b["storage_free"] = m["StorageFree"]
    return doc


def run_batch(replica_path: str, broker_path: str, out_dir: str, window: str = "48h", stat: str = "max",
              master: str | None = None, shuffle_partitions: int | None = None, driver_memory: str | None = None,
              cluster: ClusterAddress | None = None, snapshot_in: str | None = None,
              snapshot_out: str | None = None, progress=None) -> dict[str, Any]:
    """The whole `kit metrics` batch job; returns the figures, `seconds` taken and, with a
    `cluster` (a `kit.cluster.backend.ClusterAddress`), `published`: where the metrics went there.

    Every input is checked (and the snapshot loaded, the cluster reached) before any output
    is written, so bad input leaves nothing behind. `progress` (a `kit.progress.Progress`)
    hears each stage as it starts.
    """
    def stage(name: str) -> None:
        if progress is not None:
            progress.stage(name)

    check_spark_options(master, driver_memory)
    window_s = parse_window(window)
    if stat not in ("max", "p95"):
        raise BadInput(f"--stat {stat!r}: expected max or p95")
    for flag, p in (("--replica-samples", replica_path), ("--broker-samples", broker_path)):
        _sample_files(p, flag)
    parent = os.path.dirname(os.path.abspath(out_dir))
    if os.path.isfile(out_dir) or not os.path.isdir(parent):
        raise BadInput(f"--out {out_dir}: not a directory that can be created")
    if (snapshot_in is None) != (snapshot_out is None):
        raise BadInput("--snapshot-in and --snapshot-out go together")
    doc = snapshot_doc(load_snapshot(snapshot_in)) if snapshot_in else None
    backend = open_backend(cluster) if cluster else None
    try:
        start = time.perf_counter()
        stage("starting Spark")
        spark = spark_session(master, shuffle_partitions, driver_memory)
        stage("sizes, free storage and traffic from the samples")
        figures = compute(spark, replica_path, broker_path, window_s, stat)
        stage(f"writing {out_dir}")
        figures["paths"] = write_outputs(out_dir, figures)
        if backend is not None:
            stage(f"writing the metrics to {backend.reached_through}")
            figures["published"] = backend.write_metrics(figures["partition_meta"], figures["broker_metrics"])
        if doc is not None:
            stage(f"writing {snapshot_out}")
            write_atomic(snapshot_out, dumps(enrich_snapshot(doc, figures)))
        figures["seconds"] = time.perf_counter() - start
        return figures
    finally:
        if backend is not None:
            backend.close()


class _RatesSink:
    """`follow`'s micro-batch sink: each batch's per-broker windows added to the running sums,
    and `target` rewritten with each broker's newest window. `batches` counts the batches."""

    def __init__(self, target: str, window_s: int, progress=None):
        self.target, self.window_s, self.progress = target, window_s, progress
        self.sums: dict[tuple[int, int], list[float]] = {}
        self.batches = 0

    def __call__(self, batch, _batch_id) -> None:
        from pyspark.sql import functions as F

        from kit.spark.metrics_jobs import BROKER_REQUIRED, BROKER_SCHEMA, broker_rate_windows, typed_samples

        sums, window_s = self.sums, self.window_s
        typed = typed_samples(batch, BROKER_SCHEMA, BROKER_REQUIRED).cache()
        bad = typed.where(F.col("malformed")).count()
        if bad:
            sys.stderr.write(f"kit: skipped {bad} malformed rows\n")
        for r in broker_rate_windows(typed.where(~F.col("malformed")), window_s).collect():
            acc = sums.setdefault((r["broker"], r["window_end"]), [0.0, 0.0, 0])
            acc[0] += r["rx_sum"] or 0.0
            acc[1] += r["tx_sum"] or 0.0
            acc[2] += r["samples"]
        typed.unpersist()
        newest: dict[int, int] = {}
        for b, end in sums:
            newest[b] = max(newest.get(b, end), end)
        # Windows older than the previous one per broker are never shown again: drop them.
        for key in [k for k in sums if k[1] < newest[k[0]] - window_s]:
            del sums[key]
        doc = {}
        for b in sorted(newest):
            rx, tx, n = sums[(b, newest[b])]
            doc[str(b)] = {"window_end": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(newest[b])),
                           "rx_bytes_per_sec": rx / n, "tx_bytes_per_sec": tx / n, "samples": n}
        write_atomic(self.target, json.dumps(doc, separators=(",", ":")) + "\n")
        self.batches += 1
        if self.progress is not None:
            self.progress.stage(f"{self.batches} micro-batch(es) done, {len(doc)} broker(s) in {self.target}")


def follow(broker_path: str, out_dir: str, window: str = "5m", master: str | None = None,
           once: bool = False, poll_seconds: float = 5.0, shuffle_partitions: int | None = None,
           driver_memory: str | None = None, max_seconds: float | None = None, stop=None, progress=None) -> int:
    """Streaming mode: keep `out_dir/broker_rates.json` current from a directory of broker sample files.

    Spark Structured Streaming reads each new file once; every micro-batch is aggregated into
    per-broker tumbling windows that are added to the running sums, and the file is rewritten
    with each broker's newest window: `{"1001": {"window_end": ISO, "rx_bytes_per_sec": ..,
    "tx_bytes_per_sec": .., "samples": n}}`. With `once`, the files present now are processed
    and the call returns; otherwise it runs until interrupted, until `max_seconds` have
    passed, or until `stop` (a `threading.Event`) is set, whichever comes first. On a bounded
    stop the files present by then are processed before returning, so the last file written
    reflects every sample seen. Returns the micro-batches seen; `progress` (a
    `kit.progress.Progress`) hears of each one.
    """
    check_spark_options(master, driver_memory)  # before Spark is even imported
    from pyspark.sql.types import StringType, StructField, StructType

    from kit.spark.metrics_jobs import BROKER_SCHEMA, CORRUPT

    window_s = parse_window(window)
    if not os.path.isdir(broker_path):
        raise BadInput(f"--broker-samples {broker_path}: --follow needs a directory of sample files")
    parent = os.path.dirname(os.path.abspath(out_dir))
    if os.path.isfile(out_dir) or not os.path.isdir(parent):
        raise BadInput(f"--out {out_dir}: not a directory that can be created")
    os.makedirs(out_dir, exist_ok=True)
    target = os.path.join(out_dir, BROKER_RATES)
    if progress is not None:
        progress.stage("starting Spark")
    spark = spark_session(master, shuffle_partitions, driver_memory, app="kit-metrics-follow")
    schema = StructType(BROKER_SCHEMA.fields + [StructField(CORRUPT, StringType())])
    stream = (spark.readStream.schema(schema).option("mode", "PERMISSIVE")
              .option("columnNameOfCorruptRecord", CORRUPT).option("recursiveFileLookup", "true")
              .option("pathGlobFilter", "*.jsonl").json(broker_path))
    sink = _RatesSink(target, window_s, progress)
    with tempfile.TemporaryDirectory(prefix="kit-follow-") as checkpoint:
        writer = stream.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
        writer = writer.trigger(availableNow=True) if once else writer.trigger(processingTime=f"{poll_seconds} seconds")
        query = writer.start()
        if progress is not None:
            progress.stage(f"waiting for samples in {broker_path}")
        try:
            if once or (max_seconds is None and stop is None):
                query.awaitTermination()
            else:
                deadline = time.monotonic() + (max_seconds if max_seconds is not None else float("inf"))
                # Short waits, so a set `stop` or the deadline is noticed within a fraction of a second.
                while query.isActive and time.monotonic() < deadline and not (stop is not None and stop.is_set()):
                    query.awaitTermination(min(0.2, max(deadline - time.monotonic(), 0.001)))
                if query.isActive:
                    query.processAllAvailable()
                    query.stop()
                query.awaitTermination()  # raises if a micro-batch failed
        except KeyboardInterrupt:
            query.stop()
    return sink.batches
