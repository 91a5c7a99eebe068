"""kit/traffic.py over arrays: the figures and the layout read once per cluster answer what each
partition holds, the per-broker sums are kept only for the same figures, and the floor of the
clients' traffic does not depend on the brokers' names."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from kit.formats import cluster_from_snapshot
from kit.model import Broker, Cluster, Partition
from kit.traffic import broker_traffic, floor_traffic, layout, leader_of, traffic_array


@st.composite
def clusters(draw):
    """Small clusters with every kind of leader (none, Kafka's -1, live, dead, out of sync) and
    traffic figures, some partitions without."""
    ids = list(range(1, draw(st.integers(1, 6)) + 1))
    dead = set(draw(st.lists(st.sampled_from(ids), max_size=len(ids))))
    parts = []
    for i in range(draw(st.integers(0, 12))):
        reps = tuple(draw(st.lists(st.sampled_from(ids), min_size=1, max_size=3, unique=True)))
        isr = tuple(draw(st.lists(st.sampled_from(reps), max_size=len(reps), unique=True)))
        leader = draw(st.none() | st.just(-1) | st.sampled_from(reps))
        figure = st.floats(0, 1e9) | st.just(0.0)
        parts.append(Partition(topic="t", partition=i, replicas=reps, isr=isr, size=draw(st.integers(0, 10**12)),
                               bytes_in=draw(figure), bytes_out=draw(figure), leader=leader))
    brokers = {b: Broker(id=b, alive=b not in dead) for b in ids}
    return Cluster(brokers=brokers, partitions=tuple(parts))


@settings(max_examples=200, deadline=None)
@given(clusters())
def test_traffic_array_and_layout_read_what_each_partition_holds(cluster):
    # The figures are read once per cluster and kept: every call answers what the partitions
    # hold, and a caller changing its answer changes no later one.
    want = [[p.bytes_in, p.bytes_out] for p in cluster.partitions]
    first = traffic_array(cluster)
    assert first.tolist() == want
    first += 1.0
    assert traffic_array(cluster).tolist() == want
    live = {b.id for b in cluster.brokers.values() if b.alive}
    lay = layout(cluster, live)
    assert lay.size.tolist() == [float(p.size) for p in cluster.partitions]
    lead = [leader_of(p, live) for p in cluster.partitions]
    assert lay.lead_id.tolist() == [-1 if b is None else b for b in lead]


def test_broker_traffic_answers_again_only_for_the_same_figures():
    # The last answer is kept for the same layout and figures: the caller's dicts are its own,
    # and an array changed in place gives a new answer (the one a first call gives).
    c = cluster_from_snapshot({"version": 1, "brokers": [{"id": b, "net_capacity": 1e8} for b in (1, 2, 3)],
                               "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2], "isr": [1, 2],
                                               "leader": 1, "bytes_in": 1.0, "bytes_out": 2.0}]})
    figures = traffic_array(c)
    first = broker_traffic(c, figures)
    first[0][1] = 99.0
    assert broker_traffic(c, figures) == ({1: 1.0, 2: 1.0}, {1: 3.0, 2: 0.0})
    figures[0] = [3.0, 5.0]
    assert broker_traffic(c, figures) == ({1: 3.0, 2: 3.0}, {1: 8.0, 2: 0.0})
    assert broker_traffic(c) == ({1: 1.0, 2: 1.0}, {1: 3.0, 2: 0.0})


def _renamed(cluster: Cluster, to) -> Cluster:
    """`cluster` with every broker id b renamed to(b) (Kafka's leader -1 stays -1)."""
    brokers = {to(b): Broker(id=to(b), alive=x.alive) for b, x in cluster.brokers.items()}
    parts = tuple(Partition(topic=p.topic, partition=p.partition, replicas=tuple(map(to, p.replicas)),
                            isr=tuple(map(to, p.isr)), size=p.size, bytes_in=p.bytes_in, bytes_out=p.bytes_out,
                            leader=p.leader if p.leader in (None, -1) else to(p.leader))
                  for p in cluster.partitions)
    return Cluster(brokers=brokers, partitions=parts)


@settings(max_examples=200, deadline=None)
@given(clusters(), st.data())
def test_the_floor_of_client_traffic_does_not_depend_on_the_brokers_names(cluster, data):
    # Broker 0 is a broker like any other (Kafka's ids start at 0): the floor once gave a target
    # led by broker 0 no load at its end, as if it had no leader.
    ids = sorted(cluster.brokers)
    targets = {i: data.draw(st.lists(st.sampled_from(ids), min_size=1, max_size=3, unique=True))
               for i in data.draw(st.lists(st.integers(0, len(cluster.partitions) - 1), unique=True, max_size=12))
               } if cluster.partitions else {}
    live = {b for b in ids if cluster.brokers[b].alive}
    traffic = [(p.bytes_in, p.bytes_out) for p in cluster.partitions]
    rx, tx = floor_traffic(cluster, traffic, live, targets)
    down = _renamed(cluster, lambda b: b - 1)
    rx0, tx0 = floor_traffic(down, traffic, {b - 1 for b in live},
                             {i: [b - 1 for b in t] for i, t in targets.items()})
    assert rx0 == {b - 1: v for b, v in rx.items()} and tx0 == {b - 1: v for b, v in tx.items()}
