"""bench_plan.py's measurements of one run: its own peak memory, and an end to every run."""
from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import bench_plan  # noqa: E402


def test_a_runs_peak_is_its_own_not_the_benchmarks(tmp_path):
    # The benchmark holds a big snapshot while it runs kit (as bench_plan.py does at 200,000
    # partitions); Linux hands a forked child's peak its parent's high-water mark at exec.
    held = bytearray(300 * 2**20)
    for i in range(0, len(held), 4096):
        held[i] = 1
    dt, cpu, peak, code = bench_plan.run_child([sys.executable, "-c", "pass"], tmp_path / "out", tmp_path / "err")
    assert code == 0 and dt > 0 and cpu > 0
    assert 1 < peak < 150, peak  # a bare Python start-up, some 10-30 MiB; 300+ read the parent's
    del held


def test_a_run_past_its_timeout_is_stopped_and_says_so(tmp_path):
    t0 = time.monotonic()
    _, _, _, code = bench_plan.run_child(["sleep", "120"], tmp_path / "out", tmp_path / "err", timeout=1.0)
    assert code is None and time.monotonic() - t0 < 100  # stopped, not waited out
    runs = bench_plan.Runs()
    said = bench_plan.timed_run(["sleep", "120"], tmp_path / "plan.json", 1.0, runs, tmp_path / "run", timeout=1.0)
    assert said == "stopped after 1 s (wall clock)" and runs.times == []


def test_a_failed_run_gives_its_exit_code(tmp_path):
    _, _, _, code = bench_plan.run_child(["sh", "-c", "echo no >&2; exit 3"], tmp_path / "out", tmp_path / "err")
    assert code == 3 and (tmp_path / "err").read_text() == "no\n"


def test_a_keep_row_is_its_actions_command_with_leadership_kept(tmp_path):
    snap = tmp_path / "snap.json"
    snap.write_text('{"version": 1, "brokers": [' + ", ".join(
        f'{{"id": {b}, "rack": "r{b % 3}"}}' for b in range(1001, 1007)) + '], "partitions": []}')
    assert bench_plan.kit_action("remove-keep") == ("remove", ["--leadership", "keep"])
    assert bench_plan.kit_action("az-loss-keep") == ("az-loss", ["--leadership", "keep"])
    assert bench_plan.kit_action("remove") == ("remove", [])
    extra, targets = bench_plan.action_args("remove-keep", snap)
    assert extra == ["--leadership", "keep", "--remove", "1005,1006"] and targets == [1001, 1002, 1003, 1004]
    assert bench_plan.action_args("remove", snap) == (["--remove", "1005,1006"], [1001, 1002, 1003, 1004])
    for scenario in ("az-loss", "drift"):
        rows = bench_plan.SCENARIOS[scenario][1]
        assert all(row.removesuffix("-keep") in rows for row in rows)
