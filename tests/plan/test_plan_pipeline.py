"""The planner's shared pieces: the pipeline's order, the objectives, the rack rule and the
failover figure that the planner, the report and the doctor all use."""
from __future__ import annotations

import importlib
import pkgutil
import random
from operator import attrgetter
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kit.model import Broker, Cluster, Partition
from kit.plan.failover import excess_by_leader, heirs, worst_excess
import kit.plan
from kit.plan import pipeline
from kit.plan.objectives import (COPIES, COUNT_SPREAD, FAILOVER_EXCESS, LEADER_SPREAD, LEADER_TARGETS, OBJECTIVES,
                                 RACK_RULE, LeaderFigures, Ranking, allowance_key)
from kit.plan.pipeline import STAGES, Stages, run_stages
from kit.plan.racks import may_join, racks_needed, set_ok, spans
from kit.plan.steps import leadership, pair_balance, spare_copies
from kit.plan.steps.leadership import balance_leadership
from kit.plan.steps.leadership_figures import leader_figures
from kit.plan.workspace import Workspace
from kit.report.figures import assignment_figures


def test_the_stages_run_in_pipeline_order_and_only_those_named():
    assert STAGES == ("place", "balance", "exact_refinement", "leadership", "spare_copies", "finish")
    assert Stages().leadership is balance_leadership
    ran = []
    stages = Stages(spare_copies=lambda ws: ran.append("spare"), place=lambda ws: ran.append("place"),
                    leadership=None, exact_refinement=lambda ws: ran.append("exact"))
    assert run_stages("ws", stages) == "ws"
    assert ran == ["place", "exact", "spare"]


def test_objectives_by_priority_and_the_leadership_targets():
    names = [o.name for o in OBJECTIVES]
    assert names.index("rack rule") < names.index("replica count spread") < names.index("replica additions")
    assert names.index("replica additions") < names.index("leader count spread") < names.index("topic leader excess")
    assert names.index("topic leader excess") < names.index("failover excess") < names.index("partitions changed")
    assert LEADER_TARGETS == (1, 1, 2)
    figs = LeaderFigures(3, 1, 5)
    assert figs.shortfall() == (2, 0, 3) and not figs.met()
    key = leadership.RANKING.key
    assert key(None, figs) == (2, 0, 3, 3, 1, 5)  # the shortfalls in order, then the figures
    assert figs.missed() == "leader count spread 3, failover excess 5"
    assert LeaderFigures(1, 0, -1).met() and key(None, LeaderFigures(1, 0, -1)) < key(None, LeaderFigures(1, 0, 0))
    assert allowance_key(figs, 7) == (2, 0, 3, 7)


def _standing(count_spread: int, copies: int, *figs: int) -> tuple[SimpleNamespace, LeaderFigures]:
    """What a ranking measures, without a workspace: (ws, figs) for `Ranking.key`."""
    return SimpleNamespace(count_spread=lambda: count_spread, copies_made=lambda: copies), LeaderFigures(*figs)


def _swapped(a, b) -> tuple:
    """The objectives table with `a` and `b` swapped."""
    table = list(OBJECTIVES)
    i, j = table.index(a), table.index(b)
    table[i], table[j] = b, a
    return tuple(table)


def _under(ranking: Ranking, table: tuple) -> Ranking:
    """The same objectives ranked by another table (ties left out)."""
    return Ranking(*sorted(ranking.objectives, key=table.index), table=table)


def _rankings() -> dict[str, Ranking]:
    """Every `Ranking` a kit.plan module declares, by module."""
    found = {}
    for info in pkgutil.walk_packages(kit.plan.__path__, "kit.plan."):
        module = importlib.import_module(info.name)
        found.update({info.name: v for v in vars(module).values() if isinstance(v, Ranking)})
    return found


def test_every_stage_ranks_by_the_objectives_table_in_its_order():
    rankings = _rankings()
    assert {pipeline.RANKING, leadership.RANKING, pair_balance.RANKING, spare_copies.RANKING} <= set(rankings.values())
    for name, ranking in rankings.items():
        at = [OBJECTIVES.index(o) for o in ranking.objectives]
        assert at == sorted(at) and len(set(at)) == len(at), name
    # The key, built from the table: count spread (a group of one: its shortfall, then its
    # value), copies, then the leadership group's shortfalls before its figures.
    ws, figs = _standing(2, 7, 3, 1, 5)
    assert pipeline.RANKING.key(ws, figs) == (1, 2, 7, 2, 0, 3, 3, 1, 5)
    assert pair_balance.RANKING.key(ws, figs) == (1, 2, 2, 0, 3, 3, 1, 5)
    # A count spread of 0 ranks before 1 even at more copies: its group is itself alone.
    assert pipeline.RANKING.key(*_standing(0, 9, 0, 0, 0)) < pipeline.RANKING.key(*_standing(1, 8, 0, 0, 0))
    with pytest.raises(ValueError, match="order"):
        Ranking(LEADER_SPREAD, COUNT_SPREAD)
    with pytest.raises(ValueError, match="not measured"):
        Ranking(RACK_RULE, COUNT_SPREAD)


@pytest.mark.parametrize("stage, swap, better, worse", [
    # Copies before leader spread: the copies decide; swapped, leader spread (now grouped
    # with count spread) does.
    (pipeline, (COPIES, LEADER_SPREAD), _standing(1, 10, 1, 0, 2), _standing(1, 11, 0, 0, 2)),
    # Leader spread's shortfall before failover's; swapped, failover's first.
    (leadership, (LEADER_SPREAD, FAILOVER_EXCESS), _standing(0, 0, 1, 0, 3), _standing(0, 0, 2, 0, 2)),
    (spare_copies, (LEADER_SPREAD, FAILOVER_EXCESS), _standing(0, 0, 1, 0, 3), _standing(0, 0, 2, 0, 2)),
    # Copies are not pair_balance's to rank, but where they stand in the table is: swapped with
    # count spread, count spread joins the leadership group and its shortfalls come first.
    (pair_balance, (COUNT_SPREAD, COPIES), _standing(0, 0, 2, 0, 2), _standing(1, 0, 1, 0, 2)),
])
def test_swapping_two_objectives_in_the_table_changes_what_a_stage_prefers(stage, swap, better, worse):
    plain = _under(stage.RANKING, OBJECTIVES)
    assert plain.key(*better) < plain.key(*worse)
    swapped = _under(stage.RANKING, _swapped(*swap))
    assert swapped.key(*worse) < swapped.key(*better)


def test_the_pipelines_rank_is_its_ranking_over_the_table(monkeypatch):
    c = _cluster(["a", "b", "c", "a"], [[1, 2, 3], [1, 2, 3], [1, 3, 2], [4, 2, 3]])
    ws = Workspace(c, [1, 2, 3, 4], range(4))
    ws.replace_slot(0, 0, 4, "test")  # a copy: broker 4 leads partition 0 now
    figs = leader_figures(ws, ws.assign)
    assert pipeline.rank(ws) == pipeline.RANKING.key(ws, figs)
    swapped = _under(pipeline.RANKING, _swapped(COPIES, FAILOVER_EXCESS))
    assert swapped.key(ws, figs) != pipeline.rank(ws)
    monkeypatch.setattr(pipeline, "RANKING", swapped)
    assert pipeline.rank(ws) == swapped.key(ws, figs)


def test_the_rack_rule():
    assert racks_needed(3, 0) == 0 and racks_needed(3, 2) == 2 and racks_needed(2, 3) == 2
    assert racks_needed(3, 3, min_rack_ids=2) == 2
    assert may_join(None, ["a", "a"], 3)  # no rack: always
    assert may_join("b", ["a"], 2) and not may_join("a", ["a"], 2)
    assert may_join("a", ["a", "b"], 2)  # the others already span the racks needed
    assert may_join("a", ["b", None], 2) and may_join("a", [None, "a"], 2)  # no rack counts as a rack of its own
    assert spans(["a", None, None], 3) and not spans(["a", "a"], 2)
    assert set_ok(["a", "b", "c"], 3) and not set_ok(["a", "a", "b"], 3) and set_ok(["a", "a", "b"], 2)
    # The doctor's use: every replica in its own rack, except a move inside one rack.
    assert not may_join("a", ["a", "b"], 3)
    assert may_join("a", ["a", "b"], 3, replaces="a")


def _cluster(racks: list[str | None], assignment: list[list[int]]) -> Cluster:
    """Brokers 1.. in `racks`, one partition per replica list, all of one topic."""
    brokers = {i + 1: Broker(i + 1, rack) for i, rack in enumerate(racks)}
    parts = tuple(Partition("t", p, tuple(reps), tuple(reps)) for p, reps in enumerate(assignment))
    return Cluster(brokers=brokers, partitions=parts)


def test_heirs_of_a_broker_without_a_rack_differ_only_by_choice():
    tidx = np.arange(4)
    rack = np.array([0, 1, -1, -1])
    assert heirs(0, tidx, rack, 2).tolist() == [1, 2, 3]
    assert heirs(2, tidx, rack, 2).tolist() == [0, 1]  # evaluate_plan's: the brokers with a rack
    assert heirs(2, tidx, rack, 2, rackless_to_all=True).tolist() == [0, 1, 3]  # the planner's
    assert heirs(1, tidx, rack, 0).tolist() == [0, 2, 3]


def _excess_by_hand(assign, targets, rack_of) -> int:
    """evaluate_plan's loop, written out."""
    racked = any(rack_of[t] is not None for t in targets)
    worst = 0
    for x in targets:
        got = {}
        for reps in assign:
            if len(reps) > 1 and reps[0] == x:
                got[reps[1]] = got.get(reps[1], 0) + 1
        led = sum(got.values())
        if not led:
            continue
        elig = [b for b in targets if b != x and (not racked or rack_of[b] != rack_of[x])] or \
            [b for b in targets if b != x]
        vals = [got.get(b, 0) for b in elig]
        worst = max(worst, max(vals) - min(vals) - (led % len(elig) != 0))
    return worst


@pytest.mark.parametrize("seed", range(30))
def test_one_failover_figure_for_the_planner_and_the_report(seed):
    rng = random.Random(seed)
    n = rng.randint(3, 7)
    racks = [rng.choice(["r1", "r2", "r3"]) for _ in range(n)]
    rf = rng.choice([2, 3])
    assign = [rng.sample(range(1, n + 1), rf) for _ in range(rng.randint(1, 40))]
    c = _cluster(racks, assign)
    targets = sorted(c.brokers)
    want = _excess_by_hand(assign, targets, {b: c.brokers[b].rack for b in targets})
    assert assignment_figures(c, assign, targets)["failover_excess_spread_max"] == want
    ws = Workspace(c, targets, range(len(assign)))
    # Every target has a rack: the planner's figure is the report's, but for a floor at 0.
    assert max(0, leader_figures(ws, ws.assign).failover_excess) == want


def test_excess_by_leader_leaves_out_brokers_without_heirs():
    leader, follower, count = np.array([0, 0]), np.array([1, 2]), np.array([3, 1])
    got = excess_by_leader(leader, follower, count, [0, 1], lambda x: np.array([1, 2, 3]) if x == 0 else np.array([]))
    assert got == {0: 3 - 0 - 1}  # 4 led over 3 heirs: spread 3, less the unavoidable 1
    assert worst_excess({}) == 0 and worst_excess({0: -1}) == 0 and worst_excess({0: -1, 1: 2}) == 2


@pytest.mark.parametrize("in_order", [False, True])
@pytest.mark.parametrize("seed", range(25))
def test_the_workspace_counts_the_assignment_as_a_loop_over_it_would(seed, in_order):
    # Mixed replication factors, topics out of name order (or in it, as a loaded cluster's:
    # the buckets' other grouping), unsorted broker ids, a replica on a broker listed twice,
    # a partial selection: every counter and bucket, order included.
    rng = random.Random(seed)
    ids = rng.sample(range(1, 80), rng.randint(3, 9))
    brokers = {b: Broker(id=b, rack=rng.choice(["a", "b", None])) for b in ids}
    parts = []
    for n in range(rng.randint(1, 60)):
        reps = rng.sample(ids, rng.randint(1, min(4, len(ids))))
        if rng.random() < 0.05:
            reps.append(reps[0])
        parts.append(Partition(rng.choice(["z", "m", "a.b", "k"]), n, tuple(reps), tuple(reps)))
    if in_order:
        parts.sort(key=attrgetter("topic"))
    c = Cluster(brokers=brokers, partitions=tuple(parts))
    selected = [i for i in range(len(parts)) if rng.random() < 0.7]
    ws = Workspace(c, rng.sample(ids, rng.randint(1, len(ids))), selected)
    index = {b: i for i, b in enumerate(ids)}
    topics = sorted({p.topic for p in parts})
    count = np.zeros(len(ids), dtype=np.int64)
    tcount = np.zeros((len(topics), len(ids)), dtype=np.int64)
    shared = np.zeros((len(ids), len(ids)), dtype=np.int64)
    on_topic = [dict() for _ in ids]
    for i, p in enumerate(parts):
        t = topics.index(p.topic)
        for x, b in enumerate(p.replicas):
            count[index[b]] += 1
            tcount[t, index[b]] += 1
            for y, other in enumerate(p.replicas):
                if x != y:
                    shared[index[b], index[other]] += 1
            if i in selected:
                on_topic[index[b]].setdefault(t, {})[i] = None
    assert ws.assign == [list(p.replicas) for p in parts] and ws.topic_names == topics
    assert ws.topic.tolist() == ws.topic_list == [topics.index(p.topic) for p in parts]
    for got, want in ((ws.count, count), (ws.tcount, tcount), (ws.shared, shared)):
        assert got.dtype == np.int64 and np.array_equal(got, want)
    assert [[(t, list(ps)) for t, ps in d.items()] for d in ws.on_topic] == \
        [[(t, list(ps)) for t, ps in d.items()] for d in on_topic]


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.booleans())
def test_the_workspace_counts_any_drawn_assignment_as_a_loop_over_it_would(seed, in_order):
    # The buckets are grouped by one stable sort of the replicas, then ordered by a sort of
    # the buckets alone (by broker alone with partitions in topic order): on any assignment
    # drawn, what the loop over it inserts, order included.
    test_the_workspace_counts_the_assignment_as_a_loop_over_it_would(seed, in_order)


@pytest.mark.parametrize("seed", range(20))
def test_counters_made_after_changes_are_those_kept_through_them_order_included(seed):
    # The counters and buckets are made on first read, the changes made before replayed:
    # every counter and bucket (insertion order included) as when they were made at the
    # start and kept move by move, whichever changes came first (a replica listed twice too).
    rng = random.Random(seed)
    ids = list(range(1, 10))
    brokers = {b: Broker(id=b, rack="abc"[b % 3]) for b in ids}
    lists = [rng.sample(ids, rng.randint(1, 4)) for _ in range(60)]
    lists[0] = [lists[0][0], lists[0][0]]
    parts = tuple(Partition(rng.choice("xyz"), n, tuple(reps), tuple(reps)) for n, reps in enumerate(lists))
    cluster = Cluster(brokers=brokers, partitions=parts)
    selected = [i for i in range(60) if rng.random() < 0.8]
    early, late = Workspace(cluster, ids, selected), Workspace(cluster, ids, selected, made_on_read=True)
    assert "count" in early.__dict__ and "count" not in late.__dict__  # made on first read only
    assert type(early) is Workspace and isinstance(late, Workspace)

    def change(ws, r):
        p = r.choice(ws.selected[1:])
        free = [b for b in ids if b not in ws.assign[p]]
        kind = r.randrange(4)
        if kind == 0 and free:
            ws.replace_slot(p, r.randrange(len(ws.assign[p])), r.choice(free), "replaced")
        elif kind == 1 and free:
            ws.append_replica(p, r.choice(free), "added")
        elif kind == 2 and len(ws.assign[p]) > 1:
            ws.drop_replica(p, r.choice(ws.assign[p]), "dropped")
        elif kind == 3 and len(ws.assign[p]) == len(parts[p].replicas):
            ws.restore(p, list(parts[p].replicas))
    for ws in (early, late):
        r = random.Random(seed + 1)
        for _ in range(50):
            change(ws, r)

    def listed(buckets):
        return [[(t, list(ps)) for t, ps in d.items()] for d in buckets]
    assert late.shared.dtype == np.int64 and late.__dict__["_changes"] is None
    # Everything made, a plain Workspace again (whose attribute reads CPython specializes).
    assert type(late) is Workspace and type(early) is Workspace
    assert early.assign == late.assign and early.degree_floor == late.degree_floor
    for name in ("count", "tcount", "shared"):
        assert np.array_equal(getattr(early, name), getattr(late, name)), name
    assert listed(late.on_topic) == listed(early.on_topic)
    with pytest.raises(AttributeError):
        late.no_such_counter


def test_a_substitution_makes_no_counters_or_topic_numbers(monkeypatch):
    # `replace` puts NEW in OLD's slots and reads no counter, bucket or topic number: the
    # workspace never makes them.
    def made(ws):
        raise AssertionError("made")
    monkeypatch.setattr(Workspace, "_count", made)
    monkeypatch.setattr(Workspace, "_topics", made)
    ids = [1, 2, 3, 4, 5]
    brokers = {b: Broker(id=b, rack=None) for b in ids}
    parts = tuple(Partition("t", n, (1 + n % 4, 1 + (n + 1) % 4), (1 + n % 4, 1 + (n + 1) % 4)) for n in range(12))
    plan = kit.plan.plan_replace(Cluster(brokers=brokers, partitions=parts), [(1, 5)])
    assert all(1 not in reps for reps in plan.after) and sum(5 in reps for reps in plan.after) == 6


@pytest.mark.parametrize("seed", range(10))
def test_packed_buckets_and_reasons_come_back_as_they_were_order_included(seed):
    # The leadership stage of a large plan runs with the buckets and reasons packed (`pack`);
    # a later stage reads them back: the same partitions, topics, reasons and insertion order,
    # moves made before packing included (they append where a rebuilt index would sort).
    rng = random.Random(seed)
    ids = list(range(1, 9))
    brokers = {b: Broker(id=b, rack="abc"[b % 3]) for b in ids}
    parts = tuple(Partition(rng.choice("xyz"), n, tuple(reps), tuple(reps))
                  for n, reps in enumerate(rng.sample(ids, 3) for _ in range(80)))
    ws = Workspace(Cluster(brokers=brokers, partitions=parts), ids, [i for i in range(80) if i % 7])
    for _ in range(40):
        p = rng.choice(ws.selected)
        free = [b for b in ids if b not in ws.assign[p]]
        ws.replace_slot(p, rng.randrange(3), rng.choice(free), rng.choice(["test", "other"]))

    def listed(buckets):
        return [[(t, list(ps)) for t, ps in d.items()] for d in buckets]
    before, reasons, topics = listed(ws.on_topic), list(ws.reasons.items()), list(ws.topic_list)
    ws.pack()
    ws.pack()  # packed already: nothing to do
    assert listed(ws.on_topic) == before
    assert list(ws.reasons.items()) == reasons and ws.topic_list == topics
    # Read back, they are the workspace's again: a move updates them as before packing.
    p = ws.selected[0]
    reasons_of = dict(reasons)
    old = ws.assign[p][0]
    new = next(b for b in ids if b not in ws.assign[p])
    ws.replace_slot(p, 0, new, "test")
    t = ws.topic_list[p]
    assert p in ws.on_topic[ws.index[new]][t] and p not in ws.on_topic[ws.index[old]].get(t, {})
    assert ws.reasons[p] == reasons_of.get(p, "test")


@pytest.mark.parametrize("large", [False, True])
def test_the_leadership_stage_packs_a_large_workspace_itself(monkeypatch, large):
    # However the stage is called (the pipeline's stage, an evacuation's stage, directly), a
    # large workspace goes into its flows packed; a small one is left as it is.
    monkeypatch.setattr(leadership, "LARGE", 10 if large else 10**6)
    rng = random.Random(3)
    ids = list(range(1, 10))
    brokers = {b: Broker(id=b, rack="abc"[b % 3]) for b in ids}
    parts = tuple(Partition(f"t{n % 4}", n, tuple(reps), tuple(reps))
                  for n, reps in enumerate([b] + rng.sample([x for x in ids if x % 3 != b % 3], 2)
                                           for b in [1] * 30 + [2] * 30))
    ws = Workspace(Cluster(brokers=brokers, partitions=parts), ids, list(range(60)))
    packed = []
    monkeypatch.setattr(ws, "pack", lambda: packed.append(True))
    assert balance_leadership(ws)  # brokers 1 and 2 lead everything: the order changes
    assert packed == ([True] if large else [])


def test_a_workspace_over_a_replica_on_an_unlisted_broker_is_refused():
    c = Cluster(brokers={1: Broker(id=1), 2: Broker(id=2)},
                partitions=(Partition("t", 0, (1, 2), (1, 2)), Partition("t", 1, (2, 9), (2,))))
    with pytest.raises(KeyError, match="9"):
        Workspace(c, [1, 2], [0, 1])
    with pytest.raises(KeyError, match="9"):
        Workspace(c, [1, 2], [0, 1], made_on_read=True)
