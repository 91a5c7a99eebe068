"""Which live broker takes each dead broker's place in a replacement (`pair_dead_with_new`):
a pure rule on the cluster, apart from the replace action so that a caller choosing the pairs
(the runbooks' pre-checks) need not load the planner's pipeline and its solvers.
"""
from __future__ import annotations

from kit.errors import BadInput
from kit.model import Cluster


def pair_dead_with_new(cluster: Cluster) -> list[tuple[int, int]]:
    """(dead, new) broker pairs for a replacement: each dead broker that still holds replicas,
    in id order, takes the lowest-id unused empty live broker in its own rack, else anywhere.
    BadInput when there is no dead broker or the two sets differ in size."""
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
