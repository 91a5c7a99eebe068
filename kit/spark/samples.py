"""Realistic metric samples for tests and benchmarks (numpy + pyarrow; no Spark needed).

Heavy-tailed partition sizes (log-normal) that grow slowly, diurnal client traffic with
noise, and reassignment periods during which every replica of the partition is marked
`reassigning` and the leader's rates burst (copies ride along with client traffic). Rows
follow the replica and broker sample schema of `kit metrics`, written as Parquet parts.
"""
from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

EPOCH = datetime(2026, 3, 1, tzinfo=timezone.utc)


def generate(out_dir: str, partitions: int = 5000, brokers: int = 24, rf: int = 3, steps: int = 2000,
             interval: int = 60, topics: int = 50, moving_share: float = 0.02, seed: int = 1,
             steps_per_file: int = 100, ts_text: bool = False) -> dict:
    """Write `out_dir/replica/*.parquet` and `out_dir/broker/*.parquet`; returns row counts.

    Replica rows = partitions x rf x steps. Replica k of partition p sits on broker
    (p + k * (brokers // rf)) % brokers, replica 0 leads.

    Parameters
    ----------
    ts_text : bool
        Write `ts` as ISO-8601 text (as JSON-lines samples carry it) instead of Parquet's
        UTC timestamp type (what a metrics exporter writing Parquet would use).
    """
    rng = np.random.default_rng(seed)
    pid = np.arange(partitions)
    topic_of = pid % topics
    part_of = pid // topics
    topic_names = np.array([f"topic-{t:03d}" for t in range(topics)], dtype=object)
    stride = max(1, brokers // rf)
    placement = np.stack([(pid + k * stride) % brokers for k in range(rf)], axis=1) + 1001
    size0 = rng.lognormal(mean=20.0, sigma=1.5, size=partitions)
    growth = rng.lognormal(mean=8.0, sigma=1.0, size=partitions)  # bytes per step
    bin_base = rng.lognormal(mean=12.0, sigma=1.3, size=partitions)
    fanout = rng.uniform(1.0, 3.0, size=partitions)
    moving = rng.random(partitions) < moving_share
    move_start = rng.integers(0, steps, size=partitions)
    move_len = rng.integers(10, 60, size=partitions)
    racks = np.array([f"rack-{i % 3}" for i in range(brokers)], dtype=object)
    os.makedirs(os.path.join(out_dir, "replica"), exist_ok=True)
    os.makedirs(os.path.join(out_dir, "broker"), exist_ok=True)
    n_rep = n_bro = 0
    for first in range(0, steps, steps_per_file):
        ts_steps = np.arange(first, min(first + steps_per_file, steps))
        rep_cols: dict[str, list] = {k: [] for k in ("ts", "broker", "topic", "partition", "leader", "size_bytes",
                                                     "bytes_in_per_sec", "bytes_out_per_sec", "reassigning")}
        bro_cols: dict[str, list] = {k: [] for k in ("ts", "broker", "rack", "instance_type", "net_rx_bytes_per_sec",
                                                     "net_tx_bytes_per_sec", "storage_total_bytes",
                                                     "storage_free_bytes")}
        for s in ts_steps:
            t = s * interval
            ts = (EPOCH + timedelta(seconds=int(t))).strftime("%Y-%m-%dT%H:%M:%SZ")
            shape = 1.0 + 0.5 * np.sin(2 * np.pi * t / 86400.0)
            noise = np.clip(1.0 + 0.1 * rng.standard_normal(partitions), 0.5, 1.5)
            mv = moving & (s >= move_start) & (s < move_start + move_len)
            burst = np.where(mv, 3.0, 1.0)
            b_in = bin_base * shape * noise * burst
            b_out = b_in * fanout
            size = (size0 + growth * s).astype(np.int64)
            for k in range(rf):
                rep_cols["ts"].append(np.full(partitions, ts if ts_text else t, dtype=object if ts_text else np.int64))
                rep_cols["broker"].append(placement[:, k])
                rep_cols["topic"].append(topic_names[topic_of])
                rep_cols["partition"].append(part_of.astype(np.int32))
                rep_cols["leader"].append(np.full(partitions, k == 0))
                rep_cols["size_bytes"].append(size)
                rep_cols["bytes_in_per_sec"].append(b_in if k == 0 else np.full(partitions, np.nan))
                rep_cols["bytes_out_per_sec"].append(b_out if k == 0 else np.full(partitions, np.nan))
                rep_cols["reassigning"].append(mv)
            _add_broker_samples(bro_cols, ts if ts_text else t, placement, b_in, b_out, size, racks)
        n_rep += _write_part(os.path.join(out_dir, "replica", f"part-{first:06d}.parquet"), rep_cols, ts_text)
        n_bro += _write_part(os.path.join(out_dir, "broker", f"part-{first:06d}.parquet"), bro_cols, ts_text)
    return {"replica_rows": n_rep, "broker_rows": n_bro}


def _add_broker_samples(cols: dict[str, list], ts, placement: np.ndarray, b_in: np.ndarray, b_out: np.ndarray,
                        size: np.ndarray, racks: np.ndarray) -> None:
    """One instant's broker rows, appended to `cols`: each broker's client rx/tx (the leader
    sends bytes_out plus bytes_in to each follower) and free storage (8 TB less what it holds)."""
    brokers, rf = len(racks), placement.shape[1]
    idx = placement - 1001
    rx = np.bincount(idx.ravel(), weights=np.repeat(b_in, rf), minlength=brokers)
    tx = np.bincount(idx[:, 0], weights=b_out + b_in * (rf - 1), minlength=brokers)
    held = np.bincount(idx.ravel(), weights=np.repeat(size.astype(float), rf), minlength=brokers)
    total = np.full(brokers, 8 * 10**12, dtype=np.int64)
    cols["ts"].append(np.full(brokers, ts, dtype=object if isinstance(ts, str) else np.int64))
    cols["broker"].append(np.arange(brokers) + 1001)
    cols["rack"].append(racks)
    cols["instance_type"].append(np.full(brokers, "standard", dtype=object))
    cols["net_rx_bytes_per_sec"].append(rx)
    cols["net_tx_bytes_per_sec"].append(tx)
    cols["storage_total_bytes"].append(total)
    cols["storage_free_bytes"].append(total - held.astype(np.int64))


def _write_part(path: str, cols: dict[str, list], ts_text: bool) -> int:
    """The columns (lists of arrays) as one Parquet file; returns its rows."""
    arrays = {}
    for k, parts in cols.items():
        v = np.concatenate(parts)
        if k == "ts" and not ts_text:
            # Seconds since EPOCH as a UTC timestamp column: nothing to parse on read.
            arrays[k] = pa.array(v + int(EPOCH.timestamp()), type=pa.timestamp("s", tz="UTC"))
        else:
            arrays[k] = pa.array(v, from_pandas=True) if v.dtype.kind == "f" else pa.array(v)
    table = pa.table(arrays)
    pq.write_table(table, path)
    return table.num_rows
