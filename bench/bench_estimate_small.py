#!/usr/bin/env python3
"""The duration estimate on the small bench clusters, this checkout against a baseline checkout:
its figures, its cost, and the whole `kit plan` command's (issue 38).

  bench_estimate_small.py --baseline DIR [--sizes 3000,5000] [--repeat 3] [--predict-repeat 5]
                          [--shared ../shared] [--out docs/benchmarks.md]

For each of bench_plan_small.py's cases (its snapshots, made once by shared/tools/gen_cluster.py
and cached in build/bench/small/), `kit plan` of this checkout writes the plan once. Then, for
each side (PYTHONPATH = this checkout, or DIR), a child process loads the snapshot and the plan
and calls `kit.report.estimate.predict` --predict-repeat times as `kit plan` does (auto-throttle,
the snapshot's traffic): the least CPU seconds (process_time) of one call, estimate_s and the
rate recomputations (steps). Then the whole `kit plan` command runs --repeat times per side,
alternating, after one untimed run each (bytecode written): the median CPU seconds (user +
system of the child) and whether the two sides wrote the same plan bytes. The table goes into
--out between the markers below, regenerated on every run. Exits 1 when a command failed.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_estimate import commit_of, write_section  # noqa: E402
from bench_plan import action_args, kit_command, run_child  # noqa: E402
from bench_plan_small import CASES, snapshot  # noqa: E402
from provenance import header as provenance_header, load_average, utc_now  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- bench_estimate_small:begin -->", "<!-- bench_estimate_small:end -->"
# One side's predict on one plan: the least CPU seconds of `repeat` calls, and its figures.
PREDICT_TIMER = """
import json, sys, time
from kit.formats import load_plan, load_snapshot
from kit.report.estimate import predict
from kit.throttle.decide import Settings
c = load_snapshot(sys.argv[1])
index = {p.key: i for i, p in enumerate(c.partitions)}
targets = {index[(m["topic"], m["partition"])]: list(m["replicas"]) for m in load_plan(sys.argv[2], c)}
cpu = []
for _ in range(int(sys.argv[3])):
    t0 = time.process_time()
    r = predict(c, targets, "auto", None, Settings())
    cpu.append(time.process_time() - t0)
print(json.dumps({"cpu": min(cpu), "estimate_s": r["estimate_s"], "steps": r["steps"], "moved": len(targets),
                  "assumptions": r["assumptions"]}))
"""


def predict_side(path: str, snap: Path, plan: Path, repeat: int) -> dict:
    r = subprocess.run([sys.executable, "-c", PREDICT_TIMER, str(snap), str(plan), str(repeat)], capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": path}, cwd="/", stdin=subprocess.DEVNULL)
    if r.returncode:
        raise SystemExit(f"predict ({path}) failed: {r.stderr.strip()[-300:]}")
    return json.loads(r.stdout)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def moved(new: float | None, old: float | None) -> str:
    if not old or new is None:
        return "0" if new == old else "-"
    return f"{100 * (new / old - 1):+.2f}%"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", required=True, metavar="DIR", help="a checkout of kit to compare with")
    ap.add_argument("--sizes", default="3000,5000", help="partitions, comma-separated")
    ap.add_argument("--repeat", type=int, default=3, help="timed `kit plan` runs per side")
    ap.add_argument("--predict-repeat", type=int, default=5, help="predict calls per side (the least counts)")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--shared", type=Path, default=Path(os.environ.get("SHARED", ROOT.parent / "shared")))
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    a = ap.parse_args(argv)
    args = list(argv if argv is not None else sys.argv[1:])
    for opt in ("--out", "--shared"):  # paths of this machine's
        if opt in args:
            del args[args.index(opt):args.index(opt) + 2]
    command = " ".join(["bench/bench_estimate_small.py", *("DIR" if x == a.baseline else x for x in args)])
    started, load_before = utc_now(), load_average()
    work = ROOT / "build" / "bench" / "small" / "estimate"
    work.mkdir(parents=True, exist_ok=True)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # as bench_plan_small.py: an installed kit has its bytecode
    sides = [("new", str(ROOT)), ("old", str(Path(a.baseline).resolve()))]
    rows, failed = [], []
    for partitions in [int(s) for s in a.sizes.split(",") if s.strip()]:
        for name, scenario, action, extra in CASES:
            snap = snapshot(a.shared, ROOT / "build" / "bench" / "small", scenario, partitions, a.seed)
            more, _ = action_args(action, snap)
            cmd = kit_command() + ["plan", action, "--snapshot", str(snap), *more, *extra, "--ignore-warns", "--out"]
            plans = {side: work / f"plan-{side}.json" for side, _ in sides}
            env = dict(os.environ)
            cpus: dict[str, list[float]] = {side: [] for side, _ in sides}
            for k in range(a.repeat + 1):
                for side, path in sides:
                    os.environ["PYTHONPATH"] = path
                    _, cpu, _, code = run_child(cmd + [str(plans[side])], work / "stdout", work / "stderr")
                    if code:
                        failed.append(f"{partitions} {name} ({side}): exit {code}")
                    elif k:  # the first run writes the bytecode
                        cpus[side].append(cpu)
            os.environ.clear()
            os.environ.update(env)
            if any(not cpus[side] for side, _ in sides):
                continue
            pred = {side: predict_side(path, snap, plans["new"], a.predict_repeat) for side, path in sides}
            row = {"partitions": partitions, "action": name, "same_plan": digest(plans["new"]) == digest(plans["old"]),
                   **{f"{k}_{side}": pred[side][k] for side, _ in sides for k in ("cpu", "estimate_s", "steps")},
                   **{f"plan_cpu_{side}": statistics.median(cpus[side]) for side, _ in sides},
                   "moved": pred["new"]["moved"],
                   "budget": [x for x in pred["new"]["assumptions"] if x not in pred["old"]["assumptions"]]}
            rows.append(row)
            print(f"{partitions} {name:18s} estimate {row['estimate_s_old']!r} -> {row['estimate_s_new']!r} "
                  f"({moved(row['estimate_s_new'], row['estimate_s_old'])}), steps {row['steps_old']} -> "
                  f"{row['steps_new']}, predict {row['cpu_old']:.3f} -> {row['cpu_new']:.3f} CPU s, kit plan "
                  f"{row['plan_cpu_old']:.2f} -> {row['plan_cpu_new']:.2f} CPU s, same plan {row['same_plan']}",
                  flush=True)
    head = provenance_header(command, started, load_before)
    out = [BEGIN, "", "### The duration estimate's budget on the small bench clusters", "", *head, "",
           f"- this checkout: {commit_of(ROOT)}; baseline: {commit_of(Path(a.baseline))}",
           f"- predict: the least CPU s of {a.predict_repeat} calls in one child per side, on the plan this checkout "
           f"writes; kit plan: median CPU s (user + system) of {a.repeat} runs per side, alternating, after one "
           "untimed run each", "- estimate_s: simulated seconds on the cluster's clock; steps: rate recomputations",
           "", "| partitions | action | partitions moved | estimate_s old | estimate_s new | moved | steps old | steps new | "
           "predict CPU s old | new | kit plan CPU s old | new | same plan |", "|---" * 13 + "|"]
    for r in rows:
        est = [f"{r[k]:,.0f}" if r[k] is not None else "-" for k in ("estimate_s_old", "estimate_s_new")]
        out.append(f"| {r['partitions']:,} | {r['action']} | {r['moved']:,} | {est[0]} | {est[1]} | "
                   f"{moved(r['estimate_s_new'], r['estimate_s_old'])} | {r['steps_old']:,} | {r['steps_new']:,} | "
                   f"{r['cpu_old']:.3f} | {r['cpu_new']:.3f} | {r['plan_cpu_old']:.2f} | {r['plan_cpu_new']:.2f} | "
                   f"{'yes' if r['same_plan'] else 'NO'} |")
    if rows:
        out += ["", f"Plans identical on {sum(r['same_plan'] for r in rows)} of {len(rows)}; predict at most "
                f"{max(r['cpu_new'] for r in rows):.3f} CPU s (baseline {max(r['cpu_old'] for r in rows):.3f})."]
    out += [f"Failed: {', '.join(failed)}." if failed else "", END]
    write_section(a.out, "\n".join(out), BEGIN, END)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
