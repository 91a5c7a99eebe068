"""A cluster and its assignments as numpy arrays, for the plan-quality figures.

An assignment becomes one flat array of dense broker indices plus the length of each
replica list; every per-partition figure (kit.report.figures) is then a vectorised pass
over the partitions that share a replication factor. Pure: no I/O.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property
from operator import attrgetter

import numpy as np

from kit.array_ops import distinct
from kit.model import Cluster
from kit.traffic import replica_columns

__all__ = ["FigureContext", "FlatAssignment", "context"]

# Broker ids spanning less than this get a dense lookup table (8 bytes per id in the span).
LOOKUP_SPAN_MAX = 1 << 20


@dataclass
class FlatAssignment:
    """One assignment as arrays over dense broker indices."""

    lengths: np.ndarray  # replica-list length per partition
    starts: np.ndarray  # offset of each list in `idx`
    idx: np.ndarray  # dense broker index of every replica, list after list
    groups: dict[int, tuple[np.ndarray, np.ndarray]]  # length -> (rows, matrix rows x length)

    @cached_property
    def part_of(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.lengths)), self.lengths)


@dataclass
class FigureContext:
    """What the figures need to know about the cluster and the target brokers (`context`)."""

    cluster: Cluster
    ids: np.ndarray  # sorted broker ids; position = dense index
    target_set: set[int]
    tidx: np.ndarray  # dense indices of the targets, in id order
    is_target: np.ndarray
    known: np.ndarray  # registered in the snapshot (evaluate_plan's "brokers")
    rack: np.ndarray  # rack code per broker, -1 for none
    n_racks: int
    sizes: np.ndarray  # bytes per partition
    topic: np.ndarray  # topic code per partition
    n_topics: int
    storage_free: list[int] | None  # per target, when every target reports it
    snapshot: FlatAssignment  # the cluster's own assignment (storage "before" is measured on it)


def _flatten_ids(assignment) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter(map(len, assignment), dtype=np.int64, count=len(assignment))
    flat = np.fromiter(itertools.chain.from_iterable(assignment), dtype=np.int64, count=int(lengths.sum()))
    return lengths, flat


def _flat(lengths: np.ndarray, idx: np.ndarray) -> FlatAssignment:
    starts = np.zeros(len(lengths), dtype=np.int64)
    if len(lengths) > 1:
        np.cumsum(lengths[:-1], out=starts[1:])
    groups = {}
    for n in np.flatnonzero(np.bincount(lengths)).tolist():  # the lengths there are (np.unique's 7x)
        if n == 0:
            continue
        rows = np.flatnonzero(lengths == n)
        groups[n] = (rows, idx[starts[rows][:, None] + np.arange(n)])
    return FlatAssignment(lengths, starts, idx, groups)


def _dense_ids(base: np.ndarray, flats: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Sorted ids of every broker named anywhere, and each array renumbered densely."""
    # Plans may name brokers the cluster has never heard of; they get indices too.
    every = [base] + [f for f in flats if len(f)]
    lo = min(int(a.min()) for a in every)
    hi = max(int(a.max()) for a in every)
    if hi - lo < LOOKUP_SPAN_MAX:
        # Broker ids are usually a compact range: a table beats sorting and searching.
        seen = np.zeros(hi - lo + 1, dtype=bool)
        for a in every:
            seen[a - lo] = True
        lookup = np.cumsum(seen) - 1
        return np.flatnonzero(seen) + lo, [lookup[f - lo] for f in flats]
    ids = distinct(*every)
    return ids, [np.searchsorted(ids, f) for f in flats]


def context(cluster: Cluster, targets, assignments) -> tuple[FigureContext, list[FlatAssignment]]:
    """Number every broker densely and turn the assignments into arrays.

    Parameters
    ----------
    cluster : Cluster
        The cluster; its own assignment is flattened too (``FigureContext.snapshot``).
    targets : iterable of int
        The target broker ids (at least one).
    assignments : list
        Replica lists per partition, aligned with ``cluster.partitions``; None for the
        cluster's own.

    Returns
    -------
    tuple
        The context and one `FlatAssignment` per assignment.
    """
    target_set = {int(t) for t in targets}
    if not target_set:
        raise ValueError("figures need at least one target broker")
    parts = cluster.partitions
    for a in assignments:
        if a is not None and len(a) != len(parts):
            raise ValueError(f"assignment has {len(a)} replica lists for {len(parts)} partitions")
    # None stands for the cluster's own assignment, which is flattened once anyway (once per
    # cluster: kit.traffic.replica_columns).
    replicas = replica_columns(cluster)
    raw = [(np.bincount(replicas.part, minlength=len(parts)), replicas.id)]
    raw += [raw[0] if a is None else _flatten_ids(a) for a in assignments]
    base = np.fromiter(itertools.chain(cluster.brokers, target_set), dtype=np.int64)
    ids, dense = _dense_ids(base, [flat for _, flat in raw])
    own = _flat(raw[0][0], dense[0])
    flats = [own] + [own if a is None else _flat(r[0], d) for a, r, d in zip(assignments, raw[1:], dense[1:])]

    id_list = ids.tolist()
    is_target = np.isin(ids, np.fromiter(target_set, dtype=np.int64))
    brokers = cluster.brokers
    known = np.array([b in brokers and brokers[b].known for b in id_list], dtype=bool)
    rack_names = [brokers[b].rack if b in brokers else None for b in id_list]
    codes: dict[str, int] = {}
    rack = np.array([-1 if r is None else codes.setdefault(r, len(codes)) for r in rack_names], dtype=np.int64)
    n_racks = len({r for r, t in zip(rack_names, is_target.tolist()) if t and r is not None})

    names = list(map(attrgetter("topic"), parts))
    tcodes = {t: i for i, t in enumerate(dict.fromkeys(names))}
    topic = np.fromiter(map(tcodes.__getitem__, names), dtype=np.int64, count=len(parts))
    sizes = np.fromiter(map(attrgetter("size"), parts), dtype=np.int64, count=len(parts))

    tidx = np.flatnonzero(is_target)
    free = [brokers[b].storage_free if b in brokers else None for b in ids[tidx].tolist()]
    ctx = FigureContext(
        cluster=cluster, ids=ids, target_set=target_set, tidx=tidx, is_target=is_target, known=known,
        rack=rack, n_racks=n_racks, sizes=sizes, topic=topic, n_topics=len(tcodes),
        storage_free=None if any(f is None for f in free) else free, snapshot=flats[0],
    )
    return ctx, flats[1:]
