"""The metrics pipeline (kit/spark/metrics_jobs.py, kit/metrics/edge.py) on real local Spark.

Small hand-made samples with answers worked out by hand: the window edge, the 30-minute
cooldown after reassigning samples, p95 against max, followers without traffic, the
latest-size rule, the follower replication egress in broker_load, malformed rows; then the
`kit metrics` command, and the simulator's samples end to end through ZooKeeper.
"""
from __future__ import annotations

import itertools
import json
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pyspark = pytest.importorskip("pyspark")

from pyspark.sql import functions as F  # noqa: E402
from pyspark.testing import assertDataFrameEqual  # noqa: E402

from kit.cli import main  # noqa: E402
from kit.errors import BadInput  # noqa: E402
from kit.metrics.edge import read_samples  # noqa: E402
from kit.spark.metrics_jobs import (BROKER_REQUIRED, BROKER_SCHEMA, REPLICA_REQUIRED, REPLICA_SCHEMA,  # noqa: E402
                                broker_load, latest_sizes, replica_latest, replica_traffic, typed_samples)
from tests.conftest import PROGRESS_LINE, run_kit  # noqa: E402

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
HOUR = 3600


def iso(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def rep(t, broker, topic="t", partition=0, leader=True, size=100, bin_=None, bout=None, moving=False):
    """One replica sample; rates only on leaders unless given."""
    if leader and bin_ is None:
        bin_, bout = 1.0, 2.0
    return {"ts": iso(t), "broker": broker, "topic": topic, "partition": partition, "leader": leader,
            "size_bytes": size, "bytes_in_per_sec": bin_, "bytes_out_per_sec": bout, "reassigning": moving}


def brk(t, broker, rx=0.0, tx=0.0, free=500):
    return {"ts": iso(t), "broker": broker, "rack": "a", "instance_type": "std", "net_rx_bytes_per_sec": rx,
            "net_tx_bytes_per_sec": tx, "storage_total_bytes": 1000, "storage_free_bytes": free}


def replicas_df(spark, rows):
    raw = spark.createDataFrame(rows, REPLICA_SCHEMA)
    return typed_samples(raw, REPLICA_SCHEMA, REPLICA_REQUIRED).drop("malformed")


def brokers_df(spark, rows):
    raw = spark.createDataFrame(rows, BROKER_SCHEMA)
    return typed_samples(raw, BROKER_SCHEMA, BROKER_REQUIRED).drop("malformed")


def traffic(spark, rows):
    return spark.createDataFrame(rows, "topic string, partition int, bytes_in double, bytes_out double")


def test_the_window_keeps_samples_strictly_newer_than_newest_minus_window(spark):
    rows = [rep(0, 1, bin_=900.0, bout=900.0),          # exactly newest - 1h: outside
            rep(1, 1, bin_=50.0, bout=70.0),            # one second inside
            rep(HOUR, 1, bin_=10.0, bout=20.0),         # the newest sample
            rep(HOUR, 2, leader=False)]
    got = replica_traffic(replicas_df(spark, rows), window_seconds=HOUR)
    assertDataFrameEqual(got, traffic(spark, [("t", 0, 50.0, 70.0)]))


def test_samples_while_reassigning_and_30_minutes_after_are_left_out(spark):
    rows = [rep(0, 1, bin_=5.0, bout=6.0),                           # before the move: counts
            rep(600, 1, bin_=500.0, bout=600.0, moving=True),        # during: out
            rep(600, 3, leader=False, moving=True),                  # the new follower marks it too
            rep(1200, 1, bin_=400.0, bout=400.0),                    # 10 min after: out
            rep(1200, 3, leader=False, moving=True),                 # a follower still copying: marks 1200
            rep(1200 + 1800, 1, bin_=300.0, bout=300.0),             # exactly 30 min after: out
            rep(1200 + 1860, 1, bin_=7.0, bout=1.0),                 # 31 min after: counts
            # another partition, never reassigned, is not affected by t/0's move
            rep(1200, 1, partition=1, bin_=40.0, bout=41.0)]
    got = replica_traffic(replicas_df(spark, rows), window_seconds=24 * HOUR)
    assertDataFrameEqual(got, traffic(spark, [("t", 0, 7.0, 6.0), ("t", 1, 40.0, 41.0)]))


def test_p95_interpolates_and_max_takes_the_peak(spark):
    rows = [rep(60 * i, 1, bin_=float(i), bout=float(10 * i)) for i in range(1, 21)]
    df = replicas_df(spark, rows)
    assertDataFrameEqual(replica_traffic(df, HOUR, "max"), traffic(spark, [("t", 0, 20.0, 200.0)]))
    # 20 values 1..20: rank 0.95 * 19 = 18.05 lies between 19 and 20.
    got = replica_traffic(df, HOUR, "p95").collect()[0]
    assert got["bytes_in"] == pytest.approx(19.05) and got["bytes_out"] == pytest.approx(190.5)


def test_followers_carry_no_traffic_and_a_partition_without_a_leader_sample_is_absent(spark):
    rows = [rep(0, 1, bin_=3.0, bout=4.0), rep(0, 2, leader=False), rep(0, 3, leader=False),
            rep(0, 2, partition=1, leader=False)]
    assertDataFrameEqual(replica_traffic(replicas_df(spark, rows), HOUR), traffic(spark, [("t", 0, 3.0, 4.0)]))


def test_size_is_the_largest_of_each_replicas_latest_size(spark):
    rows = [rep(0, 1, size=200), rep(60, 1, size=50),         # shrank (retention): latest is 50
            rep(0, 2, leader=False, size=70), rep(30, 2, leader=False, size=80),
            rep(60, 3, leader=False, size=10, moving=True)]    # still being copied
    got = latest_sizes(replicas_df(spark, rows))
    assertDataFrameEqual(got, spark.createDataFrame([("t", 0, 80)], "topic string, partition int, size bigint"))


@pytest.mark.parametrize("span", [
    None,                                                # two aggregations and a join
    (0, 0, 0, 0),                                        # one aggregation over packed keys
    (0, 0, 0, 1 << 41),                                  # a size too large to pack: the join
])
def test_latest_sample_per_replica_breaks_ties_by_the_larger_value(spark, span):
    rows = [rep(0, 1, size=200), rep(60, 1, size=50), rep(60, 1, size=40),   # tie at 60: 50
            rep(0, 2, leader=True, size=7), rep(30, 2, leader=False, size=9),
            rep(30, 2, leader=True, size=8),                                  # tie at 30: leader, 9
            rep(120, 3, partition=1, leader=False, size=1 << 39)]
    df = replicas_df(spark, rows)
    if span is not None:  # what the validation pass measures, plus the case under test
        f = df.agg(F.min("ts"), F.max("ts"), F.min("size_bytes"), F.max("size_bytes")).first()
        span = (f[0], f[1], f[2], max(f[3], span[3]))
    want = spark.createDataFrame(
        [("t", 0, 1, T0.timestamp() + 60, 50, True), ("t", 0, 2, T0.timestamp() + 30, 9, True),
         ("t", 1, 3, T0.timestamp() + 120, 1 << 39, False)],
        "topic string, partition int, broker bigint, ts double, size bigint, leader boolean")
    got = replica_latest(df, span).select("topic", "partition", "broker", F.col("ts").cast("double"), "size", "leader")
    assertDataFrameEqual(got, want)


def test_broker_load_counts_replication_egress_to_followers(spark):
    # t/0 on 1 (leader), 2, 3; t/1 on 2 (leader), 3. Broker 4 reports samples but holds nothing.
    # Broker 5's replica of t/0 was moved away an hour ago: no longer in the placement.
    rows = [rep(HOUR, 1, bin_=10.0, bout=30.0), rep(HOUR, 2, leader=False), rep(HOUR, 3, leader=False),
            rep(0, 5, leader=False),
            rep(HOUR, 2, partition=1, bin_=1.0, bout=2.0), rep(HOUR, 3, partition=1, leader=False)]
    reps = replicas_df(spark, rows)
    bro = brokers_df(spark, [brk(0, 1, 1.0, 1.0), brk(HOUR, 1, 11.0, 50.0), brk(HOUR, 4, 0.5, 0.25)])
    got = broker_load(reps, replica_traffic(reps, 2 * HOUR), bro)
    want = spark.createDataFrame(
        [(1, 1, 1, 10.0, 30.0 + 2 * 10.0, 11.0, 50.0),      # consumers + one copy per follower
         (2, 2, 1, 10.0 + 1.0, 2.0 + 1 * 1.0, None, None),
         (3, 2, 0, 10.0 + 1.0, 0.0, None, None),
         (4, 0, 0, 0.0, 0.0, 0.5, 0.25)],
        "broker bigint, replicas bigint, leaders bigint, expected_bytes_in double, expected_bytes_out double, "
        "measured_rx_bytes_per_sec double, measured_tx_bytes_per_sec double")
    assertDataFrameEqual(got, want)


def _jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_malformed_rows_are_counted_not_fatal(spark, tmp_path):
    missing = rep(60, 2, leader=False)
    del missing["size_bytes"]
    path = _jsonl(tmp_path / "r.jsonl", [
        rep(0, 1), rep(60, 1),
        "{not json",                                   # does not parse
        missing,                                       # lacks a required field
        dict(rep(0, 2, leader=False), ts="yesterday"),  # ts not ISO-8601
        dict(rep(0, 3, leader=False), broker="three"),  # wrong type in one row only
    ])
    good, bad = read_samples(spark, str(path), "replica")
    assert bad == 4 and good.count() == 2


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_a_column_of_the_wrong_type_throughout_is_bad_input(spark, tmp_path, fmt):
    rows = [dict(rep(0, 1), broker=f"b{i}") for i in range(3)]
    if fmt == "jsonl":
        path = _jsonl(tmp_path / "r.jsonl", rows)
    else:
        path = tmp_path / "r.parquet"
        pq.write_table(pa.Table.from_pylist(rows), path)
    with pytest.raises(BadInput, match="column broker"):
        read_samples(spark, str(path), "replica")


def test_parquet_and_json_lines_read_alike(spark, tmp_path):
    rows = [rep(0, 1, size=5), rep(60, 2, leader=False, size=9)]
    (tmp_path / "d").mkdir()
    _jsonl(tmp_path / "d" / "a.jsonl", rows[:1])
    pq.write_table(pa.Table.from_pylist(rows[1:]), tmp_path / "d" / "b.parquet")
    good, bad = read_samples(spark, str(tmp_path / "d"), "replica")
    assert bad == 0
    assertDataFrameEqual(latest_sizes(good), latest_sizes(replicas_df(spark, rows)))


def _samples(tmp_path):
    """A small sample set: two partitions over two hours, one reassigned, one malformed row."""
    r = [rep(60 * i, 1, bin_=float(i), bout=float(2 * i), size=1000 + i) for i in range(120)]
    r += [rep(60 * i, 2, leader=False, size=1000 + i) for i in range(120)]
    r += [rep(60 * i, 2, partition=1, bin_=100.0, bout=100.0, size=50, moving=i > 100) for i in range(120)]
    r += [rep(60 * i, 3, partition=1, leader=False, size=min(50, i), moving=i > 100) for i in range(100, 120)]
    r.append("garbage")
    b = [brk(60 * i, n, rx=float(n), tx=float(2 * n), free=10 * n + i) for i in range(120) for n in (1, 2, 3)]
    (tmp_path / "replica").mkdir()
    (tmp_path / "broker").mkdir()
    _jsonl(tmp_path / "replica" / "r.jsonl", r)
    _jsonl(tmp_path / "broker" / "b.jsonl", b)
    return tmp_path / "replica", tmp_path / "broker"


def test_kit_metrics_writes_the_four_outputs_deterministically(spark, tmp_path, capsys):
    rdir, bdir = _samples(tmp_path)
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps({"version": 1, "brokers": [{"id": b} for b in (1, 2, 3)],
                                "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]},
                                               {"topic": "t", "partition": 1, "replicas": [2, 3]}]}))
    from kit.metrics.edge import run_batch

    class Heard:
        def __init__(self):
            self.stages = []

        def stage(self, name):
            self.stages.append(name)

    # The same job twice: by the CLI, then by the function it calls, which also shows where a
    # long Spark job is (stderr in the CLI): every stage, in order. (Once a test of its own, a
    # third Spark batch over the same samples.)
    out0, out1, s1 = tmp_path / "out0", tmp_path / "out1", tmp_path / "s1.json"
    assert main(["metrics", "--replica-samples", str(rdir), "--broker-samples", str(bdir), "--out", str(out0),
                 "--window", "1h", "--snapshot-in", str(snap), "--snapshot-out", str(tmp_path / "s0.json")]) == 0
    assert "skipped 1 malformed rows" in capsys.readouterr().err
    heard = Heard()
    run_batch(str(rdir), str(bdir), str(out1), "1h", snapshot_in=str(snap), snapshot_out=str(s1), progress=heard)
    assert heard.stages == ["starting Spark", "sizes, free storage and traffic from the samples", f"writing {out1}",
                            f"writing {s1}"]
    outs = [{p.name: p.read_bytes() for p in sorted(out.iterdir())} for out in (out0, out1)]
    assert (tmp_path / "s0.json").read_bytes() == s1.read_bytes()
    assert outs[0] == outs[1] and len(outs[0]) == 4
    out = tmp_path / "out0"
    assert json.loads((out / "partition_meta.json").read_text()) == {"t": {"0": {"Size": 1119}, "1": {"Size": 50}}}
    assert json.loads((out / "broker_metrics.json").read_text()) == {"1": {"StorageFree": 129}, "2": {"StorageFree": 139},
                                                                     "3": {"StorageFree": 149}}
    # t/1 reassigned from minute 101 on: every sample since is in the move or its cooldown,
    # and the 1h window starts after minute 59, so only minutes 60..100 count.
    assert pq.read_table(out / "replica_traffic.parquet").to_pylist() == [
        {"topic": "t", "partition": 0, "bytes_in": 119.0, "bytes_out": 238.0},
        {"topic": "t", "partition": 1, "bytes_in": 100.0, "bytes_out": 100.0}]
    load = {r["broker"]: r for r in pq.read_table(out / "broker_load.parquet").to_pylist()}
    assert load[2]["expected_bytes_out"] == 100.0 + 1 * 100.0 and load[1]["expected_bytes_out"] == 238.0 + 119.0
    enriched = json.loads((tmp_path / "s0.json").read_text())
    assert [p["size"] for p in enriched["partitions"]] == [1119, 50]
    assert [b["storage_free"] for b in enriched["brokers"]] == [129, 139, 149]
    assert enriched["partitions"][0]["bytes_out"] == 238.0


def test_kit_metrics_publishes_to_a_kraft_cluster_through_the_admin_api(spark, tmp_path, capsys, monkeypatch):
    """With --bootstrap the sizes and free storage go to kit's metrics directory for that
    cluster, where the Admin API backend (the planners, the auto-throttle) reads them back."""
    from kit.cluster.backend import ClusterAddress, open_backend

    rdir, bdir = _samples(tmp_path)
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps({"version": 1, "brokers": [{"id": b, "rack": None} for b in (1, 2, 3)],
                                "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]},
                                               {"topic": "t", "partition": 1, "replicas": [2, 3]}]}))
    monkeypatch.setenv("KIT_STATE_DIR", str(tmp_path / "kit"))
    state = tmp_path / "kraft"
    r = run_kit("sim", "start", "--kraft", "--snapshot", snap, "--state", state, timeout=180)
    assert r.returncode == 0, r.stderr
    try:
        bootstrap = (state / "bootstrap").read_text().strip()
        assert main(["metrics", "--replica-samples", str(rdir), "--broker-samples", str(bdir),
                     "--out", str(tmp_path / "out"), "--window", "1h", "--bootstrap", bootstrap]) == 0
        with open_backend(ClusterAddress(bootstrap=bootstrap)) as backend:
            published, _ = backend.broker_metrics()
    finally:
        run_kit("sim", "stop", "--state", state, timeout=120)
    assert published == json.loads((tmp_path / "out" / "broker_metrics.json").read_text())
    said = capsys.readouterr().out.splitlines()[-1]
    assert said.startswith("wrote the partition sizes and broker metrics in " + str(tmp_path / "kit")), said
    assert said.endswith(f"for {bootstrap}")


def test_bad_input_is_one_line_exit_2_and_nothing_written(spark, tmp_path, capsys):
    rdir, bdir = _samples(tmp_path)
    out = tmp_path / "out"
    r = run_kit("metrics", "--replica-samples", tmp_path / "nope", "--broker-samples", bdir, "--out", out)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "nope" in r.stderr and not out.exists()
    _jsonl(tmp_path / "wrong.jsonl", [dict(rep(0, 1), size_bytes="big")] * 3)
    capsys.readouterr()
    assert main(["metrics", "--replica-samples", str(tmp_path / "wrong.jsonl"), "--broker-samples", str(bdir),
                 "--out", str(out)]) == 2
    # Progress lines (a slow machine prints them, a fast one not) are not the error.
    err = [x for x in capsys.readouterr().err.splitlines() if not PROGRESS_LINE.fullmatch(x)]
    assert len(err) == 1 and "column size_bytes" in err[0] and not out.exists()
    assert main(["metrics", "--replica-samples", str(rdir), "--broker-samples", str(bdir), "--out", str(out),
                 "--window", "two days"]) == 2 and not out.exists()


def test_help_has_an_example():
    r = run_kit("metrics", "--help")
    assert r.returncode == 0 and "example:" in r.stdout and "kit metrics --replica-samples" in r.stdout


def test_follow_keeps_per_broker_rates_of_the_newest_window(spark, tmp_path):
    bdir = tmp_path / "broker"
    bdir.mkdir()
    # Two files (two scrapes of a 5-minute window ending at 00:10) and a file of an older window.
    _jsonl(bdir / "1.jsonl", [brk(300, 1, 10.0, 20.0), brk(300, 2, 1.0, 1.0)])
    _jsonl(bdir / "2.jsonl", [brk(420, 1, 30.0, 40.0), "oops"])
    _jsonl(bdir / "0.jsonl", [brk(0, 1, 999.0, 999.0)])
    out = tmp_path / "out"
    assert main(["metrics", "--follow", "--once", "--broker-samples", str(bdir), "--out", str(out),
                 "--window", "5m"]) == 0
    doc = json.loads((out / "broker_rates.json").read_text())
    assert doc == {"1": {"window_end": iso(600), "rx_bytes_per_sec": 20.0, "tx_bytes_per_sec": 30.0, "samples": 2},
                   "2": {"window_end": iso(600), "rx_bytes_per_sec": 1.0, "tx_bytes_per_sec": 1.0, "samples": 1}}


_chroots = itertools.count()


def test_simulator_samples_end_to_end_through_zookeeper(spark, zookeeper, tmp_path):
    """The simulated controller copies one partition to a new broker while writing samples;
    kit metrics then writes kafka-kit's znodes, which `kit snapshot` reads back."""
    from kit.cluster.zk.layout import connect
    from kit.cluster.zk.read import read_cluster

    cap = 100e6
    snap = tmp_path / "cluster.json"
    parts = [{"topic": "t", "partition": i, "replicas": [1 + i % 3, 1 + (i + 1) % 3], "size": (i + 1) * 10**9,
              "bytes_in": 1e6 * (i + 1), "bytes_out": 2e6 * (i + 1)} for i in range(6)]
    snap.write_text(json.dumps({"version": 1, "brokers": [
        {"id": b, "rack": None, "net_capacity": cap, "storage_total": 10**13, "storage_free": 9 * 10**12}
        for b in (1, 2, 3, 4)], "partitions": parts}))
    root = f"{zookeeper}/kit-metrics-{next(_chroots)}"
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 5, "replicas": [3, 4]}]}))
    samples = tmp_path / "samples"
    try:
        assert run_kit("sim", "seed", "--zk", root, "--snapshot", snap).returncode == 0
        assert run_kit("apply", plan, "--zk", root, "--throttle", "10000000").returncode == 0
        # 6 GB at 10 MB/s: ten simulated minutes, sampled every minute.
        r = run_kit("sim", "run", "--zk", root, "--speed", "100000", "--until-idle", "--max-seconds", "60",
                    "--samples", samples, "--sample-every", "60")
        assert r.returncode == 0, r.stderr
        out = tmp_path / "out"
        assert main(["metrics", "--replica-samples", str(samples / "replica"), "--broker-samples",
                     str(samples / "broker"), "--out", str(out), "--zk", root]) == 0
        client = connect(root)
        try:
            cluster, _ = read_cluster(client)
        finally:
            client.stop()
    finally:
        run_kit("sim", "stop", "--zk", root)
    assert {p.partition: p.size for p in cluster.partitions} == {p["partition"]: p["size"] for p in parts}
    assert all(b.storage_free is not None and b.storage_free < 10**13 for b in cluster.brokers.values())
    traffic_rows = {r["partition"]: r for r in pq.read_table(out / "replica_traffic.parquet").to_pylist()}
    # t/5 was reassigning in every sample but the last, which falls in its cooldown.
    assert sorted(traffic_rows) == [0, 1, 2, 3, 4]
    assert all(traffic_rows[i]["bytes_in"] == pytest.approx(parts[i]["bytes_in"]) for i in range(5))
    # Brokers 1 and 2 do not hold t/5 (leader 3, follower 4 now): their expected load matches
    # what the simulator measured, replication egress to followers included.
    load = {r["broker"]: r for r in pq.read_table(out / "broker_load.parquet").to_pylist()}
    for b in (1, 2):
        assert load[b]["expected_bytes_out"] == pytest.approx(load[b]["measured_tx_bytes_per_sec"])
        assert load[b]["expected_bytes_in"] == pytest.approx(load[b]["measured_rx_bytes_per_sec"])
