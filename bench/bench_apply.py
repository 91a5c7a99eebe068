#!/usr/bin/env python3
"""Time kit's throttle writes against a real local ZooKeeper.

  bench_apply.py [--topics 2000] [--brokers 150] [--partitions 40000] [--repeat 3]

Lays a generated cluster out in a fresh local ZooKeeper (kit/cluster/zk/server.py), plans the loss
of a rack (every partition, so every topic, moves), and times `set_throttles` (topic configs for every
moving topic, rate configs for every participating broker, one /config/changes
notification per entity): the issue asks for 2,000 topics and 150 brokers in at most 5 s,
where kafka-kit sleeps 250 ms per topic (8 minutes for 2,000).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kit.cluster.zk import server as localzk  # noqa: E402
from kit.cluster.zk.changes import set_throttles  # noqa: E402
from kit.formats import load_snapshot  # noqa: E402
from kit.plan import plan_az_loss  # noqa: E402
from kit.cluster.zk.layout import connect, write_cluster  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=2000)
    ap.add_argument("--brokers", type=int, default=150)
    ap.add_argument("--partitions", type=int, default=40000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--shared", type=Path, default=Path(os.environ.get("SHARED", ROOT.parent / "shared")))
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        snap = Path(tmp) / "cluster.json"
        subprocess.run([sys.executable, str(a.shared / "tools" / "gen_cluster.py"), "--brokers", str(a.brokers),
                        "--topics", str(a.topics), "--partitions", str(a.partitions), "--scenario", "az-loss",
                        "--out", str(snap)], check=True)
        cluster = load_snapshot(str(snap))
        moves = plan_az_loss(cluster, "rack-c").reassignment()["partitions"]
        server = localzk.start(localzk.free_port(), str(Path(tmp) / "zk"))
        times = []
        try:
            for i in range(a.repeat):
                client = connect(f"{server.connect}/bench-{i}")
                write_cluster(client, cluster)
                t = time.perf_counter()
                n_topics, n_brokers = set_throttles(client, cluster, moves, 50e6)
                times.append(time.perf_counter() - t)
                client.stop()
        finally:
            localzk.stop(str(Path(tmp) / "zk"))
    print(json.dumps({"topics_throttled": n_topics, "brokers_throttled": n_brokers,
                      "seconds_median": round(statistics.median(times), 3),
                      "seconds_runs": [round(x, 3) for x in times]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
