"""The count balance's choices depend on the cluster only, never on how numpy orders equal values nor on
whether its kernels run compiled."""
from __future__ import annotations

import copy
import random
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kit.model import Broker, Cluster, Partition
from kit.plan.steps import count_balance, count_kernels
from kit.plan.steps.count_balance import balance_counts
from kit.plan.steps.place import place_orphans
from kit.plan.steps.topic_quotas import topic_quotas
from kit.plan.workspace import Workspace


def test_among_equally_uneven_topics_the_highest_numbered_32_are_searched_first():
    # Broker 1 holds two partitions of each of 40 topics, brokers 2 and 3 none: every topic is
    # equally uneven (d = 2), more topics than a pick looks at (32). Which 32 it keeps must be a
    # rule of kit's (the highest topic numbers; then the lowest of them first), not whatever
    # numpy's argpartition (SIMD code on some CPUs) returns among equal keys.
    topics = [f"t{i:02d}" for i in range(40)]
    parts = tuple(Partition(topic=t, partition=n, replicas=(1,), isr=(1,), leader=1) for t in topics for n in (0, 1))
    cluster = Cluster(brokers={b: Broker(id=b) for b in (1, 2, 3)}, partitions=parts)
    ws = Workspace(cluster, targets=[1, 2, 3], selected=range(len(parts)))
    assert balance_counts(ws, "balance", max_moves=1) == 1
    moved = [p for p, reps in enumerate(ws.assign) if reps != [1]]
    assert [(parts[p].topic, ws.assign[p]) for p in moved] == [("t08", [2])]


def _drifted(seed: int) -> Cluster:
    """A small cluster whose replicas sit mostly on its first brokers, in random racks."""
    rng = random.Random(seed)
    ids = list(range(1, rng.randint(5, 13)))
    racks = rng.choice([["a", "b", "c"], ["a", "b"], ["a", "b", None], [None]])
    brokers = {b: Broker(id=b, rack=rng.choice(racks)) for b in ids}
    heavy = ids[:len(ids) // 2 + 1]
    parts = []
    for t in range(rng.randint(1, 8)):
        for n in range(rng.randint(3, 40)):
            rf = rng.randint(1, 3)
            reps = tuple(rng.sample(heavy if rng.random() < 0.7 else ids, rf))
            parts.append(Partition(topic=f"t{t}", partition=n, replicas=reps, isr=reps, leader=reps[0]))
    return Cluster(brokers=brokers, partitions=tuple(parts))


def _balanced(cluster: Cluster, compiled: bool, monkeypatch, how: str):
    """The workspace's state after a count balance run compiled or as plain Python: `how` is
    a rebalance with quotas and spread moves, one without, or placing a dead broker's replicas."""
    monkeypatch.setattr(count_balance, "_PLAIN_MOVES", 0 if compiled else 10 ** 9)
    if compiled:
        count_kernels.preload()  # a cluster this small is balanced as plain Python until numba is loaded
    calls, compile_ = [], count_kernels.compiled
    monkeypatch.setattr(count_kernels, "compiled", lambda: calls.append(1) or compile_())
    ids = sorted(cluster.brokers)
    targets = ids[1:] if how == "place" else ids
    ws = Workspace(cluster, targets=targets, selected=range(len(cluster.partitions)))
    quotas = topic_quotas(ws) if how == "quotas" else None
    if how == "place":
        moves = place_orphans(ws, "placed", allow_rack_violation=True)
    else:
        moves = balance_counts(ws, "balance", quotas=quotas, spread_touched=how == "quotas")
    assert bool(calls) == (compiled and moves > 0), "the kernels ran compiled" if calls else "as plain Python"
    return (moves, ws.assign, list(ws.reasons.items()), ws.count.tolist(), ws.shared.tolist(),
            [[(t, list(ps)) for t, ps in d.items()] for d in ws.on_topic],
            None if quotas is None else [q.tolist() for q in quotas])


@pytest.mark.parametrize("seed", range(16))
def test_the_compiled_kernels_make_the_same_moves_as_plain_python(seed, monkeypatch):
    # Large balances run count_kernels compiled by numba, small ones as plain Python: one
    # source, and numba's integer and array semantics must not make it choose differently.
    cluster = _drifted(seed)
    for how in ("quotas", "plain", "place"):
        assert _balanced(cluster, True, monkeypatch, how) == _balanced(cluster, False, monkeypatch, how), how


@pytest.mark.parametrize("seed", range(6))
def test_the_moves_are_the_same_in_batches_of_any_size(seed, monkeypatch):
    # The compiled kernel chooses the moves in a thread, a batch at a time, while the
    # workspace makes the previous batch (`moves_aside`): where a batch ends must not matter.
    cluster = _drifted(seed)
    want = _balanced(cluster, True, monkeypatch, "quotas")
    monkeypatch.setattr(count_balance, "_LOG_ROWS", 2)  # the fewest a batch may hold (a two-step move)
    assert _balanced(cluster, True, monkeypatch, "quotas") == want


def test_an_error_in_the_kernel_reaches_the_caller_and_its_thread_ends():
    import threading

    state = np.zeros(3, dtype=np.int64)
    calls = []

    def kernel(*args):
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("the second batch")
        log = args[-1]
        log[:2] = [[0, 1, 2], [3, 4, 5]]
        return 2

    seen = []
    with pytest.raises(ValueError, match="the second batch"):
        for batch in count_balance.moves_aside(kernel, (state,), 4):
            seen.append(batch.tolist())
    assert seen == [[[0, 1, 2], [3, 4, 5]]]
    assert not [t for t in threading.enumerate() if t.name == "kit-count-balance"]


def test_tasks_kept_for_an_idle_moment_are_done_while_the_kernel_chooses():
    # `moves_aside` waits for the kernel's thread: meanwhile the caller's thread does the
    # tasks kept (`kit.concurrency.idle`). This kernel chooses only once a task has run.
    from kit.concurrency import idle

    state = np.zeros(3, dtype=np.int64)
    ran = threading.Event()

    def kernel(*args):
        state[2] = 1
        log = args[-1]
        log[0] = [0, 1, 2] if ran.wait(60) else [-1, -1, -1]
        return 1

    with idle.tasks_kept():
        idle.while_waiting(ran.set)
        batches = [b.tolist() for b in count_balance.moves_aside(kernel, (state,), 4)]
    assert batches == [[[0, 1, 2]]]


def test_the_warm_up_runs_the_balance_compiled_so_numba_caches_it(monkeypatch):
    # `make venv` runs scripts/warm_kernels.py so that no test and no `kit plan` compiles the
    # balance (some 40 CPU s, paid by every test process of a fresh clone otherwise). Its
    # cluster is small, so it must load numba first or its balance runs as plain Python.
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "warm_kernels.py"
    spec = importlib.util.spec_from_file_location("warm_kernels", path)
    warm_kernels = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(warm_kernels)
    ran, compile_ = [], count_kernels.compiled

    def spied():
        balance, bucket_orders = compile_()
        return (lambda *args: ran.append(1) or balance(*args)), bucket_orders
    monkeypatch.setattr(count_kernels, "compiled", spied)
    assert warm_kernels.main() == 0
    assert ran, "the warm-up's balance ran as plain Python: numba's cache holds no balance"


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.booleans(), st.booleans(), st.booleans())
def test_a_balance_that_balanced_skips_would_have_made_no_move_and_changed_nothing(seed, own_pool, spread, quotas):
    # `balance_counts` and `place_orphans` build no balance where the counts are even already
    # (`count_balance.balanced`): built and run anyway, it makes no move and changes nothing.
    from conftest import skewed_cluster
    cluster = skewed_cluster(seed, most_brokers=12, rack_choices=[["a", "b", "c"], ["a", "b"], [None], ["a", None]],
                             topics=(1, 6), partitions=(1, 12), most_rf=3)
    ws = Workspace(cluster, sorted(cluster.brokers), range(len(cluster.partitions)))
    balance_counts(ws, "even out")
    if not count_balance.balanced(ws):
        return  # a rack rule kept the counts apart: the balance has work, and runs
    pool = [{t: dict(ps) for t, ps in d.items()} for d in ws.on_topic] if own_pool else None
    before = (copy.deepcopy(ws.assign), ws.count.tolist(), ws.tcount.tolist(), ws.shared.tolist(),
              [[(t, list(ps)) for t, ps in d.items()] for d in (pool or ws.on_topic)], dict(ws.reasons))
    moves = count_balance.CountBalance(ws, "again", pool, spread).run(quotas=topic_quotas(ws) if quotas else None)
    assert moves == 0
    assert (ws.assign, ws.count.tolist(), ws.tcount.tolist(), ws.shared.tolist(),
            [[(t, list(ps)) for t, ps in d.items()] for d in (pool or ws.on_topic)], dict(ws.reasons)) == before


@pytest.mark.parametrize("seed", range(40))
def test_a_placed_pool_balances_as_the_same_pool_of_dicts(seed):
    # `place_orphans` hands its balance the replicas it placed as arrays (`PlacedPool`, built
    # by `place.placed_pool`), not as dicts filled replica by replica: the same pool, so the
    # same moves and the same workspace after them.
    from kit.plan.steps.place import placed_pool

    cluster = _drifted(seed)
    rng = random.Random(seed)
    slots = [(p, b) for p, part in enumerate(cluster.partitions) for b in part.replicas]
    placed = rng.sample(slots, rng.randint(1, len(slots)))  # in the order placed
    states = []
    for as_arrays in (False, True):
        ws = Workspace(cluster, targets=sorted(cluster.brokers), selected=range(len(cluster.partitions)))
        if as_arrays:
            pool = placed_pool(ws, np.array([p for p, _ in placed], dtype=np.int64),
                               np.array([ws.index[b] for _, b in placed], dtype=np.int64))
        else:
            pool = [dict() for _ in ws.ids]
            for p, b in placed:
                pool[ws.index[b]].setdefault(int(ws.topic[p]), {})[p] = None
        moves = count_balance.CountBalance(ws, "placed", pool).run()
        states.append((moves, ws.assign, ws.count.tolist(), ws.shared.tolist(), list(ws.reasons.items()),
                       [[(t, list(ps)) for t, ps in d.items()] for d in ws.on_topic]))
    assert states[0] == states[1]
