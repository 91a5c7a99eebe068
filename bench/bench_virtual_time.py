#!/usr/bin/env python3
"""Run the broker-replacement runbook on the simulated ZooKeeper cluster at several speeds and
check that the record says the same thing at each (the simulated cluster's clock, issue 36).

  bench_virtual_time.py [--speeds 100,2000,20000] [--busy N] [--out FILE | --docs]

Each speed is one `kit run broker_replacement -p apply true -p speed S` into a record folder
of its own under build/bench/virtual-time/. The table gives, per speed, the wall time of the
run, the record's `timing.actual_s` and `estimate_s` (the simulated cluster's clock), the time
at the fail-safe and at the minimum rate, the number of auto-throttle decisions, and whether
the decisions (time, kind, brokers, role, rate) and the headline (less the wall-clock stamps,
the paths and the reproducing command) are identical to the first speed's; then issue 36's
target beside it: `timing.actual_s` within 1% of the first speed's, the same decisions and the
same headline (pass/fail). `--busy N` runs N processes spinning on a CPU beside the runs (the
issue's "beside two busy processes"). `--docs` writes docs/bench/sim-virtual-time.md (what
`make bench-sim` does).

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
TOLERANCE = 0.01  # issue 36: the same timing.actual_s within 1% at every speed
SPIN = "while True:\n    pass\n"  # a busy process: one CPU, nothing else


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


def same_actual(r: dict, first: dict) -> float | None:
    """How far r's timing.actual_s is from the first speed's, as a fraction; None when either is missing."""
    a, b = (x.get("timing", {}).get("actual_s") for x in (r, first))
    return abs(a - b) / b if a is not None and b else None


def verdict(r: dict, first: dict) -> str:
    """pass when actual_s is within TOLERANCE of the first speed's and decisions and headline are the same."""
    if "failed" in r or "failed" in first:
        return "FAIL (run failed)"
    off = same_actual(r, first)
    missed = [w for w, bad in (("actual_s", off is None or off > TOLERANCE),
                               ("decisions", r["decisions"] != first["decisions"]),
                               ("headline", r["headline"] != first["headline"])) if bad]
    return "FAIL: " + ", ".join(missed) if missed else "pass"


def table(runs: list[dict]) -> list[str]:
    """One line per speed: the record's figures, and issue 36's target beside them with pass/fail."""
    first = runs[0]
    out = ["| speed | wall (s, wall clock) | outcome | actual_s (s, simulated) | vs first speed | estimate_s (s, "
           "simulated) | fail-safe (s, simulated) | at minimum (s, simulated) | decisions | same decisions | "
           "same headline | target (issue 36) | pass/fail |",
           "|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---|---|---|"]
    target = "actual_s within 1% of the first speed's, same decisions, same headline"
    for r in runs:
        if "failed" in r:
            out.append(f"| {r['speed']} | {r['wall_s']:.0f} | failed: {r['failed']} | | | | | | | | | {target} | "
                       f"{verdict(r, first)} |")
            continue
        t = r["timing"]
        off = same_actual(r, first)
        out.append(f"| {r['speed']} | {r['wall_s']:.0f} | {r['outcome']} | {t['actual_s']} "
                   f"({human_duration(t['actual_s'])}) | {'' if off is None else f'{100 * off:.2f}%'} | "
                   f"{t['estimate_s']} | {t['failsafe_s']} | {t['minimum_s']} | {len(r['decisions'])} | "
                   f"{'yes' if r['decisions'] == first.get('decisions') else 'NO'} | "
                   f"{'yes' if r['headline'] == first.get('headline') else 'NO'} | {target} | "
                   f"{verdict(r, first)} |")
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the runbook at each speed, print (and with --out/--docs write) the table; 1 on a failure or a miss."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--speeds", default="100,2000,20000")
    ap.add_argument("--busy", type=int, default=0, metavar="N",
                    help="run N processes spinning on a CPU beside the runs (default 0)")
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--out", metavar="FILE")
    where.add_argument("--docs", action="store_true", help="write docs/bench/sim-virtual-time.md")
    a = ap.parse_args(argv)
    started, load_before = utc_now(), load_average()
    base = ROOT / "build" / "bench" / "virtual-time"
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.DEVNULL) for _ in range(a.busy)]
    try:
        runs = []
        for s in a.speeds.split(","):
            print(f"speed {s} ...", file=sys.stderr, flush=True)
            runs.append(run_once(s, base / s))
            print(f"  {runs[-1]['wall_s']:.0f} s wall", file=sys.stderr, flush=True)
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    busy = f"beside {a.busy} process(es) spinning on a CPU (`--busy {a.busy}`)" if a.busy else \
        "with no busy process of its own (`--busy 0`; the machine's load is in the header)"
    lines = ["# The runbook's record at several speeds (simulated cluster's clock)", "",
             *header("bench/bench_virtual_time.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                     started, load_before),
             f"- one run per speed, {busy}: the figures under test (actual_s, estimate_s, fail-safe, minimum, "
             "decisions) are on the simulated cluster's clock, so the speeds are the repeats; wall is the run's "
             "wall time (`time.monotonic`) and is not a target.", "",
             "`kit run broker_replacement -p apply true -p speed S` on the simulated ZooKeeper cluster "
             "(the demo's runbook and cluster).", "", *table(runs), ""]
    ok = all(verdict(r, runs[0]) == "pass" for r in runs)
    lines += ["The headline of the first speed:", "", "```", *(runs[0].get("headline") or ["(failed)"]), "```", ""]
    text = "\n".join(lines)
    if a.docs or a.out:
        write_atomically(Path(a.out) if a.out else ROOT / "docs" / "bench" / "sim-virtual-time.md", text)
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
