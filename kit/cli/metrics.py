"""`kit metrics`: partition sizes, free storage and replica traffic from metric samples, by
the PySpark jobs of kit.metrics.edge (batch, or --follow for Structured Streaming).
"""
# General flow:
# 1) add_parser declares `kit metrics`.
# 2) The outputs are checked and --replica-samples required unless --follow.
# 3) --follow: kit.metrics.edge.follow keeps DIR/broker_rates.json current until --once,
#    --max-seconds or Ctrl-C. Otherwise kit.metrics.edge.run_batch writes the batch outputs
#    (and the znodes and the enriched snapshot when asked). PySpark is imported there, when
#    Spark starts.
# 4) One line per output says what was written.
from __future__ import annotations

import os
import sys

from kit.cli.lazy import lazy_module
from kit.cli.options import cluster_address, cluster_options, command, rate, whole, writable
from kit.errors import BadInput
from kit.metrics import BROKER_RATES
from kit.progress import Progress

edge = lazy_module("kit.metrics.edge")  # imported when used: see kit.cli.lazy


def add_parser(sub) -> None:
    """Register `kit metrics` on the `kit` command's subparsers."""
    p = command(sub, "metrics", "partition sizes, free storage and replica traffic from metric samples (PySpark)",
                "Run the PySpark metrics jobs over replica and broker samples (JSON lines or Parquet, files or "
                "directories): DIR/partition_meta.json and DIR/broker_metrics.json (kafka-kit's shapes), "
                "DIR/replica_traffic.parquet (windowed leader traffic outside reassignments) and "
                "DIR/broker_load.parquet. With --follow, keep DIR/broker_rates.json current from a directory "
                "of broker samples (Spark Structured Streaming).",
                "kit metrics --replica-samples samples/replica --broker-samples samples/broker --out build/metrics "
                "--window 48h --stat p95 --snapshot-in cluster.json --snapshot-out cluster-sized.json")
    p.add_argument("--replica-samples", metavar="PATH", help="replica samples: a file or a directory")
    p.add_argument("--broker-samples", required=True, metavar="PATH", help="broker samples: a file or a directory")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (created if missing)")
    p.add_argument("--window", default=None, metavar="DURATION",
                   help="traffic window ending at the newest sample, e.g. 48h, 90m (default 48h; 5m with --follow)")
    p.add_argument("--stat", choices=["max", "p95"], default="max", help="per-partition statistic (default max)")
    publish = p.add_argument_group(
        "publishing to a cluster (optional)",
        "sizes and free storage also go to the cluster, where kit's planners and the auto-throttle read them: "
        "with --zk kafka-kit's znodes /topicmappr/partitionmeta and /topicmappr/brokermetrics, with --bootstrap "
        "kit's metrics directory for that cluster (docs/admin-api.md)")
    cluster_options(p, publish.add_mutually_exclusive_group())
    p.add_argument("--snapshot-in", metavar="FILE", help="a snapshot to enrich with sizes, traffic, free storage")
    p.add_argument("--snapshot-out", metavar="FILE", help="where to write the enriched snapshot")
    p.add_argument("--master", metavar="URL", help="Spark master (default $SPARK_MASTER, else local[*])")
    p.add_argument("--shuffle-partitions", type=whole(1), metavar="N", help="spark.sql.shuffle.partitions (default 8)")
    p.add_argument("--driver-memory", metavar="SIZE", help="spark.driver.memory, e.g. 4g")
    p.add_argument("--follow", action="store_true", help="streaming: keep DIR/broker_rates.json current")
    p.add_argument("--once", action="store_true", help="with --follow: process the files there now, then exit")
    p.add_argument("--max-seconds", type=rate, metavar="S", help="with --follow: stop after S wall seconds")
    p.set_defaults(run=run)


def run(a) -> int:
    """`kit metrics [--follow]`: the Spark jobs; one line per output written."""
    if a.snapshot_out:
        writable("--snapshot-out", a.snapshot_out, snapshot_in=a.snapshot_in)
    if a.follow:
        with Progress("kit metrics --follow") as progress:
            n = edge.follow(a.broker_samples, a.out, a.window or "5m", a.master, once=a.once,
                            shuffle_partitions=a.shuffle_partitions, driver_memory=a.driver_memory,
                            max_seconds=a.max_seconds, progress=progress)
        print(f"{os.path.join(a.out, BROKER_RATES)}: {n} micro-batch(es)")
        return 0
    if not a.replica_samples:
        raise BadInput("--replica-samples is required (except with --follow)")
    with Progress("kit metrics") as progress:
        f = edge.run_batch(a.replica_samples, a.broker_samples, a.out, a.window or "48h", a.stat, a.master,
                           a.shuffle_partitions, a.driver_memory,
                           cluster_address(a) if a.zk or a.bootstrap else None, a.snapshot_in,
                           a.snapshot_out, progress=progress)
    if f["malformed"]:
        sys.stderr.write(f"kit: skipped {f['malformed']} malformed rows\n")
    print(f"{a.out}: sizes of {sum(len(v) for v in f['partition_meta'].values())} partitions, free storage of "
          f"{len(f['broker_metrics'])} brokers, traffic of {len(f['replica_traffic'])} partitions "
          f"({a.stat}, window {a.window or '48h'}), load of {len(f['broker_load'])} brokers in {f['seconds']:.1f} s")
    if "published" in f:
        print(f"wrote {f['published']} " + (f"at {a.zk}" if a.zk else f"for {a.bootstrap}"))
    if a.snapshot_out:
        print(f"{a.snapshot_out}: enriched snapshot")
    return 0
