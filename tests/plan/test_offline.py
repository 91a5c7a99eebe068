"""Offline partitions (kit/offline.py) and the planners around them: a partition with no live
in-sync replica is never put in a plan, every other partition that must move still does, and
the plan names each one left out (design.md, "Faults")."""
from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kit import plan as planners
from kit.errors import BadInput, Unsafe
from kit.model import Broker, Cluster, Partition
from kit.offline import cause, describe, offline_indices, recovery
from kit.plan.pairs import pair_dead_with_new
from kit.plan.pooled import plan_pooled
from kit.plan.pools import parse_pools

from test_plan_properties import SETTINGS, generate, independent_offline

GHOST = 4242  # a broker id no cluster here has


def _cluster(parts, dead=(3, 4), brokers=(1, 2, 3, 4, 5, 6)) -> Cluster:
    """Brokers 1..6 in racks a/b/c (1,4 a; 2,5 b; 3,6 c), `dead` down; `parts` as
    (replicas, isr) pairs, topic t."""
    racks = "abc"
    bs = {b: Broker(b, rack=racks[(b - 1) % 3], alive=b not in dead, net_capacity=100e6) for b in brokers}
    ps = tuple(Partition("t", i, tuple(r), tuple(isr), size=1000) for i, (r, isr) in enumerate(parts))
    return Cluster(brokers=bs, partitions=ps)


# --------------------------------------------------------------------------- which, why, what brings it back


def test_offline_means_no_live_replica_in_the_isr():
    c = _cluster([
        ((1, 2), (1, 2)),        # 0 online
        ((3, 4), (3,)),          # 1 every replica dead
        ((3, 1), (3,)),          # 2 live 1 out of sync, the in-sync one dead: offline (no unclean election)
        ((1, 3), (1,)),          # 3 online: live leader in sync
        ((1, 2), (GHOST,)),      # 4 ISR names a broker the cluster does not have
        ((1, 2), ()),            # 5 empty ISR
        ((4, 3), (4, 3)),        # 6 every replica dead, both were in sync
    ])
    assert offline_indices(c) == sorted(independent_offline(c)) == [1, 2, 4, 5, 6]


@pytest.mark.parametrize("parts, dead, offline", [
    ([((1, 2), (1, 2)), ((3, 4), (3, 4)), ((4,), (4,))], (3, 4), [1, 2]),  # every ISR its replica list
    ([((1, 2), (1, 2)), ((3, 4), (3, 4))], (), []),  # nobody dead
    ([((1, 2), (1, 2)), ((5, 6), (GHOST,))], (), [1]),  # nobody dead, but an ISR of a stranger
])
def test_offline_whether_or_not_the_isrs_are_the_replica_lists(parts, dead, offline):
    c = _cluster(parts, dead=dead)
    assert offline_indices(c) == sorted(independent_offline(c)) == offline


def test_each_offline_partition_says_why_and_what_brings_it_back():
    c = _cluster([((3, 4), (3,)), ((3, 1), (3,)), ((1, 2), (GHOST,)), ((3, 4), ()), ((1, 2), ())])
    p = c.partitions
    assert cause(c, p[0]) == "every replica is on a dead broker (3, 4)"
    assert recovery(c, p[0]) == ("broker 3 returning (in sync: a clean election); or broker 4 returning, then an "
                                 "unclean leader election onto it (the messages it lacks are lost)")
    assert cause(c, p[1]) == "its in-sync replica is on dead broker 3; live broker 1 is out of sync"
    assert recovery(c, p[1]) == ("broker 3 returning (in sync: a clean election); or an unclean leader election "
                                 "onto live broker 1 (the messages it lacks are lost)")
    # Not "no live in-sync replica": the ISR names a broker that is not there at all.
    assert cause(c, p[2]) == ("its ISR names broker 4242, which the cluster does not have; none of its replicas "
                              "is in the ISR; live brokers 1, 2 are out of sync")
    assert recovery(c, p[2]) == "an unclean leader election onto live brokers 1 or 2 (the messages it lacks are lost)"
    assert cause(c, p[3]) == "every replica is on a dead broker (3, 4), none of them in the ISR"
    assert recovery(c, p[3]) == ("brokers 3 or 4 returning, then an unclean leader election onto one of them "
                                 "(the messages it lacks are lost)")
    [entry] = describe(c, [1])
    assert entry == {"topic": "t", "partition": 1, "replicas": [3, 1], "isr": [3],
                     "cause": cause(c, p[1]), "in_sync_dead": [3], "live_out_of_sync": [1],
                     "recovery": recovery(c, p[1])}


# --------------------------------------------------------------------------- the planners


SMALL = [((1, 2, 3), (1, 2)), ((3, 4, 1), (1,)), ((3, 4, 2), ()), ((4, 3, 5), (4, 3)),
         ((2, 4, 6), (2, 6)), ((4, 1, 2), (4,)), ((6, 5, 4), (6, 5))]


@pytest.mark.parametrize("plan_it", [
    lambda c: planners.plan_replace(c, [(3, 7), (4, 8)], ignore_warns=True),
    lambda c: planners.plan_remove(c, [3, 4], ignore_warns=True),
    lambda c: planners.plan_az_loss(c, "c", ignore_warns=True),
], ids=["replace", "remove", "az-loss"])
def test_the_actions_leave_offline_partitions_out_and_name_them(plan_it):
    brokers = (1, 2, 3, 4, 5, 6, 7, 8)
    c = _cluster(SMALL, dead=(3, 4), brokers=brokers)
    c = Cluster(brokers={**c.brokers, 7: replace(c.brokers[7], rack="c"), 8: replace(c.brokers[8], rack="a")},
                partitions=c.partitions)
    plan = plan_it(c)
    assert plan.offline == [2, 3, 5]
    for i in plan.offline:
        assert plan.after[i] == list(c.partitions[i].replicas)
    assert not set(plan.changed()) & set(plan.offline)
    assert plan.warnings[0].startswith("3 offline partition(s) left out of the plan")
    # Every other partition on a leaving broker moved off it.
    leaving = {3, 4} if plan.action != "az-loss" else {3, 6, 7}
    for i in set(range(len(c.partitions))) - set(plan.offline):
        assert not leaving & set(plan.after[i]), (i, plan.after[i])


def test_a_cluster_without_offline_partitions_plans_as_before():
    c = _cluster([((1, 2, 3), (1, 2)), ((3, 5, 1), (5, 1)), ((2, 6, 3), (2, 6))], dead=(3,))
    plan = planners.plan_remove(c, [3], ignore_warns=True)
    assert plan.offline == [] and plan.warnings == []


def test_a_selection_of_only_offline_partitions_plans_nothing():
    c = _cluster([((3, 4), (3,)), ((4, 3), ())])
    plan = planners.plan_remove(c, [3, 4], ignore_warns=True)
    assert plan.offline == [0, 1] and plan.changed() == []


def test_a_pooled_plan_names_the_offline_partitions_of_every_pool():
    bs = {b: Broker(b, rack=None, alive=b not in (3, 4), net_capacity=100e6) for b in range(1, 7)}
    parts = (Partition("a", 0, (1, 3), (1, 3)), Partition("a", 1, (3, 4), (3,)),
             Partition("b", 0, (4, 5), (5,)), Partition("b", 1, (4, 3), ()))
    c = Cluster(brokers=bs, partitions=parts)
    pools = parse_pools({"one": {"topics": "a", "brokers": [1, 2, 3]}, "two": {"topics": "b", "brokers": [4, 5, 6]}})
    plan = plan_pooled(c, pools, lambda cl, topics, brokers: planners.plan_remove(
        cl, [3, 4], topics=topics, brokers=brokers, ignore_warns=True), "remove")
    assert plan.offline == [1, 3]
    assert plan.after[1] == [3, 4] and plan.after[3] == [4, 3]
    assert 3 not in plan.after[0] and 4 not in plan.after[2]


# --------------------------------------------------------------------------- property: random clusters


@st.composite
def damaged_clusters(draw):
    """A gen_cluster.py cluster with dead brokers (a replacement or a lost rack), some of whose
    partitions lose their in-sync replicas: every replica dead, the ISR emptied, left to dead
    brokers only, or naming a broker the cluster does not have."""
    scenario = draw(st.sampled_from(["replace", "az-loss"]))
    rf = draw(st.integers(1, 3))
    racks = 3 if scenario == "az-loss" else draw(st.sampled_from([0, 3]))
    args = dict(brokers=draw(st.integers(max(rf + 3, 6), 14)), racks=racks, rf=rf, scenario=scenario,
                rf2_share=draw(st.sampled_from([0.0, 0.5])) if rf == 3 else 0.0,
                topics=draw(st.integers(1, 6)), partitions=draw(st.integers(10, 120)),
                dead=draw(st.integers(1, 3)), add=1, seed=draw(st.integers(0, 10_000)))
    c = generate(**args)
    dead = {b for b, br in c.brokers.items() if not br.alive}
    parts = list(c.partitions)
    for i in draw(st.lists(st.integers(0, len(parts) - 1), max_size=8, unique=True)):
        p = parts[i]
        how = draw(st.sampled_from(["empty", "dead only", "ghost"]))
        isr = () if how == "empty" else (GHOST,) if how == "ghost" else tuple(b for b in p.replicas if b in dead)
        parts[i] = replace(p, isr=isr, leader=None)
    return Cluster(brokers=c.brokers, partitions=tuple(parts)), scenario, args


@SETTINGS
@given(damaged_clusters(), st.sampled_from(["replace", "remove", "az-loss"]))
def test_no_offline_partition_is_planned_and_every_other_that_must_move_does(case, action):
    c, scenario, _ = case
    held = set(c.map_brokers())
    dead = sorted(b for b, br in c.brokers.items() if not br.alive and b in held)
    if not dead:
        return
    if action == "az-loss":
        racks = sorted({c.rack_of(b) for b in dead if c.rack_of(b)})
        if not racks:
            return
        rack = racks[0]
        leaving = {b for b, br in c.brokers.items() if br.rack == rack}
    else:
        leaving = set(dead)
    try:
        if action == "replace":
            pairs = pair_dead_with_new(c)
            plan = planners.plan_replace(c, pairs, ignore_warns=True)
        elif action == "remove":
            plan = planners.plan_remove(c, dead, ignore_warns=True)
        else:
            plan = planners.plan_az_loss(c, rack, ignore_warns=True)
    except (BadInput, Unsafe) as e:  # a request these brokers cannot meet (too few brokers left)
        assert "offline" not in str(e) and "in-sync" not in str(e)
        return
    offline = independent_offline(c)
    assert plan.offline == sorted(offline)
    for i in offline:
        assert plan.after[i] == list(c.partitions[i].replicas)
    assert offline.isdisjoint(plan.changed())
    assert bool(offline) == any("offline partition" in w for w in plan.warnings)
    for i, p in enumerate(c.partitions):
        if i in offline:
            continue
        if action == "replace":
            mapping = dict(pairs)
            assert plan.after[i] == [mapping.get(b, b) for b in p.replicas]
        else:
            assert leaving.isdisjoint(plan.after[i]), (p.name, p.replicas, plan.after[i])
