#!/usr/bin/env python3
"""Print the `--replace OLD:NEW[,OLD:NEW]` argument for a snapshot.

  demo_replace_arg.py SNAPSHOT.json

OLD are the dead brokers that still hold replicas, in id order; NEW are the
live brokers that hold no replica (new brokers), in id order. Each dead broker
takes the lowest-id unused new broker in its own rack, or else the lowest-id
unused new broker anywhere (with brokers made by gen_cluster.py's "replace"
scenario, that is the plain sorted pairing). Exits 2 with one line on stderr
when the snapshot is bad or the two sets differ in size.
"""
from __future__ import annotations

import sys

from kit.errors import BadInput
from kit.formats import load_snapshot
from kit.model import Cluster


def replace_pairs(cluster: Cluster) -> list[tuple[int, int]]:
    """(dead, new) broker pairs for `kit plan replace`."""
    held = set(cluster.map_brokers())
    dead = sorted(b for b, br in cluster.brokers.items() if not br.alive and b in held)
    new = sorted(b for b, br in cluster.brokers.items() if br.alive and b not in held)
    if not dead:
        raise BadInput("no dead broker holds replicas: nothing to replace")
    if len(dead) != len(new):
        raise BadInput(f"{len(dead)} dead broker(s) {dead} but {len(new)} empty live broker(s) {new}")
    free = list(new)
    pairs = []
    for d in dead:
        rack = cluster.rack_of(d)
        same = [n for n in free if rack is not None and cluster.rack_of(n) == rack]
        pick = same[0] if same else free[0]
        free.remove(pick)
        pairs.append((d, pick))
    return pairs


def replace_arg(cluster: Cluster) -> str:
    return ",".join(f"{d}:{n}" for d, n in replace_pairs(cluster))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        print(replace_arg(load_snapshot(argv[0])))
    except BadInput as e:
        print(f"demo_replace_arg: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
