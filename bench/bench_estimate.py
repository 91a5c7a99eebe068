"""The duration estimate against the auto-throttled simulation it predicts.

  bench_estimate.py [--brokers 12] [--partitions 400] [--loads 0,0.3,0.5,0.7] [--out docs/benchmarks.md]

For each scenario (replace, az-loss, scale-out, rebalance on a drifted cluster) and client
load, a cluster is generated with shared/tools/gen_cluster.py --client-load F (load 0: the
generator's small default traffic), planned with `kit plan` (its report's duration.estimate_s,
the auto-throttle's interval 30 s), and run with `kit simulate --throttle auto` (completion_s).
Target: estimate / simulated completion within ±10%, neither below the physical bound
(lower_bound_s). The table goes into --out between the markers below, regenerated on every run.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

BEGIN, END = "<!-- bench_estimate:begin -->", "<!-- bench_estimate:end -->"
SCENARIOS = [("replace", "replace"), ("az-loss", "az-loss"), ("scale-out", "scale-out"), ("drift", "rebalance")]


def kit(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kit", *map(str, args)], capture_output=True, text=True)


def plan_args(scenario: str, snap: dict) -> list[str]:
    if scenario == "replace":
        dead = [b["id"] for b in snap["brokers"] if not b.get("alive", True)]
        held = {r for p in snap["partitions"] for r in p["replicas"]}
        new = [b["id"] for b in snap["brokers"] if b.get("alive", True) and b["id"] not in held]
        return ["--replace", ",".join(f"{d}:{n}" for d, n in zip(dead, new))]
    if scenario == "az-loss":
        return ["--rack", sorted({b["rack"] for b in snap["brokers"]})[-1]]
    return []


def run_case(shared: Path, work: Path, scenario: str, action: str, load: float, a) -> dict:
    snap_path, plan, report, result = (work / f"{scenario}-{load}.{x}.json" for x in ("snap", "plan", "report", "sim"))
    gen = [sys.executable, str(shared / "tools" / "gen_cluster.py"), "--scenario", scenario, "--brokers", a.brokers,
           "--partitions", a.partitions, "--seed", a.seed, "--out", snap_path]
    if load > 0:
        gen += ["--client-load", load]
    subprocess.run(list(map(str, gen)), check=True)
    snap = json.loads(snap_path.read_text())
    r = kit("plan", action, "--snapshot", snap_path, "--out", plan, "--report", report, "--ignore-warns",
            *plan_args(scenario, snap))
    if r.returncode:
        raise SystemExit(f"kit plan {action} failed: {r.stderr.strip()}")
    d = json.loads(report.read_text())["duration"]
    t0 = time.monotonic()
    r = kit("simulate", "--snapshot", snap_path, "--plan", plan, "--throttle", "auto", "--out", result)
    if r.returncode:
        raise SystemExit(f"kit simulate failed: {r.stderr.strip()}")
    sim = json.loads(result.read_text())
    return {"scenario": action, "load": load, "estimate_s": d["estimate_s"], "estimate_bound_s": d["lower_bound_s"],
            "completion_s": sim["completion_s"], "bound_s": sim["lower_bound_s"],
            "ratio": d["estimate_s"] / sim["completion_s"] if sim["completion_s"] else 1.0,
            "sim_wall_s": time.monotonic() - t0}


def table(rows: list[dict], command: str) -> str:
    ratios = [r["ratio"] for r in rows]
    ok = all(abs(r["ratio"] - 1) <= 0.10 and r["estimate_s"] >= r["bound_s"] - 1e-6
             and r["completion_s"] >= r["bound_s"] - 1e-6 for r in rows)
    out = [BEGIN, "", "### Duration estimate vs the auto-throttled simulation", "",
           f"Machine: {platform.machine()}, {os.cpu_count()} CPU(s), Python {platform.python_version()}; "
           f"{datetime.now(timezone.utc):%Y-%m-%d}. Command: `{command}` (regenerates this section).", "",
           "Simulated seconds on the cluster's clock; bound = lower_bound_s.", "",
           "| scenario | generated client load | estimate (s) | simulated completion (s) | bound (s) | "
           "estimate / simulated |", "|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['scenario']} | {r['load']:g} | {r['estimate_s']:.0f} | {r['completion_s']:.0f} | "
                   f"{r['bound_s']:.0f} | {r['ratio']:.3f} |")
    out += ["", f"Ratio median {statistics.median(ratios):.3f}, min {min(ratios):.3f}, max {max(ratios):.3f}; "
            f"target ±10% and nothing below the bound: {'met' if ok else 'NOT met'}.", "", END]
    return "\n".join(out)


def write_section(path: Path, section: str) -> None:
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", type=int, default=12)
    ap.add_argument("--partitions", type=int, default=400)
    ap.add_argument("--loads", default="0,0.3,0.5,0.7")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shared", default="/work/shared", help="the folder holding tools/gen_cluster.py")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"))
    a = ap.parse_args(argv)
    loads = [float(x) for x in a.loads.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for scenario, action in SCENARIOS:
            for load in loads:
                r = run_case(Path(a.shared), Path(tmp), scenario, action, load, a)
                rows.append(r)
                print(f"{action:10s} load {load:<4g} estimate {r['estimate_s']:>9.0f} s  simulated "
                      f"{r['completion_s']:>9.0f} s  bound {r['bound_s']:>9.0f} s  ratio {r['ratio']:.3f}", flush=True)
    command = "python bench/bench_estimate.py " + " ".join(argv if argv is not None else sys.argv[1:])
    write_section(Path(a.out), table(rows, command.strip()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
