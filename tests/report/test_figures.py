"""kit.report.figures against shared/tools/evaluate_plan.py, and the text summary."""
from __future__ import annotations

import json
import os
import random
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kit.report import arrays, figures
from kit.report.figures import assignment_figures, movement_figures, plan_report
from kit.report.summary import summary_text
from kit.formats import cluster_from_snapshot, load_snapshot, plan_text
from kit.model import Broker, Cluster, Partition, Plan
from kit.plan import plan_remove

# shared/ sits beside the clone (as in the Makefile); SHARED points elsewhere.
TOOLS = Path(os.environ.get("SHARED", Path(__file__).resolve().parents[3] / "shared")) / "tools"
GEN = TOOLS / "gen_cluster.py"
EVALUATE = TOOLS / "evaluate_plan.py"
needs_tools = pytest.mark.skipif(not (GEN.exists() and EVALUATE.exists()),
                                 reason=f"shared tools not found in {TOOLS} (set SHARED)")

# run_path compiles from source and writes no bytecode next to the shared tool.
EV = runpy.run_path(str(EVALUATE)) if EVALUATE.exists() else {}


def gen_cluster(tmp_path: Path, name: str, *args: str) -> Path:
    out = tmp_path / f"{name}.json"
    subprocess.run([sys.executable, str(GEN), *args, "--out", str(out)], check=True)
    return out


def evaluate(snapshot: Path, plan: Path, brokers: list[int] | None = None) -> dict:
    cmd = [sys.executable, str(EVALUATE), str(snapshot), str(plan), "--json"]
    if brokers is not None:
        cmd += ["--brokers", ",".join(map(str, brokers))]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


def scramble(cluster: Cluster, targets: list[int], seed: int, evacuate: bool = True) -> list[list[int]]:
    """A random but valid assignment: replicas moved, reordered, added and dropped."""
    rng = random.Random(seed)
    tset = set(targets)
    out = []
    for p in cluster.partitions:
        reps = list(p.replicas)
        if not tset.issuperset(reps):
            # A partition on a non-target broker is either left alone (not selected) or evacuated.
            if not evacuate or rng.random() < 0.15:
                out.append(reps)
                continue
            for k, b in enumerate(reps):
                if b not in tset:
                    reps[k] = rng.choice([x for x in targets if x not in reps])
        r = rng.random()
        free = [x for x in targets if x not in reps]
        if r < 0.3 and free:
            reps[rng.randrange(len(reps))] = rng.choice(free)
        elif r < 0.45:
            rng.shuffle(reps)
        elif r < 0.55 and len(reps) > 1:
            reps[0], reps[1] = reps[1], reps[0]
        elif r < 0.58 and free:
            reps.append(rng.choice(free))
        elif r < 0.6 and len(reps) > 1:
            reps.pop(rng.randrange(len(reps)))
        out.append(reps)
    return out


def check_against_evaluate(tmp_path: Path, snapshot: Path, plan: Plan, brokers: list[int] | None) -> dict:
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(plan_text(plan))
    ev = evaluate(snapshot, plan_path, brokers)
    cluster, targets = plan.cluster, plan.targets
    report = plan_report(plan)
    for key in ("before", "after", "movement"):
        assert list(report[key]) == list(ev[key]), key
        assert report[key] == ev[key], key
    assert assignment_figures(cluster, cluster.assignment(), targets) == ev["before"]
    assert assignment_figures(cluster, plan.after, targets) == ev["after"]
    assert movement_figures(cluster, cluster.assignment(), plan.after, targets) == ev["movement"]
    # Plain Python numbers, so the report serialises as it is.
    assert json.loads(json.dumps(report)) == report
    return report


SCENARIOS = [
    ("replace", 3, ["--dead", "2"]),
    ("replace", 0, ["--dead", "1"]),
    ("az-loss", 3, []),
    ("az-loss", 2, []),
    ("scale-out", 3, ["--add", "3"]),
    ("scale-out", 0, ["--add", "2"]),
    ("drift", 2, []),
    ("drift", 0, []),
    ("skewed-storage", 3, []),
    ("skewed-storage", 2, []),
    ("skewed-leaders", 3, []),
    ("balanced", 0, []),
]


@needs_tools
@pytest.mark.parametrize("scenario,racks,extra", SCENARIOS)
def test_figures_match_evaluate_plan(tmp_path, scenario, racks, extra):
    seed = len(scenario) * 7 + racks
    snap = gen_cluster(tmp_path, scenario, "--scenario", scenario, "--racks", str(racks), "--brokers", "12",
                       "--topics", "15", "--partitions", "400", "--rf2-share", "0.3", "--seed", str(seed), *extra)
    cluster = load_snapshot(str(snap))
    targets = sorted(cluster.live_ids)
    after = scramble(cluster, targets, seed)
    plan = Plan(cluster=cluster, action=scenario, after=after, targets=targets,
                selected=list(range(len(cluster.partitions))))
    report = check_against_evaluate(tmp_path, snap, plan, None)
    assert report["problems"] == [] and report["problem_count"] == 0
    assert report["movement"]["partitions_changed"] > 0


@needs_tools
@pytest.mark.parametrize("scenario,racks", [("replace", 3), ("scale-out", 2), ("drift", 0)])
def test_figures_match_with_explicit_targets(tmp_path, scenario, racks):
    snap = gen_cluster(tmp_path, scenario, "--scenario", scenario, "--racks", str(racks), "--brokers", "9",
                       "--topics", "10", "--partitions", "300", "--rf2-share", "0.3", "--seed", "5")
    cluster = load_snapshot(str(snap))
    live = sorted(cluster.live_ids)
    targets = live[:2] + live[3:]  # one live broker left out: it must be drained
    plan = Plan(cluster=cluster, action="remove", after=scramble(cluster, targets, 11), targets=targets)
    check_against_evaluate(tmp_path, snap, plan, targets)


@needs_tools
def test_invalid_plan_figures_and_problems(tmp_path):
    snap = gen_cluster(tmp_path, "bad", "--scenario", "replace", "--brokers", "8", "--topics", "6",
                       "--partitions", "120", "--rf2-share", "0.3", "--seed", "3")
    cluster = load_snapshot(str(snap))
    targets = sorted(cluster.live_ids)
    dead = next(b for b in cluster.brokers.values() if not b.alive).id
    after = scramble(cluster, targets, 4)
    after[0] = [targets[0], targets[0], targets[1]]  # duplicate broker
    after[1] = [dead] + [b for b in after[1] if b != dead][:1]  # changed, but still on a dead broker
    after[2] = after[2][::-1] if after[2] != list(cluster.partitions[2].replicas)[::-1] else after[2][1:]
    plan = Plan(cluster=cluster, action="replace", after=after, targets=targets)
    report = check_against_evaluate(tmp_path, snap, plan, None)
    names = [p.name for p in cluster.partitions]
    assert f"{names[0]} lists broker {targets[0]} twice" in report["problems"]
    assert f"{names[1]} places replicas on non-target broker(s) {dead}" in report["problems"]
    assert report["problem_count"] == len(report["problems"])


def _tiny_cluster(storage: bool = True) -> Cluster:
    free = (lambda gb: int(gb * 1e9)) if storage else (lambda gb: None)
    brokers = {
        1001: Broker(1001, "a", storage_free=free(500)),
        1002: Broker(1002, "b", storage_free=free(400)),
        1003: Broker(1003, "c", storage_free=free(450)),
        1004: Broker(1004, "b", storage_free=free(900)),
    }
    gb = 10**9

    def part(topic, num, reps, size):
        return Partition(topic, num, tuple(reps), tuple(reps), size=size * gb)

    parts = (
        part("alpha", 0, [1001, 1002, 1003], 30),
        part("alpha", 1, [1002, 1003, 1001], 20),
        part("beta", 0, [1003, 1001, 1002], 10),
        part("beta", 1, [1001, 1003, 1002], 10),
    )
    return Cluster(brokers=brokers, partitions=parts)


def _tiny_plan(storage: bool = True, **kw) -> Plan:
    cluster = _tiny_cluster(storage)
    after = [[1001, 1004, 1003], [1003, 1002, 1001], [1003, 1002, 1001], [1001, 1003, 1002]]
    args = dict(cluster=cluster, action="scale-out", after=after, targets=[1001, 1002, 1003, 1004],
                selected=[0, 1, 2], broker_changes={"added": [1004]})
    args.update(kw)
    return Plan(**args)


SECTIONS = ["Topics:", "Broker change summary:", "Action:", "WARN:", "Partition map changes:",
            "Broker distribution:", "Movement:", "Balance:", "Storage free change estimations:"]


def test_summary_text_sections_and_changes():
    plan = _tiny_plan()
    text = summary_text(plan, plan_report(plan))
    lines = text.splitlines()
    assert [ln for ln in lines if ln in SECTIONS] == SECTIONS
    assert text.endswith("\n")
    for line in [
        "Topics:\n  alpha\n  beta\n",
        "  New broker 1004\n",
        "  Replacing 0, added 1, missing 0, total count changed by 1\n",
        "Action:\n  scale-out\n",
        "WARN:\n  [none]\n",
        "  alpha p0: [1001 1002 1003] -> [1001 1004 1003] replaced broker\n",
        "  alpha p1: [1002 1003 1001] -> [1003 1002 1001] preferred leader\n",
        "  beta p0: [1003 1001 1002] -> [1003 1002 1001] follower order\n",
        "  degree [min/max/avg]: 0/2/1.50 -> 2/3/2.50\n",
        "  Broker 1002 - leader: 0, follower: 3, total: 3 (was 1/3/4)\n",
        "  Broker 1004 - leader: 0, follower: 1, total: 1 (was 0/0/0)\n",
        "  replica additions: 1 (forced 0: replicas of brokers leaving; a result with even replica counts would "
        "need at least 3)\n",
        "  data moved: 30.000 GB (a result with no broker above the mean storage would move at least 52.500 GB)\n",
        "  partitions changed: 3\n",
        "  leader-only changes: 2\n",
        "  rack violations: 0 -> 0\n",
    ]:
        assert line in text, line
    assert "beta p1" not in text
    assert "  Broker 1001 - leader: 2, follower: 2, total: 4\n" in text  # unchanged: no "(was ...)"
    # 1002 gave alpha-0 (30 GB) to 1004: 400 + 30 free after, 900 - 30 on 1004.
    assert "  range spread: 125.00% -> 102.33%\n" in text
    assert "  min free: 400.00GB -> 430.00GB\n" in text
    assert summary_text(plan, plan_report(plan)) == text
    assert summary_text(_tiny_plan(), plan_report(_tiny_plan())) == text


def test_summary_text_options():
    plan = _tiny_plan(storage=False, warnings=["rack b is short of space"], reasons={2: "leadership balance"},
                      broker_changes={"removed": [1002], "replacing": [1003], "missing": [1003], "added": [1004]})
    text = summary_text(plan, plan_report(plan), max_changes=2)
    assert "Storage free change estimations:" not in text
    assert "WARN:\n  rack b is short of space\n" in text
    assert ("  Broker 1002 marked for removal\n  Broker 1003 marked for replacement\n"
            "  Broker 1003 is missing (dead)\n  New broker 1004\n"
            "  Replacing 2, added 1, missing 1, total count changed by 1\n") in text
    assert "  alpha p1: [1002 1003 1001] -> [1003 1002 1001] preferred leader\n" in text
    assert "beta p0" not in text
    assert "  ... and 1 more (full list in the plan file)\n" in text
    full = summary_text(plan, plan_report(plan))
    assert "  beta p0: [1003 1001 1002] -> [1003 1002 1001] leadership balance\n" in full


def test_summary_text_no_changes_and_many_topics():
    gb = 10**9
    brokers = {i: Broker(i, None) for i in (1, 2, 3)}
    parts = tuple(Partition(f"t{k:02d}", 0, (1 + k % 3, 1 + (k + 1) % 3), (), size=gb) for k in range(23))
    cluster = Cluster(brokers=brokers, partitions=parts)
    plan = Plan(cluster=cluster, action="leaders", after=cluster.assignment(), targets=[1, 2, 3],
                selected=list(range(23)))
    report = plan_report(plan)
    text = summary_text(plan, report)
    assert "Partition map changes:\n  [no changes]\n" in text
    assert "  t19\n  ... and 3 more\n" in text and "  t20\n" not in text
    assert report["movement"]["partitions_changed"] == 0
    assert report["problems"] == [] and report["problem_count"] == 0


def test_report_shape():
    plan = _tiny_plan(warnings=["w"])
    report = plan_report(plan)
    assert list(report) == ["action", "targets", "problems", "problem_count", "before", "after",
                            "movement", "warnings", "notes", "broker_changes", "offline_partitions"]
    assert report["targets"] == [1001, 1002, 1003, 1004]
    assert report["warnings"] == ["w"] and report["broker_changes"] == {"added": [1004]}
    assert report["offline_partitions"] == []  # always there, empty without offline partitions
    with pytest.raises(ValueError):
        assignment_figures(plan.cluster, plan.after[:2], plan.targets)
    with pytest.raises(ValueError):
        assignment_figures(plan.cluster, plan.after, [])


def _offline_plan(n_offline: int) -> Plan:
    """Brokers 1-4 live, 8 and 9 dead; `n_offline` partitions wholly on the dead brokers (8
    was the last in sync), and a partition that moves off them, planned by `remove`."""
    brokers = {b: Broker(b, alive=b < 8, storage_free=10**12, storage_total=2 * 10**12) for b in (1, 2, 3, 4, 8, 9)}
    parts = tuple(Partition("gone", k, (8, 9), (8,), size=10**9) for k in range(n_offline))
    parts += (Partition("kept", 0, (1, 8), (1,), size=10**9),)
    return plan_remove(Cluster(brokers=brokers, partitions=parts), [8, 9], ignore_warns=True)


def test_the_summary_names_the_offline_partitions_and_the_report_lists_every_one():
    plan = _offline_plan(5)
    report = plan_report(plan)
    assert [(o["topic"], o["partition"]) for o in report["offline_partitions"]] == [("gone", k) for k in range(5)]
    assert report["offline_partitions"][0]["in_sync_dead"] == [8] and "broker 8 returning" in \
        report["offline_partitions"][0]["recovery"]
    text = summary_text(plan, report, max_changes=2)
    section = text.split("\nOffline partitions: ")[1].split("\n\n")[0].splitlines()
    assert section[0].startswith("5, left out of the plan (no live in-sync replica")
    assert section[1] == ("  gone p0 [8 9] isr [8]: every replica is on a dead broker (8, 9); back with broker 8 "
                          "returning (in sync: a clean election); or broker 9 returning, then an unclean leader "
                          "election onto it (the messages it lacks are lost)")
    assert section[2].startswith("  gone p1 [8 9]") and section[3] == \
        "  ... and 3 more (every one in the report's offline_partitions)"
    # The replica of "kept" on 8 moved; the offline ones' replicas stay on 8 and 9 (forced, not added).
    assert report["movement"]["replica_additions"] == 1 and report["movement"]["forced_additions"] == 11
    assert "forced additions and lower bounds count those on dead brokers" in section[4]
    every = summary_text(plan, report, max_changes=5)
    assert "... and" not in every.split("\nOffline partitions: ")[1].split("\n\n")[0]
    healthy = _offline_plan(0)
    assert "Offline partitions" not in summary_text(healthy, plan_report(healthy))


def test_offline_partitions_left_on_unregistered_dead_brokers_are_no_problem_of_the_plan():
    # Read from ZooKeeper, a dead broker is only a name in replica lists (known=False): the
    # offline partitions the plan leaves there must not make it "name an unknown broker".
    brokers = {b: Broker(b, alive=b < 8, known=b < 8) for b in (1, 2, 3, 4, 8, 9)}
    parts = (Partition("gone", 0, (8, 9), ()), Partition("kept", 0, (1, 8), (1,)))
    plan = plan_remove(Cluster(brokers=brokers, partitions=parts), [8, 9], ignore_warns=True)
    report = plan_report(plan)
    assert plan.offline == [0] and plan.after[0] == [8, 9]
    assert report["problems"] == [] and report["problem_count"] == 0
    # Only partitions a planner left out as offline are spared: elsewhere the rule stays evaluate_plan's.
    hand_made = Plan(cluster=plan.cluster, action="hand-made", after=[[8, 9], [1, 9]], targets=[1, 2, 3, 4])
    assert plan_report(hand_made)["problems"] == ["gone-0 names an unknown broker", "kept-0 names an unknown broker"]


# ------------------------------------------------------------------ random small clusters, in process

IDS = [1, 2, 3, 7, 40, 41, 2**31 - 1]  # Kafka's largest broker id (int32)
RACKS = [None, "a", "b", "c"]


@st.composite
def small_case(draw):
    ids = draw(st.lists(st.sampled_from(IDS), min_size=2, max_size=6, unique=True))
    brokers = []
    for b in ids:
        d = {"id": b, "rack": draw(st.sampled_from(RACKS)), "alive": draw(st.booleans())}
        if draw(st.integers(0, 9)) > 0:
            d["storage_free"] = draw(st.integers(0, 10**12))
        brokers.append(d)
    ghost = 99  # named in replica lists, never registered
    pool = ids + [ghost]
    parts = []
    for t in ("x", "y", "z")[: draw(st.integers(1, 3))]:
        for n in range(draw(st.integers(1, 8))):
            reps = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=4, unique=True))
            parts.append({"topic": t, "partition": n, "replicas": reps, "size": draw(st.integers(0, 5 * 10**10))})
    targets = draw(st.lists(st.sampled_from(ids), min_size=2, max_size=len(ids), unique=True))
    after = [draw(st.lists(st.sampled_from(pool + [1234]), min_size=0, max_size=5)) for _ in parts]
    # Mostly keep partitions as they were, so "unchanged" and "order only" both occur.
    keep = [draw(st.integers(0, 3)) for _ in parts]
    after = [a if k == 0 else (list(p["replicas"]) if k == 1 else list(p["replicas"])[::-1])
             for a, k, p in zip(after, keep, parts)]
    return {"version": 1, "brokers": brokers, "partitions": parts}, sorted(targets), after


@needs_tools
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_case())
def test_random_small_clusters_match_evaluate(case):
    snap, targets, after = case
    cluster = cluster_from_snapshot(snap)
    key = {(p["topic"], p["partition"]): p for p in snap["partitions"]}
    order = [p.key for p in cluster.partitions]
    before_d = {k: list(key[k]["replicas"]) for k in order}
    sizes = {k: key[k]["size"] for k in order}
    by_key = {(p["topic"], p["partition"]): a for p, a in zip(snap["partitions"], after)}
    after_l = [by_key[k] for k in order]
    after_d = dict(zip(order, after_l))
    tset = set(targets)
    before = cluster.assignment()
    assert assignment_figures(cluster, before, targets) == EV["metrics"](snap, before_d, tset, sizes)
    assert assignment_figures(cluster, after_l, targets) == EV["metrics"](snap, after_d, tset, sizes)
    assert movement_figures(cluster, before, after_l, targets) == EV["movement"](before_d, after_d, sizes, tset, snap)


@needs_tools
def test_sparse_paths_agree(tmp_path, monkeypatch):
    snap = gen_cluster(tmp_path, "s", "--scenario", "skewed-storage", "--brokers", "10", "--topics", "8",
                       "--partitions", "200", "--rf2-share", "0.3")
    cluster = load_snapshot(str(snap))
    targets = sorted(cluster.live_ids)
    after = scramble(cluster, targets, 9)
    plan = Plan(cluster=cluster, action="rebalance", after=after, targets=targets)
    dense = plan_report(plan)
    monkeypatch.setattr(figures, "DENSE_CELLS_MAX", 0)
    monkeypatch.setattr(arrays, "LOOKUP_SPAN_MAX", 0)
    monkeypatch.setattr(figures, "FLOAT_EXACT", 0)
    assert plan_report(plan) == dense


def test_broker_figures_are_the_summary_and_assignment_figures():
    import re

    plan = _tiny_plan()
    cluster, targets = plan.cluster, plan.targets
    text = summary_text(plan, plan_report(plan))
    before = figures.broker_figures(cluster, None, targets)
    after = figures.broker_figures(cluster, plan.after, targets)
    assert before == figures.broker_figures(cluster, cluster.assignment(), targets)
    lines = re.findall(r"Broker (\d+) - leader: (\d+), follower: (\d+), total: (\d+)(?: \(was (\d+)/(\d+)/(\d+)\))?",
                       text)
    assert {int(b) for b, *_ in lines} == set(after) == {1001, 1002, 1003, 1004}
    for b, lead, fol, tot, *was in lines:
        got = after[int(b)]
        assert (got["leaders"], got["followers"], got["replicas"]) == (int(lead), int(fol), int(tot))
        old = before[int(b)]
        assert (old["leaders"], old["followers"], old["replicas"]) == (tuple(map(int, was)) if was[0] else
                                                                       (int(lead), int(fol), int(tot)))
    for assignment, per in ((cluster.assignment(), before), (plan.after, after)):
        want = assignment_figures(cluster, assignment, targets)
        counts = [per[b]["replicas"] for b in targets]
        leaders = [per[b]["leaders"] for b in targets]
        degrees = [per[b]["degree"] for b in targets]
        free = [per[b]["storage_free"] for b in targets]
        assert (min(counts), max(counts)) == (want["replica_count_min"], want["replica_count_max"])
        assert max(leaders) - min(leaders) == want["leader_count_spread"]
        assert (min(degrees), max(degrees), round(sum(degrees) / len(degrees), 2)) == (
            want["degree_min"], want["degree_max"], want["degree_avg"])
        assert round(min(free) / 1e9, 3) == want["storage_free_min_gb"]
    # The summary's storage lines: free before -> after for each target.
    storage = re.findall(r"Broker (\d+): ([\d.]+) -> ([\d.]+) \(", text)
    assert len(storage) == len(targets)
    for b, was_gb, now_gb in storage:
        assert (f"{before[int(b)]['storage_free'] / 1e9:.2f}", f"{after[int(b)]['storage_free'] / 1e9:.2f}") == \
            (was_gb, now_gb)
    # Bytes held: the cluster's partitions, each counted once per replica.
    assert sum(v["used_bytes"] for v in after.values()) == sum(
        cluster.partitions[i].size * len(r) for i, r in enumerate(plan.after))
    # A broker outside the targets has no degree; storage unknown stays unknown.
    assert figures.broker_figures(cluster, None, [1001, 1002])[1004]["degree"] is None
    assert figures.broker_figures(_tiny_cluster(False), None, targets)[1001]["storage_free"] is None


@pytest.mark.parametrize("gb", [1, 2**20])  # 2**20 GB per partition: sums past int64, added as Python ints
def test_storage_lines_change_each_broker_by_what_it_gains_and_loses(gb):
    import re

    rng = random.Random(gb)
    ids = list(range(1, 9))
    brokers = {b: Broker(b, "abc"[b % 3], storage_free=10**20 + b) for b in ids}
    parts = tuple(Partition("t", n, tuple(r), tuple(r), size=rng.randint(1, 10) * gb * 10**9)
                  for n, r in enumerate(rng.sample(ids, 3) for _ in range(600)))
    after = [rng.sample(ids, 3) if rng.random() < 0.8 else list(p.replicas) for p in parts]
    plan = Plan(cluster=Cluster(brokers=brokers, partitions=parts), action="rebalance", after=after,
                targets=ids, selected=list(range(len(parts))))
    delta = dict.fromkeys(ids, 0)
    for p, new in zip(parts, after):
        for b in set(new) - set(p.replicas):
            delta[b] -= p.size
        for b in set(p.replicas) - set(new):
            delta[b] += p.size
    lines = re.findall(r"Broker (\d+): [\d.]+ -> [\d.]+ \(([-+][\d.]+)GB",
                       summary_text(plan, plan_report(plan)))
    assert {int(b): d for b, d in lines} == {b: f"{d / 1e9:+.2f}" for b, d in delta.items()}
