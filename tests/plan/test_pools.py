"""Topic pools (kit/plan/pools.py, kit/plan/pooled.py): each pool planned on its own brokers."""
from __future__ import annotations

import json

import pytest

from conftest import run_kit as kit
from kit import plan as planners
from kit.errors import BadInput
from kit.report.figures import plan_report
from kit.plan.pooled import plan_pooled
from kit.plan.pools import load_pools, parse_pools, topics_by_pool

from test_plan_properties import generate, pytestmark  # noqa: F401  (skips without shared/)

POOLS = {"pools": {"small": {"topics": "topic-000[0-4]", "brokers": ["1001-1012"]},
                   "big": {"topics": "topic-00(0[5-9]|1.)", "brokers": ["1013..1024", 1025, 1026, 1027]}}}


def test_ranges_and_ids_expand_and_pools_come_sorted_by_name():
    pools = parse_pools(POOLS)
    assert [p.name for p in pools] == ["big", "small"]
    assert pools[0].brokers == tuple(range(1013, 1028))
    assert pools[1].brokers == tuple(range(1001, 1013))


@pytest.mark.parametrize("doc,match", [
    ({"pools": {"a": {"topics": "x("}}}, "needs 'topics' and 'brokers'"),
    ({"pools": {"a": {"topics": "x(", "brokers": [1]}}}, "not a valid regular expression"),
    ({"pools": {"a": {"topics": "x", "brokers": ["9-1"]}}}, "neither an id nor"),
    ([], "expected a mapping"),
    # A pool's brokers are its own: each pool's plan would fill a shared broker as if alone.
    ({"a": {"topics": "x", "brokers": ["1-3"]}, "b": {"topics": "y", "brokers": [3, 4]}},
     "broker 3 is in two pools, a and b"),
])
def test_malformed_pools_are_bad_input(doc, match):
    with pytest.raises(BadInput, match=match):
        parse_pools(doc)


def test_a_topic_in_two_pools_is_bad_input():
    c = generate(brokers=12, racks=3, partitions=200, topics=4, scenario="balanced", seed=1)
    pools = parse_pools({"a": {"topics": "topic-000[01]", "brokers": ["1001-1006"]},
                         "b": {"topics": "topic-0001", "brokers": ["1007-1012"]}})
    with pytest.raises(BadInput, match="topic-0001 is in two pools"):
        topics_by_pool(c, pools)


def test_a_pool_matching_no_topic_is_bad_input_naming_it(tmp_path, snapshots):
    c = generate(brokers=12, racks=3, partitions=200, topics=4, scenario="balanced", seed=1)
    pools = parse_pools({"a": {"topics": "topic-000[01]", "brokers": ["1001-1006"]},
                         "typo": {"topics": "topci-.*", "brokers": ["1007-1012"]}})
    with pytest.raises(BadInput, match="pool typo: topics 'topci-.\\*' match no topic"):
        topics_by_pool(c, pools)
    # From the command line: one line, exit 2, no traceback (it was a ValueError's).
    path = tmp_path / "pools.json"
    path.write_text(json.dumps({"pools": {"typo": {"topics": "topci-.*", "brokers": ["1001-1015"]}}}))
    r = kit("plan", "rebalance", "--snapshot", str(snapshots["scale-out"]), "--pools", str(path),
            "--out", str(tmp_path / "x.json"))
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [r.stderr.strip()] and "match no topic" in r.stderr
    assert not (tmp_path / "x.json").exists()


def test_an_unreadable_pools_file_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="no such file"):
        load_pools(str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("pools: [unclosed")
    with pytest.raises(BadInput, match="not valid YAML"):
        load_pools(str(bad))


def test_each_pool_ends_on_its_own_brokers_balanced_with_the_fewest_copies():
    c = generate(brokers=24, racks=3, partitions=3000, scenario="scale-out", add=3, seed=1)
    plan = plan_pooled(c, parse_pools(POOLS), lambda cl, topics, brokers: planners.plan_rebalance(
        cl, topics=topics, brokers=brokers), "rebalance")
    report = plan_report(plan)
    for name, pool in report["pools"].items():
        assert pool["after"]["replicas_off_target"] == 0, name
        assert pool["after"]["replica_count_spread"] <= 1, name
        assert pool["after"]["leader_count_spread"] <= 1, name
        mv = pool["movement"]
        assert mv["replica_additions"] <= 1.05 * mv["additions_lower_bound_count_balanced"], name




def test_cli_pools_report_and_refusals(tmp_path, snapshots):
    pools = tmp_path / "pools.json"
    pools.write_text(json.dumps({"pools": {"all": {"topics": ".*", "brokers": ["1001-1015"]}}}))
    out, rep = tmp_path / "plan.json", tmp_path / "report.json"
    r = kit("plan", "scale-out", "--snapshot", str(snapshots["scale-out"]), "--pools", str(pools),
            "--out", str(out), "--report", str(rep))
    assert r.returncode == 0, r.stderr
    assert "all" in json.loads(rep.read_text())["pools"] and "Pools:" in r.stdout
    for extra in (["--topics", "topic-0001"], []):
        action = ["rebalance", *extra] if extra else ["replace", "--replace", "1001:1013"]
        r = kit("plan", *action, "--snapshot", str(snapshots["scale-out"]), "--pools", str(pools),
                "--out", str(tmp_path / "x.json"))
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "x.json").exists()
