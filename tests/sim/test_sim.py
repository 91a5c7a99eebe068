"""The offline simulator (kit/sim/physics.py): design.md's physics, checked on cases with known answers."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kit.errors import BadInput
from kit.formats import cluster_from_snapshot
from kit.sim.physics import simulate

CAP = 100e6


def cluster(partitions, brokers=(1, 2, 3, 4)):
    return cluster_from_snapshot({"version": 1, "brokers": [{"id": b, "net_capacity": CAP} for b in brokers],
                                  "partitions": partitions})


def test_one_partition_at_a_fixed_rate_without_client_load_takes_size_over_rate():
    c = cluster([{"topic": "t", "partition": 0, "replicas": [1], "size": 10**9}])
    res = simulate(c, [{"topic": "t", "partition": 0, "replicas": [1, 2]}], throttle=25e6)
    assert res["completion_s"] == pytest.approx(40.0)
    assert res["bytes_moved"] == 10**9 and res["saturated_broker_seconds"] == 0


def test_flows_share_a_brokers_cap_fairly():
    # Broker 1 sends two copies at once; each gets half of its 50 MB/s throttle.
    c = cluster([{"topic": "t", "partition": 0, "replicas": [1], "size": 10**9},
                 {"topic": "t", "partition": 1, "replicas": [1], "size": 10**9}])
    res = simulate(c, [{"topic": "t", "partition": 0, "replicas": [1, 2]},
                       {"topic": "t", "partition": 1, "replicas": [1, 3]}], throttle=50e6)
    assert res["completion_s"] == pytest.approx(40.0)


def test_unthrottled_copies_beside_client_traffic_saturate_and_beat_the_lower_bound():
    c = cluster([{"topic": "t", "partition": 0, "replicas": [1], "size": 10**9}])
    res = simulate(c, [{"topic": "t", "partition": 0, "replicas": [1, 2]}], client_load=0.5)
    # The copy takes the whole NIC (10 s) while clients use half of broker 1's: broker 1 is
    # saturated sending; broker 2, empty, carries no clients until the copy joins the ISR.
    assert res["completion_s"] == pytest.approx(10.0)
    assert res["lower_bound_s"] == pytest.approx(20.0)
    assert res["saturated_broker_seconds"] == pytest.approx(10.0)


def test_a_spike_counts_saturation_only_while_it_lasts():
    c = cluster([{"topic": "t", "partition": 0, "replicas": [1], "size": 60 * 10**9}])
    flat = simulate(c, [{"topic": "t", "partition": 0, "replicas": [1, 2]}], throttle=40e6, client_load=0.5)
    spike = simulate(c, [{"topic": "t", "partition": 0, "replicas": [1, 2]}], throttle=40e6, client_load=0.5,
                     traffic="spike")
    assert flat["saturated_broker_seconds"] == 0
    assert 0 < spike["saturated_broker_seconds"] <= 2 * 600


def test_bad_requests_are_bad_input():
    c = cluster([{"topic": "t", "partition": 0, "replicas": [1], "size": 1}])
    with pytest.raises(BadInput):
        simulate(c, [{"topic": "t", "partition": 0, "replicas": [1, 9]}])
    with pytest.raises(BadInput):
        simulate(c, [], client_load=1.5)


def test_cli_simulate(tmp_path):
    snap, plan, out = tmp_path / "c.json", tmp_path / "p.json", tmp_path / "r.json"
    snap.write_text(json.dumps({"version": 1, "brokers": [{"id": b, "net_capacity": CAP} for b in (1, 2)],
                                "partitions": [{"topic": "t", "partition": 0, "replicas": [1], "size": 10**9}]}))
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}))
    exe = str(Path(sys.executable).parent / "kit")
    r = subprocess.run([exe, "simulate", "--snapshot", str(snap), "--plan", str(plan), "--throttle", "10000000",
                        "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["completion_s"] == pytest.approx(100.0)
    r = subprocess.run([exe, "simulate", "--snapshot", str(snap), "--plan", str(plan), "--throttle", "fast",
                        "--out", str(tmp_path / "x.json")], capture_output=True, text=True)
    assert r.returncode == 2 and not (tmp_path / "x.json").exists()
