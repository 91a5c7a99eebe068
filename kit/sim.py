"""Simulated replication: a plan run start to finish in simulated time, without ZooKeeper.

The physics of design.md ("The simulator's physics"):
- every live broker carries F x net_capacity of client traffic in each direction, flat or
  shaped (diurnal: x(1 + 0.5 sin(2 pi t / 86400)); spike: x1.6 for ten minutes half-way);
- each new replica copies its partition's size from the partition's leader (first live ISR
  replica); a broker's replication out is capped by its leader throttle, in by its follower
  throttle (or by its NIC when there is no throttle), and a broker's flows share its caps
  fairly (max-min fair);
- a replica joins the ISR when it has every byte; the reassignment completes when all have;
- a broker-second with client plus replication traffic above net_capacity in either
  direction counts in saturated_broker_seconds.
Pure: a cluster and a plan in, figures out.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import BadInput
from .model import Cluster

SPIKE = (1.6, 600.0)  # factor, seconds
_STEP = 60.0  # seconds: the longest step taken while client traffic changes shape


def client_factor(traffic: str, t: float, horizon: float) -> float:
    """Client traffic at time t relative to its mean."""
    if traffic == "flat":
        return 1.0
    if traffic == "diurnal":
        return 1 + 0.5 * math.sin(2 * math.pi * t / 86400)
    if traffic == "spike":
        start = horizon / 2
        return SPIKE[0] if start <= t < start + SPIKE[1] else 1.0
    raise BadInput(f"--traffic {traffic!r}: expected flat, diurnal or spike")


@dataclass
class _Flow:
    source: int
    dest: int
    left: float
    rate: float = 0.0


def _fair_rates(flows: list[_Flow], out_cap: dict[int, float], in_cap: dict[int, float]) -> None:
    """Max-min fair rates by progressive filling over the brokers' out and in caps."""
    active = [f for f in flows if f.left > 0]
    for f in active:
        f.rate = 0.0
    room = {("out", b): c for b, c in out_cap.items()}
    room.update({("in", b): c for b, c in in_cap.items()})
    users: dict[tuple[str, int], list[_Flow]] = {}
    for f in active:
        users.setdefault(("out", f.source), []).append(f)
        users.setdefault(("in", f.dest), []).append(f)
    unfrozen = set(map(id, active))
    while unfrozen:
        level, tight = math.inf, None
        for key, fs in users.items():
            n = sum(1 for f in fs if id(f) in unfrozen)
            if n and room[key] / n < level:
                level, tight = room[key] / n, key
        if tight is None or math.isinf(level):
            break
        for key, fs in users.items():
            n = sum(1 for f in fs if id(f) in unfrozen)
            room[key] -= level * n
        for f in active:
            if id(f) in unfrozen:
                f.rate += level
        for f in users[tight]:
            unfrozen.discard(id(f))


def simulate(cluster: Cluster, moves: list[dict], throttle: float | None = None, client_load: float = 0.0,
             traffic: str = "flat") -> dict:
    """Run a plan's copies to completion; returns the figures of design.md's contract."""
    if not 0 <= client_load < 1:
        raise BadInput(f"--client-load must be in [0, 1), got {client_load}")
    client_factor(traffic, 0.0, 1.0)  # validates the name
    brokers = {b.id: b for b in cluster.brokers.values() if b.alive}
    for b in brokers.values():
        if b.net_capacity is None:
            raise BadInput(f"broker {b.id} has no net_capacity: the simulator needs it")
    current = {(p.topic, p.partition): p for p in cluster.partitions}
    flows: list[_Flow] = []
    repl_out: dict[int, float] = {}
    repl_in: dict[int, float] = {}
    for m in moves:
        p = current.get((m["topic"], m["partition"]))
        if p is None:
            raise BadInput(f"the plan names {m['topic']}-{m['partition']}, which the cluster does not have")
        live_isr = [b for b in p.isr if b in brokers and b in p.replicas]
        if not live_isr:
            raise BadInput(f"{p.name} has no live in-sync replica to copy from")
        source = live_isr[0]
        for d in m["replicas"]:
            if d not in p.replicas:
                if d not in brokers:
                    raise BadInput(f"the plan puts {p.name} on broker {d}, which is not live")
                flows.append(_Flow(source, d, float(p.size)))
                repl_out[source] = repl_out.get(source, 0.0) + p.size
                repl_in[d] = repl_in.get(d, 0.0) + p.size
    bytes_moved = sum(f.left for f in flows)
    lower = max([n / ((1 - client_load) * brokers[b].net_capacity) for b, n in
                 list(repl_out.items()) + list(repl_in.items())] or [0.0])
    out_cap = {b: throttle or brokers[b].net_capacity for b in brokers}
    in_cap = {b: throttle or brokers[b].net_capacity for b in brokers}
    horizon = max(lower, 1.0) * 2
    t, saturated = 0.0, 0.0
    pending = [f for f in flows if f.left > 0]
    while pending:
        _fair_rates(pending, out_cap, in_cap)
        if not any(f.rate > 0 for f in pending):
            raise BadInput("no replication can make progress (a throttle or capacity of 0)")
        step = min(f.left / f.rate for f in pending if f.rate > 0)
        if traffic != "flat":
            step = min(step, _STEP)
        # Saturation: client plus replication above capacity, per broker and direction.
        factor = client_factor(traffic, t, horizon)
        send, recv = {}, {}
        for f in pending:
            send[f.source] = send.get(f.source, 0.0) + f.rate
            recv[f.dest] = recv.get(f.dest, 0.0) + f.rate
        for b, br in brokers.items():
            client = client_load * factor * br.net_capacity
            if client + send.get(b, 0.0) > br.net_capacity or client + recv.get(b, 0.0) > br.net_capacity:
                saturated += step
        for f in pending:
            f.left -= f.rate * step
        t += step
        pending = [f for f in pending if f.left > 1e-6 * max(1.0, bytes_moved)]
    return {
        "completion_s": round(t, 3),
        "lower_bound_s": round(lower, 3),
        "saturated_broker_seconds": round(saturated, 3),
        "throttle_cleared_s": 0.0 if throttle else None,
        "interval_s": None,
        "bytes_moved": int(bytes_moved),
        "throttle": "none" if throttle is None else throttle,
        "client_load": client_load,
        "traffic": traffic,
    }
