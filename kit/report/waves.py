"""Reassignment waves and duration estimates: pure arithmetic over a plan.

A partition whose replica set grows makes Kafka copy the whole partition from its leader
to every added replica. A wave is a set of such moves that Kafka runs at once; splitting a
plan into waves bounds how many moves each broker takes part in at a time (Cruise
Control's default concurrency is 5 per broker). The duration estimate (`duration_report`)
predicts the run kit makes, all at once with the auto-throttle (or a fixed throttle), with
kit/report/estimate.py's model of the simulator's physics; the per-wave figures are simpler: each
wave's busiest broker over its rate at the start.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate, chain
from operator import mul

import numpy as np

from kit.array_ops import dense_codes
from kit.throttle.decide import Settings
from kit.errors import BadInput
from kit.report.estimate import predict
from kit.report.figures import PlanArrays
from kit.report.moves import Move, MoveColumns, Moves, moves_of
from kit.report.starting import known_capacities
from kit.model import Cluster, Plan
from kit.text import human_duration
from kit.traffic import broker_traffic as client_traffic
from kit.traffic import traffic_array

DEFAULT_MAX_MOVES_PER_BROKER = 5
# kafka-kit's autothrottle never throttles replication below this; a broker whose NIC is
# already full of client traffic still replicates at about this rate.
MIN_RATE = 10_000_000.0  # bytes/s


@dataclass(frozen=True)
class WaveColumns:
    """Waves as columns (`wave_columns`): their moves wave after wave, each in placing order."""

    at: np.ndarray  # positions of the moves in those given, in that order
    moves: MoveColumns  # the moves in that order
    lengths: list[int]  # moves per wave


class Waves(list):
    """Waves as `split_waves` gives them, a list of lists of `Move`, with the same waves as
    `columns` (`WaveColumns`), which the duration estimate reads (read-only: the columns are
    not updated)."""

    def __init__(self, waves: list[list[Move]], columns: WaveColumns):
        super().__init__(waves)
        self.columns = columns


def wave_columns(moves: MoveColumns, max_moves_per_broker: int = DEFAULT_MAX_MOVES_PER_BROKER,
                 biggest_first: bool = True) -> WaveColumns:
    """Pack moves into waves in which no broker takes part in more than `max_moves_per_broker`.

    Moves that copy nothing (a change of replica order) all go in the first wave. Data moves
    are placed biggest first (by index among equals) or in plan order, each in the earliest
    wave where every broker it involves still has room.
    """
    at, lengths = wave_order(moves, max_moves_per_broker, biggest_first)
    return WaveColumns(at, moves.take(at), lengths)


def wave_order(moves: MoveColumns, max_moves_per_broker: int = DEFAULT_MAX_MOVES_PER_BROKER,
               biggest_first: bool = True) -> tuple[np.ndarray, list[int]]:
    """`wave_columns`' waves as the positions of the moves in wave order and the moves of
    each wave (what `kit plan` has the second process work out: small to send)."""
    if max_moves_per_broker < 1:
        raise BadInput(f"--max-moves-per-broker must be at least 1, got {max_moves_per_broker}")
    order_only = np.flatnonzero(moves.per_move == 0)
    data = np.flatnonzero(moves.per_move > 0)
    lengths = [len(order_only)] if len(order_only) else []
    if not len(data):
        return order_only, lengths
    order, brokers = _placing_order(moves.take(data), biggest_first)
    wave_of = np.array(_first_fit(brokers, max_moves_per_broker), dtype=np.int64)
    # Wave by wave, each in placing order; the waves are numbered without gaps (a move
    # opens at most the next one).
    return (np.concatenate([order_only, data[order[np.argsort(wave_of, kind="stable")]]]),
            lengths + np.bincount(wave_of).tolist())


def split_waves(moves: list[Move], max_moves_per_broker: int = DEFAULT_MAX_MOVES_PER_BROKER,
                biggest_first: bool = True) -> Waves:
    """`wave_columns` of `moves` (read from their columns when `moves_of` gives them), as
    lists of the moves."""
    columns = wave_columns(moves.columns if isinstance(moves, Moves) else MoveColumns.of(moves),
                           max_moves_per_broker, biggest_first)
    placed = list(map(moves.__getitem__, columns.at.tolist()))
    ends = list(accumulate(columns.lengths, initial=0))
    return Waves([placed[a:b] for a, b in zip(ends, ends[1:])], columns)


def _placing_order(data: MoveColumns, biggest_first: bool) -> tuple[np.ndarray, list[list[int]]]:
    """The order `split_waves` places `data` in (positions into it), and each move's brokers
    (its source first) as numbers from 0, in that order."""
    n = len(data.index)
    lens, source, dest = data.per_move, data.source, data.dest
    if biggest_first:
        order = np.lexsort((data.index, -data.size))
    else:
        order = np.arange(n)
    # Small numbers instead of broker ids: the packing keeps its state in lists indexed by them.
    _, codes = dense_codes(np.concatenate([source, dest]))
    src, dst = codes[:n][order], codes[n:]
    lens, starts = lens[order], (np.cumsum(lens) - lens)[order]
    # One row per move as wide as the widest, made lists at once; the shorter rows (few: most
    # moves add as many replicas) are then cut to their length.
    width = int(lens.max())
    rows = np.empty((n, 1 + width), dtype=np.int64)
    rows[:, 0] = src
    at = np.minimum(starts[:, None] + np.arange(width), len(dst) - 1)  # past a row's end: cut below
    rows[:, 1:] = dst[at]
    brokers = rows.tolist()
    for i, k in zip(np.flatnonzero(lens < width).tolist(), lens[lens < width].tolist()):
        del brokers[i][1 + k:]
    return order, brokers


def _first_fit(brokers: list[list[int]], cap: int) -> list[int]:
    """The data wave (from 0) of each move, given as its brokers' numbers, placed in turn in
    the earliest wave where none of its brokers takes part in `cap` moves yet."""
    # Per broker, its full waves as the bits of one integer: the earliest wave where all of a
    # move's brokers have room is the lowest bit clear in the OR of theirs (a few integer
    # operations per move, however many waves there are: a search per broker and wave was
    # most of the time of a 200,000-move plan).
    full = [0] * (1 + max(map(max, brokers)))
    count: list[list[int]] = [[] for _ in full]  # per broker: its moves in each wave (up to its last)
    wave_of = []
    for bs in brokers:
        taken = 0
        for b in bs:
            taken |= full[b]
        w = (~taken & (taken + 1)).bit_length() - 1
        for b in bs:
            counts = count[b]
            if len(counts) <= w:
                counts.extend([0] * (w + 1 - len(counts)))
            counts[w] += 1
            if counts[w] >= cap:
                full[b] |= 1 << w
        wave_of.append(w)
    return wave_of


def broker_traffic(cluster: Cluster, client_load: float | None = None) -> tuple[dict[int, float], dict[int, float]]:
    """Client bytes/s each broker sends and receives now (kit/traffic.py's model): (tx, rx)."""
    rx, tx = client_traffic(cluster, traffic_array(cluster, client_load))
    return tx, rx


def replication_rates(cluster: Cluster, throttle: float | None = None, client_load: float | None = None,
                      settings: Settings | None = None) -> dict[int, tuple[float, float]]:
    """Bytes/s each broker can send and receive for replication at the start: its NIC capacity
    less its client traffic (at least `MIN_RATE`), capped by `throttle` when one is set; with
    `settings`, the auto-throttle's first rates instead (that share of the free capacity, at
    least its minimum). Brokers with neither a capacity nor a throttle are left out."""
    return _replication_rates(cluster, *broker_traffic(cluster, client_load), throttle, settings,
                              known_capacities(cluster.brokers))


def _replication_rates(cluster: Cluster, tx: dict[int, float], rx: dict[int, float], throttle: float | None,
                       settings: Settings | None, nic: dict[int, float]) -> dict[int, tuple[float, float]]:
    """`replication_rates` from the client traffic `broker_traffic` gives and the NICs `nic`."""
    rates = {}
    for b in cluster.brokers.values():
        if not b.alive:
            continue
        if b.id not in nic:
            if throttle is None:
                continue
            rates[b.id] = (float(throttle), float(throttle))
            continue
        share, floor = (settings.share, settings.minimum) if settings is not None else (1.0, MIN_RATE)
        out_room = max((nic[b.id] - tx.get(b.id, 0.0)) * share, floor)
        in_room = max((nic[b.id] - rx.get(b.id, 0.0)) * share, floor)
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
    return estimates([moves], rates)[0]


def estimates(groups: list[list[Move]], rates: dict[int, tuple[float, float]]) -> list[Estimate]:
    """`estimate` of each group of moves (the waves, say), over numpy arrays.

    Bytes per broker are added in move order, and the busiest broker is the first largest of
    the senders then the receivers by id, as a loop over the moves finds them.
    """
    return _estimates(_Copies.of(MoveColumns.of(list(chain.from_iterable(groups)))), list(map(len, groups)), rates)


@dataclass(frozen=True)
class _Copies:
    """Moves as columns, one entry per copy (an added broker) in move order: what `estimates`
    reads, from the moves' columns (`MoveColumns`)."""

    per_move: np.ndarray  # copies per move
    copied: np.ndarray | list[int]  # bytes per move (its size, once per copy), exact: int64, or
    # Python's integers where a sum of them could pass int64
    source: np.ndarray
    dest: np.ndarray
    weight: np.ndarray  # bytes per copy, as a float

    @classmethod
    def of(cls, moves: MoveColumns) -> _Copies:
        per_move, size = moves.per_move, moves.size
        copied = size * per_move
        if len(size) and int(size.max()) * int(per_move.sum()) >= 1 << 62:  # `twice` sums it twice
            copied = list(map(mul, size.tolist(), per_move.tolist()))
        return cls(per_move, copied, np.repeat(moves.source, per_move), moves.dest,
                   np.repeat(size.astype(float), per_move))

    def twice(self) -> _Copies:
        """The same moves twice over (all at once, then in waves)."""
        return _Copies(*(np.concatenate([c, c]) if isinstance(c, np.ndarray) else c + c
                         for c in (self.per_move, self.copied, self.source, self.dest, self.weight)))


def _estimates(copies: _Copies, lengths: list[int], rates: dict[int, tuple[float, float]]) -> list[Estimate]:
    """`estimates` of groups of `lengths` moves, one after the other in `copies`."""
    ends = list(accumulate(lengths, initial=0))
    if isinstance(copies.copied, list):
        totals = [sum(copies.copied[a:b]) for a, b in zip(ends, ends[1:])]
    else:
        running = np.concatenate([[0], np.cumsum(copies.copied)])
        totals = (running[ends[1:]] - running[ends[:-1]]).tolist()
    ng = len(lengths)
    g = np.repeat(np.repeat(np.arange(ng, dtype=np.int64), lengths), copies.per_move)
    source, dest = copies.source, copies.dest
    ids, codes = dense_codes(np.concatenate([source, dest]))
    nb = len(ids)
    # Per group and broker: bytes sent (columns 0..nb-1), then bytes received.
    per = np.concatenate([
        np.bincount(g * nb + at, weights=copies.weight, minlength=ng * nb).reshape(ng, nb)
        for at in (codes[:len(source)], codes[len(source):])], axis=1)
    rate = np.array([rates.get(b, (0.0, 0.0))[0] for b in ids.tolist()]
                    + [rates.get(b, (0.0, 0.0))[1] for b in ids.tolist()])
    busy = per > 0
    lacking = busy & (rate <= 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        seconds = np.where(busy & (rate > 0), per / np.where(rate > 0, rate, 1.0), 0.0)
    worst = seconds.argmax(axis=1) if nb else np.zeros(ng, dtype=np.int64)
    both = ids.tolist() * 2
    out = []
    for k in range(ng):
        if lacking[k].any():
            out.append(Estimate(None, totals[k], None, None, tuple(sorted(set(np.array(both)[lacking[k]].tolist())))))
        elif nb and seconds[k, worst[k]] > 0:
            j = int(worst[k])
            out.append(Estimate(float(seconds[k, j]), totals[k], both[j], "out" if j < nb else "in"))
        else:
            out.append(Estimate(0.0, totals[k], None, None))
    return out


def duration_report(plan: Plan, waves: list[list[Move]] | WaveColumns, throttle: float | str | None = None,
                    client_load: float | None = None, settings: Settings | None = None,
                    cap_map: dict | None = None, first_decision_s: float = 0.0,
                    arrays: PlanArrays | None = None) -> dict:
    """The duration estimate for a plan, as plain data for the report and the summary.

    `throttle` None or "auto": kit's auto-throttle with `settings` (default Settings()); a rate:
    that fixed throttle; "none": no throttle. `client_load` None: the snapshot's traffic; a
    share F: the what-if kit simulate --client-load F runs. The primary figure, ``estimate_s``
    (simulated seconds from apply to the last replica in sync, all partitions at once), comes
    with ``lower_bound_s`` and the ``assumptions`` it rests on; ``seconds_all_at_once`` is the
    same figure (kept for older readers); the per-wave figures are each wave's busiest broker
    over its starting rate. `first_decision_s`: when the auto-throttle first decides (see
    `kit.report.estimate.predict`). `arrays`: ``PlanArrays(plan)``, when the caller has it
    (the changed partitions and their lists are read from it).
    """
    settings = settings or Settings()
    mode = "auto" if throttle in (None, "auto") else ("none" if throttle == "none" else float(throttle))
    fixed = mode if isinstance(mode, float) else None
    after = plan.after
    changed = plan.changed() if arrays is None else arrays.changed_rows
    targets = {i: after[i] for i in changed}  # the reassignment, without its JSON
    pred = predict(plan.cluster, targets, None if mode == "none" else mode, client_load, settings, cap_map,
                   first_decision_s=first_decision_s, lists=None if arrays is None else arrays.lists(changed))
    # A what-if the estimate could not scale (no capacities: it says so) is not used below either.
    what_if = None if pred["estimate_s"] is None else client_load
    tx, rx = broker_traffic(plan.cluster, what_if)
    nic = known_capacities(plan.cluster.brokers, cap_map)  # the figures `predict` used
    rates = _replication_rates(plan.cluster, tx, rx, fixed, settings if mode == "auto" else None, nic)
    if pred["unknown"]:
        rates = {b: r for b, r in rates.items() if b not in pred["unknown"]}
    saturated = sorted(b for b, cap in nic.items() if max(tx.get(b, 0.0), rx.get(b, 0.0)) > cap - MIN_RATE)
    # All at once, then wave by wave: the moves' columns read once.
    columns = _columns(waves)
    start, *per_wave = _estimates(_Copies.of(columns.moves).twice(), [len(columns.at), *columns.lengths], rates)
    known = all(e.seconds is not None for e in per_wave)
    missing = sorted(set(pred["unknown"]) | set(start.missing_rate))
    return {
        "estimate_s": _round(pred["estimate_s"]) if not missing else None,
        "lower_bound_s": _round(pred["lower_bound_s"]),
        "lower_bound_leaves_out": pred["lower_bound_leaves_out"],
        "assumptions": pred["assumptions"],
        "throttle": mode,
        "interval_s": settings.interval if mode == "auto" else None,
        "client_load": client_load,
        "throttle_bytes_per_sec": fixed,
        "waves": len(columns.lengths),
        "bytes_to_move": start.bytes,
        "seconds_all_at_once": _round(pred["estimate_s"]) if not missing else None,
        "busiest_broker": start.busiest_broker,
        "busiest_direction": start.direction,
        "seconds_in_waves": _round(sum(e.seconds for e in per_wave)) if known and not missing else None,
        "brokers_without_rate": missing,
        "brokers_without_headroom": saturated,
        "wave_seconds": [_round(e.seconds) for e in per_wave],
        "wave_partitions": list(columns.lengths),
    }


def duration_lines(d: dict, max_waves: int = 10, clock: str | None = None, at_once: bool = False) -> list[str]:
    """The duration estimate as summary lines: the figure and the clock it is on, the best any
    run can do, what the estimate assumes, and the waves' simpler figure.

    Parameters
    ----------
    d : dict
        `duration_report`'s answer.
    max_waves : int
        Waves listed one by one before the rest is only counted.
    clock : str, optional
        The clock the figures are on: "simulated" (a simulated cluster's), "wall" (a real
        cluster's); None: simulated seconds, the time `kit simulate` runs the plan in.
    at_once : bool
        The caller applies the whole plan at once (the runbooks): said so, and the waves'
        figure, which its run does not follow, left out.
    """
    gb = d["bytes_to_move"] / 1e9
    out = [f"  {gb:,.1f} GB to copy" + ("" if at_once else f" in {d['waves']} wave(s)")]
    if d["brokers_without_rate"]:
        out.append(f"  duration unknown: {no_rate_text(d['brokers_without_rate'])}")
        return out
    if d.get("brokers_without_headroom"):
        n = len(d["brokers_without_headroom"])
        out.append(f"  WARN: the clients of {n} broker(s) leave no NIC capacity free; those copy at the "
                   f"{_human_rate(MIN_RATE)} minimum, taking it from their clients")
    mode = d.get("throttle", "auto")
    how = ("with the auto-throttle" if mode == "auto" else "unthrottled" if mode == "none"
           else f"at a fixed throttle of {_human_rate(d['throttle_bytes_per_sec'])}")
    on = {"simulated": "on the simulated cluster's clock", "wall": "wall clock"}.get(clock, "simulated cluster time")
    out.append(f"  estimate:    {human_duration(d['seconds_all_at_once'])} ({on}, from apply until the last new "
               f"replica is in sync; every partition at once {how}){_bound_text(d)}")
    for a in d.get("assumptions", []):
        out.append(f"    assumes {a}")
    if d["busiest_broker"] is not None:
        out.append(f"  busiest at the start: broker {d['busiest_broker']} "
                   f"({'sending' if d['busiest_direction'] == 'out' else 'receiving'})")
    if at_once:
        out.append("  applied all at once, not in waves: the estimate above is the one this run follows")
        return out
    out.append(f"  in waves:    {human_duration(d['seconds_in_waves'])} (if the waves are applied one after "
               "another: each wave's busiest broker at its starting rate, a simpler figure than the estimate)")
    for n, (secs, parts) in enumerate(zip(d["wave_seconds"], d["wave_partitions"]), 1):
        if n > max_waves:
            out.append(f"  ... and {d['waves'] - max_waves} more waves")
            break
        out.append(f"    wave {n}: {parts} partition(s), {human_duration(secs)}")
    return out


def no_rate_text(brokers: list[int]) -> str:
    """Why a duration is unknown: the brokers whose replication rate nothing gives."""
    ids = " ".join(map(str, brokers[:10])) + (f" … ({len(brokers)} brokers)" if len(brokers) > 10 else "")
    return (f"no NIC capacity is known for broker(s) {ids} (no net_capacity, no capacity map entry) and no "
            "fixed throttle was given")


def _bound_text(d: dict) -> str:
    """The best any run can do as the estimate line's tail, saying which brokers it leaves out:
    on a broker whose clients fill its NIC no copy is safe, so the bound has nothing to say
    there (a bare "0s" would read as "could be instant")."""
    bound, out = d.get("lower_bound_s"), d.get("lower_bound_leaves_out") or []
    if bound is None:
        return ""
    if not out:
        return (f"; at best {human_duration(bound)} (every copying broker at all the NIC capacity its clients "
                "leave free)")
    if not bound:
        return (f"; no best case: the clients of every copying broker ({len(out)}) leave no NIC "
                "capacity free")
    return (f"; at best {human_duration(bound)} over the copying brokers with NIC capacity free "
            f"({len(out)} have none)")


def _human_rate(x: float) -> str:
    return f"{x / 1e6:.0f} MB/s"


def wave_documents(plan: Plan, waves: list[list[Move]] | WaveColumns) -> list[dict]:
    """One Kafka reassignment document per wave."""
    parts = plan.cluster.partitions
    columns = _columns(waves)
    ends = list(accumulate(columns.lengths, initial=0))
    index = columns.moves.index.tolist()
    return [{"version": 1, "partitions": [
        {"topic": parts[i].topic, "partition": parts[i].partition, "replicas": list(plan.after[i])}
        for i in sorted(index[a:b])]} for a, b in zip(ends, ends[1:])]


def _columns(waves: list[list[Move]] | WaveColumns) -> WaveColumns:
    """`waves` as columns: as given, kept by `split_waves`, or read from the moves."""
    if isinstance(waves, WaveColumns):
        return waves
    if isinstance(waves, Waves):
        return waves.columns
    moves = [m for w in waves for m in w]
    return WaveColumns(np.arange(len(moves)), MoveColumns.of(moves), list(map(len, waves)))


def _round(x: float | None) -> float | None:
    return None if x is None else round(float(x), 1)


__all__ = ["Move", "moves_of", "WaveColumns", "Waves", "wave_columns", "wave_order", "split_waves", "broker_traffic", "replication_rates", "estimate", "estimates", "duration_report",
           "duration_lines", "no_rate_text", "wave_documents", "DEFAULT_MAX_MOVES_PER_BROKER"]
