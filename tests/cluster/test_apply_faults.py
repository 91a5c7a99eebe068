"""Crash safety of `kit apply` (issue 20, "every fault repairable"): a real `kit apply` (or
`kit verify`, `kit rollback`) SIGKILLed at known points by tests/kill_at.py, and throttles left
without a reassignment made by hand as Kafka's tool or an older kit leaves them. After each
fault `kit status` explains the state in words, the repairing command brings the cluster to a
good state, and once no reassignment runs no throttle key is left anywhere."""
from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_kit as kit
from conftest import finish_reassignment, seed
from kit.cluster.zk.changes import REASSIGN, rollback_document, set_throttles
from kit.formats import dumps, load_plan, load_snapshot
from kit.sim.controller import SimController
from kit.throttle.configs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from kit.cluster.zk.layout import connect
from kit.cluster.zk.read import read_cluster

KILL_AT = Path(__file__).parents[1] / "kill_at.py"
THROTTLE_KEYS = {"brokers": (LEADER_RATE, FOLLOWER_RATE), "topics": (LEADER_REPLICAS, FOLLOWER_REPLICAS)}
_chroots = itertools.count()


# The plan `kit plan scale-out --zk` makes of a freshly seeded chroot, made once per test process:
# every chroot holds the same cluster, a plan is a pure function of it, and these tests are about
# the faults of applying one (one child process, ~3-7 s under load, per test).
_PLAN: list[str] = []


@pytest.fixture
def kafka(zookeeper, snapshots, tmp_path):
    """A chroot holding the scale-out cluster and its plan: (connect string, plan path)."""
    root = f"{zookeeper}/kit-faults-{next(_chroots)}"
    seed(root, load_snapshot(str(snapshots["scale-out"])))
    plan = tmp_path / "plan.json"
    if not _PLAN:
        r = kit("plan", "scale-out", "--zk", root, "--out", plan)
        assert r.returncode == 0, r.stderr
        _PLAN.append(plan.read_text())
    else:
        plan.write_text(_PLAN[0])
    return root, plan


def killed(point: str, *args) -> subprocess.CompletedProcess:
    """`kit ARGS` SIGKILLed at `point` (tests/kill_at.py); the kill is asserted."""
    r = subprocess.run([sys.executable, str(KILL_AT), point, *map(str, args)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == -9, (point, r.returncode, r.stdout, r.stderr)
    return r


def throttles(root: str) -> dict[str, list[str]]:
    """Every /config entity still carrying a throttle key, by kind (empty lists: none left)."""
    client = connect(root)
    try:
        out = {}
        for kind, keys in THROTTLE_KEYS.items():
            names = client.get_children(f"/config/{kind}") if client.exists(f"/config/{kind}") else []
            out[kind] = sorted(n for n in names if any(
                k in (json.loads(client.get(f"/config/{kind}/{n}")[0] or b"{}") or {}).get("config", {})
                for k in keys))
        return out
    finally:
        client.stop()


NONE_LEFT = {"brokers": [], "topics": []}


def assignment(root: str) -> dict[tuple[str, int], list[int]]:
    client = connect(root)
    try:
        cluster, _ = read_cluster(client)
    finally:
        client.stop()
    return {p.key: list(p.replicas) for p in cluster.partitions}


def reassignment(root: str) -> dict | None:
    client = connect(root)
    try:
        return json.loads(client.get(REASSIGN)[0]) if client.exists(REASSIGN) else None
    finally:
        client.stop()


def status(root: str) -> str:
    r = kit("status", "--zk", root)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("point", ["after-preflight", "after-rollback-file", "before-commit"])
def test_apply_killed_before_its_transaction_changes_nothing_and_is_simply_run_again(kafka, tmp_path, point):
    root, plan = kafka
    rollback = tmp_path / "rollback.json"
    before = assignment(root)
    killed(point, "apply", plan, "--zk", root, "--throttle", "50000000", "--rollback-out", rollback)
    assert reassignment(root) is None and throttles(root) == NONE_LEFT
    out = status(root)
    assert "no reassignment in progress" in out and "throttled brokers: none" in out \
        and "throttled topics: none" in out and "without a reassignment" not in out, out
    moves = load_plan(str(plan))
    if point != "after-preflight":
        # The rollback file was written first: it holds the assignment as it still is, so
        # rolling back has nothing to do, and says so.
        assert {(e["topic"], e["partition"]): e["replicas"] for e in load_plan(str(rollback))} == \
            {(m["topic"], m["partition"]): before[(m["topic"], m["partition"])] for m in moves}
        r = kit("rollback", rollback, "--zk", root)
        assert r.returncode == 0 and "already has the replicas it names: nothing to start" in r.stdout, r
        assert reassignment(root) is None
    else:
        assert not rollback.exists()
    r = kit("apply", plan, "--zk", root, "--throttle", "50000000", "--rollback-out", rollback)
    assert r.returncode == 0 and f"reassignment of {len(moves)} partition(s) started" in r.stdout, r
    assert "cleared" not in r.stdout  # nothing was left over to clear
    assert reassignment(root)["partitions"] == moves and throttles(root) != NONE_LEFT
    finish_reassignment(root)
    r = kit("verify", plan, "--zk", root)
    assert r.returncode == 0 and f"{len(moves)} of {len(moves)} partition(s) done" in r.stdout, r
    assert throttles(root) == NONE_LEFT and reassignment(root) is None
    assert {k: v for k, v in assignment(root).items() if k in {(m["topic"], m["partition"]) for m in moves}} == \
        {(m["topic"], m["partition"]): m["replicas"] for m in moves}


@pytest.mark.slow
def test_apply_killed_after_its_transaction_is_found_again_followed_and_rolled_back(kafka, tmp_path):
    """Killed once the throttles and the reassignment are committed, before a word is printed:
    status says a reassignment runs and whose throttles those are; apply run again recognises
    its own reassignment; rollback refuses while it runs (ZooKeeper cannot cancel it), works
    once it is over (itself killed after its commit and run again), and verify clears all."""
    root, plan = kafka
    rollback = tmp_path / "rollback.json"
    original = assignment(root)
    moves = load_plan(str(plan))
    r = killed("after-commit", "apply", plan, "--zk", root, "--throttle", "50000000", "--rollback-out", rollback)
    assert r.stdout == ""
    assert reassignment(root)["partitions"] == moves
    left = throttles(root)
    assert left["brokers"] and left["topics"]
    out = status(root)
    assert f"reassignment in progress: {len(moves)} partition(s)" in out
    assert "the throttles are the reassignment's" in out and f"kit verify --zk {root} --wait" in out, out
    assert f"throttled topics: {' '.join(left['topics'][:10])}" in out and "without a reassignment" not in out
    saved = rollback.read_text()

    r = kit("apply", plan, "--zk", root, "--throttle", "50000000", "--rollback-out", rollback)
    assert r.returncode == 0 and "already in progress" in r.stdout and "nothing written" in r.stdout, r
    assert f"rollback plan in {rollback}" in r.stdout and rollback.read_text() == saved
    r = kit("apply", plan, "--zk", root, "--rollback-out", tmp_path / "other.json")
    assert r.returncode == 3 and "already in progress" in r.stderr and "nothing was changed" in r.stderr, r
    assert not (tmp_path / "other.json").exists()
    r = kit("rollback", rollback, "--zk", root)
    assert r.returncode == 3 and "cannot cancel" in r.stderr and "kit verify --wait" in r.stderr, r
    assert reassignment(root)["partitions"] == moves and throttles(root) == left

    finish_reassignment(root)
    r = kit("verify", plan, "--zk", root)
    assert r.returncode == 0 and f"{len(moves)} of {len(moves)} partition(s) done; throttles cleared" in r.stdout, r
    assert throttles(root) == NONE_LEFT
    r = kit("apply", plan, "--zk", root, "--rollback-out", rollback)  # once more: it is all done
    assert r.returncode == 0 and "nothing to start" in r.stdout and "left as it was" in r.stdout, r
    assert rollback.read_text() == saved and reassignment(root) is None  # the way back is kept

    killed("after-commit", "rollback", rollback, "--zk", root, "--throttle", "50000000")
    assert reassignment(root)["partitions"] == json.loads(saved)["partitions"] and throttles(root) != NONE_LEFT
    r = kit("rollback", rollback, "--zk", root)
    assert r.returncode == 0 and "already in progress" in r.stdout, r
    finish_reassignment(root)
    r = kit("verify", "--zk", root)
    assert r.returncode == 0 and "no reassignment is running" in r.stdout, r
    assert throttles(root) == NONE_LEFT and assignment(root) == original


def leave_throttles(root: str, plan: Path) -> dict[str, list[str]]:
    """Throttles without a reassignment, as Kafka's tool or an older kit leaves them when cut
    short between its two writes: the plan's topics and brokers, plus a rate on a broker that
    has left the cluster, each beside settings of its own. Returns them by kind."""
    client = connect(root)
    try:
        cluster, _ = read_cluster(client)
        set_throttles(client, cluster, load_plan(str(plan)), 5e7)
        client.create("/config/brokers/9999", json.dumps({"version": 1, "config": {
            LEADER_RATE: "10000000", FOLLOWER_RATE: "10000000", "log.cleaner.threads": "2"}}).encode())
        topic = f"/config/topics/{sorted(cluster.topics())[0]}"
        doc = json.loads(client.get(topic)[0]) if client.exists(topic) else {"version": 1, "config": {}}
        doc["config"].update({"retention.ms": "3600000"}, **{LEADER_REPLICAS: doc["config"].get(LEADER_REPLICAS, "*")})
        client.ensure_path(topic)
        client.set(topic, json.dumps(doc).encode())
    finally:
        client.stop()
    left = throttles(root)
    assert "9999" in left["brokers"] and left["topics"]
    return left


def kept_settings(root: str) -> bool:
    """The settings beside the throttles survived their removal."""
    client = connect(root)
    try:
        topic = sorted(read_cluster(client)[0].topics())[0]
        return json.loads(client.get("/config/brokers/9999")[0])["config"] == {"log.cleaner.threads": "2"} and \
            json.loads(client.get(f"/config/topics/{topic}")[0])["config"] == {"retention.ms": "3600000"}
    finally:
        client.stop()


@pytest.mark.parametrize("repair", ["verify-plan", "verify", "apply", "apply-unthrottled", "rollback"])
def test_throttles_without_a_reassignment_are_explained_and_cleared_by_each_repair(kafka, tmp_path, repair):
    root, plan = kafka
    moves = load_plan(str(plan))
    left = leave_throttles(root, plan)
    nb, nt = len(left["brokers"]), len(left["topics"])
    out = status(root)
    assert "no reassignment in progress" in out and "throttled brokers: " in out and " 9999" in out
    assert f"throttles without a reassignment: {nb} broker(s) and {nt} topic(s)" in out, out
    assert f"kit verify --zk {root} clears them" in out
    said = f"cleared throttles left without a reassignment: {nb} broker(s), {nt} topic(s)"
    if repair == "verify-plan":
        r = kit("verify", plan, "--zk", root)
        assert r.returncode == 1 and "not started (no reassignment runs for it)" in r.stdout and said in r.stdout, r
    elif repair == "verify":
        r = kit("verify", "--zk", root)
        assert r.returncode == 0 and f"no reassignment is running; {said}" in r.stdout, r
    elif repair == "rollback":
        client = connect(root)
        try:
            rollback = tmp_path / "rollback.json"
            rollback.write_text(dumps(rollback_document(read_cluster(client)[0], moves)))
        finally:
            client.stop()
        r = kit("rollback", rollback, "--zk", root)
        assert r.returncode == 0 and "nothing to start" in r.stdout and said in r.stdout, r
    else:
        throttled = repair == "apply"
        r = kit("apply", plan, "--zk", root, *(["--throttle", "50000000"] if throttled else []))
        assert r.returncode == 0 and "started" in r.stdout, r
        # The apply's own transaction removes every throttle its plan does not set.
        if throttled:
            assert "cleared throttles left without a reassignment: 1 broker(s)" in r.stdout
            assert "9999" not in throttles(root)["brokers"]
        else:
            assert said in r.stdout and throttles(root) == NONE_LEFT
        finish_reassignment(root)
        r = kit("verify", plan, "--zk", root)
        assert r.returncode == 0, r
    assert throttles(root) == NONE_LEFT and kept_settings(root)
    out = status(root)
    assert "throttled brokers: none" in out and "throttled topics: none" in out \
        and "without a reassignment" not in out, out


def test_verify_killed_while_clearing_leaves_a_state_status_explains_and_verify_finishes(kafka):
    """Each entity's throttle keys go with their /config/changes notification in one
    transaction: a verify killed after the first leaves the brokers told of every change made,
    and the rest for the next verify."""
    root, plan = kafka
    left = leave_throttles(root, plan)
    client = connect(root)
    try:
        notes = len(client.get_children("/config/changes"))
        killed("after-first-config", "verify", "--zk", root)
        assert len(client.get_children("/config/changes")) == notes + 1
    finally:
        client.stop()
    now = throttles(root)
    assert now["brokers"] == left["brokers"] and len(now["topics"]) == len(left["topics"]) - 1
    out = status(root)
    assert f"throttles without a reassignment: {len(now['brokers'])} broker(s) and {len(now['topics'])} topic(s)" \
        in out, out
    r = kit("verify", "--zk", root)
    assert r.returncode == 0 and (f"cleared throttles left without a reassignment: {len(now['brokers'])} "
                                  f"broker(s), {len(now['topics'])} topic(s)") in r.stdout, r
    assert throttles(root) == NONE_LEFT and kept_settings(root)


def test_rollback_of_a_reassignment_cut_short_midway_waits_for_it_then_restores_the_original(kafka, tmp_path):
    """The controller copies part of the plan, then stops (as if killed) with the rest in
    flight: rollback refuses, changing nothing, until the reassignment is over; then it takes
    every partition back and verify clears every throttle."""
    root, plan = kafka
    rollback = tmp_path / "rollback.json"
    original = assignment(root)
    moves = load_plan(str(plan))
    r = kit("apply", plan, "--zk", root, "--throttle", "50000000", "--rollback-out", rollback)
    assert r.returncode == 0, r
    client = connect(root)
    try:
        ctl = SimController(client, speed=1.0)
        ctl.step(1.0)  # one simulated second: what needs no copy finishes, the copies are under way
        assert 0 < len(ctl.targets) < len(moves)
    finally:
        client.stop()  # the controller is gone mid-way
    out = status(root)
    assert "reassignment in progress" in out and "the throttles are the reassignment's" in out, out
    left = throttles(root)
    r = kit("rollback", rollback, "--zk", root)
    assert r.returncode == 3 and "cannot cancel" in r.stderr and "then roll back" in r.stderr, r
    assert reassignment(root)["partitions"] == moves and throttles(root) == left
    r = kit("verify", plan, "--zk", root)
    assert r.returncode == 1 and "in progress" in r.stdout, r
    finish_reassignment(root)
    r = kit("verify", plan, "--zk", root, "--wait", "--interval", "0.2")
    assert r.returncode == 0 and throttles(root) == NONE_LEFT, r
    r = kit("rollback", rollback, "--zk", root, "--throttle", "50000000")
    assert r.returncode == 0 and f"rollback of {len(moves)} partition(s) started" in r.stdout, r
    finish_reassignment(root)
    r = kit("verify", rollback, "--zk", root)
    assert r.returncode == 0, r
    assert throttles(root) == NONE_LEFT and assignment(root) == original


@pytest.mark.parametrize("point, submitted", [("sigint-after-preflight", False), ("sigint-after-commit", True)])
def test_ctrl_c_during_apply_says_in_one_line_the_state_it_left_and_exits_130(kafka, tmp_path, point, submitted):
    """Ctrl-C before anything is written, and once the reassignment and its throttles are
    committed: one line naming what was left and the command that undoes it, no traceback."""
    root, plan = kafka
    rollback = tmp_path / "rollback.json"
    r = subprocess.run([sys.executable, str(KILL_AT), point, "apply", str(plan), "--zk", root,
                        "--throttle", "50000000", "--rollback-out", str(rollback)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 130, (r.returncode, r.stderr)
    assert r.stderr.startswith("kit: interrupted: ") and r.stderr.count("\n") == 1, r.stderr
    assert "Traceback" not in r.stderr and "connection lost" not in r.stderr
    if submitted:
        n = len(throttles(root)["brokers"])
        assert reassignment(root) is not None and n
        assert f"the reassignment was submitted; throttles set on {n} broker(s): kit rollback {rollback} " \
               f"--zk {root} undoes it" in r.stderr, r.stderr
        finish_reassignment(root)
    else:
        assert reassignment(root) is None and throttles(root) == NONE_LEFT
        assert "the reassignment was not submitted; no throttle set" in r.stderr, r.stderr
