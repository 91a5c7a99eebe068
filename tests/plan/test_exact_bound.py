"""The exact refinement asks no flow when the greedy pass already made the fewest copies its
count range allows (`exact_refinement.fewest_copies`): the flow could only tie, and a tie is
not taken, so the plan is the one the flow would have left."""
from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import skewed_cluster
from kit.model import Broker, Cluster, Partition
from kit.plan.steps import exact_refinement
from kit.plan.steps.count_balance import balance_counts, count_range
from kit.plan.steps.place import place_orphans
from kit.plan.workspace import Workspace


def _flows_asked(monkeypatch) -> list[int]:
    """Counts every min-cost flow the exact refinement makes from now on."""
    made = []
    real = exact_refinement.new_min_cost_flow

    def counted():
        made.append(1)
        return real()
    monkeypatch.setattr(exact_refinement, "new_min_cost_flow", counted)
    return made


def _scale_out() -> Cluster:
    """Six full brokers in three racks and three empty ones: the greedy pass fills the new
    brokers with exactly their deficit."""
    brokers = {b: Broker(id=b, rack="abc"[b % 3]) for b in range(1, 10)}
    parts = []
    for t in range(4):
        for n in range(12):
            reps = tuple(1 + (n + k * 2 + t) % 6 for k in range(3))
            reps = reps if len(set(reps)) == 3 else (1 + n % 6, 1 + (n + 1) % 6, 1 + (n + 2) % 6)
            parts.append(Partition(topic=f"t{t}", partition=n, replicas=reps, isr=reps, leader=reps[0]))
    return Cluster(brokers=brokers, partitions=tuple(parts))


def test_no_flow_when_the_greedy_pass_made_the_fewest_copies(monkeypatch):
    cluster = _scale_out()
    ws = Workspace(cluster, targets=sorted(cluster.brokers), selected=range(len(cluster.partitions)))
    balance_counts(ws, "scale-out")
    counts = ws.count[ws.target_idx]
    lo, hi, _ = count_range(ws, counts, int(counts.min()), int(counts.max()))
    held = [sum(b in p.replicas for p in cluster.partitions) for b in sorted(cluster.brokers)]
    assert ws.copies_made() == exact_refinement.fewest_copies(held, 0, lo, hi) > 0
    made = _flows_asked(monkeypatch)
    assert not exact_refinement.exact_rebalance(ws, "scale-out")
    assert made == []
    # Spreading topics may still take a placement with as many copies: the flow is asked.
    assert exact_refinement.exact_rebalance(ws, "scale-out", spread_topics=True) in (True, False)
    assert made == [1]


def test_the_bound_counts_the_deficit_the_surplus_and_the_replicas_off_the_targets():
    assert exact_refinement.fewest_copies([5, 0, 1], 0, 2, 3) == 3  # 2 + 1 arrive
    assert exact_refinement.fewest_copies([5, 2, 2], 0, 2, 3) == 2  # 2 leave the first
    assert exact_refinement.fewest_copies([3, 2, 2], 4, [2, 2, 2], [3, 3, 3]) == 4  # off the targets


def _cluster(seed: int) -> Cluster:
    return skewed_cluster(seed, most_brokers=12, rack_choices=[["a", "b", "c"], ["a", "b"], ["a", "b", None], [None]],
                          topics=(1, 6), partitions=(2, 25), most_rf=3)


def _swap_some(ws: Workspace, seed: int, swaps: int) -> None:
    """Copies the counts do not need: pairs of partitions trade a broker each (every count
    stays), so that the flow has fewer copies to find."""
    rng = random.Random(seed)
    sel = list(ws.selected)
    for _ in range(swaps if len(sel) > 1 else 0):
        p, q = rng.sample(sel, 2)
        a = [b for b in ws.assign[p] if b not in ws.assign[q]]
        b = [x for x in ws.assign[q] if x not in ws.assign[p]]
        if a and b:
            ws.replace_slot(p, ws.assign[p].index(a[0]), b[0], "swap")
            ws.replace_slot(q, ws.assign[q].index(b[0]), a[0], "swap")


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.booleans(), st.sampled_from([0, 0, 3, 10]))
def test_the_plan_is_the_one_the_flow_would_have_left(seed, drop_one, swaps):
    """With and without the bound (`fewest_copies` made to bound nothing), the same replica
    sets, whether the greedy pass made the fewest copies or more (`swaps`); and no placement
    the flow takes has fewer copies than the bound."""
    cluster = _cluster(seed)
    ids = sorted(cluster.brokers)
    targets = ids[:-1] if drop_one and len(ids) > 3 else ids
    results = []
    for bounded in (True, False):
        ws = Workspace(cluster, targets=targets, selected=range(len(cluster.partitions)))
        place_orphans(ws, "broker not in target set", allow_rack_violation=True)
        balance_counts(ws, "rebalance")
        _swap_some(ws, seed, swaps)
        counts = ws.count[ws.target_idx]
        lo, hi, _ = count_range(ws, counts, int(counts.min()), int(counts.max()))
        tset = set(targets)
        held = [sum(b in p.replicas for p in cluster.partitions) for b in ids if b in tset]
        off = sum(b not in tset for p in cluster.partitions for b in p.replicas)
        bound = exact_refinement.fewest_copies(held, off, lo, hi)
        assert ws.copies_made() >= bound
        real = exact_refinement.fewest_copies
        if not bounded:
            exact_refinement.fewest_copies = lambda *a: -1
        try:
            taken = exact_refinement.exact_rebalance(ws, "rebalance")
        finally:
            exact_refinement.fewest_copies = real
        if taken and int(counts.max() - counts.min()) <= 1:  # the range the bound was taken for
            assert ws.copies_made() >= bound
        results.append([list(r) for r in ws.assign])
    assert results[0] == results[1]
