#!/usr/bin/env python3
"""Run the broker-replacement runbook on the simulated ZooKeeper cluster at several speeds and
check that the record says the same thing at each (the simulated cluster's clock, issue 36).

  bench_virtual_time.py [--speeds 2000,20000] [--out FILE | --docs]

Each speed is one `kit run broker_replacement -p apply true -p speed S` into a record folder
of its own under build/bench/virtual-time/. The table gives, per speed, the wall time of the
run, the record's `timing.actual_s` and `estimate_s` (the simulated cluster's clock), the time
at the fail-safe and at the minimum rate, the number of auto-throttle decisions, and whether
the decisions (time, kind, brokers, role, rate) and the headline (less the wall-clock stamps,
the paths and the reproducing command) are identical to the first speed's. `--docs` writes
docs/bench/virtual-time.md.

Exits 1 when a run failed or the records differ.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from provenance import ROOT, header, load_average, utc_now, write_atomically

from kit.report.waves import human_duration
from kit.runbook.record import headline

# Headline rows that differ between runs of the same inputs by nature: when it ran, where its
# files are, and the command (which names the speed).
PER_RUN_ROWS = ("started → finished (UTC, wall clock)", "rollback file", "plan file", "reproduce")


def run_once(speed: str, folder: Path) -> dict:
    """One runbook run at `speed`: its record's figures, decisions and headline."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    kit = Path(sys.executable).parent / "kit"
    started = time.monotonic()
    r = subprocess.run([str(kit) if kit.exists() else sys.executable, *([] if kit.exists() else ["-m", "kit"]),
                        "run", "broker_replacement", "-p", "apply", "true", "-p", "speed", speed,
                        "--record-dir", str(folder)], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    wall = time.monotonic() - started
    records = sorted(folder.glob("*-broker_replacement.json"))
    if r.returncode != 0 or not records:
        return {"speed": speed, "wall_s": wall, "failed": (r.stderr.strip().splitlines() or ["?"])[-1]}
    doc = json.loads(records[-1].read_text())
    events = Path(doc["change"]["events"])
    decisions = [(e["time"], e["kind"], tuple(e.get("brokers") or ()), e.get("role"), e.get("new"))
                 for e in map(json.loads, events.read_text().splitlines())] if events.exists() else []
    rows = [line for line in headline(doc).text().splitlines()[1:]
            if not line.strip().startswith(PER_RUN_ROWS)]
    return {"speed": speed, "wall_s": wall, "timing": doc["timing"], "decisions": decisions,
            "headline": [headline(doc).title()] + rows, "outcome": doc["outcome"]}


def table(runs: list[dict]) -> list[str]:
    first = runs[0]
    out = ["| speed | wall | outcome | actual_s | estimate_s | fail-safe | at minimum | decisions | "
           "same decisions | same headline |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        if "failed" in r:
            out.append(f"| {r['speed']} | {r['wall_s']:.0f} s | failed: {r['failed']} | | | | | | | |")
            continue
        t = r["timing"]
        out.append(f"| {r['speed']} | {r['wall_s']:.0f} s | {r['outcome']} | {t['actual_s']} "
                   f"({human_duration(t['actual_s'])}) | {t['estimate_s']} | {t['failsafe_s']} s | "
                   f"{t['minimum_s']} s | {len(r['decisions'])} | "
                   f"{'yes' if r['decisions'] == first.get('decisions') else 'NO'} | "
                   f"{'yes' if r['headline'] == first.get('headline') else 'NO'} |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--speeds", default="2000,20000")
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--out", metavar="FILE")
    where.add_argument("--docs", action="store_true", help="write docs/bench/virtual-time.md")
    a = ap.parse_args(argv)
    started, load_before = utc_now(), load_average()
    base = ROOT / "build" / "bench" / "virtual-time"
    runs = [run_once(s, base / s) for s in a.speeds.split(",")]
    lines = ["# The runbook's record at several speeds (simulated cluster's clock)", "",
             *header("bench/bench_virtual_time.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                     started, load_before), "",
             "`kit run broker_replacement -p apply true -p speed S` on the simulated ZooKeeper cluster; "
             "actual_s, estimate_s, fail-safe and minimum on the simulated cluster's clock, wall on the wall clock.",
             "", *table(runs), ""]
    ok = all("failed" not in r for r in runs) and all(
        r["decisions"] == runs[0]["decisions"] and r["headline"] == runs[0]["headline"] for r in runs)
    lines += ["The headline of the first speed:", "", "```", *(runs[0].get("headline") or ["(failed)"]), "```", ""]
    text = "\n".join(lines)
    if a.docs or a.out:
        write_atomically(Path(a.out) if a.out else ROOT / "docs" / "bench" / "virtual-time.md", text)
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
