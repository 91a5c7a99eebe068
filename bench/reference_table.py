#!/usr/bin/env python3
"""kit on the reference cluster of shared/design.md's peer table.

  reference_table.py [--shared ../shared] [--seed 1] [--out FILE | --docs]

24 brokers, 3 racks, 3,000 RF-3 partitions (gen_cluster.py defaults otherwise), the
three scenarios of the table, each planned with the kit actions an operator would use
and scored by shared/tools/evaluate_plan.py. Prints a markdown table in the same
columns as design.md's, so kit's row can be read against topicmappr's and Kafka's.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from provenance import header as provenance_header, load_average, utc_now, write_atomically

ROOT = Path(__file__).resolve().parent.parent

CASES = [
    # scenario label, gen_cluster args, kit plan action + args (a function of the snapshot)
    ("2 brokers replaced", ["--scenario", "replace", "--dead", "2"], "replace"),
    ("2 brokers replaced", ["--scenario", "replace", "--dead", "2"], "remove"),
    ("AZ lost", ["--scenario", "az-loss"], "az-loss"),
    ("3 brokers added", ["--scenario", "scale-out", "--add", "3"], "scale-out"),
]


def action_args(action: str, snap: dict) -> list[str]:
    dead = sorted(b["id"] for b in snap["brokers"] if not b.get("alive", True))
    held = {r for p in snap["partitions"] for r in p["replicas"]}
    new = sorted(b["id"] for b in snap["brokers"] if b.get("alive", True) and b["id"] not in held)
    if action == "replace":
        return ["--replace", ",".join(f"{o}:{n}" for o, n in zip(dead, new))]
    if action == "remove":
        return ["--remove", ",".join(map(str, dead))]
    if action == "az-loss":
        lost = sorted({b["rack"] for b in snap["brokers"] if not b.get("alive", True)})
        return ["--rack", lost[0]]
    return []


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", type=Path, default=Path(os.environ.get("SHARED", ROOT.parent / "shared")))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, help="also write the table, with where it comes from, to this file")
    ap.add_argument("--docs", action="store_true", help="write it to docs/bench/reference.md (what `make bench` does)")
    a = ap.parse_args(argv)
    command = " ".join(["bench/reference_table.py", *(sys.argv[1:] if argv is None else argv)])
    started, load_before = utc_now(), load_average()
    out = a.out or (ROOT / "docs" / "bench" / "reference.md" if a.docs else None)
    tools = a.shared / "tools"
    kit = [str(Path(sys.executable).parent / "kit")]
    rows = ["| scenario | kit action | additions / lower bound | replica spread | leader spread | failover excess |",
            "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for label, gen_args, action in CASES:
            snap_path = Path(tmp) / "cluster.json"
            subprocess.run([sys.executable, str(tools / "gen_cluster.py"), "--brokers", "24", "--racks", "3",
                            "--partitions", "3000", "--seed", str(a.seed), *gen_args, "--out", str(snap_path)],
                           check=True)
            snap = json.loads(snap_path.read_text())
            plan = Path(tmp) / "plan.json"
            subprocess.run(kit + ["plan", action, "--snapshot", str(snap_path), *action_args(action, snap),
                                  "--out", str(plan)], check=True, stdout=subprocess.DEVNULL)
            res = json.loads(subprocess.run([sys.executable, str(tools / "evaluate_plan.py"), str(snap_path),
                                             str(plan), "--json"], check=True, capture_output=True,
                                            text=True).stdout)
            mv, after = res["movement"], res["after"]
            rows.append(f"| {label} | `{action}` | {mv['replica_additions']} / "
                        f"{mv['additions_lower_bound_count_balanced']} | {after['replica_count_spread']} | "
                        f"{after['leader_count_spread']} | {after['failover_excess_spread_max']} |")
    print("\n".join(rows))
    if out:
        text = "\n".join([f"# kit on design.md's reference cluster (24 brokers, 3 racks, 3,000 RF-3 partitions, "
                          f"seed {a.seed})", "", *provenance_header(command, started, load_before),
                          "- figures from shared/tools/evaluate_plan.py; the plans are deterministic", "",
                          *rows]) + "\n"
        write_atomically(out, text)
        print(f"table written to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
