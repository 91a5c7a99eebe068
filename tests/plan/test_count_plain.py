"""The count balance written for CPython (`count_plain`) makes the moves the reference kernel
(`count_kernels.balance`, the source numba compiles) makes, and leaves its arrays as the kernel
does, on any workspace; small clusters balance through it alone."""
from __future__ import annotations

import copy
import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import skewed_cluster
from kit import jit
from kit.model import Cluster
from kit.plan.steps import count_balance, count_kernels, count_pick, count_plain
from kit.plan.steps.count_balance import CountBalance, balance_counts
from kit.plan.steps.topic_quotas import topic_quotas
from kit.plan.workspace import Workspace


def _cluster(seed: int) -> Cluster:
    """A small cluster, its replicas mostly on its first brokers, in random racks, RF 1 to 4
    (so sets of several sizes, padded in the kernels' arrays)."""
    return skewed_cluster(seed, most_brokers=14, rack_choices=[["a", "b", "c"], ["a", "b"], ["a", "b", None], [None],
                                                             ["a", "b", "c", "d"]],
                          topics=(1, 40), partitions=(1, 30), most_rf=4)


def _pool(ws: Workspace, seed: int):
    """Some of the workspace's movable replicas, as a pool of the balance's own (two-step moves
    allowed)."""
    rng = random.Random(seed)
    pool = [{t: {p: None for p in parts if rng.random() < 0.6} for t, parts in by_topic.items()}
            for by_topic in ws.on_topic]
    return [{t: parts for t, parts in by_topic.items() if parts} for by_topic in pool]


def _reference(args: tuple, rows: int):
    """`count_kernels.balance` run as plain Python (not compiled) over `args`' arrays: its moves
    with a log of `rows` (-1: called again until it is done, as `CountBalance.run` does)."""
    state, moves = args[-1], []
    while True:
        log = np.empty((rows if rows >= 0 else 64, 3), dtype=np.int64)
        moves += [tuple(m) for m in log[:count_kernels.balance(*args, log)].tolist()]
        if rows >= 0 or state[2]:
            return moves


def _arrays(args: tuple) -> list:
    return [np.asarray(a).tolist() for group in args[5:10] for a in group] + [args[10].tolist()]


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.booleans(), st.booleans(), st.booleans(),
       st.sampled_from([(24, 8, 16), (12, 4, 8), (2, 1, 2), (1, 1, 1)]), st.integers(-1, 5), st.integers(-1, 60),
       st.sampled_from([-1, -1, 0, 1, 2, 3, 7]))
def test_the_cpython_balance_makes_the_reference_kernels_moves_and_leaves_its_arrays(
        seed, quotas, spread, own_pool, scan, floor, max_moves, rows):
    cluster = _cluster(seed)
    ws = Workspace(cluster, targets=sorted(cluster.brokers), selected=range(len(cluster.partitions)))
    if ws.target_idx.size < 2:
        return
    cb = CountBalance(ws, "balance", _pool(ws, seed) if own_pool else None, spread)
    cb.scan = scan
    if quotas:
        cb.quotas = cb.quota_arrays(topic_quotas(ws))
    # The degree floor as drawn (-1: the workspace's own), so that moves losing peers are weighed.
    band = cb.band if floor < 0 else (cb.band[0], cb.band[1], floor)
    args = (max_moves, cb.own_pool, spread, scan, band, cb.lists, cb.counts, cb.quotas, cb.peers, cb.targets,
            np.zeros(3, dtype=np.int64))
    ref = copy.deepcopy(args)
    want = _reference(ref, rows)
    got, orders = count_plain.balance(*args, rows=rows)
    assert got == want
    assert _arrays(args) == _arrays(ref)
    assert [o.tolist() for o in orders] == [o.tolist() for o in count_kernels.bucket_orders(ref[5])]


def test_a_small_cluster_balances_through_the_cpython_balance_alone(monkeypatch):
    # Neither the array kernel's search (`count_pick`) nor numba: `count_plain` makes every move.
    monkeypatch.setattr(jit, "numba_loaded", lambda: False)

    def other(*args):
        raise AssertionError("the small balance ran another kernel than count_plain's")

    monkeypatch.setattr(count_pick, "balance", other)
    monkeypatch.setattr(count_kernels, "compiled", other)
    ran = []
    plain = count_plain.balance
    monkeypatch.setattr(count_plain, "balance", lambda *args: ran.append(1) or plain(*args))
    cluster = _cluster(3)
    ws = Workspace(cluster, targets=sorted(cluster.brokers), selected=range(len(cluster.partitions)))
    assert balance_counts(ws, "balance") > 0
    assert ran
    assert count_balance.SMALL >= len(cluster.partitions)
