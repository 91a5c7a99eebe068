"""Plan again on the result: `rebalance` and `leaders` on a 200,000-partition drifted cluster.

Idempotence (design.md) is a property test on small clusters; above 20,000 movable
partitions the planner makes one leadership pass, so this checks the large case directly:
the second plan must change nothing. Uses bench_plan.py's cached snapshot (build/bench/).

    .venv/bin/python bench/bench_idempotence.py [SNAPSHOT]
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from kit import plan as planners  # noqa: E402
from kit.formats import cluster_from_snapshot, load_snapshot, snapshot_doc  # noqa: E402

DEFAULT = os.path.join(os.path.dirname(__file__), "..", "build", "bench", "drift-p200000-b150-r3-t1000-s7.json")


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else DEFAULT
    if not os.path.exists(path):
        print(f"{path}: not found (make bench generates it)", file=sys.stderr)
        return 2
    cluster = load_snapshot(path)
    print(f"{os.path.basename(path)}: {len(cluster.partitions)} partitions\n")
    print("| action | changed | seconds | changed when planned again | seconds |")
    print("|---|---|---|---|---|")
    failed = False
    for name, plan in (("rebalance", planners.plan_rebalance), ("leaders", planners.plan_leaders)):
        t0 = time.perf_counter()
        first = plan(cluster)
        t1 = time.perf_counter()
        again = plan(cluster_from_snapshot(snapshot_doc(first.cluster, first.after)))
        t2 = time.perf_counter()
        failed |= bool(again.changed())
        print(f"| {name} | {len(first.changed())} | {t1 - t0:.1f} | {len(again.changed())} | {t2 - t1:.1f} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
