"""Client traffic: what producers and consumers put on each broker's NIC (design.md's physics).

One model, read by the simulator (kit/sim.py), the simulated controller (kit/simcontroller.py)
and the duration estimate (kit/estimate.py):

- every in-sync replica of a partition receives its ``bytes_in`` (the leader from producers,
  the followers by replication);
- the leader sends ``bytes_out`` to consumers plus ``bytes_in`` to each in-sync follower;
- a broker that holds nothing carries nothing; a replica being copied carries its partition's
  traffic only once it joins the ISR; when a partition's reassignment completes, the removed
  replicas stop carrying it and leadership goes to the new first replica.

The what-if (``client_load`` F): every partition's traffic scaled by one factor so that the
brokers carrying traffic now carry F of their capacity on average, in whichever direction is
busier (the convention of shared/tools/gen_cluster.py --client-load; it is "receive F" whenever
brokers receive more than they send). A cluster with no traffic figures at all gets traffic in
proportion to partition size (consumers read what producers write: bytes_out = bytes_in), or
evenly over partitions when no size is known either.
Pure: no I/O.
"""
from __future__ import annotations

from .errors import BadInput
from .model import Cluster, Partition


def leader_of(p: Partition, live: set[int]) -> int | None:
    """The broker leading `p`: its `leader` when live and in sync, else its first live in-sync
    replica (the one new replicas copy from); None when it has none (offline)."""
    if p.leader is not None and p.leader in live and p.leader in p.isr:
        return p.leader
    for b in p.isr:
        if b in live and b in p.replicas:
            return b
    return None


def in_sync(p: Partition, live: set[int]) -> list[int]:
    """The live in-sync replicas of `p`, in replica order."""
    return [b for b in p.replicas if b in live and b in p.isr]


def partition_traffic(cluster: Cluster, client_load: float | None = None) -> list[tuple[float, float]]:
    """(bytes_in, bytes_out) in bytes/s per partition, aligned with `cluster.partitions`.

    `client_load` None: the snapshot's figures. A float F in [0, 1): the what-if of the module
    docstring. BadInput when F is out of range, or F > 0 and no broker carrying traffic has a
    net_capacity.
    """
    base = [(float(p.bytes_in), float(p.bytes_out)) for p in cluster.partitions]
    if client_load is None:
        return base
    if not 0 <= client_load < 1:
        raise BadInput(f"--client-load must be in [0, 1), got {client_load}")
    if client_load == 0:
        return [(0.0, 0.0)] * len(base)
    # No figures at all (or too small to scale, 1e-300 bytes/s): the size-proportional default.
    if not any(i > 1e-100 or o > 1e-100 for i, o in base):
        # No figures at all: bigger partitions are busier ones; without sizes, all alike.
        sized = any(p.size for p in cluster.partitions)
        base = [((float(p.size) if sized else 1.0),) * 2 for p in cluster.partitions]
    live = {b.id for b in cluster.brokers.values() if b.alive}
    rx, tx = broker_traffic(cluster, base, live)
    carrying = {b for b in set(rx) | set(tx) if rx.get(b, 0.0) > 0 or tx.get(b, 0.0) > 0}
    capacity = sum(cluster.brokers[b].net_capacity or 0.0 for b in carrying if b in cluster.brokers)
    if capacity <= 0:
        raise BadInput("--client-load needs the net_capacity of the brokers that carry traffic")
    busier = max(sum(rx.values()), sum(tx.values()))
    k = client_load * capacity / busier
    return [(i * k, o * k) for i, o in base]


def partition_load(p: Partition, bytes_in: float, bytes_out: float, live: set[int],
                   holders: list[int] | None = None, leader: int | None = None) -> list[tuple[int, float, float]]:
    """(broker, rx, tx) that one partition puts on its brokers, with `holders` its in-sync
    replicas (default: the live ISR) and `leader` its leader (default: `leader_of`)."""
    holders = in_sync(p, live) if holders is None else holders
    leader = leader_of(p, live) if leader is None else leader
    if leader is None or leader not in holders:
        return []
    return [(b, bytes_in, (bytes_out + bytes_in * (len(holders) - 1)) if b == leader else 0.0) for b in holders]


def broker_traffic(cluster: Cluster, traffic: list[tuple[float, float]] | None = None,
                   live: set[int] | None = None) -> tuple[dict[int, float], dict[int, float]]:
    """Client (rx, tx) in bytes/s per broker now: only brokers that carry some appear.

    `traffic` defaults to the snapshot's figures, `live` to the cluster's live brokers.
    """
    traffic = traffic if traffic is not None else partition_traffic(cluster)
    live = live if live is not None else {b.id for b in cluster.brokers.values() if b.alive}
    rx: dict[int, float] = {}
    tx: dict[int, float] = {}
    for p, (b_in, b_out) in zip(cluster.partitions, traffic):
        for b, r, t in partition_load(p, b_in, b_out, live):
            rx[b] = rx.get(b, 0.0) + r
            tx[b] = tx.get(b, 0.0) + t
    return rx, tx


class ClientTraffic:
    """Client rx/tx per broker through a reassignment, updated as replicas join the ISR.

    Parameters
    ----------
    cluster : Cluster
        The cluster before the reassignment.
    traffic : list of (bytes_in, bytes_out)
        Per partition, aligned with `cluster.partitions` (`partition_traffic`).
    live : set of int
        The live brokers.
    """

    def __init__(self, cluster: Cluster, traffic: list[tuple[float, float]], live: set[int]):
        self.cluster, self.traffic, self.live = cluster, traffic, live
        self.rx: dict[int, float] = {b: 0.0 for b in live}
        self.tx: dict[int, float] = {b: 0.0 for b in live}
        self._holders: dict[int, list[int]] = {}
        self._leader: dict[int, int | None] = {}
        rx, tx = broker_traffic(cluster, traffic, live)
        for b in live:
            self.rx[b], self.tx[b] = rx.get(b, 0.0), tx.get(b, 0.0)

    def _state(self, i: int) -> tuple[list[int], int | None]:
        if i not in self._holders:
            p = self.cluster.partitions[i]
            self._holders[i], self._leader[i] = in_sync(p, self.live), leader_of(p, self.live)
        return self._holders[i], self._leader[i]

    def _apply(self, i: int, sign: float) -> None:
        holders, leader = self._state(i)
        b_in, b_out = self.traffic[i]
        for b, r, t in partition_load(self.cluster.partitions[i], b_in, b_out, self.live, holders, leader):
            self.rx[b] += sign * r
            self.tx[b] += sign * t

    def join(self, i: int, broker: int) -> None:
        """Broker `broker` has every byte of partition `i`: it joins the ISR and its traffic."""
        holders, _ = self._state(i)
        if broker in holders:
            return
        self._apply(i, -1.0)
        holders.append(broker)
        self._apply(i, +1.0)

    def finish(self, i: int, target: list[int]) -> None:
        """Partition `i`'s reassignment completes: replicas outside `target` leave, and the
        first target replica leads when it is in sync (Kafka's preferred leader election)."""
        holders, leader = self._state(i)
        self._apply(i, -1.0)
        self._holders[i] = [b for b in target if b in holders]
        if target and target[0] in self._holders[i]:
            self._leader[i] = target[0]
        elif leader not in self._holders[i]:
            self._leader[i] = self._holders[i][0] if self._holders[i] else None
        self._apply(i, +1.0)


def floor_traffic(cluster: Cluster, traffic: list[tuple[float, float]], live: set[int],
                  targets: dict[int, list[int]]) -> tuple[dict[int, float], dict[int, float]]:
    """The least client (rx, tx) each broker carries at any moment of the reassignment to
    `targets` (partition index -> replica list): what a physical lower bound may assume."""
    rx: dict[int, float] = {}
    tx: dict[int, float] = {}
    for i, (p, (b_in, b_out)) in enumerate(zip(cluster.partitions, traffic)):
        start = {b: (r, t) for b, r, t in partition_load(p, b_in, b_out, live)}
        if i in targets:
            target = targets[i]
            holders = [b for b in target if b in live]
            lead = target[0] if target and target[0] in holders else None
            end = {b: (r, t) for b, r, t in partition_load(p, b_in, b_out, live, holders, lead)} if lead else {}
            n_start, n_end = len(start), len(end)
            load = {}
            for b in set(start) & set(end):
                r = min(start[b][0], end[b][0])
                t = min(start[b][1], end[b][1])
                if start[b][1] and end[b][1]:  # it leads throughout: its followers only grow, then shrink
                    t = b_out + b_in * (min(n_start, n_end) - 1)
                load[b] = (r, t)
        else:
            load = start
        for b, (r, t) in load.items():
            rx[b] = rx.get(b, 0.0) + r
            tx[b] = tx.get(b, 0.0) + t
    return rx, tx


__all__ = ["leader_of", "in_sync", "partition_traffic", "partition_load", "broker_traffic", "ClientTraffic",
           "floor_traffic"]
