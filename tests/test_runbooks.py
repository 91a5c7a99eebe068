"""The runbooks, executed for real: `kit run` drives papermill and a Jupyter kernel against a
local ZooKeeper with a simulated cluster (each runbook's default), into records."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import run_kit as kit
from kit import runbook

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


def test_every_runbook_is_listed_and_every_parameter_documented():
    assert sorted(runbook.available()) == sorted(RUNBOOKS)
    for name in RUNBOOKS:
        declared = runbook.declared_parameters(runbook.runbook_path(name))
        assert {"zk", "apply", "record_path"} <= set(declared), name
        assert all(d["help"] for d in declared.values()), name  # papermill --help-notebook explains each
        assert declared["apply"]["default"] == "False"


def record_of(stdout: str) -> dict:
    path = next(line.split("record: ", 1)[1] for line in stdout.splitlines() if "record: " in line)
    return json.loads(Path(path).read_text())


@pytest.mark.parametrize("name", RUNBOOKS)
def test_each_runbook_plans_with_its_defaults_and_leaves_a_readable_record(name, tmp_path):
    r = kit("run", name, "--record-dir", tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    rec = record_of(r.stdout)
    assert rec["outcome"] == "planned" and rec["exit_code"] == 0
    assert [s["step"] for s in rec["steps"]][:1] == ["situation"] and all(s["ok"] for s in rec["steps"])
    assert rec["command"].startswith(f"kit run {name}")
    html = Path(rec["html"]).read_text()
    assert "<img" in html and "data:image/png;base64" in html  # charts readable offline
    if name != "health_check":
        assert all(c["ok"] for c in rec["checks"]) and rec["plan"]["partitions"] > 0
        assert "PASS" in html


@pytest.mark.parametrize("name", RUNBOOKS)
def test_each_runbook_takes_a_parameter_file(name, tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(PARAMETER_FILES[name]))
    r = kit("run", name, "-f", params, "--record-dir", tmp_path / "records", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    rec = record_of(r.stdout)
    for key, value in PARAMETER_FILES[name].items():
        assert rec["parameters"][key] == (float(value) if isinstance(value, int) and key in ("speed",) else value)
    if PARAMETER_FILES[name].get("apply"):
        assert rec["outcome"] == "succeeded", rec["reason"]
        assert rec["change"]["done"] and rec["change"]["throttles_cleared"]
        events = [json.loads(x) for x in Path(rec["change"]["events"]).read_text().splitlines()]
        assert any(e["kind"] == "rate" for e in events) and events[-1]["kind"] in ("done", "clear")
        # On the simulated cluster the decisions carry the cluster's (simulated) time.
        from kit.sim import SAMPLE_EPOCH

        assert all(e["time"].startswith(SAMPLE_EPOCH.strftime("%Y-%m-%d")) for e in events)
    else:
        assert rec["outcome"] == "planned"


def test_a_runbook_that_stops_at_a_check_leaves_a_record_and_exits_non_zero(tmp_path):
    r = kit("run", "broker_replacement", "-p", "replace", "1009:4242", "--record-dir", tmp_path, timeout=300)
    assert r.returncode == 3
    rec = record_of(r.stdout)
    assert rec["outcome"] == "stopped" and "4242" in rec["reason"]
    assert any(not c["ok"] and "4242" in c["check"] for c in rec["checks"])
    assert Path(rec["html"]).exists() and "FAIL" in Path(rec["html"]).read_text()


@pytest.mark.parametrize("args, message", [
    (["-p", "nope", "1"], "unknown parameter 'nope'"),
    (["-p", "apply", "maybe"], "parameter apply: expected bool"),
    (["-p", "speed", "[1, 2]"], "parameter speed: expected float"),
    (["-p", "record_path", "x"], "set by kit run"),
])
def test_bad_parameters_exit_2_and_write_nothing(tmp_path, args, message):
    r = kit("run", "broker_replacement", *args, "--record-dir", tmp_path / "records")
    assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "records").exists()


def test_unknown_runbook_is_bad_input(tmp_path):
    r = kit("run", "reboot_everything", "--record-dir", tmp_path / "records")
    assert r.returncode == 2 and "broker_replacement" in r.stderr and not (tmp_path / "records").exists()


def test_parameters_keep_their_declared_types():
    declared = runbook.declared_parameters(runbook.runbook_path("broker_replacement"))
    got = runbook.parse_parameters(declared, [("replace", "1009:1013"), ("zk", "10.0.0.1:2181/kafka"),
                                              ("cap_map", '{"standard": 125}'), ("speed", "5000"),
                                              ("apply", "yes")], [])
    assert got == {"replace": "1009:1013", "zk": "10.0.0.1:2181/kafka", "cap_map": {"standard": 125},
                   "speed": 5000.0, "apply": True}


def test_credentials_stay_out_of_records(tmp_path):
    env = dict(os.environ, KIT_ZK_AUTH="digest:oncall:hunter2-secret")
    r = kit("run", "scale_out", "--record-dir", tmp_path, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    for f in tmp_path.rglob("*"):
        if f.is_file():
            assert b"hunter2-secret" not in f.read_bytes(), f


def test_exploratory_notebooks_pass_nbval_lax():
    notebooks = Path(__file__).resolve().parents[1] / "notebooks"
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "--nbval-lax", "-p", "no:cacheprovider",
                        str(notebooks / "capacity_planning.ipynb")], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:]
    assert " passed" in r.stdout


def test_the_gate_applies_only_with_apply_or_a_button_press(monkeypatch):
    """papermill: apply=False changes nothing; in a live notebook the Apply button does it."""
    import ipywidgets

    from kit import runbook_steps

    shown, calls = [], []
    monkeypatch.setattr("IPython.display.display", lambda *objs, **kw: shown.extend(objs))
    assert runbook_steps.gate(True, lambda: calls.append("now")) is True and calls == []
    assert runbook_steps.gate(False, lambda: calls.append("pressed")) is False and calls == []
    button = next(w for box in shown if isinstance(box, ipywidgets.VBox) for w in box.children
                  if isinstance(w, ipywidgets.Button))
    assert button.description == "Apply"
    button.click()
    assert calls == ["pressed"] and button.disabled


def test_if_the_auto_throttle_fails_the_copy_goes_on_throttled_and_the_record_says_so(tmp_path):
    """A capacity map that knows none of the brokers' instance types stops the loop at its
    first metrics; the plan was applied at the loop's minimum rate, so the copy goes on
    throttled (never unthrottled) and finishes, and the record names the failure."""
    r = kit("run", "broker_replacement", "-p", "apply", "true", "-p", "speed", "50000",
            "-p", "cap_map", '{"other": 100}', "--record-dir", tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    rec = record_of(r.stdout)
    assert rec["outcome"] == "succeeded" and "auto-throttle stopped early" in rec["reason"]
    assert "instance type 'standard'" in rec["throttle_failure"]
    assert rec["change"]["done"] and rec["change"]["throttles_cleared"]
    assert "WARNING: the auto-throttle stopped" in Path(rec["html"]).read_text()
