"""Failover: who takes over a broker's leadership when it dies, and how evenly.

When a broker dies, every partition it leads passes to its first follower. A broker's
failover excess (evaluate_plan's definition) is the spread, max - min, of the partitions
its heirs would inherit, less the unavoidable 1 when they cannot split evenly; a plan's
failover excess is its worst broker's. The planner (`kit.plan.steps.leadership`) and the
report (`kit.report.figures`) both compute it here, each from pairs counted its own way.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np


def heirs(x: int, target_idx: np.ndarray, rack: np.ndarray, n_racks: int,
          rackless_to_all: bool = False) -> np.ndarray:
    """Target brokers (indices) that should share broker index `x`'s leadership when it dies.

    The other targets; where the targets have racks, only those in another rack than x,
    unless there are none. A broker without a rack (-1 in `rack`) is in a rack of its own
    for this: its heirs are the targets with a rack. With `rackless_to_all` its heirs are
    every other target instead: the planner's rule, kept apart from evaluate_plan's so that
    plans stay as they are (the two differ only where some targets have no rack).
    """
    others = target_idx[target_idx != x]
    if n_racks and (rack[x] >= 0 or not rackless_to_all):
        cross = others[rack[others] != rack[x]]
        if cross.size:
            return cross
    return others


def excess_by_leader(leader: np.ndarray, follower: np.ndarray, count: np.ndarray, brokers: Iterable[int],
                     heirs_of: Callable[[int], np.ndarray]) -> dict[int, int]:
    """Each broker's failover excess, for the brokers in `brokers` that lead a partition with a follower.

    Parameters
    ----------
    leader, follower, count : ndarray
        (leader, first follower) broker index pairs, sorted by leader, and how many
        partitions each pair leads and follows (all above 0).
    brokers : iterable of int
        Broker indices whose excess is wanted (the targets).
    heirs_of : callable
        Broker index -> indices of its heirs (`heirs`).

    Returns
    -------
    dict of int to int
        Broker index -> spread of its inherited leadership over its heirs, less 1 where
        the partitions it leads cannot split evenly over them. A broker with no heir (a
        single target) is left out.
    """
    brokers = np.asarray(list(brokers), dtype=np.int64)
    starts = np.searchsorted(leader, brokers, "left").tolist()
    ends = np.searchsorted(leader, brokers, "right").tolist()
    # One mask over broker indices, set for one broker's heirs at a time: the planner asks
    # this after every order it tries.
    is_heir = np.zeros(int(max(follower.max(initial=0), brokers.max(initial=0))) + 1, dtype=bool)
    out = {}
    for x, start, end in zip(brokers.tolist(), starts, ends):
        if start == end:
            continue
        h = heirs_of(x)
        if not h.size:
            continue
        led = int(count[start:end].sum())
        if h.max() >= is_heir.size:
            is_heir = np.zeros(int(h.max()) + 1, dtype=bool)
        is_heir[h] = True
        got = count[start:end][is_heir[follower[start:end]]]
        is_heir[h] = False
        hi = int(got.max()) if got.size else 0
        lo = int(got.min()) if got.size == h.size else 0  # an heir that inherits nothing has 0
        out[x] = hi - lo - (led % h.size != 0)
    return out


def worst_excess(by_leader: dict[int, int]) -> int:
    """A plan's failover excess as evaluate_plan reports it: the worst broker's, never below
    0 (a broker whose heirs all inherit alike, while some of its partitions' first
    followers share its rack, scores -1)."""
    return max([0, *by_leader.values()])
