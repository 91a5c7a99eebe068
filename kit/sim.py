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
from datetime import datetime, timedelta, timezone
from dataclasses import dataclass

from .errors import BadInput
from .model import Cluster

# Simulated time starts here (events, metric samples), so runs give the same timestamps.
SAMPLE_EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)
SPIKE = (1.6, 600.0)  # factor, seconds
_STEP = 60.0  # seconds: the longest step taken while client traffic changes shape


def client_factor(traffic: str, t: float, horizon: float, spike_at: float | None = None) -> float:
    """Client traffic at time t relative to its mean; the spike starts half-way through
    `horizon`, or at `spike_at`."""
    if traffic == "flat":
        return 1.0
    if traffic == "diurnal":
        return 1 + 0.5 * math.sin(2 * math.pi * t / 86400)
    if traffic == "spike":
        start = horizon / 2 if spike_at is None else spike_at
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


def simulate(cluster: Cluster, moves: list[dict], throttle: float | str | None = None, client_load: float = 0.0,
             traffic: str = "flat", settings=None, cap_map: dict | None = None, events=None,
             spike_at: float | None = None) -> dict:
    """Run a plan's copies to completion; returns the figures of design.md's contract.

    `throttle` is None (no throttle), a rate in bytes/s for every broker, or "auto": kit's
    auto-throttle (kit/autothrottle.py, unchanged) decides every `settings.interval` simulated
    seconds from the peak network of the last interval, and once more the moment the
    reassignment completes (the loop over ZooKeeper watches the reassignment znode for that).
    `events`, a list, receives the auto-throttle's decisions. The spike starts half-way
    through twice the lower bound, or at `spike_at` seconds.
    """
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
    nic = {b: float(br.net_capacity) for b, br in brokers.items()}
    auto = None
    if throttle == "auto":
        from .autothrottle import AutoThrottle, Settings, capacities

        settings = settings or Settings()
        auto = AutoThrottle(settings, capacities(brokers, cap_map))
    elif isinstance(throttle, str):
        raise BadInput(f"--throttle {throttle!r}: expected auto, none or a rate")
    out_cap = {b: throttle if auto is None and throttle else nic[b] for b in brokers}
    in_cap = dict(out_cap)
    horizon = max(lower, 1.0) * 2
    spike_start = horizon / 2 if spike_at is None else spike_at
    t, saturated = 0.0, 0.0
    pending = [f for f in flows if f.left > 0]
    peak: dict[int, list[float]] = {}  # broker -> [rx, tx, replication rx, replication tx] at the window's peak
    next_decision, completion, cleared_at = 0.0, None, None

    def decide(now):
        sources = {f.source for f in pending}
        dests = {f.dest for f in pending}
        factor = client_factor(traffic, now, horizon, spike_start)
        metrics = {}
        for b in brokers:
            client = client_load * factor * nic[b]
            rx, tx, r_rx, r_tx = peak.get(b, [client, client, 0.0, 0.0])
            metrics[b] = NetSample(now, rx, tx, r_rx, r_tx)
        stamp = _stamp(now)
        d = auto.decide(now, stamp, sources, dests, metrics)
        for b, rates in d.rates.items():
            out_cap[b] = rates.get(LEADER, out_cap[b])
            in_cap[b] = rates.get(FOLLOWER, in_cap[b])
        for b in d.clear:
            out_cap[b], in_cap[b] = nic[b], nic[b]
        if events is not None:
            events.extend(d.events)
        peak.clear()

    if auto is not None:
        from .autothrottle import FOLLOWER, LEADER, NetSample
    while pending:
        if auto is not None and t >= next_decision - 1e-9:
            decide(t)
            next_decision = t + auto.settings.interval
        _fair_rates(pending, out_cap, in_cap)
        if not any(f.rate > 0 for f in pending):
            raise BadInput("no replication can make progress (a throttle or capacity of 0)")
        step = min(f.left / f.rate for f in pending if f.rate > 0)
        if traffic != "flat":
            step = min(step, _STEP)
        if auto is not None:
            step = min(step, max(next_decision - t, 1e-9))
            if traffic == "spike":  # land on the spike's edges, where the clients change
                for edge in (spike_start, spike_start + SPIKE[1]):
                    if edge > t + 1e-9:
                        step = min(step, edge - t)
        # Saturation: client plus replication above capacity, per broker and direction.
        factor = client_factor(traffic, t, horizon, spike_start)
        send, recv = {}, {}
        for f in pending:
            send[f.source] = send.get(f.source, 0.0) + f.rate
            recv[f.dest] = recv.get(f.dest, 0.0) + f.rate
        for b, br in brokers.items():
            client = client_load * factor * br.net_capacity
            rx, tx = client + recv.get(b, 0.0), client + send.get(b, 0.0)
            if max(tx, rx) > br.net_capacity * (1 + 1e-9):  # not a rounding error of fair shares
                saturated += step
            w = peak.setdefault(b, [0.0, 0.0, 0.0, 0.0])
            if rx >= w[0]:
                w[0], w[2] = rx, recv.get(b, 0.0)
            if tx >= w[1]:
                w[1], w[3] = tx, send.get(b, 0.0)
        for f in pending:
            f.left -= f.rate * step
        t += step
        pending = [f for f in pending if f.left > 1e-6 * max(1.0, bytes_moved)]
    completion = t
    if auto is not None:
        decide(t)  # woken by the reassignment's end: every throttle goes
        cleared_at = t
    return {
        "completion_s": round(completion, 3),
        "lower_bound_s": round(lower, 3),
        "saturated_broker_seconds": round(saturated, 3),
        "throttle_cleared_s": round(cleared_at - completion, 3) if auto is not None else (0.0 if throttle else None),
        "interval_s": auto.settings.interval if auto is not None else None,
        "bytes_moved": int(bytes_moved),
        "throttle": "none" if throttle is None else throttle,
        "client_load": client_load,
        "traffic": traffic,
    }


def _stamp(seconds: float) -> str:
    """Simulated seconds as the events' ISO time, counted from the samples' epoch."""
    t = SAMPLE_EPOCH + timedelta(seconds=round(seconds, 3))
    return t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{t.microsecond // 1000:03d}" if t.microsecond else "") + "Z"
