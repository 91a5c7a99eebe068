"""The doctor's I/O: read the cluster (snapshot or ZooKeeper) and the metrics pipeline's
replica traffic, then hand them to the pure `kit.doctor.examine` (`run`, the entry point of
`kit doctor` and of notebooks), and apply its plan (`apply_report`).

The metrics pipeline (issue 6) writes ``replica_traffic.parquet`` into its output directory
with columns ``topic, partition, bytes_in, bytes_out`` (bytes/s). Partitions it does not
name keep the snapshot's own ``bytes_in``/``bytes_out``.
"""
from __future__ import annotations

import os

from kit.cluster.backend import ClusterAddress, open_backend
from kit.doctor.examine import examine
from kit.errors import BadInput
from kit.formats import load_snapshot
from kit.metrics import REPLICA_TRAFFIC

_COLUMNS = ("topic", "partition", "bytes_in", "bytes_out")


def read_traffic(metrics_dir: str) -> dict[tuple[str, int], tuple[float, float]]:
    """``(topic, partition) -> (bytes_in, bytes_out)`` from a metrics output directory.

    Several rows for one partition (one per replica, or per window) keep the largest
    figures, as DoctorKafka keeps the windowed maximum. Raises `BadInput` for a missing
    directory or file, an unreadable file or missing columns.
    """
    if not os.path.isdir(metrics_dir):
        raise BadInput(f"--metrics {metrics_dir}: no such directory")
    path = os.path.join(metrics_dir, REPLICA_TRAFFIC)
    if not os.path.exists(path):
        raise BadInput(f"--metrics {metrics_dir}: no {REPLICA_TRAFFIC} (run the metrics pipeline first)")
    try:
        # pandas is optional (kit[spark]) and heavy: imported here, so `kit doctor` without
        # --metrics needs neither, and its absence is the one-line error below.
        import pandas as pd

        df = pd.read_parquet(path, columns=list(_COLUMNS))
    except ImportError as e:
        raise BadInput(f"--metrics needs pandas with pyarrow (pip install 'kit[spark]'): {e}") from None
    except Exception as e:  # noqa: BLE001  (pyarrow raises many kinds; each is one line for the user)
        raise BadInput(f"--metrics {path}: cannot read ({type(e).__name__}: {e})") from None
    if df.empty:
        return {}
    df = df.dropna(subset=["topic", "partition"])
    grouped = df.groupby(["topic", "partition"], sort=True)[["bytes_in", "bytes_out"]].max().fillna(0.0)
    return {(str(t), int(p)): (float(row.bytes_in), float(row.bytes_out))
            for (t, p), row in grouped.iterrows()}


def load_cluster(snapshot: str | None = None, address: ClusterAddress | None = None):
    """(cluster, reassignment in flight or None) from a snapshot file or a live cluster (its
    ZooKeeper, or its brokers' Admin API)."""
    live = address is not None and address.live
    if (snapshot is not None) == live:
        raise BadInput("give exactly one of a snapshot file, a ZooKeeper connect string or bootstrap servers")
    if snapshot is not None:
        return load_snapshot(snapshot), None
    with open_backend(address) as backend:
        return backend.read()


def run(snapshot: str | None = None, address: ClusterAddress | None = None, metrics: str | None = None,
        limit_in: float | None = None, limit_out: float | None = None, time: str | None = None) -> dict:
    """Load the cluster (a snapshot file, or the live cluster at `address`: its ZooKeeper or its
    Admin API) and traffic (metrics directory), then `kit.doctor.examine.examine` it. The one
    call a notebook needs; the report is a plain dict (JSON-ready except the ``figures``'
    numbers, which are plain too).

    Examples
    --------
    >>> report = run(snapshot="cluster.json")          # doctest: +SKIP
    >>> report = run(address=ClusterAddress(zk="zk1:2181/kafka"))  # doctest: +SKIP
    >>> from kit.doctor.examine import report_text      # doctest: +SKIP
    >>> print(report_text(report))                      # doctest: +SKIP
    """
    traffic = read_traffic(metrics) if metrics else None
    cluster, reassigning = load_cluster(snapshot, address)
    source = "snapshot" if snapshot else address.reached_through
    if traffic is not None:
        named = sum(1 for p in cluster.partitions if p.key in traffic)
        source = (f"metrics {os.path.join(metrics, REPLICA_TRAFFIC)} ({named} of {len(cluster.partitions)} "
                  f"partitions; the rest from the {source})")
    return examine(cluster, traffic, limit_in, limit_out, reassigning, time=time, traffic_source=source)


def apply_report(report: dict, address: ClusterAddress, throttle: float | None = None,
                 rollback_out: str | None = None) -> dict:
    """Apply the report's plan through `kit apply`'s path (pre-flight, rollback file, throttles,
    then the reassignment). Raises `Unsafe` when pre-flight refuses."""
    moves = report["plan"]["partitions"]
    with open_backend(address) as backend:
        return backend.apply(moves, throttle, rollback_out)
