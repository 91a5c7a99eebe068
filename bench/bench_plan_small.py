#!/usr/bin/env python3
"""Time the whole `kit plan` command on small clusters, every action (issue 38: within 0.6 s
at up to 5,000 partitions), beside topicmappr's where its binary is given.

  bench_plan_small.py [--sizes 3000,5000] [--actions remove,...] [--repeat 3] [--topicmappr PATH]
                      [--cache DIR] [--out FILE | --docs]

For each size a snapshot per scenario is generated once with shared/tools/gen_cluster.py (RF 3,
3 racks; 24 brokers and 40 topics at 3,000 partitions, 30 and 60 at 5,000; cached in
build/bench/small/), then every action runs on it as `kit plan` in a child process:

  replace    (replace, --dead 2)      --replace OLD:NEW,OLD:NEW
  remove     (drift)                  --remove <the two highest broker ids>
  remove-keep                         the same with --leadership keep
  az-loss    (az-loss)                --rack <the lost rack>
  az-loss-keep                        the same with --leadership keep
  scale-out  (scale-out, --add 3)
  rf         (balanced)               --topics 'topic-000[0-9]' --replication 4
  rebalance  (drift)                  and rebalance --placement storage (skewed-storage)
  leaders    (drift)
  rebuild    (az-loss)                --brokers -2

Each command runs once untimed first (Python's bytecode and numba's caches written, as on an
installed kit), then --repeat times; the table gives the median wall time with the minimum and
maximum, the median CPU time (user + system, the steadier figure under load), and the load
average before and after, since this machine is shared.

With topicmappr's binary (--topicmappr, $TOPICMAPPR or on PATH), each action that has a
topicmappr counterpart (bench/topicmappr_peer.py: all but rf and rebuild) is also planned by it
on the same cluster, read from a local ZooKeeper, its run right after each of kit's (the untimed
first runs too): kit / topicmappr is the median of the runs' ratios, as in bench_plan.py.

PYTHONDONTWRITEBYTECODE is dropped from the children's environment: an installed kit has its
bytecode, and compiling kit's modules on every run costs some 0.3 s.

Exits 1 when any `kit plan` run failed.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

import topicmappr_peer  # noqa: E402
from kit.formats import load_snapshot  # noqa: E402
from bench_plan import action_args, generator, kit_command, log, run_child  # noqa: E402
from provenance import header as provenance_header, load_average, utc_now, write_atomically  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 0.6
# (brokers, topics) per size.
SHAPES = {3000: (24, 40), 5000: (30, 60)}
SCENARIOS = {
    "replace": ["--scenario", "replace", "--dead", "2"],
    "drift": ["--scenario", "drift"],
    "az-loss": ["--scenario", "az-loss"],
    "scale-out": ["--scenario", "scale-out", "--add", "3"],
    "balanced": ["--scenario", "balanced"],
    "skewed-storage": ["--scenario", "skewed-storage"],
}
# (row name, scenario, `kit plan` action, options besides those of bench_plan.action_args,
# the action's name in topicmappr_peer.peer_args)
CASES = [
    ("replace", "replace", "replace", [], "replace"),
    ("remove", "drift", "remove", [], "remove"),
    ("remove-keep", "drift", "remove", ["--leadership", "keep"], "remove-keep"),
    ("az-loss", "az-loss", "az-loss", [], "az-loss"),
    ("az-loss-keep", "az-loss", "az-loss", ["--leadership", "keep"], "az-loss-keep"),
    ("scale-out", "scale-out", "scale-out", [], "scale-out"),
    ("rf", "balanced", "rf", ["--topics", "topic-000[0-9]", "--replication", "4"], "rf"),
    ("rebalance", "drift", "rebalance", [], "rebalance"),
    ("rebalance storage", "skewed-storage", "rebalance", ["--placement", "storage"], "rebalance-storage"),
    ("leaders", "drift", "leaders", [], "leaders"),
    ("rebuild", "az-loss", "rebuild", ["--brokers", "-2"], "rebuild"),
]
COLUMNS = ["partitions", "brokers", "action", "median s", "min s", "max s", "within 0.6 s", "CPU s", "peak MiB",
           "topicmappr s", "kit / topicmappr"]


def snapshot(shared: Path, cache: Path, scenario: str, partitions: int, seed: int) -> Path:
    brokers, topics = SHAPES.get(partitions, (max(6, partitions // 150), max(10, partitions // 80)))
    path = cache / f"{scenario}-p{partitions}-b{brokers}-t{topics}-s{seed}.json"
    if not path.exists():
        log(f"generating {path.name}")
        tmp = path.with_suffix(".tmp")
        subprocess.run(generator(shared) + ["--brokers", str(brokers), "--racks", "3", "--partitions", str(partitions),
                                            "--topics", str(topics), "--rf", "3", "--seed", str(seed),
                                            *SCENARIOS[scenario], "--out", str(tmp)],
                       check=True, stdin=subprocess.DEVNULL)
        os.replace(tmp, path)
    return path


class Peer(NamedTuple):
    """topicmappr's command for one case, where its plan lands, and the command as the notes show it."""

    command: list[str]
    out_dir: Path
    shown: str


def peer_for(binary: Path | None, peer_action: str, snap: Path, more: list[str], work: Path,
             stack: contextlib.ExitStack) -> Peer | None:
    """topicmappr's counterpart of a case on `snap`'s cluster (laid out in a local ZooKeeper
    that lives as long as `stack`), or None: no binary, or no counterpart."""
    if binary is None:
        return None
    cluster = load_snapshot(str(snap))
    args = topicmappr_peer.peer_args(peer_action, cluster, more)
    if not args:
        return None
    zk = stack.enter_context(topicmappr_peer.cluster_in_zookeeper(binary, snap))
    if peer_action == "rebalance-storage" and not zk.with_sizes:
        return None
    out_dir = work / "topicmappr"
    shown = topicmappr_peer.shown(args)
    return Peer(topicmappr_peer.command(binary, zk.connect, args, out_dir), out_dir, shown)


def peer_run(peer: Peer, work: Path, timeout: float) -> tuple[float | None, str | None]:
    """One topicmappr run: (wall seconds, None), or (None, what went wrong)."""
    shutil.rmtree(peer.out_dir, ignore_errors=True)
    peer.out_dir.mkdir(parents=True)
    dt, _, _, code = run_child(peer.command, work / "topicmappr.stdout", work / "topicmappr.stderr", timeout)
    if code is None:
        return None, f"stopped after {timeout:.0f} s (wall clock)"
    if code != 0 or not topicmappr_peer.combined_map(peer.out_dir).exists():
        return None, f"exit {code}" if code else "no combined map"
    return dt, None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="3000,5000", help="partitions, comma-separated")
    ap.add_argument("--actions", help="comma-separated subset of the rows' actions (default: all of them): "
                    + ", ".join(case[0] for case in CASES))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--shared", type=Path, default=Path(os.environ.get("SHARED", ROOT.parent / "shared")))
    ap.add_argument("--out", type=Path, help="also write the markdown table to this file")
    ap.add_argument("--docs", action="store_true", help="write the table to docs/bench/plan-small.md")
    ap.add_argument("--cache", type=Path, default=ROOT / "build" / "bench" / "small",
                    help="where the generated snapshots are kept and the runs' outputs written")
    ap.add_argument("--topicmappr", metavar="PATH",
                    help="topicmappr's executable, timed beside kit on the same clusters "
                         "(default: $TOPICMAPPR, else topicmappr on PATH; without one, kit alone)")
    ap.add_argument("--topicmappr-timeout", type=float, default=300.0, metavar="SECONDS",
                    help="stop a topicmappr run after this long (wall clock) and say so in the notes (default 300)")
    a = ap.parse_args(argv)
    if a.docs and not a.out:
        a.out = ROOT / "docs" / "bench" / "plan-small.md"
    cases = CASES
    if a.actions:
        chosen = [x.strip() for x in a.actions.split(",") if x.strip()]
        unknown = [x for x in chosen if x not in {case[0] for case in CASES}]
        if unknown:
            ap.error(f"unknown action(s): {', '.join(unknown)}")
        cases = [case for case in CASES if case[0] in chosen]
    try:
        binary = topicmappr_peer.find_binary(a.topicmappr)
    except ValueError as e:
        ap.error(str(e))
    sizes = [int(s) for s in a.sizes.split(",") if s.strip()]
    command = topicmappr_peer.environment_shown(a.topicmappr) + " ".join(
        ["bench/bench_plan_small.py", *(sys.argv[1:] if argv is None else argv)])
    started, load_before = utc_now(), load_average()
    cache = a.cache
    work = cache / "runs"
    work.mkdir(parents=True, exist_ok=True)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # children inherit it (see the docstring)
    rows, failed = [], []
    notes = [f"topicmappr: {binary}" if binary else
             "topicmappr: none given and none on PATH (--topicmappr, $TOPICMAPPR): kit alone"]
    for partitions in sizes:
        for name, scenario, action, extra, peer_action in cases:
            snap = snapshot(a.shared, cache, scenario, partitions, a.seed)
            more, _ = action_args(action, snap)
            plan = work / "plan.json"
            cmd = kit_command() + ["plan", action, "--snapshot", str(snap), *more, *extra, "--out", str(plan),
                                   "--ignore-warns"]
            out, err = work / "stdout", work / "stderr"
            times, cpus, peaks, code = [], [], [], 0
            peer_times, peer_failed = [], None
            # One ZooKeeper at a time, for this case's runs only: none runs beside another case's.
            with contextlib.ExitStack() as stack:
                peer = peer_for(binary, peer_action, snap, more, work, stack)
                for i in range(a.repeat + 1):
                    dt, cpu, peak, code = run_child(cmd, out, err)
                    if code != 0:
                        break
                    if peer and not peer_failed:
                        peer_dt, peer_failed = peer_run(peer, work, a.topicmappr_timeout)
                        if i and peer_dt is not None:
                            peer_times.append(peer_dt)
                    if i:  # the first run writes the caches
                        times.append(dt)
                        cpus.append(cpu)
                        peaks.append(peak)
            brokers = SHAPES.get(partitions, ("",))[0]
            if code != 0:
                failed.append(f"{partitions} {name}: exit {code}")
                rows.append({"partitions": f"{partitions:,}", "brokers": str(brokers), "action": name,
                             "median s": f"exit {code}"})
                continue
            med = statistics.median(times)
            log(f"{partitions} {name}: {med:.2f}s ({' '.join(f'{t:.2f}' for t in times)})"
                + (f", topicmappr {' '.join(f'{t:.2f}' for t in peer_times)}" if peer_times else ""))
            row = {"partitions": f"{partitions:,}", "brokers": str(brokers), "action": name,
                   "median s": f"{med:.2f}", "min s": f"{min(times):.2f}", "max s": f"{max(times):.2f}",
                   "within 0.6 s": "yes" if med <= TARGET_S else "no",
                   "CPU s": f"{statistics.median(cpus):.2f}",
                   "peak MiB": f"{statistics.median(peaks):.0f}"}
            if peer and peer_failed:
                notes.append(f"{partitions} {name}: `{peer.shown}` failed: {peer_failed}")
            elif peer:
                row["topicmappr s"] = f"{statistics.median(peer_times):.2f}"
                row["kit / topicmappr"] = f"{statistics.median(k / t for k, t in zip(times, peer_times)):.2f}"
                if partitions == sizes[0]:
                    notes.append(f"{name}: topicmappr ran `{peer.shown}`")
            rows.append(row)
    text = "\n".join([
        "# kit plan on small clusters: the whole command, every action",
        "",
        *provenance_header(command, started, load_before),
        f"- median of {a.repeat} run(s) after one untimed run; seconds = the whole `kit plan` command, start-up "
        f"included; target (issue 38): at most {TARGET_S} s on a quiet machine; CPU s = user + system time of the "
        "command (median), steadier than the wall time on a loaded machine; topicmappr (when given) runs right after "
        "each kit run on the same cluster, read from a local ZooKeeper (that read is in its seconds, as the "
        "snapshot's is in kit's), and kit / topicmappr is the median of the runs' kit seconds / topicmappr seconds",
        "- clusters: shared/tools/gen_cluster.py, RF 3, 3 racks, seed "
        f"{a.seed}; 24 brokers / 40 topics at 3,000 partitions, 30 / 60 at 5,000",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---" for _ in COLUMNS) + "|",
        *("| " + " | ".join(r.get(c, "") for c in COLUMNS) + " |" for r in rows),
        "", "Notes:", *(f"- {n}" for n in notes),
        *(["", "Failed:", *(f"- {f}" for f in failed)] if failed else []),
    ]) + "\n"
    print(text, end="")
    if a.out:
        write_atomically(a.out, text)
        log(f"table written to {a.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
