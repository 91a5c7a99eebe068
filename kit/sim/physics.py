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
  fairly (max-min fair);
- a replica joins the ISR when it has every byte; when all of a partition's new replicas have,
  its removed replicas leave and its first replica leads; the reassignment completes when all
  have;
- a broker-second with client plus replication traffic above net_capacity in either
  direction counts in saturated_broker_seconds.
Pure: a cluster and a plan in, figures out.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from itertools import chain

import numpy as np

from kit.throttle.decide import FOLLOWER, LEADER, AutoThrottle, NetSample, Settings, capacities
from kit.errors import BadInput
from kit import offline
from kit import fill_kernel
from kit.model import Cluster
from kit.traffic import (ClientTraffic, appearance_order, dense_codes, floor_traffic, layout, leader_of, member,
                         pair_keys, partition_traffic)

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


@dataclass
class Flow:
    """One new replica's copy: `left` bytes from `source` to `dest` at `rate` bytes/s;
    `partition` is the partition's index in the cluster (-1 when unknown)."""

    source: int
    dest: int
    left: float
    rate: float = 0.0
    partition: int = -1


def pair_rates(src: np.ndarray, dst: np.ndarray, weight: np.ndarray, out_cap: np.ndarray,
               in_cap: np.ndarray) -> np.ndarray:
    """Max-min fair rate of each flow of each (source, destination) pair.

    Flows between the same two brokers always get the same rate, so the progressive filling
    runs over pairs, each weighted by its number of flows (`weight`, whole numbers). `src`/`dst`
    index the cap arrays. Returns the rate of one flow of each pair (0 for pairs of weight 0).

    Compiled (`fill_kernel`, the same floats) once numba is loaded, as a large plan's count
    balance loads it: a long estimate then fills thousands of times for nothing more.
    """
    if "numba" in sys.modules and len(src) and (weight > 0).all():
        return fill_kernel.compiled()(np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64),
                                      np.asarray(weight, dtype=float), np.asarray(out_cap, dtype=float),
                                      np.asarray(in_cap, dtype=float))
    return filled_rates(src, dst, weight, out_cap, in_cap)


# One progressive filling (67 lines): its loop's arrays are shared by every step of a round.
def filled_rates(src: np.ndarray, dst: np.ndarray, weight: np.ndarray, out_cap: np.ndarray,
                 in_cap: np.ndarray) -> np.ndarray:
    """`pair_rates` in numpy operations on the brokers (none on the pairs within a round)."""
    n = len(out_cap)
    rate = np.zeros(len(src))
    live = np.flatnonzero(weight > 0)
    if len(live) == len(src):  # the estimate passes only live pairs: no copies to take
        s_l, d_l, w_l = src, dst, weight
    else:
        s_l, d_l, w_l = src[live], dst[live], weight[live]
    # The flows as a source x destination matrix of weights: a full resource (broker out,
    # broker in) freezes its row or column, and the others' weights lose its sum (whole
    # numbers: exact, in any order). A round costs a few operations on the brokers, none on
    # the pairs (a rate estimate replays thousands of fillings of tens of rounds each). A
    # resource fills once, so its row or column is subtracted once and never cleared: what
    # the full resources lose afterwards is never read.
    m = np.bincount(s_l * n + d_l, weights=w_l, minlength=n * n).reshape(n, n)
    # The resources: each broker's out capacity (0..n-1) then its in capacity (n..2n-1).
    w = np.concatenate([np.bincount(s_l, w_l, n), np.bincount(d_l, w_l, n)])
    w_out, w_in = w[:n], w[n:]
    room = np.concatenate([out_cap, in_cap], dtype=float)
    room[w == 0] = np.inf  # no flows or full: never the level (inf / 0 is inf too)
    limit, taken = np.empty(2 * n), np.empty(2 * n)
    # The round each resource filled in (the last round's number: never), and the rate of
    # every pair still filling after each round.
    when = np.full(2 * n, -1)
    levels = []
    filled = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        while True:
            np.divide(room, w, out=limit)
            level = float(np.minimum.reduce(limit))
            if level == math.inf:
                break
            level = max(level, 0.0)
            np.multiply(w, level, out=taken)
            np.subtract(room, taken, out=room)
            filled += level
            # Every resource at the level is full: its flows are frozen (a rounding margin, so
            # a tie does not cost one more round).
            full = (limit <= level + (level * 1e-12 + 1e-12)).nonzero()[0]
            levels.append(filled)
            if len(full) == 1:  # the usual round: one resource, its row or column as a view
                j = int(full[0])
                when[j] = len(levels) - 1
                room[j] = np.inf
                if j < n:
                    w_in -= m[j]
                else:
                    w_out -= m[:, j - n]
                continue
            when[full] = len(levels) - 1
            room[full] = np.inf
            if full[0] < n:
                w_in -= m[full[full < n]].sum(axis=0)
            if full[-1] >= n:
                w_out -= m[:, full[full >= n] - n].sum(axis=1)
    levels.append(filled)
    when[when < 0] = len(levels) - 1
    # A pair's rate: the level when the first of its two resources filled (never: the last).
    rate[live] = np.array(levels)[np.minimum(when[s_l], when[n + d_l])]
    return rate


def fair_rates(flows: list[Flow], out_cap: dict[int, float], in_cap: dict[int, float]) -> None:
    """Set each unfinished flow's max-min fair rate over the brokers' out and in caps."""
    active = [f for f in flows if f.left > 0]
    if not active:
        return
    ids = sorted(set(out_cap) | set(in_cap) | {f.source for f in active} | {f.dest for f in active})
    pos = {b: k for k, b in enumerate(ids)}
    pairs: dict[tuple[int, int], int] = {}
    for f in active:
        pairs.setdefault((f.source, f.dest), len(pairs))
    keys = list(pairs)
    src = np.array([pos[s] for s, _ in keys], dtype=np.int64)
    dst = np.array([pos[d] for _, d in keys], dtype=np.int64)
    weight = np.bincount([pairs[(f.source, f.dest)] for f in active], minlength=len(keys)).astype(float)
    rates = pair_rates(src, dst, weight, np.array([out_cap.get(b, 0.0) for b in ids]),
                       np.array([in_cap.get(b, 0.0) for b in ids]))
    for f in active:
        f.rate = float(rates[pairs[(f.source, f.dest)]])


def copy_arrays(cluster: Cluster, moves: list[dict] | dict[int, list[int]], live: set[int]) -> tuple[dict[int, list[int]], np.ndarray,
                                                                              np.ndarray, np.ndarray, np.ndarray]:
    """`copies_of` as arrays: the targets and, one entry per new replica in plan order, its
    source, destination, size (float bytes) and partition index.

    Parameters
    ----------
    moves
        Kafka's partitions list, or a dict partition index -> replica list (then the targets).

    Returns
    -------
    tuple
        ``(targets, source, dest, size, partition)``; the targets' lists are the moves' own.
        BadInput as `copies_of`.
    """
    if isinstance(moves, dict):
        targets = moves
        rows = list(targets)
        lists = list(targets.values())
    else:
        index = {(p.topic, p.partition): i for i, p in enumerate(cluster.partitions)}
        rows = [index.get((m["topic"], m["partition"]), -1) for m in moves]
        lists = [m["replicas"] for m in moves]
        targets = dict(zip(rows, lists))
    lay = layout(cluster, live)
    n = len(rows)
    lens = np.fromiter(map(len, lists), np.int64, n)
    part = np.repeat(np.fromiter(rows, np.int64, n), lens)
    dest = np.fromiter(chain.from_iterable(lists), np.int64, int(lens.sum()))
    added = ~member(pair_keys(part, dest), pair_keys(lay.rep_part, lay.rep_id))
    part, dest = part[added], dest[added]
    source = lay.lead_id[part]
    if -1 in rows or (source < 0).any() or not member(dest, lay.live_ids).all():
        if isinstance(moves, dict):
            moves = [{"topic": cluster.partitions[i].topic, "partition": cluster.partitions[i].partition,
                      "replicas": r} for i, r in moves.items()]
        _copies_checked(cluster, moves, live)  # raises, naming the first problem in plan order
    return targets, source, dest, lay.size[part], part


def _copies_checked(cluster: Cluster, moves: list[dict], live: set[int]) -> None:
    """BadInput for the first move, in plan order, that cannot be copied."""
    index = {(p.topic, p.partition): i for i, p in enumerate(cluster.partitions)}
    for m in moves:
        i = index.get((m["topic"], m["partition"]))
        if i is None:
            raise BadInput(f"the plan names {m['topic']}-{m['partition']}, which the cluster does not have")
        p = cluster.partitions[i]
        source = leader_of(p, live)
        added = [d for d in m["replicas"] if d not in p.replicas]
        if added and source is None:
            raise BadInput(f"{p.name} is offline, nothing to copy from: {offline.cause(cluster, p)} "
                           "(kit plan leaves offline partitions out)")
        for d in added:
            if d not in live:
                raise BadInput(f"the plan puts {p.name} on broker {d}, which is not live")


def copies_of(cluster: Cluster, moves: list[dict], live: set[int]) -> tuple[dict[int, list[int]], list[Flow]]:
    """The reassignment's targets (partition index -> replica list) and one Flow per new
    replica, from its partition's leader. BadInput names what cannot be copied."""
    targets, source, dest, size, part = copy_arrays(cluster, moves, live)
    targets = {i: list(r) for i, r in targets.items()}
    return targets, [Flow(s, d, z, partition=i)
                     for s, d, z, i in zip(source.tolist(), dest.tolist(), size.tolist(), part.tolist())]


def bytes_per_broker(source: np.ndarray, dest: np.ndarray, size: np.ndarray) -> tuple[dict[int, float],
                                                                                       dict[int, float]]:
    """Bytes each broker sends and receives for copies (`source`, `dest`, `size` aligned),
    added in copy order; every source and destination appears, in order of first appearance."""
    out: list[dict[int, float]] = []
    for ends in (source, dest):
        ids, pos = dense_codes(ends)
        total = np.bincount(pos, weights=size, minlength=len(ids))
        order = appearance_order(pos, len(ids))
        out.append(dict(zip(ids[order].tolist(), total[order].tolist())))
    return out[0], out[1]


def flow_arrays(flows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(source, dest, bytes left) arrays of a list of Flow; `copy_arrays`' tuple passes through."""
    if isinstance(flows, tuple):
        return flows
    return (np.fromiter((f.source for f in flows), np.int64, len(flows)),
            np.fromiter((f.dest for f in flows), np.int64, len(flows)),
            np.fromiter((f.left for f in flows), float, len(flows)))


def lower_bound(cluster: Cluster, targets: dict[int, list[int]], flows: list[Flow] | tuple,
                traffic: list[tuple[float, float]], capacity: dict[int, float],
                left_out: list[int] | None = None) -> float | None:
    """design.md's lower_bound_s: max over brokers and directions of replication bytes over the
    capacity the broker's client traffic leaves free, that traffic taken at its lightest during
    the reassignment (kit/traffic.py's floor_traffic). None when a broker's capacity is unknown;
    a broker whose clients leave nothing free is left out (its copies displace clients: no
    duration is safe there) and, with `left_out`, named in it, so a reader is told the bound
    does not cover it.

    `flows` is a list of Flow, or the ``(source, dest, size)`` arrays of `copy_arrays`.
    """
    live = set(capacity)
    out_b, in_b = bytes_per_broker(*flow_arrays(flows))
    if any(b not in capacity for b in list(out_b) + list(in_b)):
        return None
    rx, tx = floor_traffic(cluster, traffic, live, targets)
    worst = 0.0
    for per, client in ((out_b, tx), (in_b, rx)):
        for b, n in per.items():
            free = capacity[b] - client.get(b, 0.0)
            if n > 0 and free > 0:
                worst = max(worst, n / free)
            elif n > 0 and left_out is not None and b not in left_out:
                left_out.append(b)
    if left_out is not None:
        left_out.sort()
    return worst


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


__all__ = ["SAMPLE_EPOCH", "SPIKE", "STEP", "client_factor", "Flow", "pair_rates", "filled_rates", "fair_rates", "copies_of",
           "copy_arrays", "flow_arrays", "bytes_per_broker", "lower_bound", "sim_stamp", "simulate"]
