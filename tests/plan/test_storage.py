"""Storage placement (kit/plan/storage.py): free disk evened out with the fewest bytes moved."""
from __future__ import annotations

import pytest

from kit import plan as planners
from kit.errors import BadInput, Unsafe
from kit.report.figures import assignment_figures, movement_figures
from kit.formats import cluster_from_snapshot

from test_plan_properties import generate, pytestmark  # noqa: F401  (skips without shared/)


def figures(plan):
    before = plan.cluster.assignment()
    return (assignment_figures(plan.cluster, before, plan.targets),
            assignment_figures(plan.cluster, plan.after, plan.targets),
            movement_figures(plan.cluster, before, plan.after, plan.targets))


@pytest.mark.parametrize("seed,racks", [(1, 3), (2, 3), (3, 0), (4, 4)])
def test_storage_rebalance_meets_the_targets_on_skewed_storage(seed, racks):
    c = generate(brokers=24, racks=racks, partitions=3000, scenario="skewed-storage", seed=seed)
    plan = planners.plan_rebalance(c, placement="storage")
    before, after, mv = figures(plan)
    assert after["storage_free_range_spread_pct"] <= 2.0
    assert mv["bytes_moved_gb"] <= 1.3 * mv["bytes_lower_bound_to_mean_gb"]
    assert after["rack_violations"] == 0
    assert after["leader_count_spread"] <= 1


def test_brokers_of_different_sizes_balance_by_utilisation():
    brokers = [{"id": 1, "rack": "a", "storage_total": 1000, "storage_free": 100},
               {"id": 2, "rack": "b", "storage_total": 1000, "storage_free": 100},
               {"id": 3, "rack": "a", "storage_total": 3000, "storage_free": 3000},
               {"id": 4, "rack": "b", "storage_total": 3000, "storage_free": 3000}]
    parts = [{"topic": "t", "partition": i, "replicas": [1, 2], "size": 50} for i in range(18)]
    c = cluster_from_snapshot({"version": 1, "brokers": brokers, "partitions": parts})
    plan = planners.plan_rebalance(c, placement="storage")
    used = {b: sum(50 for reps in plan.after if b in reps) for b in (1, 2, 3, 4)}
    util = {b: used[b] / (1000 if b < 3 else 3000) for b in used}
    assert max(util.values()) - min(util.values()) <= 0.06
    assert used[3] > used[1]


def test_a_full_broker_is_never_a_destination_and_a_short_plan_names_it():
    brokers = [{"id": 1, "rack": "a", "storage_total": 1000, "storage_free": 0, "alive": False},
               {"id": 2, "rack": "b", "storage_total": 1000, "storage_free": 0},
               {"id": 3, "rack": "a", "storage_total": 1000, "storage_free": 400}]
    parts = [{"topic": "t", "partition": 0, "replicas": [1, 2], "size": 500},
             {"topic": "t", "partition": 1, "replicas": [2, 1], "size": 500}]
    c = cluster_from_snapshot({"version": 1, "brokers": brokers, "partitions": parts})
    with pytest.raises(Unsafe, match=r"broker 3 \(the most free\) is 100 bytes"):
        planners.plan_rebuild(c, placement="storage")


def test_storage_placement_without_storage_figures_is_bad_input():
    c = cluster_from_snapshot({"version": 1, "brokers": [{"id": 1}, {"id": 2}],
                               "partitions": [{"topic": "t", "partition": 0, "replicas": [1], "size": 5}]})
    with pytest.raises(BadInput, match="no storage_free"):
        planners.plan_rebalance(c, placement="storage")


def test_storage_placement_with_free_storage_only_takes_the_disk_as_the_partitions():
    """kafka-kit's brokermetrics znode gives StorageFree and nothing else."""
    brokers = [{"id": 1, "storage_free": 100}, {"id": 2, "storage_free": 100}, {"id": 3, "storage_free": 1000}]
    parts = [{"topic": "t", "partition": i, "replicas": [1 + i % 2], "size": 400} for i in range(4)]
    c = cluster_from_snapshot({"version": 1, "brokers": brokers, "partitions": parts})
    plan = planners.plan_rebalance(c, placement="storage")
    after = [reps for reps in plan.after]
    assert sum(1 for reps in after if reps == [3]) >= 1  # the emptiest disk takes data


def test_storage_placement_without_sizes_is_bad_input():
    brokers = [{"id": b, "storage_total": 10, "storage_free": 10} for b in (1, 2)]
    c = cluster_from_snapshot({"version": 1, "brokers": brokers,
                               "partitions": [{"topic": "t", "partition": 0, "replicas": [1]}]})
    with pytest.raises(BadInput, match="sizes"):
        planners.plan_rebalance(c, placement="storage")


def test_force_rebuild_by_storage_places_every_partition_rack_safe_and_even():
    c = generate(brokers=12, racks=3, partitions=600, scenario="skewed-storage", seed=5)
    plan = planners.plan_rebuild(c, placement="storage", force_rebuild=True)
    _, after, _ = figures(plan)
    assert after["rack_violations"] == 0
    assert after["storage_free_range_spread_pct"] <= 2.0


def test_optimize_storage_needs_storage_placement():
    c = generate(brokers=6, racks=3, partitions=60, scenario="balanced", seed=1)
    with pytest.raises(BadInput, match="--placement storage"):
        planners.plan_rebuild(c, optimize="storage")


def test_cli_storage_placement_bad_input_is_one_line_and_writes_nothing(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    snap = tmp_path / "no-storage.json"
    snap.write_text(json.dumps({"version": 1, "brokers": [{"id": 1}, {"id": 2}],
                                "partitions": [{"topic": "t", "partition": 0, "replicas": [1], "size": 5}]}))
    exe = Path(sys.executable).parent / "kit"
    out = tmp_path / "out"
    out.mkdir()
    r = subprocess.run([str(exe), "plan", "rebalance", "--placement", "storage", "--snapshot", str(snap),
                        "--out", str(out / "plan.json")], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "storage_free" in r.stderr
    assert list(out.iterdir()) == []
