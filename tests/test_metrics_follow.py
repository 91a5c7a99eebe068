"""`kit metrics --follow` end to end: the simulated controller writes broker samples while it
copies a partition, and the streaming job keeps DIR/broker_rates.json current as they land.

The stream runs in a thread of this process on the session's Spark (bounded by a stop event
and a time limit, as `kit.metrics.follow` allows); the simulator is the real `kit sim run`
in a child process. The rates written are checked against the sample files themselves.
"""
from __future__ import annotations

import itertools
import json
import math
import subprocess
import threading
import time
from datetime import datetime, timezone

import pytest

pytest.importorskip("pyspark")

from tests.conftest import kit_command, run_kit  # noqa: E402

WINDOW_S = 120  # `--window 2m`: one window per 2 wall seconds at --speed 60

_chroots = itertools.count()


def expected_rates(broker_dir) -> dict:
    """broker_rates.json worked out from the sample files: each broker's newest 2-minute
    window (ending on a multiple of the window) and its mean rx/tx over the samples in it.

    Rows kit counts as malformed are left out the same way: a fractional number in an
    integer column (JSON `8.9e12` for `storage_free_bytes`) does not fit the schema (the
    simulator writes none: asserted below).
    """
    rows = [json.loads(line) for f in sorted(broker_dir.glob("*.jsonl")) for line in f.read_text().splitlines()]
    by_window: dict[tuple[int, int], list[dict]] = {}
    for r in rows:
        assert not any(isinstance(r.get(c), float) for c in ("broker", "storage_total_bytes", "storage_free_bytes")), r
        ts = int(datetime.fromisoformat(r["ts"].replace("Z", "+00:00")).timestamp())
        end = (ts // WINDOW_S + 1) * WINDOW_S
        by_window.setdefault((r["broker"], end), []).append(r)
    out = {}
    for b in sorted({b for b, _ in by_window}):
        end = max(e for bb, e in by_window if bb == b)
        rs = by_window[(b, end)]
        out[str(b)] = {"window_end": datetime.fromtimestamp(end, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                       "rx_bytes_per_sec": sum(r["net_rx_bytes_per_sec"] for r in rs) / len(rs),
                       "tx_bytes_per_sec": sum(r["net_tx_bytes_per_sec"] for r in rs) / len(rs),
                       "samples": len(rs)}
    return out


def test_follow_keeps_broker_rates_current_while_the_simulator_writes_samples(spark, zookeeper, tmp_path):
    from kit.metrics import follow

    snap = tmp_path / "cluster.json"
    parts = [{"topic": "t", "partition": i, "replicas": [1 + i % 3, 1 + (i + 1) % 3], "size": (i + 1) * 10**9,
              "bytes_in": 1e6 * (i + 1), "bytes_out": 2e6 * (i + 1)} for i in range(6)]
    snap.write_text(json.dumps({"version": 1, "brokers": [
        {"id": b, "rack": None, "net_capacity": 100e6, "storage_total": 10**13, "storage_free": 9 * 10**12}
        for b in (1, 2, 3, 4)], "partitions": parts}))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 5, "replicas": [3, 4]}]}))
    root = f"{zookeeper}/kit-follow-{next(_chroots)}"
    samples, out = tmp_path / "samples", tmp_path / "out"
    (samples / "broker").mkdir(parents=True)
    assert run_kit("sim", "seed", "--zk", root, "--snapshot", snap).returncode == 0
    assert run_kit("apply", plan, "--zk", root, "--throttle", "10000000").returncode == 0

    stop, errors, batches = threading.Event(), [], []

    def stream():
        try:
            batches.append(follow(str(samples / "broker"), str(out), "2m", poll_seconds=0.5, stop=stop,
                                  max_seconds=40))
        except Exception as e:  # noqa: BLE001  (reported by the test thread below)
            errors.append(e)

    streamer = threading.Thread(target=stream, daemon=True)
    streamer.start()
    # 6 GB at 10 MB/s is 600 simulated seconds: about 10 wall seconds at --speed 60, with a
    # sample every 30 simulated seconds (0.5 s of wall time), long enough for the stream
    # to show several windows as they fill.
    sim = subprocess.Popen([*kit_command(), "sim", "run", "--zk", root, "--speed", "60", "--until-idle",
                            "--max-seconds", "30", "--samples", str(samples), "--sample-every", "30"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = set()
    try:
        while sim.poll() is None:
            try:
                doc = json.loads((out / "broker_rates.json").read_text())
                seen.add(doc["1"]["window_end"])
            except (FileNotFoundError, KeyError, json.JSONDecodeError):
                pass
            time.sleep(0.1)
        _, err = sim.communicate(timeout=30)
        assert sim.returncode == 0, err
    finally:
        if sim.poll() is None:
            sim.kill()
        stop.set()
        streamer.join(timeout=60)
        run_kit("sim", "stop", "--zk", root)
    assert not errors, errors
    assert not streamer.is_alive()
    files = sorted((samples / "broker").glob("*.jsonl"))
    assert len(files) >= 10, "the simulator wrote too few samples for a moving window"
    # Updated while the samples arrived: several windows were shown, not only the last one.
    assert len(seen) >= 2, seen
    assert batches[0] >= 2
    got = json.loads((out / "broker_rates.json").read_text())
    want = expected_rates(samples / "broker")
    assert got.keys() == want.keys() and {"1", "2", "3"} <= got.keys()
    for b, w in want.items():
        assert got[b]["window_end"] == w["window_end"] and got[b]["samples"] == w["samples"], (b, got[b], w)
        for k in ("rx_bytes_per_sec", "tx_bytes_per_sec"):
            assert math.isclose(got[b][k], w[k], rel_tol=1e-9), (b, k, got[b][k], w[k])
    # Broker 3 leads t/5 and sends the copy at the throttle rate on top of its client traffic.
    assert got["3"]["tx_bytes_per_sec"] > 0
