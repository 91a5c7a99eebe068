"""The auto-throttle against static throttles, in the simulator (design.md's physics).

A broker of the reference cluster (24 brokers, 3 racks, 3,000 partitions, RF 3) is replaced
under 50% steady client load, flat and with a ten-minute x1.6 client spike half-way through
the fastest safe copy (0.5 x lower bound); the same
plan runs with kit's auto-throttle and with static throttles at 10%, 50% and 95% of each
broker's capacity. Prints a Markdown table for docs/benchmarks.md.

    .venv/bin/python bench/bench_throttle.py --shared ../shared
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from kit.throttle.decide import Settings  # noqa: E402
from kit.formats import load_snapshot  # noqa: E402
from kit.plan.actions.replace import plan_replace  # noqa: E402
from kit.sim.physics import simulate  # noqa: E402
from kit.report.waves import human_duration  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared"))
    ap.add_argument("--client-load", type=float, default=0.5)
    ap.add_argument("--repeat", type=int, default=3, help="runs per row for the median wall time")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        snap = os.path.join(tmp, "c.json")
        subprocess.run([sys.executable, os.path.join(a.shared, "tools", "gen_cluster.py"), "--brokers", "24",
                        "--racks", "3", "--partitions", "3000", "--scenario", "replace", "--dead", "1",
                        "--seed", "7", "--out", snap], check=True)
        c = load_snapshot(snap)
    dead = next(b.id for b in c.brokers.values() if not b.alive and b.id in c.map_brokers())
    new = next(b for b in c.live_ids if b not in c.map_brokers() and c.brokers[b].rack == c.brokers[dead].rack)
    moves = plan_replace(c, [(dead, new)]).reassignment()["partitions"]
    cap = c.brokers[new].net_capacity
    # The spike comes half-way through the fastest copy that does not saturate, so it hits
    # every run while it is still copying.
    spike_at = simulate(c, moves, None, a.client_load)["lower_bound_s"] / 2
    rows = [("auto (kit, 30 s)", "auto", Settings(interval=30)), ("auto (kit, 180 s)", "auto", Settings(interval=180))]
    rows += [(f"static {int(p * 100)}% of capacity", p * cap, None) for p in (0.10, 0.50, 0.95)]
    print(f"Replace broker {dead} by {new}: {len(moves)} partitions, "
          f"{sum(c.partitions[i].size for i in range(len(c.partitions)) if c.partitions[i].key in {(m['topic'], m['partition']) for m in moves}) / 1e12:.2f} TB; "
          f"client load {a.client_load:.0%}\n")
    print("| throttle | traffic | completion | / lower bound | saturated broker-s | throttle cleared after | sim wall (median) |")
    print("|---|---|---|---|---|---|---|")
    for name, throttle, settings in rows:
        for traffic in ("flat", "spike"):
            walls = []
            for _ in range(a.repeat):
                t0 = time.perf_counter()
                res = simulate(c, moves, throttle, a.client_load, traffic, settings, spike_at=spike_at)
                walls.append(time.perf_counter() - t0)
            cleared = res["throttle_cleared_s"]
            print(f"| {name} | {traffic} | {human_duration(res['completion_s'])} | "
                  f"{res['completion_s'] / res['lower_bound_s']:.3f} | {res['saturated_broker_seconds']:.0f} | "
                  f"{'-' if cleared is None else f'{cleared:.0f} s'} | {statistics.median(walls):.2f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
