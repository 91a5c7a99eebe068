"""A snapshot's partitions read a column at a time: the common form checked on arrays and
built column-wise, for `kit.formats.cluster_from_snapshot`.

`checked_partitions` accepts exactly what the formats' partition-by-partition reader accepts
and builds the same partitions, or returns None (something to refuse, or an unusual form),
and that reader names the first problem. Each check is a pass in C over a column: checks
per partition were most of the time of loading 200,000 partitions. The replica lists, the
isrs and the leaders are checked as flat arrays of broker ids (`kit.array_ops.Lists`).
Pure: no I/O.
"""
from __future__ import annotations

import itertools
import math
import operator
from collections import deque

import numpy as np
import orjson

from kit import validate
from kit.array_ops import Lists, distinct, in_lists, positions, row_entries
from kit.errors import BadInput
from kit.model import Partition

_TOP = validate.INT32_MAX


def checked_partitions(raw_parts: list) -> tuple[tuple[Partition, ...], set[int], tuple[Lists, Lists] | None] | None:
    """The snapshot's partitions in (topic, partition) order, the brokers their replica lists
    name and, when the snapshot lists them in that order (as kit writes snapshots), their
    replica lists and isrs flat (`kit.model.Cluster.lists`; None otherwise), when every
    partition is of the common form the partition-by-partition reader accepts as it is (plain
    ints, finite figures, no duplicates); None otherwise, for it to say why.
    tests/test_formats.py checks, case by case, that both accept and build the same."""
    n = len(raw_parts)
    if not n:
        return (), set(), None
    if set(map(type, raw_parts)) != {dict}:
        return None
    try:
        topics, nums, reps = (_column(raw_parts, key, True) for key in ("topic", "partition", "replicas"))
    except KeyError:
        return None
    isrs, leaders, sizes, ins, outs = (_column(raw_parts, key, False)
                                       for key in ("isr", "leader", "size", "bytes_in", "bytes_out"))
    numbers = _int_array_within(nums, 0, _TOP)
    if set(map(type, topics)) != {str} or numbers is None:
        return None
    try:
        for t in set(topics):
            validate.topic_name(t, "")
    except BadInput:
        return None
    if set(map(type, reps)) != {list}:
        return None
    text = _digits_only(reps)
    replicas = None if text is None else _id_lists(reps, np.arange(n))
    if replicas is None or not replicas.lens.all() or _repeats_a_broker(replicas):
        return None
    own = _own_isrs(isrs, text, reps, replicas)
    if own is None or not _leaders_fit(leaders, replicas):
        return None
    figures = [_figure_column(*c) for c in ((sizes, int, 0), (ins, float, 0.0), (outs, float, 0.0))]
    if None in figures:
        return None
    order = _order(topics, numbers)
    if order is None:
        return None  # a partition listed twice
    # Only the ids and lengths go on: the lists' rows and bytes are freed before the model is
    # built beside the parsed document (the peak of a load).
    ids, lens, own_ids, own_lens, own_rows = replicas.id, replicas.lens, own.id, own.lens, own.rows
    del replicas, own, text
    return _built(order, topics, numbers, (ids, lens), (own_rows, own_ids, own_lens), leaders, figures)


def _column(rows: list[dict], key: str, required: bool) -> list:
    """`key` of every row, one pass in C: `KeyError` when `required` and a row lacks it, else
    None for it."""
    if required:
        return list(map(operator.itemgetter(key), rows))
    return list(map(dict.get, rows, itertools.repeat(key)))


def _int_array_within(values: list, low: int, high: int) -> np.ndarray | None:
    """The values as an int64 array when every one is an int (not a bool) from `low` to `high`
    (`low` and `high` within int64), None otherwise: the bounds checked on the array, faster
    than Python's min and max over a long list."""
    if values and set(map(type, values)) != {int}:
        return None
    try:
        array = np.fromiter(values, dtype=np.int64, count=len(values))
    except OverflowError:  # beyond int64: beyond `high` too
        return None
    return array if not len(array) or (low <= array.min() and array.max() <= high) else None


def _dumped(lists: list) -> bytes | None:
    """The lists as orjson writes them (an int subclass refused), None for what it cannot write
    (an int beyond 64 bits, an object not of JSON)."""
    try:
        return orjson.dumps(lists, option=orjson.OPT_PASSTHROUGH_SUBCLASS)
    except orjson.JSONEncodeError:
        return None


def _digits_only(lists: list[list]) -> bytes | None:
    """The lists (each a list) as orjson writes them, when every item of every one is a plain
    int from 0 up (a bool, float, negative number, null, string or nested list writes other
    bytes): one pass in C where asking each item's type took three times as long."""
    text = _dumped(lists)
    if text is None or text.translate(None, b"0123456789,[]") or text.count(b"[") != len(lists) + 1:
        return None
    return text


def _id_lists(lists: list[list[int]], rows: np.ndarray) -> Lists | None:
    """The lists of partitions `rows` (of plain ints from 0 up, `_digits_only`) flat, None
    when an id is above int32."""
    lens = np.fromiter(map(len, lists), np.int64, len(lists))
    try:
        ids = np.fromiter(itertools.chain.from_iterable(lists), np.int64, int(lens.sum()))
    except OverflowError:  # 2^63 to 2^64: orjson writes them
        return None
    if len(ids) and ids.max() > _TOP:
        return None
    return Lists(rows, lens, np.repeat(np.arange(len(lists)), lens), ids)


def _repeats_a_broker(replicas: Lists) -> bool:
    """Whether any replica list names a broker twice."""
    kinds = np.flatnonzero(np.bincount(replicas.lens)).tolist()  # not np.unique: see kit.array_ops.distinct
    starts = np.cumsum(replicas.lens) - replicas.lens
    for k in kinds:
        if k > 1:
            # Every list of one length (the usual replication factor): the ids are the rows.
            rows = replicas.id.reshape(-1, k) if len(kinds) == 1 else \
                replicas.id[starts[replicas.lens == k][:, None] + np.arange(k)]
            rows = np.sort(rows, axis=1)
            if (rows[:, 1:] == rows[:, :-1]).any():
                return True
    return False


def _own_isrs(isrs: list, text: bytes, reps: list[list[int]], replicas: Lists) -> Lists | None:
    """The given isrs that differ from their replica lists (those equal to them, and those not
    given, share the replica list's tuple), None when one is not a list of plain ints among its
    partition's replicas (Kafka keeps them there). `text`: the replica lists as `_dumped`."""
    kinds = set(map(type, isrs))
    if not kinds <= {list, type(None)}:
        return None
    given, rows = _given(isrs)
    given_text = _digits_only(given)
    if given_text is None:
        return None
    if given_text == text:
        return Lists(*(np.empty(0, dtype=np.int64),) * 4)  # every isr the same ints as its replica list
    # Plain ints now (a bool or a float equals an int): compared in C, a list stopping at its
    # first difference, and only the lists that differ are read into arrays.
    theirs = reps if len(given) == len(reps) else list(map(reps.__getitem__, rows.tolist()))
    differ = list(itertools.compress(range(len(given)), map(operator.ne, given, theirs)))
    lists = _id_lists(list(map(given.__getitem__, differ)), rows[differ])
    if lists is None:
        return None
    part = lists.rows[lists.row]
    if len(part) and not in_lists(part, lists.id, None, replicas.row, replicas.id, len(isrs)).all():
        return None
    return lists


def _leaders_fit(leaders: list, replicas: Lists) -> bool:
    """Whether every given leader is a plain int from -1 (Kafka's no leader) to int32, and one
    of its partition's replicas unless -1."""
    given, rows = _given(leaders)
    values = _int_array_within(given, -1, _TOP)
    if values is None:
        return False
    led = values != -1
    return bool(in_lists(rows[led], values[led], None, replicas.row, replicas.id, len(leaders)).all())


def _given(column: list) -> tuple[list, np.ndarray]:
    """The column's non-null values and their rows (the column itself when none is null)."""
    if None not in column:
        return column, np.arange(len(column))
    if column.count(None) == len(column):  # a field no partition gives
        return [], np.empty(0, dtype=np.int64)
    rows = np.flatnonzero(np.fromiter(map(operator.is_not, column, itertools.repeat(None)), bool, len(column)))
    return [v for v in column if v is not None], rows


def _figure_column(column: list, kind: type, default: float) -> list | None:
    """A size or rate column as the model keeps it: `kind`, `default` for null, each value a new
    object (see `_built`); None when one is not a finite int or float from 0 to
    `validate.MAX_BYTES`. A column of `kind` alone (most snapshots) is read into an array once."""
    kinds = set(map(type, column))
    dtype = np.int64 if kind is int else np.float64
    if kinds == {kind}:
        try:
            array = np.fromiter(column, dtype=dtype, count=len(column))
        except OverflowError:  # beyond int64
            return None
        if not (np.isfinite(array).all() and 0 <= array.min() and array.max() <= validate.MAX_BYTES):
            return None
        return array.tolist()
    given = _given(column)[0]
    if not kinds - {type(None)} <= {int, float}:
        return None
    if not (all(map(math.isfinite, [v for v in given if type(v) is float])) and 0 <= min(given, default=0)
            and max(given, default=0) <= validate.MAX_BYTES):
        return None
    filled = [default if v is None else kind(v) for v in column]
    return np.fromiter(filled, dtype=dtype, count=len(filled)).tolist()


def _order(topics: list[str], numbers: np.ndarray) -> range | list[int] | None:
    """The positions of the partitions in (topic, partition) order, None when one is listed
    twice: a range when they are in order already, as kit writes snapshots."""
    n = len(topics)
    if all(map(operator.le, topics, itertools.islice(topics, 1, None))):
        # Topics in order: numbers must rise within each topic (compared as arrays, not pairs).
        same = np.fromiter(map(operator.eq, topics, itertools.islice(topics, 1, None)), dtype=bool, count=n - 1)
        if (np.diff(numbers)[same] > 0).all():
            return range(n)
    keys = list(zip(topics, numbers.tolist()))
    order = sorted(range(n), key=keys.__getitem__)
    if any(keys[a] == keys[b] for a, b in zip(order, order[1:])):
        return None
    return order


def _built(order, topics: list[str], numbers: np.ndarray, replicas: tuple[np.ndarray, np.ndarray],
           own: tuple[np.ndarray, np.ndarray, np.ndarray], leaders: list,
           figures: list[list]) -> tuple[tuple[Partition, ...], set[int], tuple[Lists, Lists] | None]:
    """The partitions `checked_partitions` checked, in `order`, the brokers their replica
    lists name and, where `order` is the snapshot's own, the replica lists and isrs flat
    (`_flat_lists`): the defaults and types the partition-by-partition reader gives, each
    column made in one pass in C. `replicas`: every list's ids and each one's length; `own`:
    the rows, ids and lengths of the isrs that differ from their replica lists."""
    # The parser makes a new object for every broker id and topic name it reads; the model
    # keeps one per broker and one per topic (at 1,000,000 partitions about 4 million ints
    # and a million strings fewer, ~230 MiB). Every object the model keeps is made anew, none
    # is the parser's: one kept object holds its whole arena of the freed document (1 MiB of
    # Python's allocator), and a topic's first name every 200 partitions held nearly all of
    # them (1,000,000 partitions: 989 arenas for 442 MB of live objects).
    (rep_ids, rep_lens), (own_rows, own_ids, own_lens) = replicas, own
    ids = distinct(rep_ids)
    brokers = np.array(ids.tolist(), dtype=object)  # one new int per broker, held by reference
    names = list(dict.fromkeys(topics))
    topics = list(map(dict(zip(names, (t.encode().decode() for t in names))).__getitem__, topics))
    nums = numbers.tolist()
    reps = _cut(brokers[positions(ids, rep_ids)].tolist(), rep_lens)
    isrs = reps.copy()  # an isr equal to its replica list (or none given: all in sync) shares its tuple
    own_isrs = _cut(brokers[positions(ids, own_ids)].tolist(), own_lens)
    deque(map(isrs.__setitem__, own_rows.tolist(), own_isrs), maxlen=0)
    if leaders.count(None) != len(leaders):  # (none given: the column of None as it is)
        leaders = list(map(dict(zip(ids.tolist(), brokers.tolist())).get, leaders, leaders))  # -1, None as they are
    columns = [topics, nums, reps, isrs, *figures, leaders]
    if isinstance(order, range):
        flat = _flat_lists(rep_ids, rep_lens, own_rows, own_ids, own_lens)
    else:
        flat = None
        columns = [list(map(column.__getitem__, order)) for column in columns]
    return tuple(Partition.many(*columns)), set(brokers.tolist()), flat


def _flat_lists(rep_ids: np.ndarray, rep_lens: np.ndarray, own_rows: np.ndarray, own_ids: np.ndarray,
                own_lens: np.ndarray) -> tuple[Lists, Lists]:
    """Every partition's replica list and isr as `Lists` (rows: the partitions in order): the
    isrs are the replica lists but in `own_rows`, which hold their own."""
    n = len(rep_lens)
    rows = np.arange(n, dtype=np.int64)
    replicas = _read_only(Lists(rows, rep_lens, np.repeat(rows, rep_lens), rep_ids))
    if not len(own_rows):
        return replicas, replicas
    isr_lens = rep_lens.copy()
    isr_lens[own_rows] = own_lens
    isr_ids = np.empty(int(isr_lens.sum()), dtype=np.int64)
    at, start = np.cumsum(isr_lens) - isr_lens, np.cumsum(rep_lens) - rep_lens
    same = np.ones(n, dtype=bool)
    same[own_rows] = False
    same = np.flatnonzero(same)
    isr_ids[row_entries(at[same], rep_lens[same])] = rep_ids[row_entries(start[same], rep_lens[same])]
    isr_ids[row_entries(at[own_rows], own_lens)] = own_ids
    return replicas, _read_only(Lists(rows, isr_lens, np.repeat(rows, isr_lens), isr_ids))


def _read_only(lists: Lists) -> Lists:
    """`lists` with its arrays made read-only: the cluster shares them with every reader."""
    for array in (lists.rows, lists.lens, lists.row, lists.id):
        array.flags.writeable = False
    return lists


def _cut(items: list, lens: np.ndarray) -> list[tuple]:
    """`items` cut into tuples of `lens` items each, in order: by `zip` when all are of one
    length (a cluster's replication factor), else a length at a time."""
    kinds = np.flatnonzero(np.bincount(lens)).tolist()
    if len(kinds) == 1:
        return list(zip(*[iter(items)] * kinds[0])) if kinds[0] else [()] * len(lens)
    out = [()] * len(lens)
    array = np.empty(len(items), dtype=object)
    array[:] = items
    starts = np.cumsum(lens) - lens
    for k in kinds:
        if k:
            rows = np.flatnonzero(lens == k)
            cut = array[(starts[rows][:, None] + np.arange(k)).ravel()].tolist()
            deque(map(out.__setitem__, rows.tolist(), zip(*[iter(cut)] * k)), maxlen=0)
    return out


__all__ = ["checked_partitions"]
