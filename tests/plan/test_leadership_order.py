"""The leadership pass's order of steps: what each step leaves for the next."""
from __future__ import annotations

from kit import plan as planners
from kit.model import Broker, Cluster, Partition
from kit.report.figures import assignment_figures


def ring_cluster(brokers: int = 9, per_broker: int = 4) -> Cluster:
    """RF 2 on a ring of rackless brokers: every partition on (i, i + 1), except one of topic
    "t" on (3, 2). Each broker leads `per_broker` partitions; broker 0 leads two of t's 8,
    brokers 1 and 2 none, the others one (a topic leader excess of 1); the rest are topics of
    one partition each, whose leaders may go anywhere. Undoing the excess keeps every broker's
    count only by passing one leader around the whole ring: 9 changes, more than the
    per-topic flow pays for a step of excess. Failover starts above its target, so the pass
    chooses leader and first follower together first."""
    parts = []

    def add(topic, replicas):
        parts.append(Partition(topic, sum(p.topic == topic for p in parts), tuple(replicas), tuple(replicas)))

    def ring(i):
        return [i % brokers, (i + 1) % brokers]

    add("t", ring(0))
    add("t", ring(0))
    add("t", [3, 2])
    for i in range(4, brokers):
        add("t", ring(i))
    leads_t = {0: 2, 1: 0, 2: 0}
    for i in range(brokers):
        for _ in range(per_broker - leads_t.get(i, 1)):
            add(f"f{len(parts):03d}", ring(i))
    return Cluster(brokers={i: Broker(id=i) for i in range(brokers)}, partitions=tuple(parts))


def test_leaders_undo_the_topic_leader_excess_the_per_topic_flow_keeps():
    # Before the strict per-topic step this plan ended at topic leader excess 1 (failover 2).
    c = ring_cluster()
    before = assignment_figures(c, c.assignment(), sorted(c.brokers))
    assert (before["leader_count_spread"], before["topic_leader_excess_spread_max"],
            before["failover_excess_spread_max"]) == (0, 1, 3)
    plan = planners.plan_leaders(c)
    after = assignment_figures(c, plan.after, plan.targets)
    assert after["topic_leader_excess_spread_max"] == 0
    assert after["leader_count_spread"] == 0
    assert after["failover_excess_spread_max"] <= 2
    # Planning again on the result changes nothing.
    again = planners.plan_leaders(Cluster(brokers=c.brokers, partitions=tuple(
        Partition(p.topic, p.partition, tuple(r), tuple(r)) for p, r in zip(c.partitions, plan.after))))
    assert again.after == plan.after
