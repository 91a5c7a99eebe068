"""bench_plan_small.py's topicmappr column: topicmappr runs beside each kit run on the same cluster
(from a real ZooKeeper), its time and the ratio in the row, its command in the notes, and a
failing topicmappr said in the notes without losing kit's row."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A stand-in for topicmappr's binary: it logs its arguments, one line per run, and writes an
# empty combined map where the real one would (or fails, with FAIL set).
FAKE = """#!{python}
import json, os, sys
args = sys.argv[1:]
with open({log!r}, "a") as f:
    f.write(json.dumps(args) + "\\n")
if {fail!r}:
    sys.exit(5)
out = args[args.index("--out-path") + 1] + args[args.index("--out-file") + 1] + ".json"
with open(out, "w") as f:
    json.dump({{"version": 1, "partitions": []}}, f)
"""


def _fake(tmp_path: Path, fail: bool) -> tuple[Path, Path]:
    log = tmp_path / ("failing.log" if fail else "calls.log")
    binary = tmp_path / ("failing-topicmappr" if fail else "topicmappr")
    binary.write_text(FAKE.format(python=sys.executable, log=str(log), fail=fail))
    binary.chmod(0o755)
    return binary, log


def _run(shared_dir: Path, tmp_path: Path, binary: Path, actions: str,
         by_environment: bool = False) -> tuple[subprocess.CompletedProcess, str]:
    table = tmp_path / f"{binary.name}.md"
    cmd = [sys.executable, str(ROOT / "bench" / "bench_plan_small.py"), "--shared", str(shared_dir), "--sizes", "300",
           "--actions", actions, "--repeat", "1", "--cache", str(tmp_path / "cache"), "--out", str(table)]
    env = {**os.environ, "HOME": str(tmp_path)}
    env.pop("TOPICMAPPR", None)
    if by_environment:
        env["TOPICMAPPR"] = str(binary)  # as `make bench TOPICMAPPR=PATH` gives it
    else:
        cmd += ["--topicmappr", str(binary)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    return r, table.read_text() if table.exists() else ""


def _row(table: str, action: str) -> dict[str, str]:
    lines = [ln for ln in table.splitlines() if ln.startswith("| ")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    for ln in lines[1:]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        if cells[2] == action:
            return dict(zip(head, cells))
    raise AssertionError(f"no row for {action}")


def test_topicmappr_runs_beside_kit_and_its_time_is_in_the_row(shared_dir, tmp_path):
    binary, log = _fake(tmp_path, fail=False)
    r, table = _run(shared_dir, tmp_path, binary, "remove,rf")
    assert r.returncode == 0, r.stderr
    remove = _row(table, "remove")
    assert float(remove["topicmappr s"]) > 0
    kit_s, tm_s = float(remove["median s"]), float(remove["topicmappr s"])
    # one timed run: the ratio is that run's kit seconds / topicmappr seconds, each shown to 0.01 s
    ratio = float(remove["kit / topicmappr"])
    assert (kit_s - 0.005) / (tm_s + 0.005) - 0.005 <= ratio <= (kit_s + 0.005) / (tm_s - 0.005) + 0.005
    # rf has no topicmappr counterpart: kit's figures alone
    rf = _row(table, "rf")
    assert rf["topicmappr s"] == "" and rf["kit / topicmappr"] == "" and float(rf["median s"]) > 0
    # once untimed and once timed, each right after a kit run, on the brokers kit keeps
    calls = [json.loads(ln) for ln in log.read_text().splitlines()]
    assert len(calls) == 2
    snap = json.loads(next((tmp_path / "cache").glob("drift-p300-*.json")).read_text())
    live = sorted(b["id"] for b in snap["brokers"] if b.get("alive", True))
    brokers = [int(b) for b in calls[0][calls[0].index("--brokers") + 1].split(",")]
    assert brokers == live[:-2]  # the two highest ids are the ones removed
    assert calls[0][calls[0].index("rebuild") + 1:calls[0].index("rebuild") + 3] == ["--topics", ".*"]
    assert "- remove: topicmappr ran `topicmappr rebuild --topics .* --brokers <target brokers>" in table


def test_a_failing_topicmappr_is_named_and_kits_row_stays(shared_dir, tmp_path):
    binary, log = _fake(tmp_path, fail=True)
    r, table = _run(shared_dir, tmp_path, binary, "remove", by_environment=True)
    # the binary came from the environment: the table's command line says so, to be run again
    assert f"- command: `TOPICMAPPR={binary} bench/bench_plan_small.py --shared" in table
    assert r.returncode == 0, r.stderr
    remove = _row(table, "remove")
    assert float(remove["median s"]) > 0 and remove["topicmappr s"] == ""
    assert "- 300 remove: `topicmappr rebuild" in table and "failed: exit 5" in table
    assert len(log.read_text().splitlines()) == 1  # not run again once it failed


def test_an_unknown_action_is_refused_before_anything_runs(shared_dir, tmp_path):
    binary, log = _fake(tmp_path, fail=False)
    r, table = _run(shared_dir, tmp_path, binary, "remove,nonsense")
    assert r.returncode == 2 and "unknown action(s): nonsense" in r.stderr.strip().splitlines()[-1]
    assert table == "" and not log.exists() and not (tmp_path / "cache").exists()
