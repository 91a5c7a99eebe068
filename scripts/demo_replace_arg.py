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
from kit.plan.pairs import pair_dead_with_new


def replace_arg(cluster: Cluster) -> str:
    return ",".join(f"{d}:{n}" for d, n in pair_dead_with_new(cluster))


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
