"""The runbooks' entry point (`kit.runbook.steps.start`): the parameters are read once, from
the runbook's parameters cell, and the pre-checks step stops the run on a failed check; no
cluster or kernel needed."""
from __future__ import annotations

import json

import pytest

from kit.formats import load_snapshot
from kit.runbook import steps
from kit.runbook.catalog import RUNBOOKS, declared_defaults


def test_start_records_every_declared_parameter_as_given_and_derives_the_workdir(tmp_path):
    declared = declared_defaults("broker_replacement")
    record = tmp_path / "20260101T000000Z-broker_replacement.json"
    # The notebook's globals: the declared parameters (papermill's values injected), and more.
    namespace = {**declared, "speed": 20000.0, "replace": "1009:1013", "record_path": str(record),
                 "rb": steps, "current": None}
    run = steps.start("broker_replacement", namespace)
    assert run.workdir == str(tmp_path / "20260101T000000Z-broker_replacement-files")
    doc = json.loads(record.read_text())
    expected = {k: v for k, v in namespace.items() if k in declared and k != "record_path"}
    assert doc["parameters"] == dict(expected, workdir=run.workdir)
    assert doc["command"] == "kit run broker_replacement -p replace 1009:1013 -p speed 20000.0"
    given = dict(namespace, workdir=str(tmp_path / "mine"), record_path="")
    assert steps.start("broker_replacement", given).workdir == str(tmp_path / "mine")


def test_a_failed_pre_check_stops_the_run_in_its_step(tmp_path, capsys):
    record = tmp_path / "r.json"
    run = steps.start("scale_out", {**declared_defaults("scale_out"), "record_path": str(record)})
    run.env = steps.Environment("10.0.0.1:2181/kafka", False, str(tmp_path))
    run.env.read = lambda: (load_snapshot(str(RUNBOOKS / "clusters" / "scale_out.json")), None)
    with pytest.raises(steps.CheckFailed, match="pre-check failed: a check of the runbook's own: why"):
        with run.pre_checks() as (checks, cluster):
            assert cluster.partitions
            checks.check("a check of the runbook's own", False, "why")
    doc = json.loads(record.read_text())
    assert [c["check"] for c in doc["checks"]] == ["ZooKeeper answers", "no reassignment in progress",
                                                   "a check of the runbook's own"]
    assert doc["steps"][-1]["step"] == "pre-checks" and doc["steps"][-1]["ok"] is False
    assert doc["outcome"] == "stopped" and "why" in doc["reason"]
    assert "FAIL  a check of the runbook's own — why" in capsys.readouterr().out
