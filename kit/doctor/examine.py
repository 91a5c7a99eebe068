"""The doctor: a health report, dead-broker healing and network balancing, decided with care.

Like Pinterest's DoctorKafka, the doctor only acts when it understands what it sees:

* every under-replicated partition gets a reason: a replica on a dead broker, a follower
  lagging on a live broker, no leader, or a leader whose network is saturated;
* when every one is explained by dead brokers, it plans the replacement of exactly those
  replicas the way ``kit plan remove`` does (fewest copies, rack-safe, balanced);
* when a broker is over its inbound or outbound limit, it relieves it by leadership
  changes first (no data moves), then by the fewest replica moves, and stops as soon as
  the broker is under its limit;
* anything else (a lagging follower with no saturated leader, a partition without a
  leader, a load no plan can bring under the limits) is an alert, and no plan is made.

Traffic model (DoctorKafka's): a partition's leader receives ``bytes_in`` from producers
and sends ``bytes_out`` to consumers; each follower on a live broker fetches ``bytes_in``
from the leader. So a broker's inbound rate is the ``bytes_in`` of every replica it holds,
and its outbound rate is, over the partitions it leads, ``bytes_out + bytes_in × (live
replicas − 1)``.

Everything here is pure: a cluster and traffic in, a report (a dict) and a plan out.
Reading ZooKeeper, snapshots and the metrics pipeline's Parquet lives in
``kit.doctor.load``; :func:`run` is the one-call entry point for notebooks.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from kit.errors import BadInput, Unsafe
from kit.events import event, utc_now
from kit.model import Cluster, Plan
from kit.plan.actions.remove import evacuate
from kit.plan.racks import may_join

__all__ = ["PARTITIONS_PER_BROKER_GUIDANCE", "broker_loads", "current_leader", "diagnose", "examine",
           "report_text", "run"]

# Kafka's guidance since 1.1: up to 4,000 partitions (replicas) per broker.
PARTITIONS_PER_BROKER_GUIDANCE = 4000

# Rates are floats summed in different orders; a hair over a limit is not over it.
_EPS = 1e-6

SOURCE = "doctor"

# Reasons an under-replicated partition can have, and whether the doctor understands it
# well enough to act (dead brokers: heal; saturated leader: balance; reassignment: wait).
REASONS = {
    "dead_broker": "replica on a dead broker",
    "follower_lagging": "follower lagging on a live broker",
    "no_leader": "no leader",
    "leader_saturated": "leader's network saturated",
    "reassigning": "new replica catching up in the reassignment in progress",
}
_EXPLAINED = {"dead_broker", "leader_saturated", "reassigning"}

Traffic = dict[tuple[str, int], tuple[float, float]]


def _mb(x: float) -> str:
    return f"{x / 1e6:.1f} MB/s"


# --------------------------------------------------------------------------- state


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


def _limits(cluster: Cluster, limit_in: float | None, limit_out: float | None) -> dict[int, tuple]:
    """Per live broker (inbound limit, outbound limit); None means no limit is known."""
    out = {}
    for b in cluster.brokers.values():
        if b.alive:
            out[b.id] = (limit_in if limit_in is not None else b.net_capacity,
                         limit_out if limit_out is not None else b.net_capacity)
    return out


def _over(load: tuple[float, float], lim: tuple) -> list[str]:
    dirs = []
    for name, x, cap in (("in", load[0], lim[0]), ("out", load[1], lim[1])):
        if cap is not None and x > cap + _EPS:
            dirs.append(name)
    return dirs


# --------------------------------------------------------------------------- diagnosis


def diagnose(cluster: Cluster, traffic: Traffic | None = None, limit_in: float | None = None,
             limit_out: float | None = None, reassigning: dict | None = None) -> dict:
    """The health report: dead brokers, under-replicated partitions with reasons, brokers over
    their network limits, replicas per broker against Kafka's guidance.

    Parameters
    ----------
    cluster : Cluster
        The cluster as it is now.
    traffic : dict, optional
        ``(topic, partition) -> (bytes_in, bytes_out)``; missing partitions use the snapshot's.
    limit_in, limit_out : float, optional
        Bytes/s every broker may receive / send; default each broker's ``net_capacity``.
    reassigning : dict, optional
        The reassignment in flight (Kafka's JSON), if any.

    Returns
    -------
    dict
        Keys ``brokers`` (per live broker: rates, limits, replicas, leaders), ``dead_brokers``,
        ``under_replicated`` (each with ``reasons`` and ``explained``), ``unexplained``,
        ``over_limit``, ``over_guidance``, ``reassigning``.
    """
    alive = {b.id for b in cluster.brokers.values() if b.alive}
    limits = _limits(cluster, limit_in, limit_out)
    loads = broker_loads(cluster, traffic)
    over = {b: _over(loads[b], limits[b]) for b in sorted(loads)}
    moving = {(m["topic"], m["partition"]): set(m["replicas"]) for m in (reassigning or {}).get("partitions", [])}

    replicas = {b: 0 for b in sorted(alive)}
    leaders = dict(replicas)
    held_by_dead: dict[int, int] = {b.id: 0 for b in cluster.brokers.values() if not b.alive}
    urps = []
    for p in cluster.partitions:
        leader = current_leader(cluster, p)
        for r in p.replicas:
            if r in alive:
                replicas[r] += 1
            else:
                held_by_dead[r] += 1
        if leader is not None:
            leaders[leader] += 1
        dead = [r for r in p.replicas if r not in alive]
        lagging = [r for r in p.replicas if r in alive and r not in p.isr]
        reasons = []
        if leader is None:
            who = (f"leader {p.leader} is on a dead broker" if p.leader is not None
                   else "no live replica is in the ISR")
            reasons.append({"reason": "no_leader", "brokers": [], "text": f"no leader: {who}"})
        if dead:
            reasons.append({"reason": "dead_broker", "brokers": dead,
                            "text": f"replica on dead broker{'s' if len(dead) > 1 else ''} "
                                    + ",".join(map(str, dead))})
        for r in lagging:
            if p.key in moving and r in moving[p.key]:
                reasons.append({"reason": "reassigning", "brokers": [r],
                                "text": f"broker {r} is catching up in the reassignment in progress"})
            elif leader is not None and "out" in over.get(leader, []):
                reasons.append({"reason": "leader_saturated", "brokers": [r, leader],
                                "text": f"follower {r} lags: leader {leader} sends {_mb(loads[leader][1])}, "
                                        f"over its {_mb(limits[leader][1])} limit"})
            else:
                reasons.append({"reason": "follower_lagging", "brokers": [r],
                                "text": f"follower {r} on a live broker is out of the ISR"
                                        + (f" (leader {leader} is within its limits)" if leader is not None else "")})
        if reasons:
            urps.append({"partition": p.name, "topic": p.topic, "number": p.partition,
                         "replicas": list(p.replicas), "isr": list(p.isr), "leader": leader,
                         "reasons": reasons, "explained": all(r["reason"] in _EXPLAINED for r in reasons)})

    brokers = []
    for b in sorted(alive):
        lim = limits[b]
        brokers.append({"id": b, "rack": cluster.brokers[b].rack, "in": loads[b][0], "out": loads[b][1],
                        "limit_in": lim[0], "limit_out": lim[1], "replicas": replicas[b], "leaders": leaders[b],
                        "over": over[b]})
    return {
        "brokers": brokers,
        "dead_brokers": [{"id": b, "replicas": n} for b, n in sorted(held_by_dead.items())],
        "under_replicated": urps,
        "unexplained": [u for u in urps if not u["explained"]],
        "over_limit": [{"broker": b["id"], "direction": d, "rate": b[d], "limit": b[f"limit_{d}"]}
                       for b in brokers for d in b["over"]],
        "over_guidance": [{"broker": b["id"], "replicas": b["replicas"]} for b in brokers
                          if b["replicas"] > PARTITIONS_PER_BROKER_GUIDANCE],
        "reassigning": len(moving),
    }


# --------------------------------------------------------------------------- healing


def heal(cluster: Cluster, dead: list[int]) -> Plan:
    """Re-place exactly the replicas on the `dead` brokers, as ``kit plan remove`` would.

    Only replicas on dead brokers are copied (minimal movement, rack-safe, balanced); like
    ``kit plan remove``, the plan also reorders replicas elsewhere where that balances
    leadership and failover, which moves no data. The live brokers are the targets. Raises
    `Unsafe` or `BadInput` (from the planner) when no rack-safe placement exists.
    """
    every = list(range(len(cluster.partitions)))
    return evacuate(cluster, cluster.live_ids, every, "heal", "replica on a dead broker", removed=sorted(set(dead)))


# --------------------------------------------------------------------------- balancing


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
            if ex[0] > _EPS or ex[1] > _EPS:
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
            if dx > _EPS and lim[0] is not None and self.inb[b] + dx > lim[0] + _EPS:
                return False
            if dy > _EPS and lim[1] is not None and self.outb[b] + dy > lim[1] + _EPS:
                return False
        return True


def _gain(net: _Net, b: int, d_in: float, d_out: float) -> tuple[float, bool]:
    """How much of broker b's excess (relative to its limits) a relief of (d_in, d_out)
    removes, and whether it removes all of it."""
    ex = net.excess(b)
    lim = net.limits[b]
    after = (max(0.0, ex[0] - d_in), max(0.0, ex[1] - d_out))
    g = sum((e - a) / cap for e, a, cap in zip(ex, after, lim) if cap)
    return g, after[0] <= _EPS and after[1] <= _EPS


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
        if relief <= _EPS:
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
    net = _Net(cluster, traffic_of(cluster, traffic), _limits(cluster, limit_in, limit_out))
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


# --------------------------------------------------------------------------- decision


def _plan_doc(cluster: Cluster, after: list[list[int]]) -> dict:
    """Kafka's reassignment JSON for the partitions whose replica list (or order) changes."""
    return {"version": 1, "partitions": [
        {"topic": p.topic, "partition": p.partition, "replicas": list(a)}
        for p, a in zip(cluster.partitions, after) if list(p.replicas) != list(a)]}


def examine(cluster: Cluster, traffic: Traffic | None = None, limit_in: float | None = None,
            limit_out: float | None = None, reassigning: dict | None = None, time: str | None = None,
            traffic_source: str = "snapshot") -> dict:
    """Diagnose the cluster and decide: healthy, heal, balance, wait or alert.

    Parameters
    ----------
    cluster : Cluster
        The cluster as it is now (from a snapshot or ZooKeeper).
    traffic : dict, optional
        ``(topic, partition) -> (bytes_in, bytes_out)`` from the metrics pipeline.
    limit_in, limit_out : float, optional
        Network limits in bytes/s for every broker (default each broker's ``net_capacity``).
    reassigning : dict, optional
        The reassignment in flight, if any: the doctor then only waits (or alerts).
    time : str, optional
        ISO-8601 UTC time stamped on the events (default now).
    traffic_source : str
        Where the traffic figures came from, for the report.

    Returns
    -------
    dict
        The report: ``status`` (``healthy``, ``heal``, ``balance``, ``wait`` or ``alert``),
        ``exit_code`` (0, or 4 for an alert), ``summary`` (one sentence), ``alerts``,
        ``notes``, ``plan`` (Kafka reassignment JSON or None), ``actions``, ``events``
        (for the events log), ``figures`` (the plan's quality figures when there is a plan)
        and everything :func:`diagnose` reports.
    """
    time = time or utc_now()
    rep = diagnose(cluster, traffic, limit_in, limit_out, reassigning)
    rep.update(status="healthy", exit_code=0, alerts=[], notes=[], plan=None, actions=[], events=[],
               figures=None, traffic_source=traffic_source,
               counts={"brokers_live": len(rep["brokers"]), "brokers_dead": len(rep["dead_brokers"]),
                       "partitions": len(cluster.partitions), "under_replicated": len(rep["under_replicated"])})
    ev = rep["events"]
    for g in rep["over_guidance"]:
        rep["notes"].append(f"broker {g['broker']} holds {g['replicas']} replicas, over Kafka's "
                            f"{PARTITIONS_PER_BROKER_GUIDANCE} per broker guidance")
    idle_dead = [d["id"] for d in rep["dead_brokers"] if d["replicas"] == 0]
    if idle_dead:
        rep["notes"].append(f"dead broker(s) {','.join(map(str, idle_dead))} hold no replicas: nothing to heal")

    def alert(summary: str, lines: list[str], brokers=(), **fields):
        rep.update(status="alert", exit_code=4, summary=summary, plan=None)
        rep["alerts"] += lines
        ev.append(event(time, SOURCE, "alert", summary, brokers, **fields))
        return rep

    if rep["unexplained"]:
        lines = [f"{u['partition']}: " + "; ".join(r["text"] for r in u["reasons"] if r["reason"] not in _EXPLAINED)
                 for u in rep["unexplained"]]
        named = ", ".join(lines[:5]) + (f" and {len(lines) - 5} more" if len(lines) > 5 else "")
        brokers = {b for u in rep["unexplained"] for r in u["reasons"] if r["reason"] not in _EXPLAINED
                   for b in r["brokers"][:1]}
        return alert(f"{len(lines)} under-replicated partition(s) not explained by dead brokers, no plan: {named}",
                     lines, brokers,
                     partitions=[{"partition": u["partition"],
                                  "reasons": [r["reason"] for r in u["reasons"] if r["reason"] not in _EXPLAINED]}
                                 for u in rep["unexplained"]])

    dead = sorted({b for u in rep["under_replicated"] for r in u["reasons"] if r["reason"] == "dead_broker"
                   for b in r["brokers"]})
    if rep["reassigning"]:
        moving_to_dead = sorted({b for m in (reassigning or {}).get("partitions", []) for b in m["replicas"]
                                 if not (cluster.brokers.get(b) and cluster.brokers[b].alive)})
        if moving_to_dead:
            return alert(f"the reassignment in progress places replicas on dead broker(s) "
                         f"{','.join(map(str, moving_to_dead))}: it cannot finish; roll it back",
                         [f"reassignment in progress targets dead broker {b}" for b in moving_to_dead], moving_to_dead)
        rep.update(status="wait", summary=f"a reassignment of {rep['reassigning']} partition(s) is in progress: "
                                          "healing and balancing wait for it to finish")
        ev.append(event(time, SOURCE, "wait", rep["summary"], dead))
        return rep

    if dead:
        try:
            plan = heal(cluster, dead)
        except (Unsafe, BadInput) as e:
            return alert(f"dead broker(s) {','.join(map(str, dead))}: no confident healing plan ({e})",
                         [str(e)], dead)
        from kit.report.figures import plan_report

        figs = plan_report(plan)
        if figs["problem_count"]:
            return alert(f"the healing plan failed its own checks: {figs['problems'][0]}", figs["problems"], dead)
        doc = plan.reassignment()
        copies = figs["movement"].get("replica_additions")
        rep.update(status="heal", plan=doc, figures=figs,
                   summary=f"heal: {len(doc['partitions'])} partition(s) lose their replicas on dead broker(s) "
                           f"{','.join(map(str, dead))}; {copies} replica(s) copied to live brokers")
        if rep["over_limit"]:
            rep["notes"].append("brokers over their network limits are balanced once healing has finished")
        ev.append(event(time, SOURCE, "heal", rep["summary"], dead, partitions=len(doc["partitions"]),
                        replica_additions=copies))
        return rep

    if rep["over_limit"]:
        over_ids = sorted({o["broker"] for o in rep["over_limit"]})
        # When the brokers together carry more than their limits allow, no reassignment can
        # help (only more brokers or less traffic): say so without searching.
        for d, name in (("in", "inbound"), ("out", "outbound")):
            caps = [b[f"limit_{d}"] for b in rep["brokers"]]
            if all(cap is not None for cap in caps) and sum(b[d] for b in rep["brokers"]) > sum(caps) + _EPS:
                total = sum(b[d] for b in rep["brokers"])
                return alert(f"no confident balancing plan: the live brokers' {name} traffic "
                             f"{_mb(total)} exceeds their combined limit {_mb(sum(caps))}; add brokers or "
                             "shed load", [f"cluster {name} {_mb(total)} over the combined {_mb(sum(caps))}"],
                             over_ids)
        res = balance(cluster, traffic, limit_in, limit_out)
        if not res["ok"]:
            lines = []
            for s in res["still_over"]:
                parts = []
                if s["limit_in"] is not None and s["in"] > s["limit_in"] + _EPS:
                    parts.append(f"inbound {_mb(s['in'])} over {_mb(s['limit_in'])}")
                if s["limit_out"] is not None and s["out"] > s["limit_out"] + _EPS:
                    parts.append(f"outbound {_mb(s['out'])} over {_mb(s['limit_out'])}")
                lines.append(f"broker {s['broker']}: {' and '.join(parts)} even after "
                             f"{len(res['actions'])} change(s): no follower or broker has the headroom")
            return alert(f"no confident balancing plan: {lines[0]}", lines, [s["broker"] for s in res["still_over"]])
        doc = _plan_doc(cluster, res["after"])
        lm = sum(a["kind"] == "leader_move" for a in res["actions"])
        rm = sum(a["kind"] == "replica_move" for a in res["actions"])
        rep.update(status="balance", plan=doc, actions=res["actions"],
                   summary=f"balance: broker(s) {','.join(map(str, over_ids))} over their network limits; "
                           f"{lm} leadership change(s) and {rm} replica move(s) bring every broker under")
        for a in res["actions"]:
            what = "leadership" if a["kind"] == "leader_move" else "replica"
            ev.append(event(time, SOURCE, a["kind"],
                            f"{a['partition']}: {what} {a['from']} -> {a['to']} relieves broker {a['relieved']} "
                            f"(in {_mb(a['rates_before'][0])} -> {_mb(a['rates_after'][0])}, "
                            f"out {_mb(a['rates_before'][1])} -> {_mb(a['rates_after'][1])})",
                            [a["from"], a["to"]], partition=a["partition"], replicas=a["replicas_after"]))
        if lm:
            rep["notes"].append("leadership changes take effect at the preferred-leader election once the "
                                "reassignment is done (kit elect)")
        return rep

    rep["summary"] = (f"healthy: {len(rep['brokers'])} live broker(s), {len(cluster.partitions)} partition(s), "
                      "no under-replicated partition, every broker within its network limits")
    ev.append(event(time, SOURCE, "healthy", rep["summary"]))
    return rep


# --------------------------------------------------------------------------- text


def _rate_cell(x: float, cap) -> str:
    return f"{x / 1e6:8.1f}" + (f" / {cap / 1e6:.0f}" if cap else "")


def report_text(report: dict, max_lines: int = 50) -> str:
    """The report as a person reads it (terminal, runbook record). Same report, same text.

    Parameters
    ----------
    report : dict
        From :func:`examine` (or :func:`run`).
    max_lines : int
        Under-replicated partitions and actions listed before the rest is only counted.
    """
    r = report
    out = [f"Status: {r['status'].upper()} (exit {r['exit_code']})", f"  {r['summary']}", ""]
    c = r["counts"]
    out.append(f"Brokers: {c['brokers_live']} live, {c['brokers_dead']} dead"
               + (" (" + ", ".join(f"{d['id']}: {d['replicas']} replicas" for d in r["dead_brokers"]) + ")"
                  if r["dead_brokers"] else ""))
    out.append(f"Partitions: {c['partitions']}, under-replicated {c['under_replicated']}"
               + (f", reassignment in progress for {r['reassigning']}" if r["reassigning"] else ""))
    out.append(f"Traffic figures: {r['traffic_source']}")
    if r["under_replicated"]:
        out += ["", "Under-replicated partitions:"]
        for u in r["under_replicated"][:max_lines]:
            mark = "" if u["explained"] else "  [UNEXPLAINED]"
            out.append(f"  {u['partition']} {u['replicas']} isr {u['isr']} leader {u['leader']}: "
                       + "; ".join(x["text"] for x in u["reasons"]) + mark)
        if len(r["under_replicated"]) > max_lines:
            out.append(f"  ... and {len(r['under_replicated']) - max_lines} more")
    out += ["", "Broker network (MB/s, in / limit, out / limit), replicas, leaders:"]
    for b in r["brokers"]:
        flag = ("  OVER " + ",".join(b["over"])) if b["over"] else ""
        out.append(f"  {b['id']:>6} {b['rack'] or '-':<8} in {_rate_cell(b['in'], b['limit_in'])}  "
                   f"out {_rate_cell(b['out'], b['limit_out'])}  replicas {b['replicas']:>5}  "
                   f"leaders {b['leaders']:>5}{flag}")
    if r["actions"]:
        out += ["", "Actions (in order):"]
        for a in r["actions"][:max_lines]:
            what = "leader " if a["kind"] == "leader_move" else "replica"
            out.append(f"  {what} {a['partition']}: {a['from']} -> {a['to']}  {a['replicas_before']} -> "
                       f"{a['replicas_after']} (relieves {a['relieved']})")
        if len(r["actions"]) > max_lines:
            out.append(f"  ... and {len(r['actions']) - max_lines} more")
    if r["plan"] is not None:
        out += ["", f"Plan: {len(r['plan']['partitions'])} partition(s) change"]
        figs = r.get("figures")
        if figs:
            mv = figs["movement"]
            out.append(f"  replica additions {mv.get('replica_additions')}, "
                       f"replica count spread {figs['before'].get('replica_count_spread')} -> "
                       f"{figs['after'].get('replica_count_spread')}, rack violations "
                       f"{figs['after'].get('rack_violations')}")
    if r["alerts"]:
        out += ["", "ALERT:"] + [f"  {x}" for x in r["alerts"][:max_lines]]
        if len(r["alerts"]) > max_lines:
            out.append(f"  ... and {len(r['alerts']) - max_lines} more")
    if r["notes"]:
        out += ["", "Notes:"] + [f"  {x}" for x in r["notes"]]
    return "\n".join(out) + "\n"


def run(snapshot: str | None = None, zk: str | None = None, metrics: str | None = None,
        limit_in: float | None = None, limit_out: float | None = None, zk_auth: str | None = None,
        time: str | None = None) -> dict:
    """Load the cluster (snapshot file or live ZooKeeper) and traffic (metrics directory), then
    :func:`examine` it. The one call a notebook needs; the report is a plain dict (JSON-ready
    except the ``figures``' numbers, which are plain too).

    Examples
    --------
    >>> report = run(snapshot="cluster.json")          # doctest: +SKIP
    >>> print(report_text(report))                      # doctest: +SKIP
    """
    # Lazy: kit.doctor.load does the I/O (ZooKeeper, pandas), which stays out of this
    # pure module's import (and load imports this module).
    from kit.doctor import load

    return load.run(snapshot=snapshot, zk=zk, metrics=metrics, limit_in=limit_in, limit_out=limit_out,
                         zk_auth=zk_auth, time=time)
