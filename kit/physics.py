"""The copy physics: how fast a reassignment's new replicas copy, shared by the simulator
(kit.sim.physics runs it in simulated time) and the duration estimate (kit.report.estimate
replays it as a fluid model), neither of which depends on the other.

design.md ("The simulator's physics"): each new replica copies its partition's size from the
partition's leader (first live ISR replica); a broker's replication out is capped by its leader
throttle, in by its follower throttle (or its NIC), and a broker's flows share its caps fairly
(max-min fair, `pair_rates`). `lower_bound` is design.md's lower_bound_s. Pure: arrays in, arrays out.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import chain

import numpy as np

from kit import fill_kernel, jit, offline
from kit.array_ops import Lists, appearance_order, dense_codes, in_lists, member
from kit.errors import BadInput
from kit.model import Cluster
from kit.traffic import floor_traffic, layout, leader_of


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
               in_cap: np.ndarray, rounds: list | None = None) -> np.ndarray:
    """Max-min fair rate of each flow of each (source, destination) pair.

    Flows between the same two brokers always get the same rate, so the progressive filling
    runs over pairs, each weighted by its number of flows (`weight`, whole numbers). `src`/`dst`
    index the cap arrays. Returns the rate of one flow of each pair (0 for pairs of weight 0).

    Compiled (`fill_kernel`, the same floats) once numba is loaded (`kit.jit.numba_loaded`), as
    a large plan's count balance loads it: a long estimate then fills thousands of times for nothing more.
    `rounds`, when given, receives the filling's rounds as `filled_rates` gives them (only
    the array version does: compiled, it stays empty).
    """
    if jit.numba_loaded() and len(src) and (weight > 0).all():
        return fill_kernel.compiled()(np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64),
                                      np.asarray(weight, dtype=float), np.asarray(out_cap, dtype=float),
                                      np.asarray(in_cap, dtype=float))
    return filled_rates(src, dst, weight, out_cap, in_cap, rounds)


def filled_rates(src: np.ndarray, dst: np.ndarray, weight: np.ndarray, out_cap: np.ndarray,
                 in_cap: np.ndarray, rounds: list | None = None) -> np.ndarray:
    """`pair_rates` in numpy operations on the brokers (none on the pairs within a round).

    `rounds`, when given, receives ``[when, steps]``: the round each resource (broker out
    0..n-1, broker in n..2n-1) filled in, ``len(steps)`` for never, and each round's level
    step (`filling_stands` reads them)."""
    n = len(out_cap)
    rate = np.zeros(len(src))
    live = slice(None) if (weight > 0).all() else np.flatnonzero(weight > 0)
    if isinstance(live, slice):  # the estimate passes only live pairs: no copies to take
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
    # A round is a handful of numpy calls on 2n numbers, each costing mostly its call: the
    # level is the limit at `argmin` (the very float `min` gives: no limit is NaN), and the
    # level and the margin go in as 0-d arrays (a Python float is converted on every call), and
    # the full resources are a preallocated mask's.
    at, below, is_full = np.empty(()), np.empty(()), np.empty(2 * n, dtype=bool)
    # The round each resource filled in (the last round's number: never), and the rate of
    # every pair still filling after each round.
    when = np.full(2 * n, -1)
    levels, steps = [], []
    filled = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        while True:
            np.divide(room, w, out=limit)
            j = int(limit.argmin())
            level = limit.item(j)
            if level == math.inf:
                break
            if level < 0.0:
                level = 0.0
            steps.append(level)
            at[()] = level
            np.multiply(w, at, out=taken)
            np.subtract(room, taken, out=room)
            filled += level
            # Every resource at the level is full: its flows are frozen (a rounding margin, so
            # a tie does not cost one more round).
            below[()] = level + (level * 1e-12 + 1e-12)
            np.less_equal(limit, below, out=is_full)
            levels.append(filled)
            full = is_full.nonzero()[0]
            if len(full) == 1:  # the usual round: the argmin alone, its row or column as a view
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
    if rounds is not None:
        rounds[:] = [when, steps]
    return rate


def filling_stands(rounds: list, src: np.ndarray, dst: np.ndarray, weight: np.ndarray, out_cap: np.ndarray,
                   in_cap: np.ndarray, changed: list[int]) -> bool:
    """Whether `filled_rates` gives the very rates of the filling whose `rounds` it returned when
    only the caps of the resources `changed` (numbered as in `rounds`) are now those of
    `out_cap`/`in_cap`, the pairs and weights the same.

    True when no such resource filled in that filling and, with its new cap, none fills in any
    round either: its room is followed round by round with the filling's own floats, so every
    level, every filled resource and every rate stays as it was. False when in doubt (the
    filling is then made again)."""
    when, steps = rounds
    n, never = len(out_cap), len(steps)
    for j in changed:
        if when[j] != never:
            return False
        if j < n:
            mine, cap = (src == j) & (weight > 0), out_cap[j]
            other = n + dst[mine]
        else:
            mine, cap = (dst == j - n) & (weight > 0), in_cap[j - n]
            other = src[mine]
        taken = weight[mine]
        if not len(taken):
            continue  # no flows: its room is never read
        # Its weight round by round: whole numbers (exact in any order), less the flows frozen
        # by the other end's filling a round before.
        w = float(taken.sum())
        frozen = np.bincount(when[other], taken, never + 1).tolist()
        room = float(cap)
        for k, level in enumerate(steps):
            if k:
                w -= frozen[k - 1]
            if w == 0:
                if room > 0:
                    continue  # every flow frozen: an endless limit, as in the filling
                return False
            if room / w <= level + (level * 1e-12 + 1e-12):
                return False
            room -= w * level
        # After the last round every limit was endless: so must this one be still.
        if never and frozen[never - 1]:
            w -= frozen[never - 1]
        if w != 0 and room != math.inf or w == 0 and not room > 0:
            return False
    return True


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


def copy_arrays(cluster: Cluster, moves: list[dict] | dict[int, list[int]], live: set[int],
                lists: Lists | None = None) -> tuple[dict[int, list[int]], np.ndarray, np.ndarray, np.ndarray,
                                                     np.ndarray]:
    """`copies_of` as arrays: the targets and, one entry per new replica in plan order, its
    source, destination, size (float bytes) and partition index.

    Parameters
    ----------
    moves
        Kafka's partitions list, or a dict partition index -> replica list (then the targets).
    lists
        With a dict, ``kit.array_ops.Lists.of(moves)`` when the caller has it.

    Returns
    -------
    tuple
        ``(targets, source, dest, size, partition)``; the targets' lists are the moves' own.
        BadInput as `copies_of`.
    """
    if isinstance(moves, dict):
        targets = moves
        lists = lists or Lists.of(targets)
        rows, part, dest = lists.rows, lists.rows[lists.row], lists.id
    else:
        index = {(p.topic, p.partition): i for i, p in enumerate(cluster.partitions)}
        rows = [index.get((m["topic"], m["partition"]), -1) for m in moves]
        replicas = [m["replicas"] for m in moves]
        targets = dict(zip(rows, replicas))
        n = len(rows)
        lens = np.fromiter(map(len, replicas), np.int64, n)
        part = np.repeat(np.fromiter(rows, np.int64, n), lens)
        dest = np.fromiter(chain.from_iterable(replicas), np.int64, int(lens.sum()))
    lay = layout(cluster, live)
    added = ~in_lists(part, dest, None, lay.rep_part, lay.rep_id, len(cluster.partitions))
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
                left_out: list[int] | None = None, lists: Lists | None = None) -> float | None:
    """design.md's lower_bound_s: max over brokers and directions of replication bytes over the
    capacity the broker's client traffic leaves free, that traffic taken at its lightest during
    the reassignment (kit/traffic.py's floor_traffic). None when a broker's capacity is unknown;
    a broker whose clients leave nothing free is left out (its copies displace clients: no
    duration is safe there) and, with `left_out`, named in it, so a reader is told the bound
    does not cover it.

    `flows` is a list of Flow, or the ``(source, dest, size)`` arrays of `copy_arrays`;
    `lists` is ``kit.array_ops.Lists.of(targets)`` when the caller has it.
    """
    live = set(capacity)
    out_b, in_b = bytes_per_broker(*flow_arrays(flows))
    if any(b not in capacity for b in list(out_b) + list(in_b)):
        return None
    rx, tx = floor_traffic(cluster, traffic, live, targets, lists)
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
