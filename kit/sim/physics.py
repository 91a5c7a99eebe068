"""Simulated replication: a plan run start to finish in simulated time, without ZooKeeper.

The physics of design.md ("The simulator's physics"):
- client traffic per broker from the partitions' bytes_in/bytes_out (kit/traffic.py: every
  in-sync replica receives bytes_in, the leader sends bytes_out plus bytes_in per in-sync
  follower; a new replica carries its partition's traffic from when it joins the ISR), or the
  --client-load what-if scaling of those figures; flat or shaped (diurnal:
  x(1 + 0.5 sin(2 pi t / 86400)); spike: x1.6 for ten minutes half-way);
- each new replica copies its partition's size from the partition's leader (first live ISR
  replica); a broker's replication out is capped by its leader throttle, in by its follower
  throttle (or by its NIC when there is no throttle), and a broker's flows share its caps
  fairly (max-min fair): the copy physics, kit/physics.py, which the estimate shares;
- a replica joins the ISR when it has every byte; when all of a partition's new replicas have,
  its removed replicas leave and its first replica leads; the reassignment completes when all
  have;
- a broker-second with client plus replication traffic above net_capacity in either
  direction counts in saturated_broker_seconds.
Pure: a cluster and a plan in, figures out.
"""
from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

from kit.throttle.decide import FOLLOWER, LEADER, AutoThrottle, NetSample, Settings, capacities
from kit.errors import BadInput
from kit.model import Cluster
from kit.physics import copies_of, fair_rates, lower_bound
from kit.traffic import ClientTraffic, partition_traffic

# Simulated time starts here (events, metric samples), so runs give the same timestamps.
SAMPLE_EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)
SPIKE = (1.6, 600.0)  # factor, seconds
STEP = 60.0  # seconds: the longest step taken while client traffic changes shape


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


class _Run:
    """One simulated run's state: the copies still running, the brokers' replication caps, their
    clients' traffic, the window's peak the auto-throttle decides from, the clock and the
    saturated broker-seconds.

    BadInput (as `simulate`) for a live broker without net_capacity, or copies that cannot be made.
    """

    def __init__(self, cluster: Cluster, moves: list[dict], figures: list[tuple[float, float]]):
        self.brokers = {b.id: b for b in cluster.brokers.values() if b.alive}
        for b in self.brokers.values():
            if b.net_capacity is None:
                raise BadInput(f"broker {b.id} has no net_capacity: the simulator needs it")
        live = set(self.brokers)
        self.targets, flows = copies_of(cluster, moves, live)
        self.nic = {b: float(br.net_capacity) for b, br in self.brokers.items()}
        self.clients = ClientTraffic(cluster, figures, live)
        self.waiting = {i: 0 for i in self.targets}  # partition -> copies still running
        for f in flows:
            self.waiting[f.partition] += 1
        # A change of order only: done at once.
        self.clients.finish_all(sorted(i for i, n in self.waiting.items() if n == 0), self.targets)
        self.bytes_moved = sum(f.left for f in flows)
        self.lower = lower_bound(cluster, self.targets, flows, figures, self.nic) or 0.0
        self.pending = [f for f in flows if f.left > 0]
        self.out_cap: dict[int, float] = {}
        self.in_cap: dict[int, float] = {}
        # broker -> [rx, tx, replication rx, replication tx] at the window's peak
        self.peak: dict[int, list[float]] = {}
        self.t, self.saturated = 0.0, 0.0

    def decide(self, auto: AutoThrottle, factor: float, events: list | None) -> None:
        """One auto-throttle decision now, from the window's peak (the clients' traffic times
        `factor` for a broker not seen yet); its rates become the caps."""
        now = self.t
        sources = {f.source for f in self.pending}
        dests = {f.dest for f in self.pending}
        metrics = {}
        for b in self.brokers:
            seen = [self.clients.rx[b] * factor, self.clients.tx[b] * factor, 0.0, 0.0]
            rx, tx, r_rx, r_tx = self.peak.get(b, seen)
            metrics[b] = NetSample(now, rx, tx, r_rx, r_tx)
        d = auto.decide(now, sim_stamp(now), sources, dests, metrics)
        for b, rates in d.rates.items():
            self.out_cap[b] = rates.get(LEADER, self.out_cap[b])
            self.in_cap[b] = rates.get(FOLLOWER, self.in_cap[b])
        for b in d.clear:
            self.out_cap[b], self.in_cap[b] = self.nic[b], self.nic[b]
        if events is not None:
            events.extend(d.events)
        self.peak.clear()

    def advance(self, step: float, factor: float) -> None:
        """Run the copies `step` seconds at their rates, with client traffic at `factor` of its
        mean: saturation and the window's peak counted, finished copies joining the ISR."""
        send, recv = {}, {}
        for f in self.pending:
            send[f.source] = send.get(f.source, 0.0) + f.rate
            recv[f.dest] = recv.get(f.dest, 0.0) + f.rate
        # Saturation: client plus replication above capacity, per broker and direction.
        for b, cap in self.nic.items():
            rx = self.clients.rx[b] * factor + recv.get(b, 0.0)
            tx = self.clients.tx[b] * factor + send.get(b, 0.0)
            if max(tx, rx) > cap * (1 + 1e-9):  # not a rounding error of fair shares
                self.saturated += step
            w = self.peak.setdefault(b, [0.0, 0.0, 0.0, 0.0])
            if rx >= w[0]:
                w[0], w[2] = rx, recv.get(b, 0.0)
            if tx >= w[1]:
                w[1], w[3] = tx, send.get(b, 0.0)
        for f in self.pending:
            f.left -= f.rate * step
        self.t += step
        still = []
        for f in self.pending:
            if f.left > 1e-6 * max(1.0, self.bytes_moved):
                still.append(f)
                continue
            self.clients.join(f.partition, f.dest)  # in sync: it carries its partition's traffic from now
            self.waiting[f.partition] -= 1
            if not self.waiting[f.partition]:
                self.clients.finish(f.partition, self.targets[f.partition])
        self.pending = still


def simulate(cluster: Cluster, moves: list[dict], throttle: float | str | None = None,
             client_load: float | None = None, traffic: str = "flat", settings: Settings | None = None,
             cap_map: dict | None = None, events: list | None = None, spike_at: float | None = None) -> dict:
    """Run a plan's copies to completion; returns the figures of design.md's contract.

    `throttle` is None (no throttle), a rate in bytes/s for every broker, or "auto": kit's
    auto-throttle (kit/throttle/decide.py, unchanged) decides every `settings.interval` simulated
    seconds from the peak network of the last interval, and once more the moment the
    reassignment completes (the loop over ZooKeeper watches the reassignment znode for that).
    `client_load` None takes client traffic from the snapshot's bytes_in/bytes_out; a share F
    is the what-if of kit/traffic.py. `events`, a list, receives the auto-throttle's decisions.
    The spike starts half-way through twice the lower bound, or at `spike_at` seconds.
    """
    figures = partition_traffic(cluster, client_load)  # validates client_load
    client_factor(traffic, 0.0, 1.0)  # validates the name
    run = _Run(cluster, moves, figures)
    auto = None
    if throttle == "auto":
        settings = settings or Settings()
        auto = AutoThrottle(settings, capacities(run.brokers, cap_map))
    elif isinstance(throttle, str):
        raise BadInput(f"--throttle {throttle!r}: expected auto, none or a rate")
    run.out_cap = {b: throttle if auto is None and throttle else run.nic[b] for b in run.brokers}
    run.in_cap = dict(run.out_cap)
    horizon = max(run.lower, 1.0) * 2
    spike_start = horizon / 2 if spike_at is None else spike_at
    next_decision, cleared_at = 0.0, None
    while run.pending:
        if auto is not None and run.t >= next_decision - 1e-9:
            run.decide(auto, client_factor(traffic, run.t, horizon, spike_start), events)
            next_decision = run.t + auto.settings.interval
        fair_rates(run.pending, run.out_cap, run.in_cap)
        if not any(f.rate > 0 for f in run.pending):
            raise BadInput("no replication can make progress (a throttle or capacity of 0)")
        step = _next_step(run, traffic, auto is not None, next_decision, spike_start)
        run.advance(step, client_factor(traffic, run.t, horizon, spike_start))
    completion = run.t
    if auto is not None:
        # Woken by the reassignment's end: every throttle goes.
        run.decide(auto, client_factor(traffic, run.t, horizon, spike_start), events)
        cleared_at = run.t
    return {
        "completion_s": round(completion, 3),
        "lower_bound_s": round(run.lower, 3),
        "saturated_broker_seconds": round(run.saturated, 3),
        "throttle_cleared_s": round(cleared_at - completion, 3) if auto is not None else (0.0 if throttle else None),
        "interval_s": auto.settings.interval if auto is not None else None,
        "bytes_moved": int(run.bytes_moved),
        "throttle": "none" if throttle is None else throttle,
        "client_load": client_load,
        "client_traffic": "snapshot" if client_load is None else "what-if",
        "traffic": traffic,
    }


def _next_step(run: _Run, traffic: str, auto: bool, next_decision: float, spike_start: float) -> float:
    """Seconds to the next event of `simulate`: the first copy to finish, and no further than
    one STEP with changing traffic, the auto-throttle's next decision, or a spike's edge."""
    step = min(f.left / f.rate for f in run.pending if f.rate > 0)
    if traffic != "flat":
        step = min(step, STEP)
    if auto:
        step = min(step, max(next_decision - run.t, 1e-9))
        if traffic == "spike":  # land on the spike's edges, where the clients change
            for edge in (spike_start, spike_start + SPIKE[1]):
                if edge > run.t + 1e-9:
                    step = min(step, edge - run.t)
    return step


def sim_stamp(seconds: float) -> str:
    """Simulated seconds as the events' ISO time, counted from the samples' epoch."""
    t = SAMPLE_EPOCH + timedelta(seconds=round(seconds, 3))
    return t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{t.microsecond // 1000:03d}" if t.microsecond else "") + "Z"


__all__ = ["SAMPLE_EPOCH", "SPIKE", "STEP", "client_factor", "sim_stamp", "simulate"]
