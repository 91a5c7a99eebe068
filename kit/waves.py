"""Reassignment waves and duration estimates: pure arithmetic over a plan.

A partition whose replica set grows makes Kafka copy the whole partition from its leader
to every added replica. A wave is a set of such moves that Kafka runs at once; splitting a
plan into waves bounds how many moves each broker takes part in at a time (Cruise
Control's default concurrency is 5 per broker). The estimate assumes what the simulator
of design.md assumes: each broker copies at its replication rate in each direction, its
flows share that rate, and the busiest broker decides how long a wave takes.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import BadInput
from .model import Cluster, Plan

DEFAULT_MAX_MOVES_PER_BROKER = 5
# kafka-kit's autothrottle never throttles replication below this; a broker whose NIC is
# already full of client traffic still replicates at about this rate.
MIN_RATE = 10_000_000.0  # bytes/s


@dataclass(frozen=True)
class Move:
    """One partition reassignment: where its data comes from and goes to."""

    index: int  # partition index in the cluster
    size: int  # bytes copied to each added replica
    source: int  # the leader the new replicas copy from
    added: tuple[int, ...]  # brokers that receive a copy

    @property
    def brokers(self) -> tuple[int, ...]:
        return (self.source, *self.added) if self.added else ()


def moves_of(plan: Plan) -> list[Move]:
    """Every changed partition as a move (order-only changes have no added brokers)."""
    out = []
    dead = {b.id for b in plan.cluster.brokers.values() if not b.alive}
    for i in plan.changed():
        p = plan.cluster.partitions[i]
        added = tuple(b for b in plan.after[i] if b not in p.replicas)
        # Followers copy from the current leader: the first live in-sync replica.
        live_isr = [b for b in p.isr if b not in dead and b in p.replicas]
        source = p.leader if p.leader is not None else (live_isr[0] if live_isr else p.replicas[0])
        out.append(Move(i, p.size, source, added))
    return out


def split_waves(moves: list[Move], max_moves_per_broker: int = DEFAULT_MAX_MOVES_PER_BROKER,
                biggest_first: bool = True) -> list[list[Move]]:
    """Pack moves into waves in which no broker takes part in more than `max_moves_per_broker`.

    Moves that copy nothing (a change of replica order) all go in the first wave. Data moves
    are placed biggest first (or in plan order), each in the earliest wave where every
    broker it involves still has room.
    """
    if max_moves_per_broker < 1:
        raise BadInput(f"--max-moves-per-broker must be at least 1, got {max_moves_per_broker}")
    order_only = [m for m in moves if not m.added]
    data = [m for m in moves if m.added]
    if biggest_first:
        data.sort(key=lambda m: (-m.size, m.index))
    waves: list[list[Move]] = [list(order_only)] if order_only else []
    first_data_wave = len(waves)
    load: list[dict[int, int]] = []  # per data wave: broker -> moves
    lowest_open: dict[int, int] = {}  # broker -> first data wave where it may have room
    cap = max_moves_per_broker
    for m in data:
        brokers = m.brokers
        w = max(lowest_open.get(b, 0) for b in brokers)
        while True:
            if w == len(load):
                load.append({})
            room = load[w]
            # Plain loops, not all(): this runs a few million times on large plans.
            for b in brokers:
                if room.get(b, 0) >= cap:
                    break
            else:
                break
            w += 1
        room = load[w]
        for b in brokers:
            room[b] = room.get(b, 0) + 1
            first = lowest_open.get(b, 0)
            while first < len(load) and load[first].get(b, 0) >= cap:
                first += 1
            lowest_open[b] = first
        while len(waves) <= first_data_wave + w:
            waves.append([])
        waves[first_data_wave + w].append(m)
    return waves


def broker_traffic(cluster: Cluster) -> tuple[dict[int, float], dict[int, float]]:
    """Bytes/s each broker sends and receives now (client and replication traffic)."""
    tx: dict[int, float] = {}
    rx: dict[int, float] = {}
    for p in cluster.partitions:
        leader = p.leader if p.leader is not None else p.replicas[0]
        # Produce traffic reaches the leader and is copied to every follower.
        for b in p.replicas:
            rx[b] = rx.get(b, 0.0) + p.bytes_in
        tx[leader] = tx.get(leader, 0.0) + p.bytes_out + p.bytes_in * (len(p.replicas) - 1)
    return tx, rx


def replication_rates(cluster: Cluster, throttle: float | None = None) -> dict[int, tuple[float, float]]:
    """Bytes/s each broker can send and receive for replication: its NIC capacity less the
    traffic it carries now (at least `MIN_RATE`), capped by `throttle` when one is set.
    Brokers with neither a capacity nor a throttle are left out: their rate is unknown."""
    tx, rx = broker_traffic(cluster)
    rates = {}
    for b in cluster.brokers.values():
        if not b.alive:
            continue
        if b.net_capacity is None:
            if throttle is None:
                continue
            rates[b.id] = (float(throttle), float(throttle))
            continue
        out_room = max(b.net_capacity - tx.get(b.id, 0.0), MIN_RATE)
        in_room = max(b.net_capacity - rx.get(b.id, 0.0), MIN_RATE)
        if throttle is not None:
            out_room, in_room = min(out_room, throttle), min(in_room, throttle)
        rates[b.id] = (out_room, in_room)
    return rates


@dataclass(frozen=True)
class Estimate:
    """How long a set of moves takes, and which broker decides it."""

    seconds: float | None  # None when some broker's rate is unknown or zero
    bytes: int
    busiest_broker: int | None
    direction: str | None  # "out" (a source) or "in" (a destination)
    missing_rate: tuple[int, ...] = ()


def estimate(moves: list[Move], rates: dict[int, tuple[float, float]]) -> Estimate:
    """Seconds for `moves` run at once: the busiest broker's bytes over its rate."""
    out_bytes: dict[int, float] = {}
    in_bytes: dict[int, float] = {}
    total = 0
    for m in moves:
        for b in m.added:
            out_bytes[m.source] = out_bytes.get(m.source, 0.0) + m.size
            in_bytes[b] = in_bytes.get(b, 0.0) + m.size
            total += m.size
    worst = (0.0, None, None)
    missing = []
    for direction, per_broker, k in (("out", out_bytes, 0), ("in", in_bytes, 1)):
        for b, n in sorted(per_broker.items()):
            if n <= 0:
                continue
            rate = rates.get(b, (0.0, 0.0))[k]
            if rate <= 0:
                missing.append(b)
                continue
            if n / rate > worst[0]:
                worst = (n / rate, b, direction)
    if missing:
        return Estimate(None, total, None, None, tuple(sorted(set(missing))))
    return Estimate(worst[0], total, worst[1], worst[2])


def duration_report(plan: Plan, waves: list[list[Move]], throttle: float | None = None) -> dict:
    """Waves and estimates for a plan, as plain data for the report and the summary."""
    moves = [m for w in waves for m in w]
    rates = replication_rates(plan.cluster, throttle)
    tx, rx = broker_traffic(plan.cluster)
    saturated = sorted(b.id for b in plan.cluster.brokers.values() if b.alive and b.net_capacity is not None
                       and max(tx.get(b.id, 0.0), rx.get(b.id, 0.0)) > b.net_capacity - MIN_RATE)
    all_at_once = estimate(moves, rates)
    per_wave = [estimate(w, rates) for w in waves]
    known = all(e.seconds is not None for e in per_wave)
    return {
        "throttle_bytes_per_sec": throttle,
        "waves": len(waves),
        "bytes_to_move": all_at_once.bytes,
        "seconds_all_at_once": _round(all_at_once.seconds),
        "busiest_broker": all_at_once.busiest_broker,
        "busiest_direction": all_at_once.direction,
        "seconds_in_waves": _round(sum(e.seconds for e in per_wave)) if known else None,
        "brokers_without_rate": list(all_at_once.missing_rate),
        "brokers_without_headroom": saturated,
        "wave_seconds": [_round(e.seconds) for e in per_wave],
        "wave_partitions": [len(w) for w in waves],
    }


def duration_lines(d: dict, max_waves: int = 10) -> list[str]:
    """The duration estimate as summary lines."""
    gb = d["bytes_to_move"] / 1e9
    out = [f"  {gb:.1f} GB to copy in {d['waves']} wave(s)"]
    if d["brokers_without_rate"]:
        ids = " ".join(map(str, d["brokers_without_rate"][:10]))
        out.append(f"  duration unknown: no replication rate for broker(s) {ids} (no net_capacity; pass --throttle)")
        return out
    if d.get("brokers_without_headroom"):
        n = len(d["brokers_without_headroom"])
        out.append(f"  WARN: {n} broker(s) have no NIC headroom left (client traffic); they are counted at the "
                   f"{_human_rate(MIN_RATE)} minimum")
    rate = "throttle " + _human_rate(d["throttle_bytes_per_sec"]) if d["throttle_bytes_per_sec"] else "free NIC capacity"
    out.append(f"  all at once: {human_duration(d['seconds_all_at_once'])} at {rate}, bounded by broker "
               f"{d['busiest_broker']} ({'sending' if d['busiest_direction'] == 'out' else 'receiving'})")
    out.append(f"  in waves:    {human_duration(d['seconds_in_waves'])}")
    for n, (secs, parts) in enumerate(zip(d["wave_seconds"], d["wave_partitions"]), 1):
        if n > max_waves:
            out.append(f"  ... and {d['waves'] - max_waves} more waves")
            break
        out.append(f"    wave {n}: {parts} partition(s), {human_duration(secs)}")
    return out


def _human_rate(x: float) -> str:
    return f"{x / 1e6:.0f} MB/s"


def wave_documents(plan: Plan, waves: list[list[Move]]) -> list[dict]:
    """One Kafka reassignment document per wave."""
    parts = plan.cluster.partitions
    return [{"version": 1, "partitions": [
        {"topic": parts[m.index].topic, "partition": parts[m.index].partition, "replicas": list(plan.after[m.index])}
        for m in sorted(w, key=lambda m: m.index)]} for w in waves]


def _round(x: float | None) -> float | None:
    return None if x is None else round(float(x), 1)


def human_duration(seconds: float | None) -> str:
    """'2h 05m', '14m 03s', '42s'; 'unknown' for None."""
    if seconds is None:
        return "unknown"
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    if h:
        return f"{h}h {m:02d}m"
    if m:
        return f"{m}m {sec:02d}s"
    return f"{sec}s"


__all__ = ["Move", "moves_of", "split_waves", "broker_traffic", "replication_rates", "estimate", "duration_report",
           "duration_lines", "wave_documents", "human_duration", "DEFAULT_MAX_MOVES_PER_BROKER"]
