#!/usr/bin/env python3
"""Time the whole `kit plan` command on small clusters, every action (issue 38: within 0.6 s
at up to 5,000 partitions).

  bench_plan_small.py [--sizes 3000,5000] [--repeat 3] [--out FILE | --docs]

For each size a snapshot per scenario is generated once with shared/tools/gen_cluster.py (RF 3,
3 racks; 24 brokers and 40 topics at 3,000 partitions, 30 and 60 at 5,000; cached in
build/bench/small/), then every action runs on it as `kit plan` in a child process:

  replace    (replace, --dead 2)      --replace OLD:NEW,OLD:NEW
  remove     (drift)                  --remove <the two highest broker ids>
  az-loss    (az-loss)                --rack <the lost rack>
  scale-out  (scale-out, --add 3)
  rf         (balanced)               --topics 'topic-000[0-9]' --replication 4
  rebalance  (drift)                  and rebalance --placement storage (skewed-storage)
  leaders    (drift)
  rebuild    (az-loss)                --brokers -2

Each command runs once untimed first (Python's bytecode and numba's caches written, as on an
installed kit), then --repeat times; the table gives the median wall time with the minimum and
maximum, the median CPU time (user + system, the steadier figure under load), and the load
average before and after, since this machine is shared.
PYTHONDONTWRITEBYTECODE is dropped from the children's environment: an installed kit has its
bytecode, and compiling kit's modules on every run costs some 0.3 s.

Exits 1 when any `kit plan` run failed.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

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
# (row name, scenario, `kit plan` action, options besides those of bench_plan.action_args)
CASES = [
    ("replace", "replace", "replace", []),
    ("remove", "drift", "remove", []),
    ("az-loss", "az-loss", "az-loss", []),
    ("scale-out", "scale-out", "scale-out", []),
    ("rf", "balanced", "rf", ["--topics", "topic-000[0-9]", "--replication", "4"]),
    ("rebalance", "drift", "rebalance", []),
    ("rebalance storage", "skewed-storage", "rebalance", ["--placement", "storage"]),
    ("leaders", "drift", "leaders", []),
    ("rebuild", "az-loss", "rebuild", ["--brokers", "-2"]),
]
COLUMNS = ["partitions", "brokers", "action", "median s", "min s", "max s", "within 0.6 s", "CPU s", "peak MiB"]


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="3000,5000", help="partitions, comma-separated")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--shared", type=Path, default=Path(os.environ.get("SHARED", ROOT.parent / "shared")))
    ap.add_argument("--out", type=Path, help="also write the markdown table to this file")
    ap.add_argument("--docs", action="store_true", help="write the table to docs/bench/plan-small.md")
    a = ap.parse_args(argv)
    if a.docs and not a.out:
        a.out = ROOT / "docs" / "bench" / "plan-small.md"
    sizes = [int(s) for s in a.sizes.split(",") if s.strip()]
    command = " ".join(["bench/bench_plan_small.py", *(sys.argv[1:] if argv is None else argv)])
    started, load_before = utc_now(), load_average()
    cache = ROOT / "build" / "bench" / "small"
    work = cache / "runs"
    work.mkdir(parents=True, exist_ok=True)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # children inherit it (see the docstring)
    rows, failed = [], []
    for partitions in sizes:
        for name, scenario, action, extra in CASES:
            snap = snapshot(a.shared, cache, scenario, partitions, a.seed)
            more, _ = action_args(action, snap)
            plan = work / "plan.json"
            cmd = kit_command() + ["plan", action, "--snapshot", str(snap), *more, *extra, "--out", str(plan),
                                   "--ignore-warns"]
            out, err = work / "stdout", work / "stderr"
            times, cpus, peaks, code = [], [], [], 0
            for i in range(a.repeat + 1):
                dt, cpu, peak, code = run_child(cmd, out, err)
                if code != 0:
                    break
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
            log(f"{partitions} {name}: {med:.2f}s ({' '.join(f'{t:.2f}' for t in times)})")
            rows.append({"partitions": f"{partitions:,}", "brokers": str(brokers), "action": name,
                         "median s": f"{med:.2f}", "min s": f"{min(times):.2f}", "max s": f"{max(times):.2f}",
                         "within 0.6 s": "yes" if med <= TARGET_S else "no",
                         "CPU s": f"{statistics.median(cpus):.2f}",
                         "peak MiB": f"{statistics.median(peaks):.0f}"})
    text = "\n".join([
        "# kit plan on small clusters: the whole command, every action",
        "",
        *provenance_header(command, started, load_before),
        f"- median of {a.repeat} run(s) after one untimed run; seconds = the whole `kit plan` command, start-up "
        f"included; target (issue 38): at most {TARGET_S} s on a quiet machine; CPU s = user + system time of the "
        "command (median), steadier than the wall time on a loaded machine",
        "- clusters: shared/tools/gen_cluster.py, RF 3, 3 racks, seed "
        f"{a.seed}; 24 brokers / 40 topics at 3,000 partitions, 30 / 60 at 5,000",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---" for _ in COLUMNS) + "|",
        *("| " + " | ".join(r.get(c, "") for c in COLUMNS) + " |" for r in rows),
        *(["", "Failed:", *(f"- {f}" for f in failed)] if failed else []),
    ]) + "\n"
    print(text, end="")
    if a.out:
        write_atomically(a.out, text)
        log(f"table written to {a.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
