#!/usr/bin/env python3
"""The two placements `rebalance` plans beyond the exact flow, side by side: the greedy
count balance alone, and the greedy balance following the topic flow's quotas with its
moves spread over many replica sets.

    .venv/bin/python bench/topic_quotas.py

Drifted clusters from shared/tools/gen_cluster.py (a third of the topics created on half
the brokers, 30% of topics at RF 2), in-process, planner time only (placement and the
leadership passes after it). Prints a Markdown table.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

CLUSTERS = [
    dict(brokers=36, racks=3, rf=3, scenario="drift", partitions=9000, topics=12, seed=5, rf2_share=0.3),
    dict(brokers=48, racks=3, rf=3, scenario="drift", partitions=15000, topics=30, seed=5, rf2_share=0.3),
]


def main() -> int:
    from test_plan_properties import generate  # gen_cluster.py in-process
    from kit.plan.actions import rebalance
    from kit.plan.pipeline import run_stages
    from kit.plan.select import resolve_brokers, select_partitions
    from kit.plan.steps.leadership_figures import leader_figures
    from kit.plan.workspace import Workspace

    print("| cluster | placement | copies | replica spread | leader spread | topic leader excess "
          "| failover excess | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    for args in CLUSTERS:
        c = generate(**args)
        selected = select_partitions(c, None, None)
        targets = resolve_brokers(c, None, selected)
        for name, how in (("greedy alone", dict(quotas=False, spread_touched=False)),
                          ("greedy + topic quotas + spread moves", dict(quotas=True, spread_touched=True))):
            start = time.perf_counter()
            ws = run_stages(Workspace(c, targets, selected),
                            rebalance.count_stages("rebalance", False, spread_topics=False, **how))
            secs = time.perf_counter() - start
            figs = leader_figures(ws, ws.assign)
            print(f"| {args['partitions']:,} partitions, {args['brokers']} brokers | {name} | {ws.copies_made()} "
                  f"| {ws.count_spread()} | {figs.leader_spread} | {figs.topic_leader_excess} "
                  f"| {figs.failover_excess} | {secs:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
