"""Capacity planning arithmetic (kit/capacity.py)."""
from __future__ import annotations

import math

import pytest

from kit.capacity import InstanceType, Workload, brokers_needed, cheapest, grown, plan_capacity, workloads
from kit.errors import BadInput
from kit.formats import cluster_from_snapshot

SMALL = InstanceType("small", net_bytes_per_sec=100e6, storage_bytes=1e12, cost_per_hour=1.0)
BIG = InstanceType("big", net_bytes_per_sec=400e6, storage_bytes=8e12, cost_per_hour=5.0)


def test_each_dimension_and_the_largest():
    # 30 MB/s in, RF 3: 90 MB/s arrives; at 60% of 100 MB/s that is 2 brokers. Out: 4x fan-out
    # (120 MB/s) plus 60 MB/s to followers = 180 MB/s -> 3 brokers. Storage: 2 TB x 3 at 60% of
    # 1 TB -> 10 brokers: storage decides.
    w = Workload("t", bytes_in=30e6, bytes_out=120e6, stored_bytes=2e12, replication=3)
    need = brokers_needed(w, SMALL, 0.6)
    assert (need["inbound"], need["outbound"], need["storage"]) == (2, 3, 10)
    assert need["brokers"] == 10 and need["limited_by"] == "storage"


def test_never_fewer_brokers_than_replicas():
    assert brokers_needed(Workload("t", 1.0, 1.0, 1.0, 3), SMALL)["brokers"] == 3


def test_cheapest_type_first():
    w = Workload("t", bytes_in=30e6, bytes_out=120e6, stored_bytes=2e12, replication=3)
    rows = cheapest(w, [SMALL, BIG])
    # small: 10 brokers x 1.0 = 10.0/h; big: max(1, 1, 2, 3) = 3 brokers x 5.0 = 15.0/h
    assert [(r["instance_type"], r["brokers"], r["cost_per_hour"]) for r in rows] == [
        ("small", 10, 10.0), ("big", 3, 15.0)]


def test_growth_compounds_and_says_how_many_brokers_to_add():
    w = Workload("t", bytes_in=10e6, bytes_out=10e6, stored_bytes=1e12, replication=3, brokers_now=5)
    assert math.isclose(grown(w, 0.1, 12).stored_bytes, 1e12 * 1.1 ** 12)
    (row,) = plan_capacity([w], [SMALL, BIG], SMALL, 0.6, growth_per_month=0.1, months=12)
    assert row["needed_now"] == 5 and row["needed_after_growth"] == 16 and row["brokers_to_add"] == 11


def test_workloads_per_topic_and_per_group():
    c = cluster_from_snapshot({"version": 1, "brokers": [{"id": b} for b in (1, 2, 3)], "partitions": [
        {"topic": "a", "partition": 0, "replicas": [1, 2], "size": 10, "bytes_in": 5.0, "bytes_out": 20.0},
        {"topic": "a", "partition": 1, "replicas": [2, 3], "size": 30, "bytes_in": 5.0, "bytes_out": 20.0},
        {"topic": "b", "partition": 0, "replicas": [3, 1, 2], "size": 7, "bytes_in": 1.0, "bytes_out": 1.0}]})
    by_topic = {w.name: w for w in workloads(c)}
    assert (by_topic["a"].bytes_in, by_topic["a"].fanout, by_topic["a"].stored_bytes) == (10.0, 4.0, 40)
    assert by_topic["b"].replication == 3 and by_topic["a"].brokers_now == 3
    (pool,) = workloads(c, {"all": "a|b"}, retention_seconds=100)
    assert pool.stored_bytes == 1100.0 and pool.replication == 3
    with pytest.raises(BadInput, match="two groups"):
        workloads(c, {"x": "a", "y": "a|b"})


def test_target_utilisation_out_of_range_is_bad_input():
    with pytest.raises(BadInput):
        brokers_needed(Workload("t", 1, 1, 1, 1), SMALL, 1.5)
