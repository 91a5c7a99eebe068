#!/usr/bin/env python3
"""Time the simulated KRaft cluster (`kit sim start --kraft`) at real sizes.

  bench_kraft_sim.py [--sizes 3000:8,200000:150] [--topics 400] [--out docs/bench/kraft-sim.md]

For each size (PARTITIONS:BROKERS) a cluster is generated with shared/tools/gen_cluster.py
(balanced, --seed 1), started with `kit sim start --kraft` (wall time from the command to its
exit: every live broker's listener answers), and, with nothing moving, asked on the wire:
Metadata (v12, every topic) of one broker, DescribeLogDirs (v4, every partition) of every
broker (all at once, each on its own connection, as an Admin API client asks them) and
ListPartitionReassignments (v0, all). Each request is timed twice, wall clock, from sending
to the whole response read: "first" (the cluster makes the answer) and "again" (the state has
not changed; the cluster keeps its encoded answer). The issue's targets (2-core machine):
200,000 partitions / 150 brokers ready within 60 s, each request within 2 s. `--out` writes
the table as Markdown with the machine, date and commit.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from kafka.protocol.admin import (DescribeLogDirsRequest, DescribeLogDirsResponse, ListPartitionReassignmentsRequest,
                                  ListPartitionReassignmentsResponse)
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 600.0  # a request not answered by then is reported as such


def ask(port: int, request, response_class, version: int):
    """One request on a connection of its own; (wall seconds, decoded response)."""
    request.with_header(correlation_id=1, client_id="kit-bench")
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as s:
        s.sendall(bytes(request.encode(version=version, header=True, framed=True)))
        stream = s.makefile("rb")
        size = struct.unpack(">i", stream.read(4))[0]
        body = stream.read(size)
    took = time.perf_counter() - started
    return took, response_class.decode(body, version=version, header=True)


def metadata(port: int) -> tuple[float, int]:
    took, resp = ask(port, MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False,
                                           include_topic_authorized_operations=False), MetadataResponse, 12)
    return took, sum(len(t.partitions) for t in resp.topics)


def log_dirs(ports: list[int]) -> tuple[float, int]:
    """Every broker asked at once; the wall time until the last answered, replicas listed."""
    counts: list[int] = []
    lock = threading.Lock()

    def one(port):
        _, resp = ask(port, DescribeLogDirsRequest(version=4, topics=None), DescribeLogDirsResponse, 4)
        with lock:
            counts.append(sum(len(t.partitions) for r in resp.results for t in r.topics))
    started = time.perf_counter()
    threads = [threading.Thread(target=one, args=(p,)) for p in ports]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - started, sum(counts)


def reassignments(port: int) -> tuple[float, int]:
    took, resp = ask(port, ListPartitionReassignmentsRequest(version=0, timeout_ms=60000, topics=None),
                     ListPartitionReassignmentsResponse, 0)
    return took, sum(len(t.partitions) for t in resp.topics)


def kit(*args, env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kit", *map(str, args)], capture_output=True, text=True, env=env)


def bench(partitions: int, brokers: int, topics: int, shared: Path, tmp: Path, env) -> dict:
    snap, state = tmp / f"cluster-{partitions}.json", tmp / f"kraft-{partitions}"
    subprocess.run([sys.executable, str(shared / "tools" / "gen_cluster.py"), "--brokers", str(brokers), "--topics",
                    str(min(topics, partitions)), "--partitions", str(partitions), "--seed", "1", "--out", str(snap)],
                   check=True, capture_output=True)
    started = time.perf_counter()
    r = kit("sim", "start", "--kraft", "--snapshot", snap, "--state", state, env=env)
    ready = time.perf_counter() - started
    if r.returncode != 0:
        raise SystemExit(f"kit sim start failed: {r.stderr.strip()}")
    try:
        ports = [int(p) for p in json.loads((state / "cluster.json").read_text())["ports"].values()]
        row = {"partitions": partitions, "brokers": brokers, "ready_s": ready}
        for name, call in (("metadata", lambda: metadata(ports[0])), ("log_dirs", lambda: log_dirs(ports)),
                           ("reassignments", lambda: reassignments(ports[0]))):
            first, n = call()
            again, _ = call()
            row[name] = {"first_s": first, "again_s": again, "items": n}
        return row
    finally:
        kit("sim", "stop", "--state", state, env=env)


def table(rows: list[dict]) -> str:
    out = ["| partitions | brokers | start, ready (s) | Metadata first / again (s) | DescribeLogDirs, all brokers, "
           "first / again (s) | ListPartitionReassignments first / again (s) |",
           "|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        cells = [f"{r[k]['first_s']:.2f} / {r[k]['again_s']:.2f}" for k in ("metadata", "log_dirs", "reassignments")]
        out.append(f"| {r['partitions']:,} | {r['brokers']} | {r['ready_s']:.1f} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="3000:8,200000:150", help="PARTITIONS:BROKERS[,...]")
    ap.add_argument("--topics", type=int, default=400)
    ap.add_argument("--shared", type=Path, default=Path(os.environ.get("SHARED", ROOT.parent / "shared")))
    ap.add_argument("--out", type=Path, help="write the table as Markdown here (with machine, date, commit)")
    a = ap.parse_args(argv)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in a.sizes.split(","):
            partitions, brokers = (int(x) for x in size.split(":"))
            rows.append(bench(partitions, brokers, a.topics, a.shared, Path(tmp), env))
            print(json.dumps(rows[-1]), flush=True)
    text = table(rows)
    print(text)
    if a.out:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        head = (f"# The simulated KRaft cluster at size\n\n`bench/bench_kraft_sim.py --sizes {a.sizes}`: "
                f"{platform.node()} ({os.cpu_count()} cores, {platform.python_version()}), "
                f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit {commit}. Wall seconds; nothing "
                "moving; \"first\" makes the answer, \"again\" is the same request with the state unchanged.\n\n")
        tmp_out = a.out.with_suffix(".tmp")
        tmp_out.write_text(head + text + "\n")
        os.replace(tmp_out, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
