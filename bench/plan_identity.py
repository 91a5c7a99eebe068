#!/usr/bin/env python3
"""Check that `kit plan` writes the same bytes as when the manifest was recorded.

  plan_identity.py --check [--manifest bench/plan_identity.json] [--large]
  plan_identity.py --write [--manifest bench/plan_identity.json] [--large]

A restructuring must not change a single plan. The corpus is every `kit plan` action on
clusters made by shared/tools/gen_cluster.py (every scenario, RF 3 and a mixed RF-2/RF-3
drift) and on the runbooks' own clusters (runbooks/clusters/). Each plan is made by the
`kit` command in a child process, through the CLI only (the script imports nothing of kit,
so it runs unchanged before and after kit's modules move) and its SHA-256 is compared with
the manifest. `--large` adds the benchmark's 200,000-partition clusters (minutes each; their
digests live under "large" in the same manifest).

A change that is meant to change plans (a better planner) re-records the manifest with
`--write` in the same commit, so the diff shows which plans changed. Exits 1 on any
difference or failed command, naming each; 0 when every plan is identical.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "bench" / "plan_identity.json"

# (name, gen_cluster.py arguments, [(action, extra kit plan arguments)]).  "{replace}" and
# "{lost-rack}" and "{remove}" are filled from the snapshot.
SMALL = ["--brokers", "24", "--racks", "3", "--partitions", "3000", "--topics", "40", "--seed", "11"]
LARGE = ["--brokers", "150", "--racks", "3", "--partitions", "200000", "--topics", "1000", "--seed", "7"]
SCENARIOS = [
    ("replace", ["--scenario", "replace", "--dead", "2"], [("replace", ["--replace", "{replace}"])]),
    ("az-loss", ["--scenario", "az-loss"], [("az-loss", ["--rack", "{lost-rack}"]),
                                            ("rebuild", ["--brokers", "-2"])]),
    ("scale-out", ["--scenario", "scale-out", "--add", "3"], [("scale-out", [])]),
    ("drift", ["--scenario", "drift"], [("rebalance", []), ("leaders", []), ("remove", ["--remove", "{remove}"])]),
    ("drift-rf2", ["--scenario", "drift", "--rf2-share", "0.3"], [("rebalance", []), ("leaders", [])]),
    ("skewed-storage", ["--scenario", "skewed-storage"], [("rebalance", ["--placement", "storage"])]),
    ("skewed-leaders", ["--scenario", "skewed-leaders"], [("leaders", [])]),
    ("balanced", ["--scenario", "balanced"], [("rf", ["--topics", "topic-000[0-9]", "--replication", "4"])]),
]
RUNBOOK_CLUSTERS = [
    ("az_loss", [("az-loss", ["--rack", "{lost-rack}"])]),
    ("broker_replacement", [("replace", ["--replace", "{replace}"])]),
    ("health_check", [("remove", ["--remove", "{dead}"])]),
    ("replication_factor", [("rf", ["--topics", ".*", "--replication", "4"])]),
    ("scale_out", [("scale-out", [])]),
    ("storage_rebalance", [("rebalance", ["--placement", "storage"])]),
]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def kit_command() -> list[str]:
    script = Path(sys.executable).parent / "kit"
    return [str(script)] if script.exists() else [sys.executable, "-m", "kit"]


def fill(args: list[str], snapshot: Path) -> list[str]:
    """Replace the placeholders with facts of the snapshot (dead brokers, new empty ones)."""
    doc = json.loads(snapshot.read_text())
    alive = {b["id"]: b.get("alive", True) for b in doc["brokers"]}
    racks = {b["id"]: b.get("rack") for b in doc["brokers"]}
    holding = {r for p in doc["partitions"] for r in p["replicas"]}
    dead = sorted(b for b, up in alive.items() if not up and b in holding)
    new = sorted(b for b, up in alive.items() if up and b not in holding)
    lost = sorted({racks[b] for b in dead if all(not alive[o] for o in racks if racks[o] == racks[b])})
    live = sorted(b for b, up in alive.items() if up)
    facts = {"{replace}": ",".join(f"{d}:{n}" for d, n in zip(dead, new)),
             "{lost-rack}": lost[0] if lost else "", "{remove}": ",".join(map(str, live[-2:])),
             "{dead}": ",".join(map(str, dead))}
    return [facts.get(x, x) for x in args]


def corpus(shared: Path, work: Path, large: bool) -> list[tuple[str, Path, str, list[str]]]:
    """(case name, snapshot, action, extra arguments) for every case of the corpus."""
    cases = []
    sizes = [("small", SMALL)] + ([("large", LARGE)] if large else [])
    for size, base in sizes:
        for name, scenario, actions in SCENARIOS:
            snap = work / f"{size}-{name}.json"
            if not snap.exists():
                log(f"generating {snap.name}")
                subprocess.run([sys.executable, str(shared / "tools" / "gen_cluster.py"), *base, *scenario,
                                "--out", str(snap)], check=True, stdin=subprocess.DEVNULL)
            cases += [(f"{size}/{name}/{action}", snap, action, extra) for action, extra in actions]
    for name, actions in RUNBOOK_CLUSTERS:
        snap = ROOT / "runbooks" / "clusters" / f"{name}.json"
        cases += [(f"runbook/{name}/{action}", snap, action, extra) for action, extra in actions]
    return cases


def digest(snapshot: Path, action: str, extra: list[str], work: Path) -> str:
    """SHA-256 of the plan `kit plan ACTION` writes, or "exit N: last stderr line"."""
    out = work / "plan.json"
    if out.exists():
        out.unlink()
    cmd = kit_command() + ["plan", action, "--snapshot", str(snapshot), *fill(extra, snapshot), "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if r.returncode != 0 or not out.exists():
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        return f"exit {r.returncode}: {lines[-1] if lines else ''}"
    return hashlib.sha256(out.read_bytes()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="compare with the manifest; exit 1 on a difference")
    mode.add_argument("--write", action="store_true", help="record the manifest from this code")
    ap.add_argument("--manifest", type=Path, default=MANIFEST)
    ap.add_argument("--large", action="store_true", help="add the 200,000-partition clusters")
    ap.add_argument("--shared", type=Path, default=Path(os.environ.get("SHARED", ROOT.parent / "shared")))
    a = ap.parse_args(argv)
    if not (a.shared / "tools" / "gen_cluster.py").exists():
        ap.error(f"{a.shared}/tools/gen_cluster.py not found; pass --shared")
    cache = ROOT / "build" / "plan_identity"
    cache.mkdir(parents=True, exist_ok=True)
    recorded = json.loads(a.manifest.read_text()) if a.manifest.exists() else {}
    with tempfile.TemporaryDirectory() as tmp:
        found = {}
        for name, snap, action, extra in corpus(a.shared, cache, a.large):
            found[name] = digest(snap, action, extra, Path(tmp))
            log(f"{name}: {found[name][:16]}")
    if a.write:
        merged = {**recorded, **found}
        text = json.dumps(dict(sorted(merged.items())), indent=1) + "\n"
        tmp_manifest = a.manifest.with_suffix(".tmp")
        tmp_manifest.write_text(text)
        os.replace(tmp_manifest, a.manifest)
        failed = [n for n, d in found.items() if d.startswith("exit")]
        for n in failed:
            log(f"FAILED {n}: {found[n]}")
        print(f"recorded {len(found)} plan digests in {a.manifest}")
        return 1 if failed else 0
    differ = [n for n, d in found.items() if recorded.get(n) != d]
    for n in differ:
        print(f"DIFFERS {n}: recorded {str(recorded.get(n))[:16]}, now {found[n][:60]}")
    print(f"{len(found) - len(differ)} of {len(found)} plans byte-identical to {a.manifest.name}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
