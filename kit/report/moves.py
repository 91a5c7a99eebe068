"""A plan's moves: each changed partition, the leader its new replicas copy from and the
brokers that receive a copy, as `Move` tuples and as numpy columns (`MoveColumns`).

The waves (kit/report/waves.py) place the moves and the duration estimate sums them per
broker: both read the columns, made once from the plan's arrays (reading a million moves'
fields back from their tuples took longer than the sums). Pure: no I/O.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import chain, repeat
from operator import attrgetter
from typing import NamedTuple

import numpy as np

from kit.array_ops import member, row_entries
from kit.model import Cluster, Partition, Plan
from kit.report.arrays import FlatAssignment
from kit.report.figures import PlanArrays
from kit.traffic import layout


class Move(NamedTuple):
    """One partition reassignment: where its data comes from and goes to (a named tuple: a
    200,000-partition plan makes 200,000 of them, and a frozen dataclass took 0.4 s)."""

    index: int  # partition index in the cluster
    size: int  # bytes copied to each added replica
    source: int  # the leader the new replicas copy from
    added: tuple[int, ...]  # brokers that receive a copy

    @property
    def brokers(self) -> tuple[int, ...]:
        return (self.source, *self.added) if self.added else ()


@dataclass(frozen=True)
class MoveColumns:
    """Moves as columns, in one order: move k is ``Move(index[k], size[k], source[k], the
    per_move[k] entries of dest from the sum of those before it)``."""

    index: np.ndarray  # partition index per move (int64)
    size: np.ndarray  # bytes per move (int64: kit.validate bounds a size at 2^53)
    source: np.ndarray  # the broker each move copies from (int64)
    per_move: np.ndarray  # brokers each move adds (int64)
    dest: np.ndarray  # the brokers added, move after move (int64)

    @classmethod
    def of(cls, moves: list[Move]) -> MoveColumns:
        """The columns of `moves`, in their order."""
        # The fields are read with the moves in the order they lie in memory (by address: `id`
        # reads no object), then put back in the given order: read in wave order (biggest
        # first), each field took several times as long (the objects lie far apart). Any read
        # order gives the same columns.
        n = len(moves)
        by_address = np.argsort(np.fromiter(map(id, moves), dtype=np.int64, count=n))
        ordered = list(map(moves.__getitem__, by_address.tolist()))
        added = list(map(attrgetter("added"), ordered))
        per_move = np.fromiter(map(len, added), dtype=np.int64, count=n)
        read = cls(np.fromiter(map(attrgetter("index"), ordered), dtype=np.int64, count=n),
                   np.fromiter(map(attrgetter("size"), ordered), dtype=np.int64, count=n),
                   np.fromiter(map(attrgetter("source"), ordered), dtype=np.int64, count=n), per_move,
                   np.fromiter(chain.from_iterable(added), dtype=np.int64, count=int(per_move.sum())))
        rank = np.empty(n, dtype=np.int64)  # move k of `moves` is move rank[k] of `read`
        rank[by_address] = np.arange(n)
        return read.take(rank)

    @property
    def copying(self) -> int:
        """How many of the moves copy data (add a broker)."""
        return int(np.count_nonzero(self.per_move))

    def narrow(self) -> MoveColumns:
        """The same moves with their ids, indices and counts as 32-bit integers (kit.validate
        bounds broker ids and partition numbers there), sizes as they are: what `kit plan`
        sends its second process (15 MB at 1,000,000 partitions instead of 25)."""
        return MoveColumns(self.index.astype(np.int32), self.size, self.source.astype(np.int32),
                           self.per_move.astype(np.int32), self.dest.astype(np.int32))

    def take(self, at: np.ndarray) -> MoveColumns:
        """The moves at positions `at` (an int array), in that order."""
        per_move = self.per_move[at]
        starts = np.cumsum(self.per_move) - self.per_move  # each move's first entry in `dest`
        return MoveColumns(self.index[at], self.size[at], self.source[at],
                           per_move, self.dest[row_entries(starts[at], per_move)])


class Moves(list):
    """A plan's moves, a list of `Move` as `moves_of` gives it, with the same moves as
    `columns` (read-only: the columns are not updated)."""

    def __init__(self, moves: list[Move], columns: MoveColumns):
        super().__init__(moves)
        self.columns = columns


def moves_of(plan: Plan, arrays: PlanArrays | None = None) -> Moves:
    """Every changed partition as a move (`move_columns`), as `Move` tuples and columns."""
    columns = move_columns(plan, arrays)
    return Moves(list(map(tuple.__new__, repeat(Move), zip(columns.index.tolist(), columns.size.tolist(),
                                                            columns.source.tolist(),
                                                            _tuples(columns.per_move, columns.dest)))), columns)


def move_columns(plan: Plan, arrays: PlanArrays | None = None) -> MoveColumns:
    """Every changed partition as a move (order-only changes have no added brokers), in
    partition order; `arrays` is ``PlanArrays(plan)`` when the caller has it.

    Followers copy from the current leader (`source`): its ``leader`` when it is not dead, a
    replica and in sync, else its first in-sync replica that is a replica and not dead, else
    (no live in-sync replica) its preferred one (broker 0 is a real id).
    """
    arrays = arrays or PlanArrays(plan)
    changed = np.flatnonzero(arrays.changed)
    ids, before, after = arrays.ctx.ids, arrays.before, arrays.after
    # The brokers added: the new list's, in its order, that the old one does not name; only
    # the partitions that gain a broker (`PlanArrays.added_dropped`) have some.
    n = len(ids)
    gaining = np.flatnonzero(np.bincount(arrays.added_dropped[0] // n, minlength=len(after.lengths)))
    new_row, new_at = _entries(after, gaining)
    old_row, old_at = _entries(before, gaining)
    added = ~member(new_row * n + after.idx[new_at], old_row * n + before.idx[old_at])
    per_move = np.zeros(len(after.lengths), dtype=np.int64)
    per_move[gaining] = np.bincount(np.searchsorted(gaining, new_row[added]), minlength=len(gaining))
    return MoveColumns(changed, arrays.ctx.sizes[changed], _sources(plan.cluster, changed),
                       per_move[changed], ids[after.idx[new_at[added]]])


def _entries(flat: FlatAssignment, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The replicas of partitions `rows` (ascending): each one's partition and place in `flat.idx`."""
    lengths = flat.lengths[rows]
    return np.repeat(rows, lengths), row_entries(flat.starts[rows], lengths)


def _sources(cluster: Cluster, rows: np.ndarray) -> np.ndarray:
    """`moves_of`'s source of each partition of `rows`: `kit.traffic.leader_of` over the live
    brokers (`kit.traffic.layout`, read once per cluster) where that is the same broker, else by
    the rule itself (`_source`)."""
    live = {b.id for b in cluster.brokers.values() if b.alive}
    lay = layout(cluster, live)
    # leader_of takes a broker for dead when it is not live, the rule when the cluster says it
    # is: the same where every broker named is the cluster's; and a leader that leads no live
    # in-sync replica (none at all, or one in sync but not a replica) is left to the rule.
    same = lay.loaded[rows]
    if not all(b in cluster.brokers for b in lay.ids.tolist()):
        same[:] = False
    source = lay.lead_id[rows]
    other = np.flatnonzero(~same)
    if len(other):
        dead = {b.id for b in cluster.brokers.values() if not b.alive}
        parts = cluster.partitions
        source[other] = [_source(parts[i], dead) for i in rows[other].tolist()]
    return source


def _source(p: Partition, dead: set[int]) -> int:
    """The broker new replicas of `p` copy from (`moves_of`), partition by partition."""
    if p.leader is not None and p.leader not in dead and p.leader in p.replicas and p.leader in p.isr:
        return p.leader
    for b in p.isr:  # the first in-sync replica that is a replica and not dead
        if b not in dead and b in p.replicas:
            return b
    return p.replicas[0]  # no live in-sync replica: the preferred one (broker 0 is a real id)


def _tuples(per_move: np.ndarray, dest: np.ndarray) -> list[tuple[int, ...]]:
    """The `per_move[k]` entries of `dest` from the sum of those before, as one tuple per k,
    made a width at a time (most moves add as many brokers)."""
    out: list[tuple[int, ...]] = [()] * len(per_move)
    starts = np.cumsum(per_move) - per_move
    for width in np.flatnonzero(np.bincount(per_move)).tolist():
        if width:
            rows = np.flatnonzero(per_move == width)
            block = dest[starts[rows][:, None] + np.arange(width)]
            list(map(out.__setitem__, rows.tolist(), map(tuple, block.tolist())))
    return out


__all__ = ["Move", "MoveColumns", "Moves", "moves_of", "move_columns"]
