"""The notebooks, run for real through papermill and a Python kernel."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

papermill = pytest.importorskip("papermill")

ROOT = Path(__file__).resolve().parents[2]
CAPACITY = ROOT / "notebooks" / "capacity_planning.ipynb"


def outputs(nb) -> str:
    text = []
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            text.append("".join(out.get("text", "")))
            text.append(str(out.get("data", {}).get("text/plain", "")))
    return "\n".join(text)


def test_every_parameter_is_documented_for_papermill():
    r = subprocess.run([str(Path(sys.executable).parent / "papermill"), "--help-notebook", str(CAPACITY)],
                       capture_output=True, text=True)
    for name in ("snapshot", "pools", "retention_hours", "target_utilization", "growth_per_month",
                 "months", "current_type", "instance_types", "show_rows"):
        assert f"{name}:" in r.stdout, name


def test_capacity_planning_runs_and_says_how_many_brokers_to_add(tmp_path, make_snapshot):
    snap = make_snapshot("--brokers", "12", "--racks", "3", "--partitions", "600", "--topics", "6", "--seed", "3")
    out = tmp_path / "capacity.ipynb"
    nb = papermill.execute_notebook(str(CAPACITY), str(out), kernel_name="python3", cwd=str(ROOT),
                                    parameters={"snapshot": str(snap), "growth_per_month": 0.2,
                                                "pools": {"first": "topic-000[0-2]", "rest": "topic-000[3-5]"}},
                                    progress_bar=False)
    text = outputs(nb)
    assert "12 brokers, 600 partitions, 2 workloads" in text
    assert "brokers_to_add" in text and "cheapest_type" in text
    assert "first" in text and "rest" in text
