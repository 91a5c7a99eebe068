"""Issue 35's faults decided once (`kit.cluster.reassign`): the dead-destination rule and the
early end of `verify --wait`."""
from __future__ import annotations

import pytest

from kit.cluster.reassign import check_plan, dead_destinations, progress, wait_until_done
from kit.errors import Unsafe
from kit.formats import cluster_from_snapshot

CLUSTER = cluster_from_snapshot({"version": 1, "brokers": [{"id": 1}, {"id": 2}, {"id": 3, "alive": False},
                                                           {"id": 4}], "partitions": [
    {"topic": "t", "partition": 0, "replicas": [1, 2, 3], "isr": [1, 2]},  # moving to [1, 3], 3 dead
    {"topic": "t", "partition": 1, "replicas": [2, 1, 4], "isr": [2, 1]}]})  # moving to [2, 4], 4 live
RUNNING = {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 3]},
                                        {"topic": "t", "partition": 1, "replicas": [2, 4]}]}


def test_the_dead_destinations_are_the_dead_brokers_a_copy_in_flight_waits_for():
    assert dead_destinations(CLUSTER, RUNNING) == [3]
    assert dead_destinations(CLUSTER, {"version": 1, "partitions": RUNNING["partitions"][1:]}) == []
    assert dead_destinations(CLUSTER, None) == []


def test_verify_wait_ends_at_once_with_exit_3_naming_the_dead_destination():
    def once():
        got = progress(CLUSTER, RUNNING, None)
        return {"partitions": got["rows"], "done": False}

    def no_waiting(_):
        pytest.fail("verify --wait waited for a reassignment that can never finish")
    with pytest.raises(Unsafe) as e:
        wait_until_done(once, (), lambda: False, "ZooKeeper", sleep=no_waiting)
    assert e.value.exit_code == 3
    assert str(e.value).startswith("broker 3, a destination of the reassignment in progress, is dead: it can never "
                                   "finish")
    assert "revive it" in str(e.value) and "kit rollback ROLLBACK.json" in str(e.value)


def test_a_plan_onto_a_registered_dead_broker_says_it_is_dead_and_onto_an_unknown_one_not_registered():
    """A KRaft broker that died stays registered, fenced (DescribeCluster v2 lists it): the plan
    check calls it dead; a broker only named in replica lists, or in none, is not registered."""
    fenced = cluster_from_snapshot({"version": 1, "brokers": [{"id": 1}, {"id": 2}, {"id": 3, "alive": False}],
                                    "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2, 4]}]})
    for target, says in (([1, 3], "broker 3 in the plan (t-0) is dead (registered, fenced); nothing was changed"),
                         ([1, 4], "broker 4 in the plan (t-0) is not registered; nothing was changed"),
                         ([1, 9], "broker 9 in the plan (t-0) is not registered; nothing was changed")):
        with pytest.raises(Unsafe) as e:
            check_plan(fenced, [{"topic": "t", "partition": 0, "replicas": target}])
        assert str(e.value) == says and e.value.exit_code == 3
    check_plan(fenced, [{"topic": "t", "partition": 0, "replicas": [2, 1]}])
