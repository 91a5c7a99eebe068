"""Network load balancing, the doctor's second planner: relieve the brokers over their
inbound or outbound limits with leadership changes first (no data moves), then the fewest
replica moves, stopping as soon as every broker is under its limits.

Traffic model (DoctorKafka's): a partition's leader receives ``bytes_in`` from producers
and sends ``bytes_out`` to consumers; each follower on a live broker fetches ``bytes_in``
from the leader. So a broker's inbound rate is the ``bytes_in`` of every replica it holds,
and its outbound rate is, over the partitions it leads, ``bytes_out + bytes_in × (live
replicas − 1)``. (`kit.traffic`, the simulator's model, counts in-sync followers only.)

Pure: a cluster and traffic in, per-broker loads and the changes out. The doctor
(`kit.doctor.examine`) decides when to use it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from kit.model import Cluster
from kit.plan.racks import may_join

# Rates are floats summed in different orders; a hair over a limit is not over it.
EPS = 1e-6

Traffic = dict[tuple[str, int], tuple[float, float]]


def current_leader(cluster: Cluster, p) -> int | None:
    """The broker leading partition `p` now, or None when it has no leader.

    An explicit ``leader`` counts only while its broker is alive. Without one (a snapshot
    that does not say, or ZooKeeper's leader -1) it is the first replica that is alive and
    in the ISR, which is the replica Kafka's controller elects.
    """
    alive = cluster.brokers
    if p.leader is not None:
        b = alive.get(p.leader)
        return p.leader if b is not None and b.alive else None
    for r in p.replicas:
        b = alive.get(r)
        if r in p.isr and b is not None and b.alive:
            return r
    return None


def traffic_of(cluster: Cluster, traffic: Traffic | None = None) -> list[tuple[float, float]]:
    """(bytes_in, bytes_out) per partition, aligned with ``cluster.partitions``: from `traffic`
    where it names the partition, else the snapshot's own figures."""
    traffic = traffic or {}
    return [traffic.get(p.key, (p.bytes_in, p.bytes_out)) for p in cluster.partitions]


def _contrib(reps, leader, rate, alive) -> list[tuple[int, float, float]]:
    """(broker, inbound, outbound) that one partition puts on each broker holding it."""
    bin_, bout = rate
    if leader is None:
        return []  # an offline partition carries no traffic
    live = [b for b in reps if b in alive]
    out = []
    for b in live:
        if b == leader:
            out.append((b, bin_, bout + bin_ * (len(live) - 1)))
        else:
            out.append((b, bin_, 0.0))
    return out


def broker_loads(cluster: Cluster, traffic: Traffic | None = None) -> dict[int, tuple[float, float]]:
    """Inbound and outbound bytes/s per live broker, with the current leaders.

    Parameters
    ----------
    cluster : Cluster
        The cluster as it is now.
    traffic : dict, optional
        ``(topic, partition) -> (bytes_in, bytes_out)`` from the metrics pipeline; partitions
        it does not name keep the snapshot's figures.

    Returns
    -------
    dict
        ``broker id -> (inbound, outbound)`` for every live broker.
    """
    alive = {b.id for b in cluster.brokers.values() if b.alive}
    inb = {b: 0.0 for b in sorted(alive)}
    outb = dict(inb)
    for p, rate in zip(cluster.partitions, traffic_of(cluster, traffic)):
        for b, i, o in _contrib(p.replicas, current_leader(cluster, p), rate, alive):
            inb[b] += i
            outb[b] += o
    return {b: (inb[b], outb[b]) for b in inb}


def broker_limits(cluster: Cluster, limit_in: float | None, limit_out: float | None) -> dict[int, tuple]:
    """Per live broker (inbound limit, outbound limit); None means no limit is known."""
    out = {}
    for b in cluster.brokers.values():
        if b.alive:
            out[b.id] = (limit_in if limit_in is not None else b.net_capacity,
                         limit_out if limit_out is not None else b.net_capacity)
    return out


def over_limits(load: tuple[float, float], lim: tuple) -> list[str]:
    """The directions, "in" and "out", in which `load` is over its limit in `lim` (None: no limit)."""
    dirs = []
    for name, x, cap in (("in", load[0], lim[0]), ("out", load[1], lim[1])):
        if cap is not None and x > cap + EPS:
            dirs.append(name)
    return dirs




@dataclass
class _Net:
    """Assignment, leaders and per-broker rates while the balancer works."""

    cluster: Cluster
    rates: list[tuple[float, float]]
    limits: dict[int, tuple]
    assign: list[list[int]] = field(init=False)
    leaders: list[int | None] = field(init=False)
    inb: dict[int, float] = field(init=False)
    outb: dict[int, float] = field(init=False)

    def __post_init__(self):
        c = self.cluster
        self.alive = {b.id for b in c.brokers.values() if b.alive}
        self.assign = [list(p.replicas) for p in c.partitions]
        self.leaders = [current_leader(c, p) for p in c.partitions]
        self.inb = {b: 0.0 for b in sorted(self.alive)}
        self.outb = dict(self.inb)
        self.held: dict[int, set[int]] = {b: set() for b in self.alive}
        self.led: dict[int, set[int]] = {b: set() for b in self.alive}
        self.free = {b: c.brokers[b].storage_free for b in self.alive}
        for i in range(len(self.assign)):
            self._account(i, +1)

    def _account(self, i: int, sign: int) -> None:
        for b, x, y in _contrib(self.assign[i], self.leaders[i], self.rates[i], self.alive):
            self.inb[b] += sign * x
            self.outb[b] += sign * y
        for b in self.assign[i]:
            if b in self.alive:
                (self.held[b].add if sign > 0 else self.held[b].discard)(i)
        lead = self.leaders[i]
        if lead is not None:
            (self.led[lead].add if sign > 0 else self.led[lead].discard)(i)

    def change(self, i: int, reps: list[int], leader: int | None) -> None:
        self._account(i, -1)
        for b in set(reps) - set(self.assign[i]):
            if self.free.get(b) is not None:
                self.free[b] -= self.cluster.partitions[i].size
        self.assign[i], self.leaders[i] = reps, leader
        self._account(i, +1)

    def excess(self, b: int) -> tuple[float, float]:
        lim = self.limits[b]
        return (0.0 if lim[0] is None else max(0.0, self.inb[b] - lim[0]),
                0.0 if lim[1] is None else max(0.0, self.outb[b] - lim[1]))

    def over(self) -> list[int]:
        """Brokers over a limit, worst (relative excess) first, then by id."""
        rows = []
        for b in sorted(self.alive):
            ex = self.excess(b)
            if ex[0] > EPS or ex[1] > EPS:
                lim = self.limits[b]
                rel = max(ex[0] / lim[0] if lim[0] else 0.0, ex[1] / lim[1] if lim[1] else 0.0)
                rows.append((-rel, b))
        return [b for _, b in sorted(rows)]

    def fits(self, i: int, reps: list[int], leader: int | None) -> bool:
        """Whether no broker whose load rises would end over its limit."""
        delta: dict[int, list[float]] = {}
        for b, x, y in _contrib(self.assign[i], self.leaders[i], self.rates[i], self.alive):
            d = delta.setdefault(b, [0.0, 0.0])
            d[0] -= x
            d[1] -= y
        for b, x, y in _contrib(reps, leader, self.rates[i], self.alive):
            d = delta.setdefault(b, [0.0, 0.0])
            d[0] += x
            d[1] += y
        for b, (dx, dy) in delta.items():
            lim = self.limits[b]
            if dx > EPS and lim[0] is not None and self.inb[b] + dx > lim[0] + EPS:
                return False
            if dy > EPS and lim[1] is not None and self.outb[b] + dy > lim[1] + EPS:
                return False
        return True


def _gain(net: _Net, b: int, d_in: float, d_out: float) -> tuple[float, bool]:
    """How much of broker b's excess (relative to its limits) a relief of (d_in, d_out)
    removes, and whether it removes all of it."""
    ex = net.excess(b)
    lim = net.limits[b]
    after = (max(0.0, ex[0] - d_in), max(0.0, ex[1] - d_out))
    g = sum((e - a) / cap for e, a, cap in zip(ex, after, lim) if cap)
    return g, after[0] <= EPS and after[1] <= EPS


def _leader_move(net: _Net, b: int):
    """The best leadership change off broker b: to an in-sync follower with headroom.

    One change that clears the excess is preferred, the smallest such (it burdens the new
    leader least); otherwise the one that clears most. Returns (partition, new replica
    order, new leader) or None.
    """
    c = net.cluster
    cands = []
    for i in net.led[b]:
        rate = net.rates[i]
        live = [r for r in net.assign[i] if r in net.alive]
        relief = rate[1] + rate[0] * (len(live) - 1)
        if relief <= EPS:
            continue
        g, enough = _gain(net, b, 0.0, relief)
        if g <= 0:
            continue
        p = c.partitions[i]
        cands.append(((0, relief) if enough else (1, -relief), p.topic, p.partition, i))
    for *_, i in sorted(cands):
        p = c.partitions[i]
        best = None
        for f in net.assign[i]:
            if f == b or f not in net.alive or f not in p.isr:
                continue
            reps = [f] + [r for r in net.assign[i] if r != f]
            if not net.fits(i, reps, f):
                continue
            lim = net.limits[f][1]
            room = (lim - net.outb[f]) / lim if lim else float("inf")
            key = (-room, f)
            if best is None or key < best[0]:
                best = (key, reps, f)
        if best is not None:
            return i, best[1], best[2]
    return None


def _replica_move(net: _Net, b: int):
    """The best single replica move off broker b: the one that clears its excess with the
    least data copied, else the one that relieves it most. Targets must be live, rack-safe,
    have storage for the copy, and stay within their own limits; the same rack is preferred,
    then the most headroom. Returns (partition, new replica list, new leader) or None."""
    c = net.cluster
    cands = []
    for i in net.held[b]:
        mine = [(x, y) for r, x, y in _contrib(net.assign[i], net.leaders[i], net.rates[i], net.alive) if r == b]
        if not mine:
            continue
        g, enough = _gain(net, b, *mine[0])
        if g <= 0:
            continue
        p = c.partitions[i]
        cands.append(((0, p.size, -g) if enough else (1, -g, p.size), p.topic, p.partition, i))
    for *_, i in sorted(cands):
        p = c.partitions[i]
        reps = net.assign[i]
        pos = reps.index(b)
        others = [c.rack_of(r) for r in reps if r != b]
        best = None
        for t in sorted(net.alive):
            # The rack rule asked for every replica in a rack of its own (need: all of them):
            # the doctor relieves load, it never doubles up a rack, even where the planner
            # would (more replicas than racks); a move inside b's rack changes nothing.
            if t in reps or not may_join(c.rack_of(t), others, len(reps), replaces=c.rack_of(b)):
                continue
            if net.free.get(t) is not None and net.free[t] < p.size:
                continue
            new = list(reps)
            new[pos] = t
            # Kafka keeps a leader that stays; a leader that leaves is replaced by the first
            # replica of the new list (in sync once the reassignment completes).
            leader = net.leaders[i] if net.leaders[i] != b else new[0]
            if not net.fits(i, new, leader):
                continue
            lim = net.limits[t]
            room = min((cap - load) / cap for cap, load in ((lim[0], net.inb[t]), (lim[1], net.outb[t])) if cap) \
                if (lim[0] or lim[1]) else float("inf")
            key = (c.rack_of(t) != c.rack_of(b), -room, t)
            if best is None or key < best[0]:
                best = (key, new, leader)
        if best is not None:
            return i, best[1], best[2]
    return None


def balance(cluster: Cluster, traffic: Traffic | None = None, limit_in: float | None = None,
            limit_out: float | None = None) -> dict:
    """Relieve brokers over their network limits: leadership changes first, then replica moves.

    Each step takes one change for the worst broker over a limit: a leadership change if any
    broker over a limit has one available, otherwise a replica move. It stops as soon as no
    broker is over, or when nothing more can be done.

    Returns
    -------
    dict
        ``after`` (replica lists per partition), ``actions`` (in order: kind ``leader_move``
        or ``replica_move``, partition, from, to, broker relieved), ``still_over`` (brokers
        left over a limit, with rates) and ``ok``.
    """
    net = _Net(cluster, traffic_of(cluster, traffic), broker_limits(cluster, limit_in, limit_out))
    actions = []
    max_steps = 4 * len(cluster.partitions) + 10  # each step relieves; this only guards the loop
    for _ in range(max_steps):
        over = net.over()
        if not over:
            break
        # Leadership first (no data moves), a replica move only when no leader change helps.
        step = next(((kind, b, mv) for kind, find in (("leader_move", _leader_move), ("replica_move", _replica_move))
                     for b in over if (mv := find(net, b)) is not None), None)
        if step is None:
            break
        kind, b, (i, reps, leader) = step
        old = list(net.assign[i])
        p = cluster.partitions[i]
        before = (net.inb[b], net.outb[b])
        net.change(i, reps, leader)
        if kind == "leader_move":
            frm, to = b, leader
        else:
            frm, to = b, next(r for r in reps if r not in old)
        actions.append({"kind": kind, "partition": p.name, "topic": p.topic, "number": p.partition,
                        "from": frm, "to": to, "replicas_before": old, "replicas_after": list(reps),
                        "size": p.size if kind == "replica_move" else 0, "relieved": b,
                        "rates_before": list(before), "rates_after": [net.inb[b], net.outb[b]]})
    still = []
    for b in net.over():
        lim = net.limits[b]
        still.append({"broker": b, "in": net.inb[b], "out": net.outb[b], "limit_in": lim[0], "limit_out": lim[1]})
    return {"after": net.assign, "actions": actions, "still_over": still, "ok": not still}
