"""The duration estimate against the auto-throttled simulation it predicts.

  bench_estimate.py [--brokers 12] [--partitions 400] [--loads 0,0.3,0.5,0.7] [--out docs/benchmarks.md]
  bench_estimate.py --big [--repeat 3] [--baseline DIR] [--out docs/benchmarks.md]

For each scenario (replace, az-loss, scale-out, rebalance on a drifted cluster) and client
load, a cluster is generated with shared/tools/gen_cluster.py --client-load F (load 0: the
generator's small default traffic), planned with `kit plan` (its report's duration.estimate_s,
the auto-throttle's interval 30 s), and run with `kit simulate --throttle auto` (completion_s).
Target: estimate / simulated completion within ±10%, neither below the physical bound
(lower_bound_s). The table goes into --out between the markers below, regenerated on every run.

--big: the estimate's cost at scale. A 200,000-partition, 150-broker cluster at client load
0.5 (gen_cluster.py --scenario az-loss --seed 3) is planned with `kit plan az-loss --rack
rack-c`; then, each --repeat times: the whole command (a child process, wall seconds), and
the duration report alone (waves.duration_report, its first call in a fresh child that has
loaded the snapshot and the plan). --baseline DIR also times `kit plan` from another
checkout of kit (PYTHONPATH=DIR), alternating with this one. The I/O floor is json.load plus
json.dump of the snapshot, as bench_plan.py measures it. Medians go into their own section.
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

from bench_plan import io_floor  # the same floor as bench_plan's table (bench/ is on sys.path)
from provenance import write_atomically

BEGIN, END = "<!-- bench_estimate:begin -->", "<!-- bench_estimate:end -->"
BIG_BEGIN, BIG_END = "<!-- bench_estimate_big:begin -->", "<!-- bench_estimate_big:end -->"
ROOT = Path(__file__).resolve().parent.parent
# The duration report's own cost, in a child that has loaded the snapshot and the plan.
REPORT_TIMER = """
import sys, time
from kit.throttle.decide import Settings
from kit.formats import load_plan, load_snapshot
from kit.model import Plan
from kit.report.waves import duration_report, moves_of, split_waves
c = load_snapshot(sys.argv[1])
moves = load_plan(sys.argv[2], c)
index = {p.key: i for i, p in enumerate(c.partitions)}
after = [list(p.replicas) for p in c.partitions]
for m in moves:
    after[index[(m["topic"], m["partition"])]] = list(m["replicas"])
plan = Plan(c, "az-loss", after, [])
waves = split_waves(moves_of(plan))
t0 = time.perf_counter()
d = duration_report(plan, waves, None, None, Settings())
print(time.perf_counter() - t0, repr(d["estimate_s"]), repr(d["lower_bound_s"]))
"""
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


def write_section(path: Path, section: str, begin: str = BEGIN, end: str = END) -> None:
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    if begin in text and end in text:
        text = text[:text.index(begin)] + section + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    write_atomically(path, text)  # the other sections of the file are never left half-written


def timed(cmd: list[str], env: dict, cwd: Path) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)  # cwd: no checkout's kit by accident
    if r.returncode:
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed: {r.stderr.strip()[-300:]}")
    return time.perf_counter() - t0


def commit_of(path: Path) -> str:
    """The checkout's commit, e.g. 84004bd (+ when its files differ from it)."""
    head = subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True)
    return (head.stdout.strip() or "not a git checkout") + ("+" if dirty.stdout.strip() else "")


def big(a, command: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        snap, plan = work / "big.json", work / "plan.json"
        subprocess.run([sys.executable, str(Path(a.shared) / "tools" / "gen_cluster.py"), "--brokers", "150",
                        "--racks", "3", "--partitions", "200000", "--scenario", "az-loss", "--seed", "3",
                        "--client-load", "0.5", "--out", str(snap)], check=True, capture_output=True)
        plan_cmd = [sys.executable, "-m", "kit", "plan", "az-loss", "--snapshot", str(snap), "--rack", "rack-c",
                    "--out", str(plan)]
        sides = [(f"this checkout ({commit_of(ROOT)})", str(ROOT))]
        if a.baseline:
            sides.append((f"baseline ({commit_of(Path(a.baseline))})", a.baseline))
        times: dict[str, list[float]] = {name: [] for name, _ in sides}
        report, figures, floor = [], set(), []
        for k in range(a.repeat):
            for name, path in sides:
                env = {**os.environ, "PYTHONPATH": path}
                times[name].append(timed(plan_cmd, env, work))
                print(f"kit plan az-loss ({name}) run {k + 1}: {times[name][-1]:.1f} s", flush=True)
            floor.append(io_floor(snap, work / "floor.json"))
            r = subprocess.run([sys.executable, "-c", REPORT_TIMER, str(snap), str(plan)], capture_output=True,
                               text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=work, check=True)
            secs, est, bound = r.stdout.split()
            report.append(float(secs))
            figures.add((est, bound))
            print(f"duration_report run {k + 1}: {report[-1]:.2f} s (estimate_s {est}, lower_bound_s {bound})",
                  flush=True)
    med = {name: statistics.median(t) for name, t in times.items()}
    fl = statistics.median(floor)
    out = [BIG_BEGIN, "", "### The duration estimate's cost at 200,000 partitions", "",
           f"Machine: {platform.machine()}, {os.cpu_count()} CPU(s), Python {platform.python_version()}; "
           f"{datetime.now(timezone.utc):%Y-%m-%d}. Command: `{command}` (regenerates this section).", "",
           "150 brokers, 3 racks, 200,000 RF-3 partitions, client load 0.5 (`gen_cluster.py --scenario az-loss "
           "--seed 3 --client-load 0.5`); `kit plan az-loss --rack rack-c` (every partition moves: 200,000 copies, "
           f"the estimate's analytic figure). Wall seconds, median of {a.repeat}; a shared, noisy machine.", "",
           "| what | median s | runs | / I/O floor |", "|---|---|---|---|"]
    for name, t in times.items():
        out.append(f"| `kit plan az-loss`, {name} | {med[name]:.2f} | {', '.join(f'{x:.1f}' for x in t)} | "
                   f"{med[name] / fl:.1f} |")
    out.append(f"| `duration_report` alone (this checkout) | {statistics.median(report):.2f} | "
               f"{', '.join(f'{x:.2f}' for x in report)} | |")
    out.append(f"| I/O floor (json.load + json.dump) | {fl:.2f} | {', '.join(f'{x:.2f}' for x in floor)} | 1.0 |")
    est, bound = sorted(figures)[0]
    out += ["", f"estimate_s {est}, lower_bound_s {bound}" + ("" if len(figures) == 1 else " (runs DIFFER)") + "."]
    if a.baseline:
        base = med[sides[1][0]]
        out.append(f"This checkout / baseline: {med[sides[0][0]] / base:.2f} (medians).")
    return "\n".join(out + ["", BIG_END])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", type=int, default=12)
    ap.add_argument("--partitions", type=int, default=400)
    ap.add_argument("--loads", default="0,0.3,0.5,0.7")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shared", default="/work/shared", help="the folder holding tools/gen_cluster.py")
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    ap.add_argument("--big", action="store_true", help="the estimate's cost at 200,000 partitions (see above)")
    ap.add_argument("--repeat", type=int, default=3, help="--big: runs of each command")
    ap.add_argument("--baseline", metavar="DIR", help="--big: also time kit plan from this checkout of kit")
    a = ap.parse_args(argv)
    if a.big:
        args = list(argv if argv is not None else sys.argv[1:])
        if "--out" in args:  # a path of this machine's
            del args[args.index("--out"):args.index("--out") + 2]
        args = ["DIR" if x == a.baseline else x for x in args]  # its commit is in the table
        command = "python bench/bench_estimate.py " + " ".join(args)
        write_section(Path(a.out), big(a, command.strip()), BIG_BEGIN, BIG_END)
        return 0
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
