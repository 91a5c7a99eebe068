"""`kit metrics --follow` end to end: the simulated controller writes broker samples while it
copies a partition, and the streaming job keeps DIR/broker_rates.json current as they land.

The stream runs in a thread of this process on the session's Spark (bounded by a stop event
and a time limit, as `kit.metrics.edge.follow` allows); the simulator is kit's simulated controller
over a real ZooKeeper, stepped 30 simulated seconds at a time (a sample each), and every
fourth step waits for the stream to show the samples so far: however slow the machine, the
test sees the windows go by (it never depends on the stream keeping pace with a clock). A
window holds four steps, so each look's newest window is the one after the last look's and
every window is shown once; a look every step or every second step cost a micro-batch each
(~2 s of wall time on 2 quiet cores, ~5 s loaded) and showed nothing more. The rates written
are checked against the sample files themselves.
"""
from __future__ import annotations

import itertools
import json
import math
import threading
import time
from datetime import datetime, timezone

import pytest

pytest.importorskip("pyspark")

from kit.sim.controller import SimController  # noqa: E402
from kit.cluster.zk.layout import connect  # noqa: E402
from tests.conftest import run_kit  # noqa: E402

WINDOW_S = 120  # `--window 2m`: a window per 4 steps of the simulator
STEP_S = 30.0  # simulated seconds per step, one sample each
STEPS_PER_LOOK = 4  # steps between looks at the stream's output: a window's worth
WAIT_S = 240  # the most one micro-batch may take on a loaded machine

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


@pytest.mark.slow
def test_follow_keeps_broker_rates_current_while_the_simulator_writes_samples(spark, zookeeper, tmp_path):
    from kit.metrics.edge import follow

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
                                  max_seconds=3600))
        except Exception as e:  # noqa: BLE001  (reported by the test thread below)
            errors.append(e)

    def shown():
        try:
            return json.loads((out / "broker_rates.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def wait_for(want: dict) -> dict:
        """The stream's output once it shows broker 1's newest window with all its samples."""
        deadline = time.monotonic() + WAIT_S
        while (got := shown()).get("1", {}).get("window_end") != want["1"]["window_end"] or \
                got["1"]["samples"] != want["1"]["samples"]:
            assert not errors, errors
            assert streamer.is_alive() and time.monotonic() < deadline, f"the stream fell behind: {got}, want {want}"
            time.sleep(0.2)
        return got

    streamer = threading.Thread(target=stream, daemon=True)
    streamer.start()
    # 6 GB at 10 MB/s is 600 simulated seconds: 20 steps of 30 s, a sample each, five windows.
    client = connect(root)
    seen = set()
    try:
        ctl = SimController(client, speed=1.0, samples_dir=str(samples), sample_every=STEP_S)
        for _ in range(100 // STEPS_PER_LOOK):
            for _ in range(STEPS_PER_LOOK):
                ctl.step(STEP_S)
                ctl.write_samples()
            seen.add(wait_for(expected_rates(samples / "broker"))["1"]["window_end"])
            if not ctl.busy():
                break
        assert not ctl.busy(), "the copy did not finish in 100 steps"
    finally:
        client.stop()
        client.close()
        stop.set()
        streamer.join(timeout=WAIT_S)
        run_kit("sim", "stop", "--zk", root)
    assert not errors, errors
    assert not streamer.is_alive()
    files = sorted((samples / "broker").glob("*.jsonl"))
    assert len(files) >= 10, "the simulator wrote too few samples for a moving window"
    # Updated while the samples arrived: every window was shown, not only the last one.
    assert len(seen) >= 5, seen
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
