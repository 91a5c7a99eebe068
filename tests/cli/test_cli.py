"""`kit plan` end to end: the installed console script in a subprocess, on generated clusters.

The contract (shared/design.md, "The kit plan command"): exit 0 on success; 2 on bad input
(one clear line on stderr, no traceback, nothing written); 3 when the request cannot be
met safely (nothing written). Same input, same bytes out.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_kit

# The console script next to the interpreter (the venv's bin/), else the module.
_SCRIPT = Path(sys.executable).with_name("kit")
KIT = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "kit"]

SECTIONS = ("Broker change summary:", "Partition map changes:", "Broker distribution:")


def kit(*args, cwd: Path | None = None, cold: bool = False) -> subprocess.CompletedProcess:
    return run_kit(*args, cwd=cwd, cold=cold)


# --------------------------------------------------------------------------- snapshot helpers


def load(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def replica_map(doc: dict) -> dict[tuple[str, int], list[int]]:
    return {(p["topic"], p["partition"]): list(p["replicas"]) for p in doc["partitions"]}


def rack_of(doc: dict) -> dict[int, str]:
    return {b["id"]: b["rack"] for b in doc["brokers"]}


def dead_and_new(doc: dict) -> tuple[list[int], list[int]]:
    """Dead brokers, and live brokers that hold no replica (new, empty)."""
    held = {b for p in doc["partitions"] for b in p["replicas"]}
    dead = sorted(b["id"] for b in doc["brokers"] if not b["alive"])
    new = sorted(b["id"] for b in doc["brokers"] if b["alive"] and b["id"] not in held)
    return dead, new


def check_plan(path: Path, snap: dict) -> dict[tuple[str, int], list[int]]:
    """Assert `path` is valid Kafka reassignment JSON for `snap`; return the replica map after it."""
    text = path.read_text()
    assert text.endswith("\n")
    doc = json.loads(text)
    assert set(doc) == {"version", "partitions"} and doc["version"] == 1
    assert isinstance(doc["partitions"], list)
    before = replica_map(snap)
    live = {b["id"] for b in snap["brokers"] if b["alive"]}
    after = dict(before)
    seen = set()
    for e in doc["partitions"]:
        assert set(e) == {"topic", "partition", "replicas"}, e
        assert isinstance(e["topic"], str) and isinstance(e["partition"], int) and not isinstance(e["partition"], bool)
        key = (e["topic"], e["partition"])
        assert key in before, f"plan names a partition the cluster lacks: {key}"
        assert key not in seen, f"plan lists {key} twice"
        seen.add(key)
        reps = e["replicas"]
        assert isinstance(reps, list) and reps and all(type(r) is int for r in reps), e
        assert len(set(reps)) == len(reps), f"duplicate broker in {e}"
        assert set(reps) <= live, f"{e} names a dead or unknown broker"
        assert reps != before[key], f"{key} is listed but does not change"
        after[key] = reps
    return after


def check_report(path: Path) -> dict:
    rep = json.loads(path.read_text())
    assert {"before", "after", "movement"} <= set(rep)
    assert rep["problem_count"] == 0 and rep["problems"] == []
    return rep


def plan_ok(tmp_path: Path, action: str, snapshot: Path, *extra) -> tuple[dict, dict, dict, str]:
    """Run a plan that must succeed; return (snapshot doc, replica map after, report, stdout)."""
    out, report = tmp_path / "plan.json", tmp_path / "report.json"
    r = kit("plan", action, "--snapshot", snapshot, *extra, "--out", out, "--report", report)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    for section in SECTIONS:
        assert section in r.stdout
    snap = load(snapshot)
    return snap, check_plan(out, snap), check_report(report), r.stdout


def unchanged_sets(before: dict, after: dict, keys) -> None:
    for k in keys:
        assert set(after[k]) == set(before[k]), k


# --------------------------------------------------------------------------- exit 0


def test_replace_gives_old_slots_to_new_and_moves_nothing_else(tmp_path, snapshots):
    snap = load(snapshots["replace"])
    (old,), (new,) = dead_and_new(snap)
    _, after, rep, stdout = plan_ok(tmp_path, "replace", snapshots["replace"], "--replace", f"{old}:{new}")
    before = replica_map(snap)
    for k, reps in before.items():
        assert after[k] == [new if b == old else b for b in reps], k  # same position: NEW leads what OLD led
    held = sum(old in reps for reps in before.values())
    assert held > 0 and rep["movement"]["replica_additions"] == held
    assert f"Broker {old} marked for replacement" in stdout


def test_remove_evacuates_the_broker_rack_safely(tmp_path, snapshots):
    snap, after, rep, stdout = plan_ok(tmp_path, "remove", snapshots["balanced"], "--remove", "1004")
    before, racks = replica_map(snap), rack_of(snap)
    held = [k for k, reps in before.items() if 1004 in reps]
    assert all(1004 not in reps for reps in after.values())
    unchanged_sets(before, after, [k for k in before if k not in held])
    for k in held:
        assert len(set(after[k]) - set(before[k])) == 1
        assert len({racks[b] for b in after[k]}) == 3
    assert rep["movement"]["replica_additions"] == len(held)
    assert "Broker 1004 marked for removal" in stdout


def kept_leaders(before: dict, after: dict, gone) -> None:
    """Each partition's leader as it was where it stays; where it leaves, the new replica in its slot."""
    for k, reps in before.items():
        assert after[k][0] == reps[0] if reps[0] not in gone else after[k][0] not in reps, k


def test_remove_with_leadership_kept_changes_only_the_evacuated_partitions(tmp_path, snapshots):
    snap, after, rep, stdout = plan_ok(tmp_path, "remove", snapshots["balanced"], "--remove", "1004,1008",
                                       "--leadership", "keep")
    before = replica_map(snap)
    held = {k for k, reps in before.items() if {1004, 1008} & set(reps)}
    assert held and {k for k in before if after[k] != before[k]} == held  # no other partition reordered
    kept_leaders(before, after, (1004, 1008))
    for k in held:
        assert len(set(after[k]) - set(before[k])) == len({1004, 1008} & set(before[k])), k
        assert not {1004, 1008} & set(after[k]), k
    assert rep["movement"]["partitions_changed"] == len(held)
    assert "leadership kept (--leadership keep)" in stdout
    # The default balances leadership: it reorders partitions nothing evacuates as well.
    balanced = plan_ok(tmp_path, "remove", snapshots["balanced"], "--remove", "1004,1008")[1]
    assert any(balanced[k] != before[k] for k in before if k not in held)


def test_az_loss_with_leadership_kept_keeps_leaders_and_evens_the_failover(tmp_path, snapshots):
    snap, after, rep, stdout = plan_ok(tmp_path, "az-loss", snapshots["az-loss"], "--rack", "rack-c",
                                       "--leadership", "keep")
    racks = rack_of(snap)
    before = replica_map(snap)
    lost = {b for b, r in racks.items() if r == "rack-c"}
    kept_leaders(before, after, lost)
    for k, reps in before.items():
        assert not lost & set(after[k]) and len(set(after[k]) - set(reps)) == len(lost & set(reps)), k
    # The followers of the partitions it changes are ordered for even failover (10 when the
    # new replicas only took the lost ones' slots).
    assert rep["after"]["failover_excess_spread_max"] <= 1
    assert rep["movement"]["leader_only_changes"] == 0
    assert "leadership kept (--leadership keep)" in stdout


def test_az_loss_moves_every_replica_off_the_rack(tmp_path, snapshots):
    snap, after, rep, _ = plan_ok(tmp_path, "az-loss", snapshots["az-loss"], "--rack", "rack-c")
    racks = rack_of(snap)
    lost = sum(racks[b] == "rack-c" for reps in replica_map(snap).values() for b in reps)
    for reps in after.values():
        assert len(reps) == 3
        assert {racks[b] for b in reps} == {"rack-a", "rack-b"}
    assert rep["movement"]["replica_additions"] == lost


def test_scale_out_fills_the_new_brokers(tmp_path, snapshots):
    snap, after, rep, _ = plan_ok(tmp_path, "scale-out", snapshots["scale-out"])
    _, new = dead_and_new(snap)
    assert len(new) == 3
    counts = {b: sum(b in reps for reps in after.values()) for b in new}
    assert all(c > 0 for c in counts.values()), counts
    assert rep["after"]["replica_count_spread"] < rep["before"]["replica_count_spread"]
    assert all(len(reps) == 3 for reps in after.values())


def test_rf_changes_only_the_selected_topics(tmp_path, snapshots):
    snap, after, _, _ = plan_ok(tmp_path, "rf", snapshots["balanced"], "--topics", "topic-000[0-2]",
                                "--replication", "2")
    before = replica_map(snap)
    chosen = [k for k in before if re.fullmatch("topic-000[0-2]", k[0])]
    assert chosen
    for k in chosen:
        assert len(after[k]) == 2 and set(after[k]) <= set(before[k])  # shrinking copies nothing
    assert all(after[k] == before[k] for k in before if k not in chosen)


def test_rebalance_keeps_replication_and_does_not_worsen_balance(tmp_path, snapshots):
    snap, after, rep, _ = plan_ok(tmp_path, "rebalance", snapshots["balanced"])
    assert all(len(reps) == 3 for reps in after.values())
    assert rep["after"]["replica_count_spread"] <= rep["before"]["replica_count_spread"]
    assert rep["after"]["leader_count_spread"] <= rep["before"]["leader_count_spread"]
    assert rep["after"]["rack_violations"] == 0


def test_leaders_reorders_only(tmp_path, snapshots):
    snap, after, rep, _ = plan_ok(tmp_path, "leaders", snapshots["balanced"])
    before = replica_map(snap)
    unchanged_sets(before, after, before)
    assert any(after[k] != before[k] for k in before)
    assert rep["movement"]["replica_additions"] == 0
    assert rep["after"]["leader_count_spread"] <= 1


def test_rebuild_replaces_only_the_dead_broker(tmp_path, snapshots):
    snap, after, _, _ = plan_ok(tmp_path, "rebuild", snapshots["replace"])
    (old,), _ = dead_and_new(snap)
    before = replica_map(snap)
    assert all(old not in reps for reps in after.values())
    unchanged_sets(before, after, [k for k, reps in before.items() if old not in reps])


def test_rebuild_force_places_everything_afresh(tmp_path, snapshots):
    snap, after, _, _ = plan_ok(tmp_path, "rebuild", snapshots["balanced"], "--force-rebuild")
    racks = rack_of(snap)
    before = replica_map(snap)
    assert sum(set(after[k]) != set(before[k]) for k in before) > 0
    for reps in after.values():
        assert len(reps) == 3 and len({racks[b] for b in reps}) == 3


def test_rebuild_sub_affinity_swaps_in_the_new_broker_of_the_rack(tmp_path, snapshots):
    snap, after, _, _ = plan_ok(tmp_path, "rebuild", snapshots["replace"], "--sub-affinity")
    (old,), (new,) = dead_and_new(snap)
    assert rack_of(snap)[old] == rack_of(snap)[new]
    for k, reps in replica_map(snap).items():
        assert set(after[k]) == {new if b == old else b for b in reps}, k


def test_rebuild_replication_on_a_topic_regex(tmp_path, snapshots):
    snap, after, _, _ = plan_ok(tmp_path, "rebuild", snapshots["balanced"], "--topics", "topic-001.*",
                                "--replication", "2")
    before = replica_map(snap)
    for k in before:
        if re.fullmatch("topic-001.*", k[0]):
            assert len(after[k]) == 2
        else:
            assert after[k] == before[k]


def test_rebuild_min_rack_ids_2(tmp_path, snapshots):
    snap, after, _, _ = plan_ok(tmp_path, "rebuild", snapshots["replace"], "--min-rack-ids", "2")
    (old,), _ = dead_and_new(snap)
    racks = rack_of(snap)
    for reps in after.values():
        assert old not in reps and len({racks[b] for b in reps}) >= 2


def test_plan_without_report_writes_only_the_plan(tmp_path, snapshots):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    r = kit("plan", "leaders", "--snapshot", snapshots["balanced"], "--out", out_dir / "plan.json")
    assert r.returncode == 0, r.stderr
    assert [p.name for p in out_dir.iterdir()] == ["plan.json"]


def test_max_changes_zero_lists_every_change(tmp_path, snapshots):
    out = tmp_path / "plan.json"
    r = kit("plan", "leaders", "--snapshot", snapshots["balanced"], "--out", out, "--max-changes", "0")
    assert r.returncode == 0, r.stderr
    n = len(json.loads(out.read_text())["partitions"])
    section = r.stdout.split("Partition map changes:\n")[1].split("\n\n")[0]
    assert n > 100 and len(section.splitlines()) == n and "more" not in section


# --------------------------------------------------------------------------- determinism


@pytest.mark.parametrize("snapshot, args", [
    ("replace", ["replace", "--replace", "{old}:{new}"]),
    ("scale-out", ["scale-out"]),
    ("az-loss", ["az-loss", "--rack", "rack-c"]),
    ("balanced", ["rebuild", "--force-rebuild"]),
], ids=["replace", "scale-out", "az-loss", "rebuild-force"])
def test_same_command_same_bytes(tmp_path, snapshots, snapshot, args):
    dead, new = dead_and_new(load(snapshots[snapshot]))
    fill = {"old": dead[0] if dead else 0, "new": new[0] if new else 0}
    runs = []
    for n in (1, 2):
        d = tmp_path / f"run{n}"
        d.mkdir()
        # The second run from a fresh interpreter (its own string hashing), the first forked warm.
        r = kit("plan", *[a.format(**fill) for a in args], "--snapshot", snapshots[snapshot],
                "--out", d / "plan.json", "--report", d / "report.json", cold=n == 2)
        assert r.returncode == 0, r.stderr
        runs.append(((d / "plan.json").read_bytes(), (d / "report.json").read_bytes(), r.stdout))
    assert runs[0][0] == runs[1][0], "plan files differ"
    assert runs[0][1] == runs[1][1], "report files differ"
    assert runs[0][2] == runs[1][2], "summaries differ"


# --------------------------------------------------------------------------- exit 2 and 3


def assert_refused(r: subprocess.CompletedProcess, out_dir: Path, code: int, match: str | None = None) -> None:
    """Exit `code`, exactly one non-empty line on stderr, no traceback, nothing on stdout or disk."""
    assert r.returncode == code, f"exit {r.returncode}\nstdout: {r.stdout[-2000:]}\nstderr: {r.stderr}"
    assert "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].strip() and r.stderr.endswith("\n"), r.stderr
    if match:
        assert re.search(match, lines[0]), lines[0]
    assert r.stdout == ""
    assert sorted(p.name for p in out_dir.iterdir()) == [], "files were written (plan, report or a temp file)"


def run_into(out_dir: Path, *args) -> subprocess.CompletedProcess:
    out_dir.mkdir(exist_ok=True)
    return kit(*args, "--out", out_dir / "plan.json", "--report", out_dir / "report.json")


def _truncated(snap: dict, text: str) -> str:
    return text[: len(text) // 2]


def _no_replicas(snap: dict, text: str) -> str:
    del snap["partitions"][5]["replicas"]
    return json.dumps(snap)


def _duplicate_replica(snap: dict, text: str) -> str:
    reps = snap["partitions"][7]["replicas"]
    reps[1] = reps[0]
    return json.dumps(snap)


def _not_an_object(snap: dict, text: str) -> str:
    return json.dumps(snap["partitions"])


def _replica_not_int(snap: dict, text: str) -> str:
    snap["partitions"][3]["replicas"][2] = "1003"
    return json.dumps(snap)


@pytest.mark.parametrize("corrupt, match", [
    (_truncated, r"not valid JSON"),
    (_no_replicas, r"partitions\[5\] lacks 'replicas'"),
    (_duplicate_replica, r"lists broker \d+ twice"),
    (_not_an_object, r"expected a JSON object"),
    (_replica_not_int, r"expected an integer"),
], ids=["malformed-json", "missing-replicas", "duplicate-replica", "not-an-object", "replica-not-int"])
def test_bad_snapshot_exit_2(tmp_path, snapshots, corrupt, match):
    text = snapshots["balanced"].read_text()
    bad = tmp_path / "bad.json"
    bad.write_text(corrupt(json.loads(text), text))
    r = run_into(tmp_path / "out", "plan", "rebalance", "--snapshot", bad)
    assert_refused(r, tmp_path / "out", 2, match)
    assert str(bad) in r.stderr  # names the file


def test_missing_snapshot_exit_2(tmp_path):
    r = run_into(tmp_path / "out", "plan", "rebalance", "--snapshot", tmp_path / "nope.json")
    assert_refused(r, tmp_path / "out", 2, r"nope\.json: no such file")


def test_snapshot_is_a_directory_exit_2(tmp_path):
    r = run_into(tmp_path / "out", "plan", "rebalance", "--snapshot", tmp_path)
    assert_refused(r, tmp_path / "out", 2, r"is a directory")


BAD_INPUT = {
    # snapshot, arguments after `plan`, what stderr must say
    "replace-old-unknown": ("replace", ["replace", "--replace", "9999:{new}"], r"broker 9999"),
    "replace-new-unknown": ("replace", ["replace", "--replace", "{old}:9999"], r"broker 9999"),
    "replace-pair-reuses-broker": ("replace", ["replace", "--replace", "{old}:{new},{old}:1001"], r"once"),
    "replace-with-brokers": ("replace", ["replace", "--replace", "{old}:{new}", "--brokers", "1001"], r"--brokers"),
    "remove-unknown": ("balanced", ["remove", "--remove", "9999"], r"broker 9999"),
    "brokers-unknown": ("balanced", ["rebalance", "--brokers", "1001,1002,9999"], r"broker 9999"),
    "brokers-unknown-rebuild": ("balanced", ["rebuild", "--brokers", "9999"], r"broker 9999"),
    "az-loss-unknown-rack": ("balanced", ["az-loss", "--rack", "rack-z"], r"rack-z"),
    "rf-above-brokers": ("balanced", ["rf", "--replication", "13"], r"13 .*12 target brokers"),
    "rf-above-target-brokers": ("balanced", ["rf", "--replication", "4", "--brokers", "1001,1002,1003"],
                                r"4 .*3 target brokers"),
    "rf-zero": ("balanced", ["rf", "--replication", "0"], r"at least 1"),
    "rebuild-replication-above-brokers": ("balanced", ["rebuild", "--replication", "13"], r"13 .*12 target brokers"),
    "topics-match-nothing": ("balanced", ["rebalance", "--topics", "orders.*"], r"no topic matches"),
    "exclude-everything": ("balanced", ["leaders", "--exclude-topics", ".*"], r"no topic matches"),
    "topics-invalid-regex": ("balanced", ["rebalance", "--topics", "topic-("], r"--topics .*not a valid regular"),
    "exclude-invalid-regex": ("balanced", ["rf", "--replication", "2", "--exclude-topics", "["],
                              r"--exclude-topics .*not a valid regular"),
}


@pytest.mark.parametrize("name", list(BAD_INPUT))
def test_bad_request_exit_2(tmp_path, snapshots, name):
    snapshot, args, match = BAD_INPUT[name]
    dead, new = dead_and_new(load(snapshots[snapshot]))
    fill = {"old": dead[0] if dead else 0, "new": new[0] if new else 0}
    action, *rest = [a.format(**fill) for a in args]
    r = run_into(tmp_path / "out", "plan", action, "--snapshot", snapshots[snapshot], *rest)
    assert_refused(r, tmp_path / "out", 2, match)


USAGE = {
    "unknown-action": (["plan", "frobnicate", "--snapshot", "{snap}"], r"invalid choice: 'frobnicate'"),
    "unknown-option": (["plan", "rebalance", "--snapshot", "{snap}", "--bogus"], r"unrecognized arguments: --bogus"),
    "unknown-command": (["frobnicate"], r"invalid choice"),
    "no-command": ([], r"required"),
    "no-action": (["plan"], r"required.*ACTION"),
    "missing-snapshot-option": (["plan", "rebalance"], r"--snapshot --zk --bootstrap is required"),
    "bad-replace-pair": (["plan", "replace", "--snapshot", "{snap}", "--replace", "1007-1013"], r"OLD:NEW"),
    "bad-remove-ids": (["plan", "remove", "--snapshot", "{snap}", "--remove", "a,b"], r"broker ids"),
    "bad-leadership": (["plan", "remove", "--snapshot", "{snap}", "--remove", "1004", "--leadership", "even"],
                       r"--leadership: invalid choice: 'even'"),
    "replication-not-int": (["plan", "rf", "--snapshot", "{snap}", "--replication", "x"], r"expected a whole number"),
    "bad-placement": (["plan", "rebalance", "--snapshot", "{snap}", "--placement", "magic"], r"invalid choice"),
    "negative-max-changes": (["plan", "leaders", "--snapshot", "{snap}", "--max-changes", "-1"], r"--max-changes"),
}


@pytest.mark.parametrize("name", list(USAGE))
def test_usage_error_is_one_line_exit_2(tmp_path, snapshots, name):
    args, match = USAGE[name]
    args = [a.format(snap=snapshots["balanced"]) for a in args]
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    extra = ["--out", out_dir / "plan.json", "--report", out_dir / "report.json"] if len(args) > 1 else []
    r = kit(*args, *extra)
    assert_refused(r, out_dir, 2, match)
    assert r.stderr.startswith("kit") and "usage:" not in r.stderr


def test_missing_out_is_a_usage_error(tmp_path, snapshots):
    r = kit("plan", "rebalance", "--snapshot", snapshots["balanced"], cwd=tmp_path)
    assert_refused(r, tmp_path, 2, r"required.*--out")


@pytest.mark.parametrize("where", ["out-dir-missing", "report-dir-missing", "out-is-dir", "out-is-report"])
def test_unwritable_output_exit_2(tmp_path, snapshots, where):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    plan, report = out_dir / "plan.json", out_dir / "report.json"
    if where == "out-dir-missing":
        plan = tmp_path / "missing" / "plan.json"
    elif where == "report-dir-missing":
        report = tmp_path / "missing" / "report.json"
    elif where == "out-is-dir":
        plan = out_dir
    else:
        report = out_dir / "." / "plan.json"
    r = kit("plan", "leaders", "--snapshot", snapshots["balanced"], "--out", plan, "--report", report)
    assert_refused(r, out_dir, 2, r"--out|--report")
    assert not (tmp_path / "missing").exists()


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs a /proc that refuses new files")
def test_report_write_failure_leaves_no_plan(tmp_path, snapshots):
    """The directory exists but refuses files (even for root): the plan written first is taken back."""
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    r = kit("plan", "leaders", "--snapshot", snapshots["balanced"], "--out", out_dir / "plan.json",
            "--report", "/proc/kit-report.json")
    assert_refused(r, out_dir, 2, r"--report /proc/kit-report.json: cannot write")


@pytest.mark.parametrize("ignore", [False, True], ids=["plain", "ignore-warns"])
def test_min_rack_ids_beyond_racks_exit_3_even_with_ignore_warns(tmp_path, snapshots, ignore):
    r = run_into(tmp_path / "out", "plan", "rebuild", "--snapshot", snapshots["balanced"], "--min-rack-ids", "4",
                 *(["--ignore-warns"] if ignore else []))
    assert_refused(r, tmp_path / "out", 3, r"--min-rack-ids 4 .*\(3\)")


@pytest.mark.parametrize("ignore", [False, True], ids=["plain", "ignore-warns"])
def test_replace_onto_a_broker_already_in_the_partition_exit_3_even_with_ignore_warns(tmp_path, snapshots, ignore):
    snap = load(snapshots["replace"])
    (old,), _ = dead_and_new(snap)
    # The first partition OLD is in (partitions are planned in topic, partition order) names NEW too.
    first = min(k for k, reps in replica_map(snap).items() if old in reps)
    new = next(b for b in replica_map(snap)[first] if b != old)
    r = run_into(tmp_path / "out", "plan", "replace", "--snapshot", snapshots["replace"], "--replace", f"{old}:{new}",
                 *(["--ignore-warns"] if ignore else []))
    assert_refused(r, tmp_path / "out", 3, rf"{first[0]}-{first[1]}: broker {new} already holds a replica")


@pytest.mark.parametrize("ignore", [False, True], ids=["plain", "ignore-warns"])
def test_sub_affinity_short_of_new_brokers_exit_3_even_with_ignore_warns(tmp_path, snapshots, ignore):
    # rack-c's four brokers are dead and no new broker joined: four to replace, none to take over.
    r = run_into(tmp_path / "out", "plan", "rebuild", "--snapshot", snapshots["az-loss"], "--sub-affinity",
                 *(["--ignore-warns"] if ignore else []))
    assert_refused(r, tmp_path / "out", 3, r"Insufficient number of new brokers: 4 to replace, 0 new")


def test_sub_affinity_short_of_new_brokers_when_brokers_leave_by_target_set(tmp_path, snapshots):
    targets = ",".join(str(b) for b in range(1001, 1012))  # 1012 leaves, nothing new joins
    r = run_into(tmp_path / "out", "plan", "rebuild", "--snapshot", snapshots["balanced"], "--sub-affinity",
                 "--brokers", targets)
    assert_refused(r, tmp_path / "out", 3, r"Insufficient number of new brokers: 1 to replace, 0 new")


def test_replace_across_racks_exit_3_but_ignore_warns_writes_it_with_warnings(tmp_path, snapshots):
    snap = load(snapshots["replace"])
    (old,), (new,) = dead_and_new(snap)
    other = next(r for r in sorted(set(rack_of(snap).values())) if r != rack_of(snap)[old])
    for b in snap["brokers"]:
        if b["id"] == new:
            b["rack"] = other  # the new broker sits in another rack: swapping it in doubles up that rack
    moved = tmp_path / "xrack.json"
    moved.write_text(json.dumps(snap))

    r = run_into(tmp_path / "out", "plan", "replace", "--snapshot", moved, "--replace", f"{old}:{new}")
    assert_refused(r, tmp_path / "out", 3, rf"two replicas in rack {other} \(use --ignore-warns to accept\)")

    _, after, rep, stdout = plan_ok(tmp_path, "replace", moved, "--replace", f"{old}:{new}", "--ignore-warns")
    before = replica_map(snap)
    for k, reps in before.items():
        assert after[k] == [new if b == old else b for b in reps]
    doubled = sum(old in reps for reps in before.values())
    assert len(rep["warnings"]) == doubled and rep["after"]["rack_violations"] == doubled
    warn = stdout.split("WARN:\n")[1].split("\n\n")[0]
    assert f"two replicas in rack {other}" in warn and "[none]" not in warn


# The cluster: three brokers dead at once and RF-2 topics, so that every replica of some
# partitions is on a dead broker (and a new empty broker for each dead one, in its rack).
OFFLINE_CLUSTER = ("--brokers", "12", "--racks", "3", "--partitions", "200", "--topics", "10", "--rf2-share", "0.5",
                   "--scenario", "replace", "--dead", "3", "--seed", "3")


def test_offline_partitions_are_planned_around_named_and_left_to_the_warning_policy(tmp_path, make_snapshot):
    path = make_snapshot(*OFFLINE_CLUSTER)
    snap = load(path)
    live = {b["id"] for b in snap["brokers"] if b["alive"]}
    offline = {(p["topic"], p["partition"]) for p in snap["partitions"]
               if not any(b in live and b in p.get("isr", p["replicas"]) for b in p["replicas"])}
    assert len(offline) >= 5  # the cluster the test is about
    dead, new = dead_and_new(snap)
    racks = rack_of(snap)
    free, chosen = list(new), []
    for d in dead:  # each dead broker's replacement is a new broker of its rack
        chosen.append(f"{d}:{free.pop(next(i for i, n in enumerate(free) if racks[n] == racks[d]))}")
    pairs = ",".join(chosen)

    # Without --ignore-warns: the summary names them, one line says why nothing is written, exit 3.
    r = run_into(tmp_path / "out", "plan", "replace", "--snapshot", path, "--replace", pairs)
    assert r.returncode == 3 and "Traceback" not in r.stderr
    [line] = r.stderr.splitlines()
    assert f"{len(offline)} offline partition(s) left out of the plan" in line and "--ignore-warns" in line
    assert f"Offline partitions: {len(offline)}, left out of the plan" in r.stdout
    assert list((tmp_path / "out").iterdir()) == []

    # With it: every other partition is planned, the offline ones are not, and all are reported.
    _, after, rep, stdout = plan_ok(tmp_path, "replace", path, "--replace", pairs, "--ignore-warns",
                                    "--max-changes", "3")
    before, mapping = replica_map(snap), dict(tuple(map(int, x.split(":"))) for x in pairs.split(","))
    for k, reps in before.items():
        assert after[k] == (reps if k in offline else [mapping.get(b, b) for b in reps]), k
    listed = rep["offline_partitions"]
    assert {(o["topic"], o["partition"]) for o in listed} == offline and len(listed) == len(offline)
    for o in listed:
        assert o["replicas"] == before[(o["topic"], o["partition"])] and o["recovery"]
        assert set(o["replicas"]) <= set(dead)  # this cluster's are all on dead brokers
    section = stdout.split("Offline partitions:")[1].split("\n\n")[0]
    assert section.count(" back with ") == 3 and f"... and {len(offline) - 3} more" in section


# --------------------------------------------------------------------------- help


def test_top_level_help_shows_examples():
    r = kit("--help")
    assert r.returncode == 0 and r.stderr == ""
    assert "examples:" in r.stdout and "kit plan replace --snapshot cluster.json --replace" in r.stdout


def test_action_help_shows_an_example():
    r = kit("plan", "replace", "--help")
    assert r.returncode == 0 and r.stderr == ""
    assert "--replace OLD:NEW" in r.stdout
    assert re.search(r"^\s+kit plan replace --snapshot \S+ --replace \d+:\d+ --out \S+", r.stdout, re.M)


def test_version():
    r = kit("--version")
    assert r.returncode == 0 and r.stdout.startswith("kit ")


# --------------------------------------------------------------------------- the command table


def _subcommands(parser) -> dict:
    """name -> parser of the subcommands `parser` declares (after any deferred declaration)."""
    parser = parser.declared() if hasattr(parser, "declared") else parser
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


def test_plan_actions_are_the_planner_facades_actions():
    from kit.cli import build_parser
    from kit.plan import ACTIONS

    actions = _subcommands(_subcommands(build_parser())["plan"])
    assert list(actions) == list(ACTIONS)
    for name, action in ACTIONS.items():
        assert actions[name].description == action.summary
        dests = {a.dest for a in actions[name].declared()._actions}
        assert {i.name for i in action.inputs} <= dests


def test_every_command_names_the_function_that_runs_it():
    """main dispatches with a.run(a): every command down to its last word has a run default
    (set on the command or on the group it belongs to)."""
    from kit.cli import build_parser

    def leaves(parser, path, run):
        run = parser.get_default("run") or run
        subs = _subcommands(parser) if any(isinstance(a, argparse._SubParsersAction)
                                           for a in parser.declared()._actions) else {}
        if not subs:
            yield " ".join(path), run
        for name, p in subs.items():
            yield from leaves(p, path + [name], run)

    found = dict(leaves(build_parser(), [], None))  # plan 8, change 6, simulate, sim 9, zk 3, throttle 3, 4 more
    assert "plan rebuild" in found and "sim kill" in found and "sim slow" in found and "status" in found and len(found) == 34
    assert [path for path, run in found.items() if not callable(run)] == []


def test_the_command_table_names_what_each_command_module_declares():
    """kit.cli.COMMANDS (which module declares which commands, read before any is imported)
    is what the modules declare, in the order `kit --help` lists them."""
    from kit.cli import COMMANDS, build_parser

    assert list(_subcommands(build_parser())) == [c for commands in COMMANDS.values() for c in commands]
    for module, commands in COMMANDS.items():
        for command in commands:
            assert list(_subcommands(build_parser(command))) == list(commands)


def test_a_command_builds_only_its_own_parser(tmp_path):
    """`kit plan ACTION` imports no other command's module and declares no other action's
    options: they cost a small plan some 0.05 CPU s of its start (issue 38)."""
    code = ("import argparse, sys\nfrom kit.cli import build_parser, main\n"
            f"main(['plan', 'leaders', '--snapshot', {str(tmp_path / 'none.json')!r}, '--out', 'y'])\n"
            "print(sorted(m for m in sys.modules if m.startswith('kit.cli.')))\n"
            "p = build_parser('plan')\np.parse_args(['plan', 'leaders', '--snapshot', 'x', '--out', 'y'])\n"
            "plan = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices['plan']\n"
            "acts = next(a for a in plan._actions if isinstance(a, argparse._SubParsersAction)).choices\n"
            "print(sorted(n for n, q in acts.items() if q.declare is None))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.splitlines() == ["['kit.cli.lazy', 'kit.cli.options', 'kit.cli.plan']", "['leaders']"], r.stderr
    assert "none.json: no such file" in r.stderr


def test_help_loads_no_library_a_command_hands_over_to():
    """`kit --help` loads none of the libraries the commands hand over to (kit.cli.lazy): not the
    planner (SciPy, OR-Tools), not ZooKeeper's client, not the runbooks, Panel or Spark."""
    libraries = ("kit.plan", "scipy", "ortools", "kazoo.client", "kit.runbook.steps", "panel", "pyspark")
    code = ("import contextlib, io, sys\nfrom kit.cli import main\n"
            "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['--help'])\n"
            f"print(sorted(set({libraries!r}) & set(sys.modules)))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "[]\n"
