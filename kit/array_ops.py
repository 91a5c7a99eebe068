"""Integer-array helpers over numpy: membership, distinct values, positions, replica lists
laid out flat, and per-position running sums with a loop's floats.

kit's planner, traffic model, copy physics and review read partitions and brokers as flat
integer arrays (partition indices, broker ids); these are the operations they share, each
giving what numpy's general operation (or a Python loop) gives, faster on such arrays (a table
over a short range of broker ids, a stable sort of nearly sorted keys). Pure: numpy only,
nothing of kit.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from itertools import chain
from operator import add

import numpy as np


def pair_keys(part: np.ndarray, broker: np.ndarray) -> np.ndarray:
    """One int64 per (partition index, broker id): both below 2^31, so keys never collide."""
    return (np.asarray(part, dtype=np.int64) << 32) + np.asarray(broker, dtype=np.int64)


def member(keys: np.ndarray, pool: np.ndarray) -> np.ndarray:
    """Whether each of `keys` is in `pool`: by a table over the pool's range when it is short,
    else by sorting and binary search (numpy's hashed `isin` is several times slower on
    `pair_keys`)."""
    # A stable sort (timsort) of pools that come nearly sorted, as `pair_keys` of rows in
    # order do: 13x faster than the default quicksort on 600,000 replicas, the same array.
    pool = np.sort(pool, kind="stable")
    if not len(pool):
        return np.zeros(len(keys), dtype=bool)
    lo, hi = int(pool[0]), int(pool[-1])
    if hi - lo < len(keys):
        # A pool over a short range (broker ids): a table over it, one lookup per key, beats
        # a binary search per key (600,000 replicas among 150 brokers: 10x).
        table = np.zeros(hi - lo + 1, dtype=bool)
        table[pool - lo] = True
        inside = (keys >= lo) & (keys <= hi)
        return inside & table[np.where(inside, keys - lo, 0)]
    at = np.minimum(np.searchsorted(pool, keys), len(pool) - 1)
    return pool[at] == keys


def dense_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` of integers: the distinct values, sorted,
    and each value's position among them. Over a short range (broker ids) by a table over it,
    20x numpy's sort of 200,000 copies' brokers."""
    values = np.asarray(values, dtype=np.int64)
    table = _presence((values,)) if len(values) else None
    if table is None:
        return np.unique(values, return_inverse=True)
    lo, seen = table
    return np.flatnonzero(seen) + lo, (np.cumsum(seen) - 1)[values - lo]


def _presence(arrays: tuple[np.ndarray, ...]) -> tuple[int, np.ndarray] | None:
    """(lo, seen): which values from lo on the non-empty integer `arrays` hold, as a table over
    their range; None where the range is as wide as the values (a sort is then the cheaper)."""
    lo, hi = min(int(a.min()) for a in arrays), max(int(a.max()) for a in arrays)
    if hi - lo >= sum(map(len, arrays)):
        return None
    seen = np.zeros(hi - lo + 1, dtype=bool)
    for a in arrays:
        seen[a - lo] = True
    return lo, seen


def distinct(*arrays: np.ndarray) -> np.ndarray:
    """The sorted distinct values of integer arrays, ``np.union1d`` of their ``np.unique``:
    over a short range (broker ids) by a table over it, a fifth of the time of sorting
    600,000 replicas' brokers twice (`layout`). kit's rule for an integer array's distinct
    values: a plain ``np.unique`` imports ``numpy.ma`` for its masked-array check (7 CPU ms
    of a small plan), so it is sorted and compared here instead."""
    arrays = tuple(np.asarray(a, dtype=np.int64) for a in arrays if len(a))
    if not arrays:
        return np.empty(0, dtype=np.int64)
    table = _presence(arrays)
    if table is None:
        values = np.sort(np.concatenate(arrays))
        return values[np.concatenate(([True], values[1:] != values[:-1]))]
    lo, seen = table
    return np.flatnonzero(seen) + lo


def appearance_order(pos: np.ndarray, n: int) -> np.ndarray:
    """The positions (0..n-1) that `pos` holds, in the order of their first appearance."""
    first = np.full(n, len(pos), dtype=np.int64)
    np.minimum.at(first, pos, np.arange(len(pos)))  # each position's first entry
    seen = np.flatnonzero(first < len(pos))
    return seen[np.argsort(first[seen])]


@dataclass(frozen=True, eq=False)
class Lists:
    """Replica lists by partition (a plan's targets), flat: read once by the copies, the lower
    bound and the partitions finished at once (15 ms each at a 200,000-partition remove's 88,287).

    Attributes
    ----------
    rows : ndarray
        Each list's partition index, in the dict's order.
    lens : ndarray
        Each list's length.
    row, id : ndarray
        Each entry's list (its index in `rows`) and broker id, list by list in list order.
    """

    rows: np.ndarray
    lens: np.ndarray
    row: np.ndarray
    id: np.ndarray

    @classmethod
    def of(cls, lists: dict[int, list[int]]) -> "Lists":
        """The lists of a dict partition index -> replica list."""
        values = list(lists.values())
        row, ids = flatten(values, len(values))
        return cls(np.fromiter(lists, np.int64, len(values)), np.fromiter(map(len, values), np.int64, len(values)),
                   row, ids)

    def heads(self) -> np.ndarray:
        """Each list's first broker, -1 for an empty list."""
        out = np.full(len(self.rows), -1, dtype=np.int64)
        some = self.lens > 0
        out[some] = self.id[(np.cumsum(self.lens) - self.lens)[some]]
        return out

    def only(self, keep: np.ndarray) -> "Lists":
        """The lists where `keep` (one bool per list) is true, in the same order."""
        entries = np.repeat(keep, self.lens)
        renumber = np.cumsum(keep) - 1
        return Lists(self.rows[keep], self.lens[keep], renumber[self.row[entries]], self.id[entries])


def in_lists(part: np.ndarray, ids: np.ndarray, rows: np.ndarray | None, l_row: np.ndarray, l_id: np.ndarray,
             n: int) -> np.ndarray:
    """Whether each (``part[k]``, ``ids[k]``) is an entry of the lists (``rows[l_row[j]]``,
    ``l_id[j]``; `l_row` ascending, `rows` distinct partition indices below `n`, None: the
    partitions 0..n-1 themselves, as a `Layout`'s lists): `member` of their `pair_keys`, by
    comparing each entry with its partition's list laid out in a grid (a few per partition:
    14 -> 4 ms for the 600,000 replicas of a 200,000-partition remove against 265,000 entries),
    or by `member` when one list is much longer than most."""
    if not len(part):  # nothing asked (a snapshot's leaders, none given): no pass over the lists
        return np.zeros(0, dtype=bool)
    counts = np.bincount(l_row, minlength=n if rows is None else len(rows))
    width = int(counts.max()) if len(counts) else 0
    if not width or len(counts) * width > 4 * len(l_id) + 4096 or \
            (rows is not None and int(rows.min()) < 0):
        return member(pair_keys(part, ids), pair_keys(l_row if rows is None else rows[l_row], l_id))
    absent = min(int(ids.min()), int(l_id.min())) - 1  # in no list, matching no id
    # The k-th entry of every list in row k of the grid (a column per list): compared a row at
    # a time, each a gather over one contiguous row (a comparison of whole rows of lists and
    # its `any` took 9 of 13 ms).
    grid = np.full((width, len(counts)), absent, dtype=np.int64)
    grid[np.arange(len(l_row)) - (np.cumsum(counts) - counts)[l_row], l_row] = l_id
    if rows is None:
        at = part
        listed = np.flatnonzero((part >= 0) & (part < n))
    else:
        row_of = np.full(n, -1, dtype=np.int64)
        row_of[rows] = np.arange(len(rows))
        at = row_of[part]
        listed = np.flatnonzero(at >= 0)
    at, mine = at[listed], ids[listed]
    found = grid[0][at] == mine
    for k in range(1, width):
        found |= grid[k][at] == mine
    out = np.zeros(len(part), dtype=bool)
    out[listed] = found
    return out


def positions(ids: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``np.searchsorted(ids, values)`` for `values` among the sorted `ids`: by a table over the
    ids' range when it is short (broker ids: 7 -> 1 ms for 265,000 values among 150 brokers)."""
    if not len(ids) or not len(values) or int(ids[-1]) - int(ids[0]) > 4 * len(values) + 4096:
        return np.searchsorted(ids, values)
    table = np.zeros(int(ids[-1]) - int(ids[0]) + 1, dtype=np.int64)
    table[ids - ids[0]] = np.arange(len(ids))
    return table[values - ids[0]]


def row_entries(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions of the entries of rows that begin at `starts` and hold `lengths` entries
    each, row after row: rows of a ragged array (values laid end to end) taken in one gather."""
    first = np.cumsum(lengths) - lengths  # each row's first place in the result
    return np.repeat(starts - first, lengths) + np.arange(int(lengths.sum()))


def flatten(lists: list, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(row index, value) of every item of `lists` (sequences of ints), row-major."""
    lens = np.fromiter(map(len, lists), np.int64, n)
    values = np.fromiter(chain.from_iterable(lists), np.int64, int(lens.sum()))
    return np.repeat(np.arange(n, dtype=np.int64), lens), values


def fold_sums(start: list[float], pos: np.ndarray, values: np.ndarray) -> dict[int, float]:
    """Per position k of `pos` (sorted, entries in order within a position), ``start[k]``
    plus its `values` added one at a time: the float a loop of ``+=`` gives (`fold_many` of
    one column of values)."""
    return fold_many([start], pos, [values])[0]


def fold_many(starts: list[list[float]], pos: np.ndarray, columns: list[np.ndarray]) -> list[dict[int, float]]:
    """`fold_sums` of each start and column of values over the same `pos`.

    One running sum per column of a grid (a position's start, then its values, padded with
    -0.0, which adds nothing to any float, -0.0 included), added one row at a time, as the loop
    does (0.12 CPU s -> 0.01 at a 200,000-partition remove's 530,000 values, twice); where each
    value goes in the grid is worked out once for every column. A grid much larger than the
    values (one position holding most of them) is left to `fold_by_loop`."""
    if not len(pos):
        return [{} for _ in columns]
    # `pos` is sorted: its runs are `np.unique`'s keys, first indices and counts, without its sort.
    first = np.flatnonzero(np.concatenate([[True], pos[1:] != pos[:-1]]))
    keys, counts = pos[first], np.diff(np.append(first, len(pos)))
    width = int(counts.max()) + 1
    if len(keys) * width > 4 * len(pos) + 4096:
        return [fold_by_loop(start, keys, first, counts, values) for start, values in zip(starts, columns)]
    # A reduction over the rows of a C-ordered grid adds row after row into the columns, one
    # addition per entry in order (numpy keeps its pairwise summation to the contiguous axis),
    # from -0.0 (numpy starts an addition from 0.0): a running sum's floats without writing its
    # every step (8 -> 3 ms for 530,000 values on 150 positions).
    at = (np.arange(len(pos)) - np.repeat(first, counts) + 1) * len(keys) + np.repeat(np.arange(len(keys)), counts)
    grid = np.empty((width, len(keys)))
    out = []
    for start, values in zip(starts, columns):
        grid.fill(-0.0)
        grid[0] = np.asarray(start, dtype=float)[keys]
        grid.ravel()[at] = values
        out.append(dict(zip(keys.tolist(), np.add.reduce(grid, axis=0, initial=-0.0).tolist())))
    return out


def fold_by_loop(start: list[float], keys: np.ndarray, first: np.ndarray, counts: np.ndarray,
                 values: np.ndarray) -> dict[int, float]:
    """`fold_sums`'s sums, position by position in Python (`keys`, `first`, `counts` as
    ``np.unique`` gives them): the reference the grid is checked against."""
    values = values.tolist()
    return {k: reduce(add, values[a:a + c], start[k])
            for k, a, c in zip(keys.tolist(), first.tolist(), counts.tolist())}


__all__ = ["pair_keys", "member", "dense_codes", "distinct", "appearance_order", "Lists", "in_lists", "positions",
           "row_entries", "flatten", "fold_sums", "fold_many", "fold_by_loop"]
