#!/usr/bin/env python3
"""How often `rebalance` misses a leadership target on random small clusters, and whether
each miss is proved the least possible (the plan's NOTE, by integer programming): of any
plan within the copies allowance moving at most one replica per partition, or of any order
of the final replica sets.

    .venv/bin/python bench/leadership_sweep.py --rf 2            # RF 2 only
    .venv/bin/python bench/leadership_sweep.py --rf 3 --rf2-share 0.3 --seed 1
    .venv/bin/python bench/leadership_sweep.py --rf 3 --rf2-share 0.3 --seed 1 --evacuate --clusters 40

`--evacuate` plans `az-loss` (of the dead rack) or `remove` (of the dead broker) instead,
whose targets are leader spread and topic leader excess only; clusters have 2-4 racks.

Clusters come from shared/tools/gen_cluster.py: 0/2/3/4 racks, up to 18 brokers, 1-12
topics, 20-400 partitions, scenarios drift / scale-out / balanced / replace.
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # conftest.SHARED, which test_plan_properties imports
sys.path.insert(0, str(ROOT / "tests" / "plan"))  # test_plan_properties.generate


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rf", type=int, default=2)
    ap.add_argument("--rf2-share", type=float, default=0.0, help="share of RF-2 topics when --rf 3")
    ap.add_argument("--clusters", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--evacuate", action="store_true", help="az-loss or remove instead of rebalance")
    a = ap.parse_args()

    from test_plan_properties import generate  # gen_cluster.py in-process
    from kit import plan as planners
    from kit.report.figures import plan_report

    rng = random.Random(a.seed)
    misses, planned = [], 0
    for _ in range(a.clusters):
        racks = rng.choice([2, 3, 4] if a.evacuate else [0, 2, 3, 4])
        scenario = rng.choice(["az-loss", "replace"] if a.evacuate else ["drift", "scale-out", "balanced", "replace"])
        args = dict(brokers=rng.randint(max(a.rf + 2, racks * 2, 4), 18), racks=racks, rf=a.rf,
                    scenario=scenario, rf2_share=a.rf2_share if a.rf == 3 else 0.0,
                    topics=rng.randint(1, 12), partitions=rng.randint(20, 400), dead=1,
                    add=rng.randint(1, 3), seed=rng.randint(0, 10000))
        c = generate(**args)
        if not a.evacuate:
            plan = planners.plan_rebalance(c, ignore_warns=True)
        elif scenario == "az-loss":
            lost = sorted({b.rack for b in c.brokers.values() if not b.alive and b.rack})[0]
            plan = planners.plan_az_loss(c, lost, ignore_warns=True)
        else:
            plan = planners.plan_remove(c, sorted(b.id for b in c.brokers.values() if not b.alive),
                                        ignore_warns=True)
        planned += 1
        after = plan_report(plan)["after"]
        figs = (after["leader_count_spread"], after["topic_leader_excess_spread_max"],
                after["failover_excess_spread_max"])
        if figs[0] > 1 or figs[1] > 1 or (figs[2] > 2 and not a.evacuate):
            proved = ("any plan within" if any("least any plan" in n for n in plan.notes) else
                      "any order" if any("least any order" in n for n in plan.notes) else "")
            misses.append((figs, proved, args))
    print(f"{planned} clusters planned, {len(misses)} miss a leadership target, "
          f"{sum(1 for m in misses if m[1])} of them proved the least possible")
    print("| leader spread | topic leader excess | failover excess | proved the least of | gen_cluster.py options |")
    print("|---|---|---|---|---|")
    for figs, proved, args in misses:
        opts = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in args.items())
        print(f"| {figs[0]} | {figs[1]} | {figs[2]} | {proved or 'not proved'} | {opts} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
