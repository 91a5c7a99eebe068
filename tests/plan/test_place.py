"""`place_orphans` keeps its incremental choice equal to the one `best_broker` and
`Workspace.replace_slot` make replica by replica: same brokers, same order, same counters."""
from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kit.errors import Unsafe
from kit.model import Broker, Cluster, Partition
from kit.plan.steps.count_balance import balance_counts
from kit.plan.steps.place import best_broker, place_orphans
from kit.plan.workspace import Workspace


def _place_one_by_one(ws: Workspace, reason: str, allow: bool = False) -> int:
    """place_orphans as it was written before it kept its keys in a heap: the reference."""
    slots = ws.orphan_slots()
    by_part: dict[int, list[int]] = {}
    for p, pos in slots:
        by_part.setdefault(p, []).append(pos)
    for p, positions in by_part.items():
        reps = ws.assign[p]
        leaving = {reps[pos] for pos in positions}
        for pos in positions:
            members = [b for b in ws.assign[p] if b not in leaving]
            new = best_broker(ws, p, members, len(reps))
            if new is None:
                cand = [i for i in np.flatnonzero(ws.is_target) if ws.ids[i] not in members]
                if not cand:
                    raise Unsafe("no target")
                new = ws.ids[min(cand, key=lambda i: ws.count[i])]
                if not allow:
                    raise Unsafe("rack")
                ws.warnings.append(f"{ws.cluster.partitions[p].name}: no rack-safe broker for a replica; "
                                   f"placed on {new}")
            leaving.discard(reps[pos])
            ws.replace_slot(p, pos, new, reason)
    if slots:
        pool = [dict() for _ in ws.ids]
        for p, pos in slots:
            pool[ws.index[ws.assign[p][pos]]].setdefault(int(ws.topic[p]), {})[p] = None
        balance_counts(ws, reason, pool=pool)
    return len(slots)


def _state(ws: Workspace):
    return (ws.assign, ws.count.tolist(), ws.tcount.tolist(), ws.shared.tolist(),
            [[(t, list(ps)) for t, ps in d.items()] for d in ws.on_topic], list(ws.reasons.items()),
            ws.warnings)


def _cluster(rng: random.Random, topics: list[str], parts_n: int) -> tuple[Cluster, list[int]]:
    ids = rng.sample(range(1, 60), rng.randint(3, 10))
    racks = rng.choice([["a", "b", "c"], ["a", "b"], ["a", "b", None], [None]])
    brokers = {b: Broker(id=b, rack=rng.choice(racks)) for b in ids}
    parts = []
    for n in range(parts_n):
        reps = rng.sample(ids, rng.randint(1, min(3, len(ids))))
        if rng.random() < 0.05:
            reps.append(reps[0])  # a broker listed twice: counted as replace_slot counts it
        parts.append(Partition(rng.choice(topics), n, tuple(reps), tuple(reps)))
    return Cluster(brokers=brokers, partitions=tuple(parts)), ids


@pytest.mark.parametrize("seed", range(60))
def test_place_orphans_chooses_as_best_broker_one_replica_at_a_time(seed):
    # Topics interleaved (the heap is rebuilt), rack rules that leave no safe broker, a
    # partial selection, targets that drop from one to most brokers.
    rng = random.Random(seed)
    c, ids = _cluster(rng, ["z", "m", "a.b", "k"], rng.randint(1, 80))
    targets = rng.sample(ids, rng.randint(max(1, len(ids) - 3), len(ids)))
    selected = [i for i in range(len(c.partitions)) if rng.random() < 0.8]
    allow = rng.random() < 0.7
    results = []
    for place in (place_orphans, _place_one_by_one):
        ws = Workspace(c, targets, selected)
        try:
            results.append((place(ws, "r", allow), _state(ws)))
        except Unsafe:
            results.append(("unsafe", _state(ws)))
    assert results[0] == results[1]


def test_place_orphans_matches_where_a_topic_count_outweighs_a_replica_count():
    # Past n*64 replicas of one topic on a broker the key is no longer (count, topic count):
    # the heap must follow the key itself.
    rng = random.Random(5)
    brokers = {b: Broker(id=b, rack=None) for b in (1, 2, 3, 4)}
    parts = [Partition("big", n, (rng.choice([1, 2, 3]), 4), (4,)) for n in range(900)]
    parts += [Partition("small", n, (rng.choice([1, 2]), 4), (4,)) for n in range(300)]
    c = Cluster(brokers=brokers, partitions=tuple(parts))
    states = []
    for place in (place_orphans, _place_one_by_one):
        ws = Workspace(c, [1, 2, 3], range(len(parts)))
        states.append((place(ws, "r"), _state(ws)))
    assert states[0] == states[1]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.integers(1, 60), st.sampled_from([1, 3, 1000]), st.booleans())
def test_a_batch_of_moves_leaves_the_workspace_as_replace_slot_move_by_move(seed, n_moves, batch, as_array):
    # `replace_slots` (the count balance's moves, in batches: a list of rows, or the kernel's
    # log as an int array) keeps the lists, buckets and reasons in the calls' order and the
    # counters from the whole batch; it must end where `replace_slot` one move at a time does.
    rng = random.Random(seed)
    cluster, ids = _cluster(rng, [f"t{i}" for i in range(rng.randint(1, 4))], rng.randint(1, 30))
    selected = sorted(rng.sample(range(len(cluster.partitions)), rng.randint(1, len(cluster.partitions))))
    one, batched = Workspace(cluster, ids, selected), Workspace(cluster, ids, selected)
    moves = []
    for _ in range(n_moves):
        p = rng.randrange(len(cluster.partitions))
        free = [b for b in ids if b not in one.assign[p]]
        if not free:
            continue
        old, new = rng.choice(one.assign[p]), rng.choice(free)
        one.replace_slot(p, one.assign[p].index(old), new, "one")
        moves.append([p, one.index[old], one.index[new]])
    for i in range(0, len(moves), batch):
        rows = moves[i:i + batch]
        batched.replace_slots(np.array(rows, dtype=np.int64).reshape(-1, 3) if as_array else rows, "one")
    assert _state(batched) == _state(one)
