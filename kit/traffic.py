"""Client traffic: what producers and consumers put on each broker's NIC (design.md's physics).

One model, read by the simulator (kit/sim/physics.py), the simulated controller (kit/sim/controller.py)
and the duration estimate (kit/report/estimate.py):

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
Per-broker sums run over flat numpy arrays of the partitions (`layout`), in partition order,
so they are the same floats a loop over partitions adds up, at 200,000 partitions in a
fraction of a second. Pure: no I/O (the last layout is kept for the next call on the same
cluster, which is immutable).
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from bisect import bisect_left
from operator import attrgetter

import numpy as np

from kit.array_ops import Lists, appearance_order, distinct, flatten, fold_many, in_lists, member, pair_keys, positions
from kit.errors import BadInput
from kit.model import Cluster, Partition


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


@dataclass(frozen=True, eq=False)
class Layout:
    """A cluster's partitions as flat arrays, for one set of live brokers.

    Attributes
    ----------
    ids : ndarray
        Sorted broker ids named by a replica list, an ISR or the live set; a broker's
        *position* is its index here.
    live_ids : ndarray
        The live brokers, sorted.
    rep_part, rep_id : ndarray
        Every replica (partition index, broker id), partition-major, in replica order.
    hold_part, hold_pos, hold_id : ndarray
        The live in-sync replicas (`in_sync`), the same way, with the broker's position.
    count : ndarray
        Per partition, its number of live in-sync replicas.
    lead_id : ndarray
        Per partition, `leader_of` (-1 for None).
    loaded : ndarray of bool
        Per partition, whether its leader is one of those replicas (it then carries traffic).
    size : ndarray
        Per partition, its size in bytes, as a float.
    """

    ids: np.ndarray
    live_ids: np.ndarray
    rep_part: np.ndarray
    rep_id: np.ndarray
    hold_part: np.ndarray
    hold_pos: np.ndarray
    hold_id: np.ndarray
    count: np.ndarray
    lead_id: np.ndarray
    loaded: np.ndarray
    size: np.ndarray


def _small_int(n: int) -> type:
    """The narrowest unsigned integer type holding 0..n-1 (numpy's stable sort of 8- and
    16-bit integers is a radix sort)."""
    return np.uint8 if n <= 1 << 8 else np.uint16 if n <= 1 << 16 else np.int64


_last: list = [None, None, None]  # weak reference to the cluster, its live set, its Layout


def layout(cluster: Cluster, live: set[int]) -> Layout:
    """The partitions of `cluster` as a `Layout` for the brokers `live` (the last one is reused)."""
    key = frozenset(live)
    ref, last_live, last = _last
    if ref is not None and ref() is cluster and last_live == key:
        return last
    parts = cluster.partitions
    n = len(parts)
    replicas = replica_columns(cluster)
    rep_part, rep_id = replicas.part, replicas.id
    isrs = cluster.lists[1] if cluster.lists is not None else None  # as the snapshot reader made them
    isr_part, isr_id = (isrs.row, isrs.id) if isrs is not None else flatten(list(map(attrgetter("isr"), parts)), n)
    live_ids = np.array(sorted(key), dtype=np.int64)
    rep_keys, isr_keys = pair_keys(rep_part, rep_id), pair_keys(isr_part, isr_id)
    hold = member(rep_id, live_ids) & member(rep_keys, isr_keys)
    hold_part, hold_id = rep_part[hold], rep_id[hold]
    # leader_of: the leader when live and in sync, else the first live in-sync replica (ISR order).
    leader = np.fromiter(_or_none(map(attrgetter("leader"), parts), -1), np.int64, n)
    rows = np.arange(n, dtype=np.int64)
    lead_id = np.where((leader >= 0) & member(leader, live_ids) & member(pair_keys(rows, leader), isr_keys),
                       leader, -1)
    fallback = np.flatnonzero(member(isr_id, live_ids) & member(isr_keys, rep_keys))
    f_part = isr_part[fallback]
    first = np.ones(len(fallback), dtype=bool)
    first[1:] = f_part[1:] != f_part[:-1]  # rows come in order: the first entry of each
    spare = np.full(n, -1, dtype=np.int64)
    spare[f_part[first]] = isr_id[fallback[first]]
    lead_id = np.where(lead_id >= 0, lead_id, spare)
    loaded = (lead_id >= 0) & member(pair_keys(rows, lead_id), pair_keys(hold_part, hold_id))
    ids = distinct(rep_id, isr_id, live_ids)
    out = Layout(ids=ids, live_ids=live_ids, rep_part=rep_part, rep_id=rep_id, hold_part=hold_part,
                 hold_pos=np.searchsorted(ids, hold_id), hold_id=hold_id,
                 count=np.bincount(hold_part, minlength=n), lead_id=lead_id, loaded=loaded,
                 size=np.fromiter(map(attrgetter("size"), parts), float, n))
    _last[:] = [weakref.ref(cluster), key, out]
    return out


@dataclass(frozen=True, eq=False)
class ReplicaColumns:
    """A cluster's replica lists as flat arrays (`replica_columns`)."""

    part: np.ndarray  # each replica's partition index, partition-major, in replica order
    id: np.ndarray  # each replica's broker id


_replicas_last: list = [None, None]  # weak reference to the cluster, its ReplicaColumns


def replica_columns(cluster: Cluster) -> ReplicaColumns:
    """The replica lists of `cluster` as flat arrays (`Cluster.lists` where the reader kept
    them), read once per cluster: by the layout (while the planner waits,
    `kit.report.estimate.prepare`) and by the review's figures (kit.report.arrays), 0.17 CPU s
    each at 1,000,000 partitions when flattened here."""
    ref, last = _replicas_last
    if ref is not None and ref() is cluster:
        return last
    if cluster.lists is not None:  # as the snapshot reader made them
        out = ReplicaColumns(cluster.lists[0].row, cluster.lists[0].id)
    else:
        n = len(cluster.partitions)
        out = ReplicaColumns(*flatten(list(map(attrgetter("replicas"), cluster.partitions)), n))
    _replicas_last[:] = [weakref.ref(cluster), out]
    return out


def _or_none(values, default: int) -> list:
    """`values` as a list, `default` where one is None (the list as read when none is)."""
    values = list(values)
    return [default if v is None else v for v in values] if None in values else values


def _per_broker(ids: np.ndarray, pos: np.ndarray, rx: np.ndarray, tx: np.ndarray) -> tuple[dict, dict]:
    """Sums of `rx` and `tx` per broker position, in entry order (a loop's floats), as dicts
    keyed by broker id in order of first appearance (a loop's dict)."""
    srx = np.bincount(pos, weights=rx, minlength=len(ids))
    stx = np.bincount(pos, weights=tx, minlength=len(ids))
    order = appearance_order(pos, len(ids))
    keys = ids[order].tolist()
    return dict(zip(keys, srx[order].tolist())), dict(zip(keys, stx[order].tolist()))


def _columns(traffic, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(bytes_in, bytes_out) arrays from `traffic`, a list of pairs or an (n, 2) array."""
    a = np.asarray(traffic, dtype=float).reshape(-1, 2)[:n]
    return a[:, 0], a[:, 1]


def traffic_array(cluster: Cluster, client_load: float | None = None) -> np.ndarray:
    """`partition_traffic` as an (n, 2) float array: bytes_in and bytes_out per partition."""
    parts = cluster.partitions
    n = len(parts)
    base = _figures(cluster).copy()  # the caller's own (a copy costs 1 ms at 200,000 partitions)
    if client_load is None:
        return base
    if not 0 <= client_load < 1:
        raise BadInput(f"--client-load must be in [0, 1), got {client_load}")
    if client_load == 0:
        return np.zeros((n, 2))
    # No figures at all (or too small to scale, 1e-300 bytes/s): the size-proportional default.
    if not (base > 1e-100).any():
        # No figures at all: bigger partitions are busier ones; without sizes, all alike.
        size = np.fromiter(map(attrgetter("size"), parts), float, n)
        base[:] = (size if (size > 0).any() else np.ones(n))[:, None]
    live = {b.id for b in cluster.brokers.values() if b.alive}
    rx, tx = broker_traffic(cluster, base, live)
    carrying = {b for b in set(rx) | set(tx) if rx.get(b, 0.0) > 0 or tx.get(b, 0.0) > 0}
    capacity = sum(cluster.brokers[b].net_capacity or 0.0 for b in carrying if b in cluster.brokers)
    if capacity <= 0:
        raise BadInput("--client-load needs the net_capacity of the brokers that carry traffic")
    busier = max(sum(rx.values()), sum(tx.values()))
    k = client_load * capacity / busier
    return base * k


_figures_last: list = [None, None]  # weak reference to the cluster, its figures


def _figures(cluster: Cluster) -> np.ndarray:
    """The snapshot's (bytes_in, bytes_out) per partition as an (n, 2) array, read once per
    cluster: the review reads them twice (the estimate, the starting rates), and reading
    200,000 partitions' fields costs more than the sums made of them."""
    ref, last = _figures_last
    if ref is not None and ref() is cluster:
        return last
    parts = cluster.partitions
    n = len(parts)
    base = np.empty((n, 2))
    base[:, 0] = np.fromiter(map(attrgetter("bytes_in"), parts), float, n)
    base[:, 1] = np.fromiter(map(attrgetter("bytes_out"), parts), float, n)
    _figures_last[:] = [weakref.ref(cluster), base]
    return base


def partition_traffic(cluster: Cluster, client_load: float | None = None) -> list[tuple[float, float]]:
    """(bytes_in, bytes_out) in bytes/s per partition, aligned with `cluster.partitions`.

    `client_load` None: the snapshot's figures. A float F in [0, 1): the what-if of the module
    docstring. BadInput when F is out of range, or F > 0 and no broker carrying traffic has a
    net_capacity.
    """
    a = traffic_array(cluster, client_load)
    return list(zip(a[:, 0].tolist(), a[:, 1].tolist()))


def partition_load(p: Partition, bytes_in: float, bytes_out: float, live: set[int],
                   holders: list[int] | None = None, leader: int | None = None) -> list[tuple[int, float, float]]:
    """(broker, rx, tx) that one partition puts on its brokers, with `holders` its in-sync
    replicas (default: the live ISR) and `leader` its leader (default: `leader_of`)."""
    holders = in_sync(p, live) if holders is None else holders
    leader = leader_of(p, live) if leader is None else leader
    sends = _leader_sends(bytes_in, bytes_out, holders, leader)
    if sends is None:
        return []
    return [(b, bytes_in, sends if b == leader else 0.0) for b in holders]


def _leader_sends(bytes_in: float, bytes_out: float, holders: list[int], leader: int | None) -> float | None:
    """What a partition's leader sends (bytes/s): bytes_out to its consumers and bytes_in to
    each other in-sync replica; None when its leader is not among `holders` (it carries nothing).
    Every holder receives bytes_in."""
    if leader is None or leader not in holders:
        return None
    return bytes_out + bytes_in * (len(holders) - 1)


def broker_traffic(cluster: Cluster, traffic: list[tuple[float, float]] | np.ndarray | None = None,
                   live: set[int] | None = None) -> tuple[dict[int, float], dict[int, float]]:
    """Client (rx, tx) in bytes/s per broker now: only brokers that carry some appear.

    `traffic` (pairs, or the array of `traffic_array`) defaults to the snapshot's figures,
    `live` to the cluster's live brokers.
    """
    traffic = traffic if traffic is not None else _figures(cluster)
    live = live if live is not None else {b.id for b in cluster.brokers.values() if b.alive}
    lay = layout(cluster, live)
    figures = np.ascontiguousarray(np.asarray(traffic, dtype=float).reshape(-1, 2)[:len(cluster.partitions)])
    # The last answer again for the same layout and the same figures, bit for bit (a review
    # asks three times: the estimate's clients, its starting rates, the waves' rates).
    ref, last_figures, last = _broker_traffic_last
    if ref is not None and ref() is lay and np.array_equal(figures.view(np.int64), last_figures.view(np.int64)):
        return dict(last[0]), dict(last[1])
    b_in, b_out = figures[:, 0], figures[:, 1]
    on = lay.loaded[lay.hold_part]  # partition_load: nothing unless its leader is a holder
    part = lay.hold_part[on]
    leads = lay.hold_id[on] == lay.lead_id[part]
    tx = np.where(leads, b_out[part] + b_in[part] * (lay.count[part] - 1), 0.0)
    rx, tx = _per_broker(lay.ids, lay.hold_pos[on], b_in[part], tx)
    _broker_traffic_last[:] = [weakref.ref(lay), figures.copy(), (rx, tx)]
    return dict(rx), dict(tx)


_broker_traffic_last: list = [None, None, None]  # weak reference to the Layout, its figures, (rx, tx)


class ClientTraffic:
    """Client rx/tx per broker through a reassignment, updated as replicas join the ISR.

    Parameters
    ----------
    cluster : Cluster
        The cluster before the reassignment.
    traffic : list of (bytes_in, bytes_out), or the (n, 2) array of `traffic_array`
        Per partition, aligned with `cluster.partitions` (`partition_traffic`).
    live : set of int
        The live brokers.
    """

    def __init__(self, cluster: Cluster, traffic: list[tuple[float, float]], live: set[int]):
        self.cluster, self.traffic, self.live = cluster, traffic, live
        # Python floats per partition, read once (indexing an array's row per change costs
        # more than the change itself: a 5,000-copy estimate makes 20,000 changes).
        b_in, b_out = _columns(traffic, len(cluster.partitions))
        self._in, self._out = b_in.tolist(), b_out.tolist()
        self.rx: dict[int, float] = {b: 0.0 for b in live}
        self.tx: dict[int, float] = {b: 0.0 for b in live}
        self._holders: dict[int, list[int]] = {}
        self._leader: dict[int, int | None] = {}
        # `finish_all`'s partitions, as it left them: (rows ascending, then as arrays each one's
        # first and end in `flat`, flat, its leader or -1 for none); a row's holders and leader
        # are read out when first asked for.
        self._finished: list[tuple[list[int], np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        rx, tx = broker_traffic(cluster, traffic, live)
        for b in live:
            self.rx[b], self.tx[b] = rx.get(b, 0.0), tx.get(b, 0.0)

    def state(self, i: int) -> tuple[list[int], int | None]:
        """Partition `i`'s live in-sync holders (the model's own list) and leader (None: none) now."""
        if i not in self._holders:
            for rows, first, end, flat, leaders in self._finished:
                k = bisect_left(rows, i)
                if k < len(rows) and rows[k] == i:
                    lead = int(leaders[k])
                    self._holders[i], self._leader[i] = flat[first[k]:end[k]].tolist(), None if lead < 0 else lead
                    break
            else:
                p = self.cluster.partitions[i]
                self._holders[i], self._leader[i] = in_sync(p, self.live), leader_of(p, self.live)
        return self._holders[i], self._leader[i]

    def _apply(self, i: int, sign: float, holders: list[int], leader: int | None) -> None:
        """Partition `i`'s load on `holders` led by `leader` (its `state`), added (`sign` 1.0)
        or taken off (-1.0)."""
        # What `partition_load` gives, added without building its list (20,000 times for a
        # 5,000-copy estimate): the same floats in the same order.
        b_in = self._in[i]
        sends = _leader_sends(b_in, self._out[i], holders, leader)
        if sends is None:
            return
        rx, tx, r, t, none = self.rx, self.tx, sign * b_in, sign * sends, sign * 0.0
        for b in holders:
            rx[b] += r
            tx[b] += t if b == leader else none

    def join(self, i: int, broker: int) -> None:
        """Broker `broker` has every byte of partition `i`: it joins the ISR and its traffic."""
        holders, leader = self.state(i)
        if broker in holders:
            return
        self._apply(i, -1.0, holders, leader)
        holders.append(broker)
        self._apply(i, +1.0, holders, leader)

    def finish(self, i: int, target: list[int]) -> None:
        """Partition `i`'s reassignment completes: replicas outside `target` leave, and the
        first target replica leads when it is in sync (Kafka's preferred leader election)."""
        holders, leader = self.state(i)
        self._apply(i, -1.0, holders, leader)
        self._holders[i] = holders = [b for b in target if b in holders]
        if target and target[0] in holders:
            self._leader[i] = target[0]
        elif leader not in holders:
            self._leader[i] = holders[0] if holders else None
        self._apply(i, +1.0, holders, self._leader[i])

    def finish_all(self, rows: list[int], targets: dict[int, list[int]], lists: Lists | None = None) -> None:
        """`finish` of each partition of `rows` (ascending, none joined or finished before) to
        ``targets[i]``, one after the other: the same floats, over arrays (a plan that only
        changes leaders finishes 100,000 partitions at once). `lists`: those targets as
        ``Lists.of`` gives them, in `rows`' order, when the caller has them.
        """
        if not rows:
            return
        if not self._holders.keys().isdisjoint(rows) or any(not set(done[0]).isdisjoint(rows) for done in self._finished):
            raise ValueError("finish_all: a partition was already joined or finished")
        n = len(self.cluster.partitions)
        lay = layout(self.cluster, self.live)
        b_in, b_out = _columns(self.traffic, n)
        row = np.fromiter(rows, np.int64, len(rows))
        rank = np.full(n, -1, dtype=np.int64)
        rank[row] = np.arange(len(row))
        # Before: what `partition_load` puts on the live in-sync replicas (replica order).
        on = (rank[lay.hold_part] >= 0) & lay.loaded[lay.hold_part]
        part, held = lay.hold_part[on], lay.hold_id[on]
        old_tx = np.where(held == lay.lead_id[part], b_out[part] + b_in[part] * (lay.count[part] - 1), 0.0)
        # After: the target's replicas that are in sync (target order), led by the first
        # target replica when in sync, else by the leader when it stays, else the first left.
        lists = lists or Lists.of({i: targets[i] for i in rows})
        t_row, t_id = lists.row, lists.id
        t_part = row[t_row]
        keep = in_lists(t_part, t_id, None, lay.hold_part, lay.hold_id, n)
        t_row, t_part, t_id = t_row[keep], t_part[keep], t_id[keep]
        count = np.bincount(t_row, minlength=len(row))
        first = np.full(len(row), -1, dtype=np.int64)
        start = np.cumsum(count) - count
        first[count > 0] = t_id[start[count > 0]]
        heads = lists.heads()
        # Whether the leader is among the replicas kept: marked from the kept replicas that are it.
        stays = np.zeros(len(row), dtype=bool)
        stays[t_row[t_id == lay.lead_id[t_part]]] = True
        stays &= lay.lead_id[row] >= 0
        lead = np.where((heads == first) & (count > 0), first, np.where(stays, lay.lead_id[row], first))
        new_tx = np.where(t_id == lead[t_row], b_out[t_part] + b_in[t_part] * (count[t_row] - 1), 0.0)
        # Broker by broker, the additions in the order `finish` makes them: partition by
        # partition, its old load taken off, then its new load added.
        pos = np.concatenate([lay.hold_pos[on], positions(lay.ids, t_id)])
        # By broker, then partition, old before new: the two halves are each in partition
        # order, so a stable sort merges them by partition (two runs: one pass), and a stable
        # sort of the brokers' positions, small integers (a radix sort), groups them by broker
        # (13 ms for 530,000 entries, against 23 ms for one sort of one combined number).
        by_part = np.argsort(np.concatenate([rank[part] * 2, t_row * 2 + 1]), kind="stable")
        order = by_part[np.argsort(pos[by_part].astype(_small_int(len(lay.ids))), kind="stable")]
        ids = lay.ids.tolist()
        columns = [np.concatenate([-b_in[part], b_in[t_part]])[order], np.concatenate([-old_tx, new_tx])[order]]
        starts = [[per.get(b, 0.0) for b in ids] for per in (self.rx, self.tx)]
        for per, sums in zip((self.rx, self.tx), fold_many(starts, pos[order], columns)):
            for k, total in sums.items():
                per[ids[k]] = total
        # Each partition's holders and leader, kept as arrays to read from when a partition is
        # asked for again (a dict entry per row cost 0.03 CPU s of 84,034 rows in a
        # 200,000-partition remove, lists 0.017 s, and the estimate asks for none of them).
        ends = np.cumsum(count)
        self._finished.append((list(rows), ends - count, ends, t_id, np.where(count > 0, lead, -1)))


def floor_traffic(cluster: Cluster, traffic: list[tuple[float, float]], live: set[int],
                  targets: dict[int, list[int]], lists: Lists | None = None) -> tuple[dict[int, float],
                                                                                      dict[int, float]]:
    """The least client (rx, tx) each broker carries at any moment of the reassignment to
    `targets` (partition index -> replica list; `lists`: ``Lists.of(targets)`` when the caller
    has it): what a physical lower bound may assume."""
    lay = layout(cluster, live)
    n = len(cluster.partitions)
    b_in, b_out = _columns(traffic, n)
    # At the start: the live in-sync replicas of partitions whose leader holds them.
    on = lay.loaded[lay.hold_part]
    part, pos, ids = lay.hold_part[on], lay.hold_pos[on], lay.hold_id[on]
    leads = ids == lay.lead_id[part]
    # At the end: the target's live replicas, led by its first one when that one is live.
    lists = lists or Lists.of(targets)
    rows, t_row, t_id = lists.rows, lists.row, lists.id
    t_part = rows[t_row]
    t_live = member(t_id, lay.live_ids)
    moved = np.zeros(n, dtype=bool)
    moved[rows] = True
    n_end = np.bincount(t_part[t_live], minlength=n)
    firsts = lists.heads()
    end_lead = np.full(n, -1, dtype=np.int64)
    end_lead[rows] = np.where(member(firsts, lay.live_ids), firsts, -1)  # -1: an empty list
    # A moved partition counts on a broker that carries it at both ends, at the lesser load:
    # rx its bytes_in; tx, when it leads throughout, bytes_out plus bytes_in per follower of
    # the smaller ISR (its followers only grow, then shrink), else nothing.
    # (Asked of the moved partitions' entries only: the others are kept whatever the answer.)
    both = moved[part] & (end_lead[part] >= 0)
    asked = np.flatnonzero(both)
    both[asked] = in_lists(part[asked], ids[asked], rows, t_row[t_live], t_id[t_live], n)
    keep = ~moved[part] | both
    lead_end = ids == end_lead[part]
    full = b_out[part] + b_in[part] * (lay.count[part] - 1)
    floor = b_out[part] + b_in[part] * (np.minimum(lay.count[part], n_end[part]) - 1)
    tx = np.where(moved[part], np.where(leads & lead_end, floor, 0.0), np.where(leads, full, 0.0))
    return _per_broker(lay.ids, pos[keep], b_in[part][keep], tx[keep])


__all__ = ["leader_of", "in_sync", "traffic_array", "partition_traffic", "partition_load", "broker_traffic", "ClientTraffic",
           "floor_traffic", "Layout", "layout", "ReplicaColumns", "replica_columns"]
