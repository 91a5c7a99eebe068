"""The runbooks, executed for real: `kit run` drives papermill and a Jupyter kernel against a
local ZooKeeper with a simulated cluster (each runbook's default), into records."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import kit_command
from conftest import run_kit as kit
from kit.runbook import catalog
from kit.runbook import runner as runbook

RUNBOOKS = ["broker_replacement", "az_loss", "scale_out", "replication_factor", "storage_rebalance", "health_check"]
# One parameter file per runbook; the replacement and the health check go all the way.
PARAMETER_FILES = {
    "broker_replacement": {"apply": True, "speed": 20000, "replace": "1009:1013", "cap_map": {"*": 125}},
    "az_loss": {"throttle": "50000000", "rack": "rack-c"},
    "scale_out": {"topics": "topic-00[0-4].*", "client_load": 0.3},
    "replication_factor": {"replication": 3, "topics": ".*"},
    "storage_rebalance": {"max_wait_s": 60},
    "health_check": {"apply": True, "speed": 20000},
}


# Every runbook runs on both simulated clusters. With its defaults (planning only, on the
# ZooKeeper one: the default `cluster`) each runs on the ZooKeeper one. With its parameter file
# the two that apply (the replacement, the health check's heal) run on the ZooKeeper one, and the
# health check's on the KRaft one too (the replacement on KRaft, at two speeds, in its own test);
# the four that only plan take their file on the KRaft one, where the same run also checks what
# their defaults run checked there (reading a parameter file is the same on either cluster; one
# run each instead of two: a run costs a kernel and a simulated cluster, ~30-60 s under load).
APPLIED_ON_KRAFT = ("broker_replacement", "health_check")
# Two default runs happen elsewhere and are checked there as these are (`check_the_planned_run`):
# the replacement's, from an installed wheel (test_runner_faults.py); the scale-out's, twice in
# the same second, with ZooKeeper credentials in the environment (test_runner_faults.py).
DEFAULTS_RUN_ELSEWHERE = ("broker_replacement", "scale_out")
DEFAULT_RUNS = [(name, "zookeeper") for name in RUNBOOKS if name not in DEFAULTS_RUN_ELSEWHERE]
CLUSTERS = [(name, "zookeeper") for name in APPLIED_ON_KRAFT] + \
    [(name, "kraft") for name in RUNBOOKS if name != "broker_replacement"]
KRAFT_SPEED = {"health_check": 20000}


def test_every_runbook_is_listed_and_every_parameter_documented():
    assert sorted(catalog.available()) == sorted(RUNBOOKS)
    for name in RUNBOOKS:
        declared = catalog.declared_parameters(catalog.runbook_path(name))
        assert {"zk", "bootstrap", "cluster", "apply", "record_path"} <= set(declared), name
        assert all(d["help"] for d in declared.values()), name  # papermill --help-notebook explains each
        assert declared["apply"]["default"] == "False"
        assert declared["cluster"]["default"] == '"zookeeper"' and declared["bootstrap"]["default"] == '""'


def record_of(stdout: str) -> dict:
    path = next(line.split("record: ", 1)[1] for line in stdout.splitlines() if "record: " in line)
    return json.loads(Path(path).read_text())


@pytest.mark.slow
@pytest.mark.parametrize("name, cluster", DEFAULT_RUNS)
def test_each_runbook_plans_with_its_defaults_and_leaves_a_readable_record(name, cluster, tmp_path):
    env = dict(os.environ, KIT_STATE_DIR=str(tmp_path / "state"))
    r = kit("run", name, "-p", "cluster", cluster, "--record-dir", tmp_path, timeout=600, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    rec = record_of(r.stdout)
    check_the_planned_run(rec, name, cluster)


def check_the_planned_run(rec: dict, name: str, cluster: str) -> None:
    """A runbook that only planned: every step passed, reached through the cluster's own
    interface (the simulated KRaft cluster stopped after), the record's HTML readable offline."""
    from kit.sim.kraft import state as kraft

    assert rec["outcome"] == "planned" and rec["exit_code"] == 0
    if cluster == "kraft":  # planned from what the Admin API said, the cluster stopped after
        assert rec["reached_through"] == "Kafka (Admin API)"
        assert rec["checks"][0]["check"] == "the Admin API answers" and "simulated KRaft" in rec["checks"][0]["detail"]
        assert not kraft.running(str(Path(rec["parameters"]["workdir"]) / "kraft"))
    else:
        assert rec["reached_through"] == "ZooKeeper"
    assert [s["step"] for s in rec["steps"]][:1] == ["situation"] and all(s["ok"] for s in rec["steps"])
    assert rec["command"].startswith(f"kit run {name}")
    html = Path(rec["html"]).read_text()
    assert "<img" in html and "data:image/png;base64" in html  # charts readable offline
    if name != "health_check":
        assert all(c["ok"] for c in rec["checks"]) and rec["plan"]["partitions"] > 0
        assert "PASS" in html


@pytest.mark.slow
@pytest.mark.parametrize("name, cluster", CLUSTERS)
def test_each_runbook_takes_a_parameter_file(name, cluster, tmp_path):
    params = tmp_path / "params.yaml"
    given = dict(PARAMETER_FILES[name])
    env = None
    if cluster == "kraft":
        given.update(cluster="kraft")
        if name in KRAFT_SPEED:
            given.update(speed=KRAFT_SPEED[name])
        # The Admin API client's settings come from the file the environment names, never a
        # parameter, and no file the run leaves names what is in it.
        props = tmp_path / "client.properties"
        props.write_text("ssl.key.password=hunter2-kraft-secret\n")
        env = dict(os.environ, KIT_KAFKA_COMMAND_CONFIG=str(props), KIT_STATE_DIR=str(tmp_path / "state"))
    params.write_text(yaml.safe_dump(given))
    r = kit("run", name, "-f", params, "--record-dir", tmp_path / "records", env=env, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    rec = record_of(r.stdout)
    for key, value in given.items():
        assert rec["parameters"][key] == (float(value) if isinstance(value, int) and key in ("speed",) else value)
    if cluster == "kraft":
        if PARAMETER_FILES[name].get("apply"):
            check_the_kraft_run(rec, tmp_path)
        else:
            check_the_planned_run(rec, name, cluster)
        for f in tmp_path.rglob("*"):
            if f.is_file() and f.name != "client.properties":
                assert b"hunter2-kraft-secret" not in f.read_bytes(), f
        return
    if PARAMETER_FILES[name].get("apply"):
        assert rec["outcome"] == "succeeded", rec["reason"]
        assert rec["change"]["done"] and rec["change"]["throttles_cleared"]
        events = [json.loads(x) for x in Path(rec["change"]["events"]).read_text().splitlines()]
        assert any(e["kind"] == "rate" for e in events)
        ends_finished(events)
        # On the simulated cluster the decisions carry the cluster's (simulated) time.
        from kit.sim.physics import SAMPLE_EPOCH

        assert all(e["time"].startswith(SAMPLE_EPOCH.strftime("%Y-%m-%d")) for e in events)
        # The record's clock is the cluster's: the simulated controller's time from apply to done.
        timing = rec["timing"]
        assert timing["clock"] == "simulated" and timing["actual_s"] > 0
        # The doctor's plan is a list of moves without kit's estimate; the planned runbooks have one.
        assert timing["estimate_s"] > 0 if name != "health_check" else timing["estimate_s"] is None
        assert rec["change"]["simulated_seconds"] == timing["actual_s"]
        # The cluster's clock: the simulated controller's own figure, not wall seconds x speed.
        controller = json.loads((Path(rec["change"]["rollback"]).parent / "controller.json").read_text())
        assert timing["actual_s"] == pytest.approx(controller["completion_s"])
    else:
        assert rec["outcome"] == "planned"


SLOW = 2000  # the slower of the two speeds of the run below


@pytest.mark.slow
def test_the_replacement_on_kraft_gives_the_same_record_at_any_speed(tmp_path):
    """Issue 34: the simulated KRaft cluster's controller runs from its start and waited for no
    one, so until the auto-throttle joined its clock it copied at the minimum rate for the
    loop's start-up wall seconds times the speed: the same run gave another `actual_s`, other
    decisions and another headline at each speed. Now the runbook holds the clock for the loop
    from before the apply. The two runs go side by side, one from a parameter file with the
    Admin API client's settings in the file the environment names."""
    props = tmp_path / "client.properties"
    props.write_text("ssl.key.password=hunter2-kraft-secret\n")
    params = tmp_path / "params.yaml"
    # 10x apart. At 1,000x the copy's 11,500 simulated seconds were 11.5 wall s of pace: the
    # slow run's change took 16 s against the fast one's 12 (its 38 rounds of the loop).
    params.write_text(yaml.safe_dump(dict(PARAMETER_FILES["broker_replacement"], cluster="kraft", speed=SLOW)))
    runs = {SLOW: ["-f", params],
            20000: ["-p", "cluster", "kraft", "-p", "apply", "true", "-p", "speed", "20000"]}
    started = {speed: subprocess.Popen(
        [*kit_command(), "run", "broker_replacement", *map(str, args), "--record-dir", str(tmp_path / f"at-{speed}")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=dict(os.environ, KIT_KAFKA_COMMAND_CONFIG=str(props), KIT_STATE_DIR=str(tmp_path / f"state-{speed}")))
        for speed, args in runs.items()}
    records = {}
    for speed, proc in started.items():
        out, _ = proc.communicate(timeout=900)
        assert proc.returncode == 0, out
        records[speed] = record_of(out)
        check_the_kraft_run(records[speed], tmp_path)
    assert records[SLOW]["parameters"]["replace"] == "1009:1013"
    for f in tmp_path.rglob("*"):
        if f.is_file() and f.name != "client.properties":
            assert b"hunter2-kraft-secret" not in f.read_bytes(), f
    slow, fast = records[SLOW], records[20000]
    assert (slow["outcome"], slow["reason"]) == (fast["outcome"], fast["reason"])
    assert fast["timing"]["actual_s"] == pytest.approx(slow["timing"]["actual_s"], rel=0.01)
    for key in ("failsafe", "minimum_s", "estimate_s"):
        assert fast["timing"][key] == slow["timing"][key], key

    def decisions(rec):
        lines = Path(rec["change"]["events"]).read_text().splitlines()
        return [(e["kind"], e["time"], e["brokers"], e.get("new")) for e in map(json.loads, lines)
                if e["kind"] == "rate"]
    assert decisions(slow) and decisions(slow) == decisions(fast)


def ends_finished(events: list[dict]) -> None:
    """The auto-throttle's last decision cleared the throttles, then `--until-idle` said why it
    stopped: the reassignment it watched finished."""
    from kit.throttle.loop import IDLE_FINISHED

    assert [e["kind"] for e in events][-1] == "idle" and events[-1]["reason"] == IDLE_FINISHED, [(e["kind"], e["reason"]) for e in events[-4:]]
    assert events[-2]["kind"] in ("done", "clear"), events[-3:]


def check_the_kraft_run(rec: dict, tmp_path: Path) -> None:
    """A change on the simulated KRaft cluster (broker_replacement's plan, health_check's heal):
    planned, applied through the Admin API with the auto-throttle (`kit throttle run
    --bootstrap`, the cluster's samples as its metrics), watched to the end, verified, every
    throttle gone; the cluster stopped after."""
    from kit.runbook.steps import simulated_copy_seconds
    from kit.sim.kraft import state as kraft

    assert rec["outcome"] == "succeeded", rec["reason"]
    assert rec["reached_through"] == "Kafka (Admin API)"
    assert rec["change"]["done"] and rec["change"]["throttles_cleared"]
    files = Path(rec["change"]["rollback"]).parent
    assert json.loads((files / "plan.json").read_text())["partitions"]
    events = [json.loads(x) for x in Path(rec["change"]["events"]).read_text().splitlines()]
    ends_finished(events)
    if rec["runbook"] == "health_check":  # the doctor's heal: every under-replicated partition healed
        assert rec["doctor"]["status"] != "alert" and rec["plan"]["partitions"] > 0
        assert rec["under_replicated"]["before"] > 0 and rec["under_replicated"]["after"] == 0, rec["under_replicated"]
    else:
        assert rec["checks"][0]["check"] == "the Admin API answers" and "simulated KRaft" in rec["checks"][0]["detail"]
        assert rec["under_replicated"] == {"before": 150, "after": 0}
        decided = [e for e in events if e.get("source") == "throttle" and e["kind"] == "rate"]
        assert decided and {1013} & {b for e in decided for b in e["brokers"]}, events[:5]
    # The cluster's clock: the simulated controller's, from its samples (it writes no report:
    # it runs for the cluster's life, started by kit sim start's code with the runbook's speed).
    timing = rec["timing"]
    assert timing["clock"] == "simulated" and timing["actual_s"] > 0
    # The doctor's plan is a list of moves without kit's estimate; the planned runbooks have one.
    assert timing["estimate_s"] > 0 if rec["runbook"] != "health_check" else timing["estimate_s"] is None
    assert timing["actual_s"] == pytest.approx(simulated_copy_seconds(str(files / "kraft" / "samples"))[0])
    assert not (files / "controller.json").exists()
    assert not kraft.running(str(files / "kraft"))  # stopped at the end, as the ZooKeeper one is


@pytest.mark.slow
@pytest.mark.parametrize("cluster", ["zookeeper", "kraft"])
def test_a_runbook_that_stops_at_a_check_leaves_a_record_and_exits_non_zero(cluster, tmp_path):
    from kit.cluster.zk import server as localzk
    from kit.sim.kraft import state as kraft

    r = kit("run", "broker_replacement", "-p", "replace", "1009:4242", "-p", "cluster", cluster,
            "--record-dir", tmp_path, timeout=300)
    assert r.returncode == 3
    rec = record_of(r.stdout)
    assert rec["outcome"] == "stopped" and "4242" in rec["reason"]
    assert any(not c["ok"] and "4242" in c["check"] for c in rec["checks"])
    assert Path(rec["html"]).exists() and "FAIL" in Path(rec["html"]).read_text()
    # The kernel stopped at the failed cell: kit run stops the simulated cluster it left.
    files = Path(rec["parameters"]["workdir"])
    assert localzk.status(str(files / "zookeeper")) is None and not kraft.running(str(files / "kraft"))


@pytest.mark.parametrize("args, message", [
    (["-p", "nope", "1"], "unknown parameter 'nope'"),
    (["-p", "apply", "maybe"], "parameter apply: expected bool"),
    (["-p", "speed", "[1, 2]"], "parameter speed: expected float"),
    (["-p", "record_path", "x"], "set by kit run"),
    # Values that used to apply the plan and then never copy a byte.
    (["-p", "speed", "-5"], "parameter speed: must be above 0"),
    (["-p", "client_load", ".nan"], "parameter client_load: must be a finite number"),
    (["-p", "max_wait_s", "0"], "parameter max_wait_s: must be above 0"),
    (["-p", "throttle", "fast"], "parameter throttle: \"auto\" or a positive rate"),
    (["-p", "cap_map", '{"standard": -1}'], "parameter cap_map: 'standard' must be a positive number"),
    # One cluster: ZooKeeper, a KRaft cluster's brokers, or a simulated one of the two kinds.
    (["-p", "cluster", "kafka"], 'parameter cluster: "zookeeper" or "kraft"'),
    (["-p", "zk", "127.0.0.1:2181", "-p", "bootstrap", "127.0.0.1:9092"], "parameters zk and bootstrap"),
    (["-p", "zk", "127.0.0.1:2181", "-p", "cluster", "kraft"], "takes bootstrap, not zk"),
    (["-p", "bootstrap", "broker-without-port"], "expected HOST:PORT"),
    # A ZooKeeper address that does not parse is said before anything starts (it ended `failed`).
    (["-p", "zk", "not a zk"], "parameter zk 'not a zk': expected HOST:PORT[/chroot]"),
    (["-p", "zk", "127.0.0.1:70000/kafka"], "with a port in 1..65535"),
])
def test_bad_parameters_exit_2_and_write_nothing(tmp_path, args, message):
    r = kit("run", "broker_replacement", *args, "--record-dir", tmp_path / "records")
    assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "records").exists()


def test_unknown_runbook_is_bad_input(tmp_path):
    r = kit("run", "reboot_everything", "--record-dir", tmp_path / "records")
    assert r.returncode == 2 and "broker_replacement" in r.stderr and not (tmp_path / "records").exists()


def test_parameters_keep_their_declared_types():
    declared = catalog.declared_parameters(catalog.runbook_path("broker_replacement"))
    got = runbook.parse_parameters(declared, [("replace", "1009:1013"), ("zk", "10.0.0.1:2181/kafka"),
                                              ("cap_map", '{"standard": 125}'), ("speed", "5000"),
                                              ("apply", "yes")], [])
    assert got == {"replace": "1009:1013", "zk": "10.0.0.1:2181/kafka", "cap_map": {"standard": 125},
                   "speed": 5000.0, "apply": True}


@pytest.mark.slow
def test_exploratory_notebooks_pass_nbval_lax():
    notebooks = Path(__file__).resolve().parents[2] / "notebooks"
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "--nbval-lax", "-p", "no:cacheprovider",
                        str(notebooks / "capacity_planning.ipynb")], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:]
    assert " passed" in r.stdout


class _Handle:
    def __init__(self):
        self.shown = []

    def update(self, obj):
        self.shown.append(obj)


def test_the_gate_applies_only_with_apply_or_a_button_press(monkeypatch, capsys):
    """papermill: apply=False changes nothing and shows no button (nobody will press it); in a
    live notebook the Apply button does it. (Changed: the button shows only in a live notebook.)"""
    import ipywidgets

    from kit.runbook import steps as runbook_steps

    shown, calls = [], []

    def display(*objs, **kw):
        shown.extend(objs)
        return _Handle() if kw.get("display_id") else None
    monkeypatch.setattr("IPython.display.display", display)
    assert runbook_steps.gate(True, lambda: calls.append("now")) is True and calls == []
    assert runbook_steps.gate(False, lambda: calls.append("pressed")) is False and calls == [] and not shown
    assert "nothing is changed" in capsys.readouterr().out
    monkeypatch.setattr("kit.runbook.gate.live_notebook", lambda: True)  # the gate asks where it runs
    assert runbook_steps.gate(False, lambda: calls.append("pressed")) is False and calls == []
    button = next(w for box in shown if isinstance(box, ipywidgets.VBox) for w in box.children
                  if isinstance(w, ipywidgets.Button))
    assert button.description == "Apply"
    button.click()
    assert calls == ["pressed"] and button.disabled


@pytest.mark.slow
def test_if_the_auto_throttle_fails_the_copy_goes_on_throttled_and_the_record_says_so(tmp_path):
    """A metrics source the loop cannot read (a file where it wants a samples directory) stops
    the loop at its start; the plan was applied at the loop's minimum rate, so the copy goes on
    throttled (never unthrottled) and finishes, and the record names the failure. (A capacity
    map knowing none of the instance types no longer stops it on the simulated cluster: the
    brokers' seeded NIC figures come first, kit.nic.)"""
    not_samples = tmp_path / "not-a-samples-directory"
    not_samples.write_text("x\n")
    r = kit("run", "broker_replacement", "-p", "apply", "true", "-p", "speed", "50000",
            "-p", "throttle_metrics", not_samples, "--record-dir", tmp_path / "records", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    rec = record_of(r.stdout)
    assert rec["outcome"] == "succeeded" and "auto-throttle stopped early" in rec["reason"]
    assert "not a directory" in rec["throttle_failure"]
    assert rec["change"]["done"] and rec["change"]["throttles_cleared"]
    assert "WARNING: the auto-throttle stopped" in Path(rec["html"]).read_text()


@pytest.mark.slow
def test_a_run_held_at_the_fail_safe_says_so_in_its_headline_title_and_timing(tmp_path):
    """Metrics withheld (an empty samples directory): the auto-throttle never gets a sample and
    keeps every broker at its 10 MB/s fail-safe. The copy finishes, and the record does not
    hide how: the outcome line, the HTML's title and first screen, and `timing` say so."""
    empty = tmp_path / "no-metrics"
    empty.mkdir()
    r = kit("run", "broker_replacement", "-p", "apply", "true", "-p", "speed", "50000",
            "-p", "throttle_metrics", empty, "--record-dir", tmp_path / "records", timeout=400)
    assert r.returncode == 0, r.stdout + r.stderr
    rec = record_of(r.stdout)
    assert rec["outcome"] == "succeeded" and "fail-safe" in rec["reason"]
    timing = rec["timing"]
    assert timing["clock"] == "simulated" and timing["actual_s"] > 0 and timing["estimate_s"] > 0
    # Held at the fail-safe from apply to done: nearly the whole copy. (No sample reached the
    # loop, so its events carry the wall clock, scaled onto the copy's span: approximate.)
    assert timing["failsafe_s"] >= 0.75 * timing["actual_s"], timing
    assert "1013" in timing["failsafe"]["brokers"]
    assert rec["under_replicated"] == {"before": 150, "after": 0}
    html = Path(rec["html"]).read_text()
    title = html.split("<title>", 1)[1].split("</title>", 1)[0]
    assert title.startswith("broker_replacement: succeeded (with ") and "10 MB/s fail-safe" in title
    # The headline is the first thing on the page, before any code.
    first = re.search(r"class=[\"']kit-headline", html).start()
    assert first < html.index('<div class="jp-InputArea') and first < html.index('id="Broker-replacement"')
    for words in ("estimated", "actual", "simulated cluster", "under-replicated partitions", "150 → 0",
                  "rollback.json", "at the fail-safe (metrics missing)", "at the minimum rate"):
        assert words in html, words
    import nbformat

    nb = nbformat.read(rec["notebook"], as_version=4)
    head = nb.cells[0]
    assert "kit-headline" in head.metadata["tags"] and "fail-safe" in head.outputs[0]["data"]["text/plain"]


def test_brokers_the_loop_never_decided_for_count_as_held_at_the_fail_safe(tmp_path):
    """A copy that ends before the auto-throttle's first round (a fast simulator, a loop slow
    to start on a loaded machine) ran at the minimum applied with the plan all along: the
    record says so instead of showing no fail-safe at all."""
    from datetime import datetime, timedelta, timezone

    from kit.runbook.steps import floor_time

    start = datetime(2024, 1, 1, tzinfo=timezone.utc)
    end = start + timedelta(hours=2)
    events = tmp_path / "events.jsonl"
    held = floor_time(str(events), start, end, failsafe_only=True, applied_to=[1001, 1013])
    assert held["seconds"] == 7200 and held["brokers"] == {1001: 7200, 1013: 7200}
    assert floor_time(str(events), start, end, failsafe_only=True)["seconds"] == 0  # nothing applied

    # The loop raised 1001 after an hour from measured traffic and never reached 1013.
    events.write_text(json.dumps({"source": "throttle", "kind": "rate", "time": "2024-01-01T01:00:00Z",
                                  "brokers": [1001], "role": "leader", "old": 10e6, "new": 50e6,
                                  "reason": "measured"}) + "\n")
    held = floor_time(str(events), start, end, failsafe_only=True, applied_to=[1001, 1013])
    assert held["brokers"] == {1013: 7200}, held

    # A loop that started late found 1013's partitions done and cleared it after 30 minutes,
    # without ever setting its rate: held until the clear.
    events.write_text(json.dumps({"source": "throttle", "kind": "clear", "time": "2024-01-01T00:30:00Z",
                                  "brokers": [1013], "reason": "no longer takes part in the reassignment"}) + "\n")
    held = floor_time(str(events), start, end, failsafe_only=True, applied_to=[1001, 1013])
    assert held["brokers"] == {1001: 7200, 1013: 1800}, held

    # With no samples the loop stamps its events with the wall clock: the change's wall span
    # (apply to done) is mapped onto the cluster's, so a loop that started late still counts
    # the time from apply, and a clear it made after the copy ended counts to the end.
    def clear_at(*stamps):
        events.write_text("".join(json.dumps({"source": "throttle", "kind": "clear", "time": t,
                                              "brokers": [b], "reason": "no longer takes part"}) + "\n"
                                  for b, t in stamps))
    clear_at((1013, "2026-11-23T10:00:02Z"), (1001, "2026-11-23T10:00:09Z"))
    held = floor_time(str(events), start, end, failsafe_only=True, applied_to=[1001, 1013],
                      wall_span=("2026-11-23T10:00:00Z", "2026-11-23T10:00:04Z"))
    assert held["brokers"] == {1001: 7200, 1013: 3600}, held


def test_the_fail_safe_is_never_blamed_on_a_broker_that_copies_nothing(zookeeper, snapshots, tmp_path):
    """The apply throttles every replica of a moving partition at the minimum, as Kafka's tool
    does, the dead broker's included; the loop then takes the dead broker's rate off at its
    first round, as late as its start allows (10,000 simulated seconds at 20,000x). The dead
    broker copied nothing: it is not among the brokers held at the minimum from apply, and the
    fail-safe time names only brokers that send or receive."""
    from datetime import datetime, timedelta, timezone

    from kit.formats import load_snapshot
    from kit.plan import plan_replace
    from kit.plan.pairs import pair_dead_with_new
    from kit.runbook.steps import Environment, apply_plan, floor_time

    root = f"{zookeeper}/kit-runbook-floor"
    assert kit("sim", "seed", "--zk", root, "--snapshot", snapshots["replace"]).returncode == 0
    cluster = load_snapshot(str(snapshots["replace"]))
    (dead, new), = pair_dead_with_new(cluster)
    plan = plan_replace(cluster, [(dead, new)])
    change = apply_plan(Environment(root, False, str(tmp_path)), plan.reassignment()["partitions"], "auto")
    moves = plan.reassignment()["partitions"]
    sources = {next(b for b in p.isr if b != dead) for p in cluster.partitions
               if any((m["topic"], m["partition"]) == p.key for m in moves)}
    assert set(change.applied_to) == sources | {new}, change.applied_to
    assert dead not in change.applied_to

    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    end = start + timedelta(hours=8)
    events = tmp_path / "events.jsonl"
    events.write_text("".join(json.dumps(e) + "\n" for e in [
        {"source": "throttle", "kind": "clear", "time": "2026-01-01T02:46:40Z", "brokers": [dead],
         "reason": "the reassignment in flight does not need them; dead, copying nothing"},
        *({"source": "throttle", "kind": "rate", "time": "2026-01-01T02:49:14Z", "brokers": [b],
           "role": "leader" if b != new else "follower", "old": 10e6, "new": 50e6, "reason": "measured"}
          for b in sorted(sources | {new})),
        {"source": "throttle", "kind": "done", "time": "2026-01-01T08:00:00Z", "brokers": [], "reason": "done"}]))
    failsafe = floor_time(str(events), start, end, failsafe_only=True, applied_to=change.applied_to)
    assert failsafe["seconds"] == 0 and failsafe["brokers"] == {}, failsafe
    minimum = floor_time(str(events), start, end, applied_to=change.applied_to)
    assert dead not in minimum["brokers"] and set(minimum["brokers"]) == sources | {new}, minimum


def test_the_reproduce_command_names_only_the_parameters_that_matter():
    """A run on a cluster of yours drops what only the simulated cluster reads, every parameter
    at its declared default, and the working directory derived from the record (a rerun must
    not overwrite this run's rollback file); what was given stays."""
    from kit.runbook.steps import command_line

    # A run from a live notebook (no record path yet: its workdir is <runbook>-files).
    given = dict(zk="", bootstrap="10.0.0.1:9092,10.0.0.2:9092", cluster="zookeeper", replace="", apply=False,
                 throttle="auto", cap_map={}, throttle_metrics="", speed=2000.0, client_load=0.5, max_wait_s=900.0,
                 workdir="broker_replacement-files")
    assert command_line("broker_replacement", given) == \
        "kit run broker_replacement -p bootstrap 10.0.0.1:9092,10.0.0.2:9092"
    # `kit run`'s: the workdir beside the record.
    record = "/records/20260101T000000Z-broker_replacement.json"
    given["workdir"] = "/records/20260101T000000Z-broker_replacement-files"
    assert command_line("broker_replacement", given, record) == \
        "kit run broker_replacement -p bootstrap 10.0.0.1:9092,10.0.0.2:9092"
    on_zk = dict(given, bootstrap="", zk="10.0.0.1:2181/kafka", speed=20000.0, apply=True, cap_map={"*": 125},
                 workdir="/var/kit/replace")
    assert command_line("broker_replacement", on_zk, record) == ("kit run broker_replacement -p apply true -p cap_map "
                                                                 "'{\"*\": 125}' -p workdir /var/kit/replace -p zk "
                                                                 "10.0.0.1:2181/kafka")
    simulated = dict(given, bootstrap="", speed=20000.0, apply=True)
    assert command_line("broker_replacement", simulated, record) == \
        "kit run broker_replacement -p apply true -p speed 20000.0"
    assert command_line("broker_replacement", dict(given, bootstrap=""), record) == "kit run broker_replacement"


@pytest.mark.parametrize("address", ["zk", "bootstrap"])
def test_the_pre_check_shows_the_whole_address(address, capsys):
    """`kit dashboard --zk` needs the chroot, `--bootstrap` every broker: the check shows the
    address as the runbook was given it."""
    from kit.formats import load_snapshot
    from kit.runbook.steps import Checks, Environment, common_checks

    where = "10.0.0.1:2181,10.0.0.2:2181/kafka/prod" if address == "zk" else "10.0.0.1:9092,10.0.0.2:9092"
    env = Environment(where if address == "zk" else "", False, "unused",
                      bootstrap=where if address == "bootstrap" else "")
    env.read = lambda: (load_snapshot(str(catalog.RUNBOOKS / "clusters" / "broker_replacement.json")), None)
    checks = Checks()
    common_checks(env, checks)
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("PASS") and first.endswith(f" — {where}"), first


def test_a_dead_brokers_unknown_rack_is_not_called_another_rack():
    """Read from ZooKeeper a dead broker has no rack (its registration is gone): the plan's
    NOTE says the rack is unknown, never "from another rack (None)"; a known other rack is
    still named."""
    import dataclasses

    from kit.formats import load_snapshot
    from kit.plan import plan_replace

    cluster = load_snapshot(str(catalog.RUNBOOKS / "clusters" / "broker_replacement.json"))
    assert cluster.rack_of(1009) == cluster.rack_of(1013) == "rack-c"
    as_zookeeper_has_it = dataclasses.replace(cluster, brokers={**cluster.brokers, 1009: dataclasses.replace(
        cluster.brokers[1009], rack=None)})
    (note,) = plan_replace(as_zookeeper_has_it, [(1009, 1013)]).notes
    assert note.startswith("broker 1013 (rack rack-c) replaces 1009, whose rack is unknown"), note
    assert "another rack" not in note and "None" not in note
    assert plan_replace(cluster, [(1009, 1013)]).notes == []
    moved = dataclasses.replace(cluster, brokers={**cluster.brokers, 1009: dataclasses.replace(
        cluster.brokers[1009], rack="rack-a")})
    assert plan_replace(moved, [(1009, 1013)], ignore_warns=True).notes[0] == \
        "broker 1013 (rack rack-c) replaces 1009 from another rack (rack-a)"


def test_the_plan_summary_says_the_duration_once_for_the_run_the_runbook_makes(capsys):
    """One Duration section (summary_text's, not a second copy), on the cluster's clock, for
    the run the runbook makes: the whole plan at once, said so, with no waves' figure beside
    it. The movement figures' bounds say what result they bound (a replacement keeps the old
    counts: it copies less than a balancing plan could), and no model's jargon is left."""
    import dataclasses

    from kit.formats import load_snapshot
    from kit.plan import plan_replace
    from kit.runbook.steps import Environment, headline, plan_summary

    cluster = load_snapshot(str(catalog.RUNBOOKS / "clusters" / "broker_replacement.json"))
    plan = plan_replace(cluster, [(1009, 1013)])
    figures = plan_summary(plan, env=Environment("127.0.0.1:2181/kafka", True, "unused"), speed=20000.0)
    out = capsys.readouterr().out
    assert out.count("Duration estimate:") == 1 and out.count("  estimate:  ") == 1, out
    assert "on the simulated cluster's clock" in out and "simulated cluster time" not in out
    assert "applied all at once, not in waves" in out and "  in waves:" not in out and "wave 1" not in out
    assert "a result with even replica counts would need at least" in out
    assert "a result with no broker above the mean storage would move at least" in out
    for jargon in ("lower bound for a count-balanced result", "lower bound to the mean", "fluid model", "analytic",
                   "physical lower bound", "snapshot's"):
        assert jargon not in out, jargon
    assert figures["estimate_s"] > 0 and figures["estimate_unknown"] is None

    # A cluster of yours that gives no NIC capacity: no estimate, on the wall clock, and why.
    blind = dataclasses.replace(cluster, brokers={b: dataclasses.replace(x, net_capacity=None)
                                                  for b, x in cluster.brokers.items()})
    figures = plan_summary(plan_replace(blind, [(1009, 1013)]), env=Environment("10.0.0.1:2181/kafka", False, "unused"))
    out = capsys.readouterr().out
    assert figures["estimate_s"] is None and "cap_map" in figures["estimate_unknown"], figures
    assert out.count("duration unknown: no NIC capacity is known for broker(s) 1001") == 1, out
    head = headline({"runbook": "broker_replacement", "outcome": "planned", "plan": figures,
                     "timing": {"estimate_s": None, "actual_s": None, "clock": "wall"}}).text()
    row = next(line for line in head.splitlines() if line.strip().startswith("duration (wall clock)"))
    assert "estimated unknown (no NIC capacity known for broker(s) 1001" in row and "cap_map" in row, row


def test_the_headline_names_the_minimum_rate_and_says_nothing_of_it_under_a_fixed_throttle():
    """The time at the minimum says which rate (the auto-throttle's, in MB/s); a run at a fixed
    throttle has no auto-throttle, so neither its fail-safe nor its minimum is shown."""
    from kit.runbook.steps import headline

    record = {"runbook": "broker_replacement", "outcome": "succeeded", "parameters": {"throttle": "auto"},
              "change": {"rollback": "/r/rollback.json"},
              "timing": {"estimate_s": 100.0, "actual_s": 120.0, "clock": "simulated", "failsafe_s": 0.0,
                         "minimum_s": 50.0, "failsafe": {"seconds": 0.0, "rate": 10e6, "brokers": {}}}}
    rows = dict(line.strip().split("  ", 1) for line in headline(record).text().splitlines()[1:])
    assert rows["at the minimum rate"].strip().startswith("50s with some broker copying at the auto-throttle's "
                                                           "10 MB/s minimum"), rows
    assert rows["at the fail-safe (metrics missing)"].strip() == "0s"
    fixed = dict(record, parameters={"throttle": "50000000"},
                 timing=dict(record["timing"], minimum_s=0.0, failsafe={"seconds": 0.0, "rate": 50e6, "brokers": {}}))
    text = headline(fixed).text()
    assert "minimum" not in text and "fail-safe" not in text, text


def test_the_runbook_refuses_a_plan_kit_plan_refuses(monkeypatch):
    """One verdict (kit.report.review.review_plan) for `kit plan`, the runbooks and the doctor."""
    from kit.report import figures
    from kit.runbook import steps as runbook_steps
    from kit.formats import load_snapshot
    from kit.plan import plan_replace

    cluster = load_snapshot(str(catalog.RUNBOOKS / "clusters" / "broker_replacement.json"))
    plan = plan_replace(cluster, [(1009, 1013)])
    real = figures.plan_report

    def with_a_problem(p, *arrays):
        report = real(p, *arrays)
        return {**report, "problems": ["topic-0000 p0 lists broker 1013 twice"], "problem_count": 1}
    monkeypatch.setattr(figures, "plan_report", with_a_problem)
    with pytest.raises(runbook_steps.CheckFailed, match="the plan failed its own checks: topic-0000 p0 lists"):
        runbook_steps.plan_summary(plan)
    from kit.errors import Unsafe
    from kit.report.review import review_plan

    with pytest.raises(Unsafe, match="the plan failed its own checks: topic-0000 p0 lists") as refused:
        review_plan(plan)
    assert refused.value.exit_code == 3 and refused.value.report["problem_count"] == 1
