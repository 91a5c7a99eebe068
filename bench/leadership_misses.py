#!/usr/bin/env python3
"""`rebalance` on the clusters where leadership targets were hard to meet, with the step that
chooses replica sets for leadership (`spend_copies_on_leadership`) off and on: the figures,
copies against the lower bound, the plan's time, and what the plan's NOTE proves.

    .venv/bin/python bench/leadership_misses.py

The clusters are the misses of bench/leadership_sweep.py in session 4 and those of the tests.

    .venv/bin/python bench/leadership_misses.py --two-moves

checks the proofs beyond what kit's program looks at: every partition may also end with any
rack-safe set two copies from its own (both replicas moved at RF 2). Slow (minutes).
"""
from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # conftest.SHARED, which test_plan_properties imports
sys.path.insert(0, str(ROOT / "tests" / "plan"))  # test_plan_properties.generate

CASES = [  # gen_cluster.py options
    dict(brokers=7, racks=3, rf=2, scenario="replace", topics=10, partitions=217, dead=1, add=2, seed=9431),
    dict(brokers=6, racks=2, rf=2, scenario="balanced", topics=4, partitions=115, dead=1, add=1, seed=4260),
    dict(brokers=7, racks=3, rf=2, scenario="balanced", topics=10, partitions=246, dead=1, add=3, seed=2864),
    dict(brokers=5, racks=2, rf=2, scenario="replace", topics=5, partitions=379, dead=1, add=1, seed=7313),
    dict(brokers=18, racks=4, rf=2, scenario="replace", topics=7, partitions=210, dead=1, add=3, seed=2921),
    dict(brokers=11, racks=3, rf=2, scenario="balanced", topics=6, partitions=387, dead=1, add=1, seed=5541),
    dict(brokers=9, racks=4, rf=3, rf2_share=0.3, scenario="balanced", topics=1, partitions=171, dead=1, add=1,
         seed=238),
    dict(brokers=11, racks=3, rf=3, rf2_share=0.3, scenario="replace", topics=2, partitions=126, dead=1, add=3,
         seed=5200),
    dict(brokers=8, racks=3, rf=3, rf2_share=0.3, scenario="balanced", topics=9, partitions=126, dead=1, add=2,
         seed=3263),
    dict(brokers=8, racks=4, rf=2, scenario="replace", topics=5, partitions=281, dead=1, add=2, seed=6634),
    dict(brokers=9, racks=4, rf=2, scenario="balanced", topics=2, partitions=379, dead=1, add=1, seed=8614),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--two-moves", action="store_true", help="let a partition move two replicas too")
    a = ap.parse_args()

    from test_plan_properties import generate  # gen_cluster.py in-process
    from kit import plan as planners
    from kit.report.figures import plan_report
    from kit.plan.actions import rebalance
    from kit.plan.solvers import exact_order

    if a.two_moves:
        exact_order._replica_sets = _sets_within_two_moves
        exact_order.MAX_PLACEMENT_VARIABLES = 10**6

    step = rebalance.spend_copies_on_leadership
    print("| brokers | racks | RF | scenario | partitions | without: leader/topic/failover, copies/bound, time "
          "| with | NOTE proves the least of |")
    print("|---|---|---|---|---|---|---|---|")
    for args in CASES:
        c = generate(**args)
        row = []
        for on in (False, True):
            rebalance.spend_copies_on_leadership = step if on else (lambda *a, **k: None)
            t = time.perf_counter()
            plan = planners.plan_rebalance(c, ignore_warns=True)
            took = time.perf_counter() - t
            report = plan_report(plan)
            a, m = report["after"], report["movement"]
            row.append(f"{a['leader_count_spread']}/{a['topic_leader_excess_spread_max']}/"
                       f"{a['failover_excess_spread_max']}, {m['replica_additions']}/"
                       f"{m['additions_lower_bound_count_balanced']}, {took:.1f} s")
        rebalance.spend_copies_on_leadership = step
        proof = ("any plan" if any("least any plan" in n for n in plan.notes) else
                 "any order" if any("least any order" in n for n in plan.notes) else "(met)")
        rf = f"{args['rf']}{' + 2' if args.get('rf2_share') else ''}"
        print(f"| {args['brokers']} | {args['racks']} | {rf} | {args['scenario']} | {args['partitions']} | "
              f"{row[0]} | {row[1]} | {proof} |")
    return 0


def _sets_within_two_moves(ws, p):
    """Every rack-safe set of target brokers at most two copies (or the forced ones) from
    partition p's own, its own first; and the plan's current set."""
    orig = list(ws.cluster.partitions[p].replicas)
    off = [b for b in orig if not ws.is_target_list[ws.index[b]]]
    out = [tuple(orig)] if not off and ws.rack_ok_set(orig) else []
    for s in itertools.combinations(ws.targets, len(orig)):
        if set(s) != set(orig) and len(set(s) - set(orig)) <= max(2, len(off)) and ws.rack_ok_set(list(s)):
            out.append(s)
    if all(frozenset(s) != frozenset(ws.assign[p]) for s in out):
        out.append(tuple(ws.assign[p]))
    return out


if __name__ == "__main__":
    sys.exit(main())
