"""Offline partitions: which partitions have no leader Kafka could elect, and what brings each back.

Kafka elects a partition's leader among its in-sync replicas on live brokers. A partition with
none is offline: nobody can produce to it or consume from it, and a new replica has nothing to
copy from, so a reassignment of it could never finish and would block every later one. kit
plans around such partitions and names each (design.md, "Faults"). Kafka brings one back when
the broker of an in-sync replica returns (a clean election, nothing lost), or when the operator
chooses an unclean leader election onto a replica that is out of sync
(``unclean.leader.election.enable``, or ``kafka-leader-election --election-type unclean``): the
messages that replica lacks are lost.

"Offline" here is exactly `kit.traffic.leader_of` finding no leader: the rule the duration
estimate and the simulator copy by. Pure: no I/O.
"""
from __future__ import annotations

from itertools import compress
from operator import attrgetter, ne, not_

import numpy as np

from kit.model import Cluster, Partition
from kit.traffic import layout

__all__ = ["offline_indices", "cause", "recovery", "describe", "ENTRY_KEYS"]

# The keys of each `describe` entry, in the order a reader meets them.
ENTRY_KEYS = ("topic", "partition", "replicas", "isr", "cause", "in_sync_dead", "live_out_of_sync", "recovery")

def offline_indices(cluster: Cluster) -> list[int]:
    """Indices (in partition order) of the partitions with no live in-sync replica.

    Where every ISR is its partition's replica list (a cluster with nothing under-replicated),
    an offline partition is one whose every replica is dead: one set test per partition, in C.
    Otherwise `leader_of` for every partition at once, read off the cluster's
    `kit.traffic.layout`, which the plan's duration estimate reads too and which is kept for
    the next call on the same cluster (the review then finds it made).
    """
    parts = cluster.partitions
    live = frozenset(b.id for b in cluster.brokers.values() if b.alive)
    if not any(map(ne, map(attrgetter("isr"), parts), map(attrgetter("replicas"), parts))):
        # With no broker dead, only a partition without replicas has no leader.
        test = not_ if len(live) == len(cluster.brokers) else live.isdisjoint
        return list(compress(range(len(parts)), map(test, map(attrgetter("isr"), parts))))
    return np.flatnonzero(layout(cluster, live).lead_id < 0).tolist()


def _ids(brokers: list[int]) -> str:
    return ", ".join(map(str, brokers))


def _brokers(n: int) -> str:
    return "broker" if n == 1 else "brokers"


def _alive(cluster: Cluster, alive: frozenset[int] | None = None) -> frozenset[int]:
    return frozenset(cluster.live_ids) if alive is None else alive


def _split(p: Partition, alive: frozenset[int]) -> tuple[list[int], list[int], list[int], list[int]]:
    """The replicas of `p` in sync on dead brokers, out of sync on live ones, out of sync on dead
    ones, and the ISR's brokers that are not replicas at all."""
    returning = [b for b in p.replicas if b in p.isr and b not in alive]
    unclean_live = [b for b in p.replicas if b not in p.isr and b in alive]
    unclean_dead = [b for b in p.replicas if b not in p.isr and b not in alive]
    strangers = [b for b in p.isr if b not in p.replicas]
    return returning, unclean_live, unclean_dead, strangers


def cause(cluster: Cluster, p: Partition, alive: frozenset[int] | None = None) -> str:
    """Why offline partition `p` has no leader, in one clause (`alive`: the live brokers' ids,
    when the caller has them)."""
    returning, unclean_live, _, strangers = _split(p, _alive(cluster, alive))
    said = []
    if strangers:
        unknown = [b for b in strangers if b not in cluster.brokers or not cluster.brokers[b].known]
        what = ("the cluster does not have" if len(unknown) == len(strangers)
                else "is not one of its replicas" if len(strangers) == 1 else "are not among its replicas")
        said.append(f"its ISR names {_brokers(len(strangers))} {_ids(strangers)}, which {what}")
    if not p.replicas:
        said.append("it has no replicas")
    elif not unclean_live:
        said.append(f"every replica is on a dead broker ({_ids(p.replicas)})"
                    + ("" if returning else ", none of them in the ISR"))
    elif returning:
        said.append(f"its in-sync {'replica is' if len(returning) == 1 else 'replicas are'} on dead "
                    f"{_brokers(len(returning))} {_ids(returning)}; live {_brokers(len(unclean_live))} "
                    f"{_ids(unclean_live)} {'is' if len(unclean_live) == 1 else 'are'} out of sync")
    else:
        said.append(f"none of its replicas is in the ISR; live {_brokers(len(unclean_live))} "
                    f"{_ids(unclean_live)} {'is' if len(unclean_live) == 1 else 'are'} out of sync")
    return "; ".join(said)


def recovery(cluster: Cluster, p: Partition, alive: frozenset[int] | None = None) -> str:
    """What brings offline partition `p` back: the clean way first, then the unclean one."""
    returning, unclean_live, unclean_dead, _ = _split(p, _alive(cluster, alive))
    ways = []
    if returning:
        ways.append(f"{_brokers(len(returning))} {' or '.join(map(str, returning))} returning "
                    "(in sync: a clean election)")
    if unclean_live:
        ways.append(f"an unclean leader election onto live {_brokers(len(unclean_live))} "
                    f"{' or '.join(map(str, unclean_live))} (the messages it lacks are lost)")
    elif unclean_dead:
        ways.append(f"{_brokers(len(unclean_dead))} {' or '.join(map(str, unclean_dead))} returning, then an "
                    f"unclean leader election onto {'it' if len(unclean_dead) == 1 else 'one of them'} "
                    "(the messages it lacks are lost)")
    return "; or ".join(ways) or "nothing: it has no replicas"


def describe(cluster: Cluster, indices: list[int]) -> list[dict]:
    """One entry per offline partition (`indices` into ``cluster.partitions``), keys
    `ENTRY_KEYS`: the partition, its replicas and ISR, why it has no leader (``cause``), the
    dead brokers whose return brings it back cleanly (``in_sync_dead``: its in-sync replicas),
    the live replicas an unclean election could pick (``live_out_of_sync``), and what brings
    it back, in words (``recovery``)."""
    alive = _alive(cluster)
    out = []
    for i in indices:
        p = cluster.partitions[i]
        returning, unclean_live, _, _ = _split(p, alive)
        out.append({"topic": p.topic, "partition": p.partition, "replicas": list(p.replicas), "isr": list(p.isr),
                    "cause": cause(cluster, p, alive), "in_sync_dead": returning, "live_out_of_sync": unclean_live,
                    "recovery": recovery(cluster, p, alive)})
    return out
