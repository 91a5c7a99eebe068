#!/usr/bin/env python3
"""Time `kit plan` on large generated clusters and score the plans it writes.

  bench_plan.py [--partitions 200000] [--brokers 150] [--repeat N] [--out FILE | --docs]

For each scenario a snapshot is generated once with shared/tools/gen_cluster.py
(RF 3, 3 racks, 1000 topics; cached in build/bench/), then:

  replace    (--dead 2)   kit plan replace --replace OLD:NEW,OLD:NEW
  az-loss                 kit plan az-loss --rack <the lost rack>; the same with
                          --leadership keep (row az-loss-keep)
  scale-out  (--add 6)    kit plan scale-out
  drift                   kit plan rebalance; kit plan leaders;
                          kit plan remove --remove <the two highest broker ids>;
                          the same with --leadership keep (row remove-keep)
  skewed-storage          kit plan rebalance --placement storage

Each `kit plan` runs in a child process: wall time, and peak resident memory
from the child's own rusage (os.wait4, read by bench/child_usage.py, a fresh
launcher: a child of this process would start with this process's own peak,
which holds a snapshot). The I/O floor is the time a fresh
Python process takes to json.load the snapshot and json.dump it back to a
file (timed inside that child, around those two calls): no planner can beat
reading its input and writing its output, so "ratio" says how far above that
floor the whole command is. The floor is measured right before each `kit plan`
run, and the ratio is the median of the runs' own ratios: this machine's speed
drifts within minutes (the floors of same-sized 200,000-partition snapshots
read 3.6 to 5.8 s within one run on 2026-11-29, 2.9 to 5.1 s the day before),
and a floor measured apart from the runs it divides moved every ratio with it. Each plan is then scored with
shared/tools/evaluate_plan.py --json (definitions: shared/design.md,
"Plan quality"). With --repeat N the medians are reported.

With topicmappr's binary (--topicmappr, $TOPICMAPPR or on PATH), each action
is also planned by the topicmappr command an operator would run for it
(bench/topicmappr_peer.py), on the same cluster in a local ZooKeeper, timed
right after kit's run and scored the same way.

Exits 1 when any `kit plan` run failed (the table still shows every row).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from demo_replace_arg import replace_arg  # noqa: E402
from provenance import header as provenance_header, load_average, utc_now, write_atomically  # noqa: E402

import topicmappr_peer  # noqa: E402

from kit.formats import load_snapshot  # noqa: E402

SCENARIOS: dict[str, tuple[list[str], list[str]]] = {
    "replace": (["--scenario", "replace", "--dead", "2"], ["replace"]),
    "az-loss": (["--scenario", "az-loss"], ["az-loss", "az-loss-keep"]),
    "scale-out": (["--scenario", "scale-out", "--add", "6"], ["scale-out"]),
    "drift": (["--scenario", "drift"], ["rebalance", "leaders", "remove", "remove-keep"]),
    "skewed-storage": (["--scenario", "skewed-storage"], ["rebalance-storage"]),
}

COLUMNS = [
    "scenario", "action", "tool", "seconds", "I/O floor s", "ratio", "kit / topicmappr", "peak MiB",
    "additions / bound", "replica spread", "leader spread", "topic leader excess", "failover excess",
    "storage range %", "bytes moved / bound GB",
]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def kit_command() -> list[str]:
    script = Path(sys.executable).parent / "kit"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys\nfrom kit.cli import main\nsys.exit(main())"]


def generator(shared: Path) -> list[str]:
    gen = shared / "tools" / "gen_cluster.py"
    if not gen.exists():
        sys.exit(f"bench_plan.py: {gen} not found; pass --shared /path/to/shared")
    return [sys.executable, str(gen)]


def snapshot_for(scenario: str, a: argparse.Namespace, cache: Path) -> Path:
    path = cache / f"{scenario}-p{a.partitions}-b{a.brokers}-r{a.racks}-t{a.topics}-s{a.seed}.json"
    if path.exists():
        return path
    extra, _ = SCENARIOS[scenario]
    cmd = generator(a.shared) + [
        "--brokers", str(a.brokers), "--racks", str(a.racks), "--partitions", str(a.partitions),
        "--topics", str(a.topics), "--rf", "3", "--seed", str(a.seed), *extra,
    ]
    tmp = path.with_suffix(".tmp")
    log(f"generating {path.name} ...")
    t0 = time.perf_counter()
    subprocess.run(cmd + ["--out", str(tmp)], check=True, stdin=subprocess.DEVNULL)
    os.replace(tmp, path)
    log(f"  {time.perf_counter() - t0:.1f}s")
    return path


# The floor's child: json.load + json.dump of argv[1] into argv[2], timed around those two calls.
_FLOOR_CHILD = """
import json, sys, time
t0 = time.perf_counter()
with open(sys.argv[1]) as f:
    doc = json.load(f)
with open(sys.argv[2], "w") as f:
    json.dump(doc, f, separators=(",", ":"))
print(time.perf_counter() - t0)
"""


def io_floor(snapshot: Path, scratch: Path) -> float:
    """Seconds a fresh Python process takes to json.load `snapshot` and json.dump it to
    `scratch` (start-up not counted), as `kit plan` starts fresh too."""
    try:
        r = subprocess.run([sys.executable, "-c", _FLOOR_CHILD, str(snapshot), str(scratch)], check=True,
                           capture_output=True, text=True, stdin=subprocess.DEVNULL)
    finally:
        scratch.unlink(missing_ok=True)
    return float(r.stdout)


def run_child(cmd: list[str], stdout: Path, stderr: Path,
              timeout: float | None = None) -> tuple[float, float, float, int | None]:
    """Run cmd: (wall seconds, CPU seconds (user + system, its own and its second process's),
    peak RSS MiB of that child alone, exit code: None when it outlasted `timeout` seconds and was
    killed). On a loaded machine the CPU time is the steadier figure. The command runs under
    bench/child_usage.py, so its peak is its own, not this process's (which may hold a snapshot)."""
    usage_file = stdout.with_name(stdout.name + ".usage.json")
    usage_file.unlink(missing_ok=True)
    launcher = [sys.executable, "-I", "-S", str(Path(__file__).with_name("child_usage.py")), str(usage_file)]
    with open(stdout, "wb") as so, open(stderr, "wb") as se:
        t0 = time.perf_counter()
        proc = subprocess.Popen(launcher + cmd, stdin=subprocess.DEVNULL, stdout=so, stderr=se,
                                start_new_session=True)
        killed = threading.Event()
        timer = threading.Timer(timeout, lambda: (killed.set(), os.killpg(proc.pid, signal.SIGKILL))) if timeout else None
        if timer:
            timer.start()
        proc.wait()
        if timer:
            timer.cancel()
    if killed.is_set() or not usage_file.exists():
        return time.perf_counter() - t0, 0.0, 0.0, None
    usage = json.loads(usage_file.read_text())
    # ru_maxrss is KiB on Linux
    return usage["wall_s"], usage["cpu_s"], usage["peak_kib"] / 1024.0, usage["exit"]


# Rows that are another action's command with options added: the row, the `kit plan` action and the options.
VARIANTS = {"rebalance-storage": ("rebalance", ["--placement", "storage"]),
            "az-loss-keep": ("az-loss", ["--leadership", "keep"]),
            "remove-keep": ("remove", ["--leadership", "keep"])}


def kit_action(action: str) -> tuple[str, list[str]]:
    """The `kit plan` action of a row, and the options the row adds to it (`VARIANTS`)."""
    return VARIANTS.get(action, (action, []))


def action_args(action: str, snap: Path) -> tuple[list[str], list[int] | None]:
    """Extra `kit plan` options, and the target brokers to score against (None: live brokers)."""
    action, added = kit_action(action)
    if added:
        extra, targets = action_args(action, snap)
        return [*added, *extra], targets
    if action == "replace":
        return ["--replace", replace_arg(load_snapshot(str(snap)))], None
    with open(snap) as f:
        brokers = json.load(f)["brokers"]
    live = sorted(b["id"] for b in brokers if b.get("alive", True))
    if action == "az-loss":
        racks = {b.get("rack") for b in brokers}
        lost = sorted(r for r in racks if r and all(not b.get("alive", True) for b in brokers if b.get("rack") == r))
        return ["--rack", lost[0] if lost else "rack-c"], None
    if action == "remove":
        gone = live[-2:]
        return ["--remove", ",".join(map(str, gone))], [b for b in live if b not in gone]
    return [], None


def evaluate(shared: Path, snap: Path, plan: Path, targets: list[int] | None) -> dict | None:
    tool = shared / "tools" / "evaluate_plan.py"
    if not tool.exists():
        return None
    cmd = [sys.executable, str(tool), str(snap), str(plan), "--json"]
    if targets:
        cmd += ["--brokers", ",".join(map(str, targets))]
    r = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        log(f"  evaluate_plan.py failed: {r.stderr.strip().splitlines()[-1:] or r.returncode}")
        return None
    return json.loads(r.stdout)


def last_line(path: Path) -> str:
    lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1][:200] if lines else ""


class Runs:
    """One tool's timed runs of one action: wall seconds, the floor measured before each, peaks."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.floors: list[float] = []
        self.peaks: list[float] = []
        self.digests: set[str] = set()

    def row(self, scenario: str, action: str, tool: str) -> dict:
        secs, floor = statistics.median(self.times), statistics.median(self.floors)
        ratio = statistics.median(t / f for t, f in zip(self.times, self.floors))
        return {"scenario": scenario, "action": action, "tool": tool, "seconds": f"{secs:.2f}",
                "I/O floor s": f"{floor:.2f}", "ratio": f"{ratio:.1f}", "peak MiB": f"{statistics.median(self.peaks):.0f}"}


def timed_run(cmd: list[str], plan: Path, floor: float, runs: Runs, stem: Path,
              timeout: float | None = None) -> str | None:
    """Run `cmd` once into `runs` (its plan at `plan`); what went wrong when it failed or
    outlasted `timeout` seconds."""
    plan.unlink(missing_ok=True)
    err = stem.with_suffix(".stderr")
    dt, _, peak, code = run_child(cmd, stem.with_suffix(".stdout"), err, timeout)
    if code is None:
        return f"stopped after {timeout:.0f} s (wall clock)"
    if code != 0:
        return last_line(err) or f"exit {code}"
    runs.times.append(dt)
    runs.floors.append(floor)
    runs.peaks.append(peak)
    runs.digests.add(hashlib.sha256(plan.read_bytes()).hexdigest() if plan.exists() else "")
    log(f"  {stem.name}: {dt:.2f}s (floor {floor:.2f}s, ratio {dt / floor:.2f}), {peak:.0f} MiB")
    return None


def scored(row: dict, res: dict | None) -> str | None:
    """`row` with evaluate_plan.py's figures `res`; a note when it found problems."""
    if res is None:
        return None
    mv, after = res["movement"], res["after"]
    row.update({
        "additions / bound": f"{mv['replica_additions']} / {mv['additions_lower_bound_count_balanced']}",
        "replica spread": str(after["replica_count_spread"]),
        "leader spread": str(after["leader_count_spread"]),
        "topic leader excess": str(after["topic_leader_excess_spread_max"]),
        "failover excess": str(after["failover_excess_spread_max"]),
        "storage range %": f"{res['before'].get('storage_free_range_spread_pct', '')} -> "
                           f"{after.get('storage_free_range_spread_pct', '')}",
        "bytes moved / bound GB": f"{mv['bytes_moved_gb']:.0f} / {mv['bytes_lower_bound_to_mean_gb']:.0f}",
    })
    if res.get("problem_count"):
        return f"evaluate_plan.py found {res['problem_count']} problem(s): {res['problems'][:3]}"
    return None


def bench_action(scenario: str, action: str, snap: Path, a: argparse.Namespace, work: Path,
                 peer: topicmappr_peer.Peer | None = None) -> tuple[list[dict], list[str]]:
    """kit's row for one action, and topicmappr's after it when `peer` (topicmappr with `snap`'s
    cluster in a ZooKeeper) is given and has a counterpart: both run in turn after each floor, so
    a drift of the machine's speed reaches both alike. topicmappr's runs end after
    `a.topicmappr_timeout` s."""
    extra, targets = action_args(action, snap)
    cli_action = kit_action(action)[0]
    stem = work / f"{scenario}-{action}"
    plan, report = stem.with_suffix(".plan.json"), stem.with_suffix(".report.json")
    kit_cmd = kit_command() + ["plan", cli_action, "--snapshot", str(snap), *extra,
                               "--out", str(plan), "--report", str(report)]
    peer_cmd = peer_dir = None
    if peer and (peer.with_sizes or action != "rebalance-storage"):
        args = topicmappr_peer.peer_args(action, peer.cluster, extra)
        if args:
            peer_dir = work / f"{scenario}-{action}.topicmappr"
            peer_cmd = topicmappr_peer.command(peer.binary, peer.connect, args, peer_dir)
    kit_runs, peer_runs, notes = Runs(), Runs(), []
    peer_failed = None
    for i in range(a.repeat):
        log(f"{scenario} / {action}: run {i + 1}/{a.repeat}")
        floor = io_floor(snap, work / "io-floor.json")
        failed = timed_run(kit_cmd, plan, floor, kit_runs, stem)
        if failed:
            log(f"  kit failed: {failed}")
            row = {"scenario": scenario, "action": action, "tool": "kit", "seconds": "failed", "I/O floor s": f"{floor:.2f}"}
            return [row], [f"{scenario} / {action}: {failed}"]
        if peer_cmd and not peer_failed:
            shutil.rmtree(peer_dir, ignore_errors=True)
            peer_dir.mkdir(parents=True)
            peer_failed = timed_run(peer_cmd, topicmappr_peer.combined_map(peer_dir), floor, peer_runs,
                                    work / f"{scenario}-{action}.topicmappr-run", a.topicmappr_timeout)
    row = kit_runs.row(scenario, action, "kit")
    if len(kit_runs.digests) > 1:
        notes.append(f"{scenario} / {action}: plans differ between repeats (not deterministic)")
    if not plan.exists():
        row["seconds"] = "no plan"
        return [row], [f"{scenario} / {action}: exit 0 but no plan written"]
    problem = scored(row, evaluate(a.shared, snap, plan, targets))
    if problem:
        notes.append(f"{scenario} / {action}: {problem}")
    rows = [row]
    if peer_cmd:
        shown = topicmappr_peer.shown(args)
        if peer_failed or not topicmappr_peer.combined_map(peer_dir).exists():
            notes.append(f"{scenario} / {action}: `{shown}` failed: {peer_failed or 'no combined map'}")
        else:
            peer_row = peer_runs.row(scenario, action, "topicmappr")
            row["kit / topicmappr"] = f"{statistics.median(k / t for k, t in zip(kit_runs.times, peer_runs.times)):.2f}"
            problem = scored(peer_row, evaluate(a.shared, snap, topicmappr_peer.combined_map(peer_dir), targets))
            rows.append(peer_row)
            notes.append(f"{scenario} / {action}: topicmappr ran `{shown}`" + (f"; {problem}" if problem else ""))
    return rows, notes


def markdown(rows: list[dict], notes: list[str], a: argparse.Namespace, provenance: dict) -> str:
    head = [
        f"# kit plan benchmark: {a.partitions} partitions, RF 3, {a.brokers} brokers, "
        f"{a.racks} racks, {a.topics} topics (seed {a.seed})",
        "",
        *provenance_header(provenance["command"], provenance["started"], provenance["load_before"]),
        f"- median of {a.repeat} run(s); seconds = whole `kit plan` command, start-up included; "
        "I/O floor = json.load + json.dump of the snapshot in a fresh Python process, measured right before "
        "each run (median shown); ratio = the median of the runs' own seconds / floor; topicmappr (when given) runs "
        "right after kit on the same cluster, read from a local ZooKeeper (that read is in its seconds, as the "
        "snapshot's is in kit's), and kit / topicmappr is the median of the runs' kit seconds / topicmappr seconds",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---" for _ in COLUMNS) + "|",
    ]
    body = ["| " + " | ".join(r.get(c, "") for c in COLUMNS) + " |" for r in rows]
    tail = ["", "Notes:", *[f"- {n}" for n in notes]] if notes else []
    return "\n".join(head + body + tail) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=200_000)
    ap.add_argument("--brokers", type=int, default=150)
    ap.add_argument("--racks", type=int, default=3)
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=1, help="runs per action; the median is reported")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS),
                    help=f"comma-separated subset of {','.join(SCENARIOS)}")
    ap.add_argument("--shared", type=Path, default=Path(os.environ.get("SHARED", ROOT.parent / "shared")),
                    help="the shared/ folder holding tools/gen_cluster.py and tools/evaluate_plan.py")
    ap.add_argument("--out", type=Path, help="also write the markdown table to this file")
    ap.add_argument("--cache", type=Path, default=ROOT / "build" / "bench",
                    help="where the generated snapshots are kept and the runs' outputs written")
    ap.add_argument("--topicmappr", metavar="PATH",
                    help="topicmappr's executable, timed and scored beside kit on the same clusters "
                         "(default: $TOPICMAPPR, else topicmappr on PATH; without one, the floor ratio alone)")
    ap.add_argument("--topicmappr-timeout", type=float, default=300.0, metavar="SECONDS",
                    help="stop a topicmappr run after this long (wall clock; its rebuild from scratch "
                         "grows fast with the cluster) and say so in the notes (default 300)")
    ap.add_argument("--docs", action="store_true",
                    help="write the table to docs/bench/plan-<partitions>p-<brokers>b.md (what `make bench` does; "
                         "docs/benchmarks.md links it)")
    a = ap.parse_args(argv)
    if a.docs and not a.out:
        a.out = ROOT / "docs" / "bench" / f"plan-{a.partitions}p-{a.brokers}b.md"
    if a.repeat < 1:
        ap.error("--repeat must be at least 1")
    chosen = [s.strip() for s in a.scenarios.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SCENARIOS]
    if unknown:
        ap.error(f"unknown scenario(s): {', '.join(unknown)}")
    if not (a.shared / "tools" / "evaluate_plan.py").exists():
        log(f"note: no {a.shared}/tools/evaluate_plan.py: plans will not be scored")
    try:
        binary = topicmappr_peer.find_binary(a.topicmappr)
    except ValueError as e:
        ap.error(str(e))

    provenance = {"command": topicmappr_peer.environment_shown(a.topicmappr)
                  + " ".join(["bench/bench_plan.py", *(sys.argv[1:] if argv is None else argv)]),
                  "started": utc_now(), "load_before": load_average()}
    cache = a.cache
    work = cache / "runs"
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    notes = [f"topicmappr: {binary}" if binary else
             "topicmappr: none given and none on PATH (--topicmappr, $TOPICMAPPR): the ratio to the floor alone"]
    for scenario in chosen:
        snap = snapshot_for(scenario, a, cache)
        with contextlib.ExitStack() as stack:
            peer = None
            if binary:
                log(f"{scenario}: laying the cluster out in a local ZooKeeper for topicmappr ...")
                t0 = time.perf_counter()
                peer = stack.enter_context(topicmappr_peer.cluster_in_zookeeper(binary, snap))
                log(f"  {time.perf_counter() - t0:.1f}s")
                if not peer.with_sizes and "rebalance-storage" in SCENARIOS[scenario][1]:
                    notes.append(f"{scenario}: kafka-kit's metric znodes do not fit in a znode at this size "
                                 "(1 MB even gzipped): topicmappr's storage rebalance, which reads them, not run")
            for action in SCENARIOS[scenario][1]:
                action_rows, action_notes = bench_action(scenario, action, snap, a, work, peer)
                rows += action_rows
                notes += action_notes
    text = markdown(rows, notes, a, provenance)
    print(text, end="")
    if a.out:
        write_atomically(a.out, text)
        log(f"table written to {a.out}")
    failed = any(not r["seconds"][:1].isdigit() for r in rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
