#!/usr/bin/env python3
"""`kit snapshot`'s work with the cluster read from a Snapshot v1 file instead of a live cluster.

  snapshot_from_file.py IN.json OUT.json

The baseline of issue 36's target "`kit snapshot --bootstrap` within 3x the time `kit snapshot`
takes from a Snapshot v1 file of the same cluster" (bench/bench_kraft_sim.py times it): the same
start-up (kit's command line imported), the cluster loaded with `kit.formats.load_snapshot`, then
written as `kit snapshot` writes it (`snapshot_doc`, `dumps`, `write_atomic`) with its summary line.
"""
from __future__ import annotations

import sys

import kit.cli  # noqa: F401  (the start-up `kit snapshot` pays)
from kit.formats import dumps, load_snapshot, snapshot_doc
from kit.files import write_atomic


def main(argv: list[str] | None = None) -> int:
    """Read IN as Snapshot v1, write it to OUT as `kit snapshot` would; exit 0."""
    src, out = argv if argv is not None else sys.argv[1:]
    cluster = load_snapshot(src)
    write_atomic(out, dumps(snapshot_doc(cluster)))
    live = sum(b.alive for b in cluster.brokers.values())
    print(f"{out}: {live} live and {len(cluster.brokers) - live} dead brokers, {len(cluster.topics())} topics, "
          f"{len(cluster.partitions)} partitions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
