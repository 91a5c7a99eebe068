"""The simulated KRaft broker's kept answers (Metadata per topic, DescribeLogDirs,
ListPartitionReassignments) follow every change of the store: the answer after a change is the
one made from scratch, and shows the change."""
from __future__ import annotations

import pytest
from kafka.protocol.admin import (DescribeLogDirsRequest, DescribeLogDirsResponse, ListPartitionReassignmentsRequest,
                                  ListPartitionReassignmentsResponse)
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from kit.formats import cluster_from_snapshot
from kit.sim.kraft import handlers, logdirs, reassign
from kit.sim.kraft.context import Context, encode_entry, encoded, layout
from kit.sim.kraft.versions import DESCRIBE_LOG_DIRS, ranges
from kit.sim.memstore import MemoryStore
from kit.sim.store import Store

TOPICS = ("alpha", "beta", "gamma")
RANGES = [ranges(release) for release in ("3.7", "4.0")]  # the releases the simulated broker answers as


def make_store() -> MemoryStore:
    """Four brokers; three topics of four partitions, two replicas each."""
    brokers = [{"id": b, "rack": f"r{b % 2}", "alive": True, "storage_total": 10**12, "storage_free": 9 * 10**11}
               for b in range(1, 5)]
    parts = [{"topic": t, "partition": p, "replicas": [1 + p % 4, 1 + (p + 1) % 4], "size": 1000 * (p + 1)}
             for t in TOPICS for p in range(4)]
    cluster = cluster_from_snapshot({"version": 1, "brokers": brokers, "partitions": parts})
    return MemoryStore.from_cluster(cluster, {b: 9000 + b for b in range(1, 5)})


def every_topic(store: MemoryStore, version: int) -> bytes:
    """The Metadata answer for every topic (null topic list; empty at v0), as the broker sends it."""
    req = MetadataRequest(version=version, topics=[] if version == 0 else None, allow_auto_topic_creation=False)
    return handlers.metadata(Context(store, 1, "kit-test"), req, version).body


def named(store: MemoryStore, version: int) -> bytes:
    """The Metadata answer for every topic asked by name: made whole, never kept."""
    Topic = MetadataRequest.MetadataRequestTopic
    req = MetadataRequest(version=version, topics=[Topic(name=t, topic_id=None) for t in TOPICS],
                          allow_auto_topic_creation=False)
    return encoded(handlers.metadata(Context(store, 1, "kit-test"), req, version), version).body


def partition(store: MemoryStore, topic: str, p: int, version: int = 12):
    resp = MetadataResponse.decode(every_topic(store, version), version=version, header=False)
    (t,) = [t for t in resp.topics if t.name == topic]
    return t.partitions[p]


def log_dir(store: MemoryStore, broker: int) -> dict[tuple[str, int], int]:
    body = logdirs.describe_log_dirs(Context(store, broker, "kit-test"), DescribeLogDirsRequest(version=4, topics=None),
                                     4).body
    (result,) = DescribeLogDirsResponse.decode(body, version=4, header=False).results
    return {(t.name, p.partition_index): p.partition_size for t in result.topics for p in t.partitions}


def moving(store: MemoryStore) -> dict[tuple[str, int], tuple[list, list, list]]:
    req = ListPartitionReassignmentsRequest(version=0, timeout_ms=1000, topics=None)
    body = reassign.list_partition_reassignments(Context(store, 1, "kit-test"), req, 0).body
    resp = ListPartitionReassignmentsResponse.decode(body, version=0, header=False)
    return {(t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
            for t in resp.topics for p in t.partitions}


@pytest.mark.parametrize("version", range(1, MetadataResponse.max_version + 1))
def test_metadata_of_kept_topics_is_the_answer_made_whole(version):
    store = make_store()
    assert every_topic(store, version) == named(store, version)
    every_topic(store, version)  # kept now
    store.update_state("beta", 2, lambda st: st.update(leader=st["isr"][-1]))
    assert every_topic(store, version) == named(store, version)


def test_metadata_v0_all_topics_decodes_to_every_topic():
    resp = MetadataResponse.decode(every_topic(make_store(), 0), version=0, header=False)
    assert [t.name for t in resp.topics] == list(TOPICS)
    assert [len(t.partitions) for t in resp.topics] == [4, 4, 4]


def test_leader_change_shows_in_the_next_metadata():
    store = make_store()
    before = partition(store, "beta", 2)
    assert (before.leader_id, before.leader_epoch) == (3, 0)
    store.update_state("beta", 2, lambda st: st.update(leader=4))
    after = partition(store, "beta", 2)
    assert (after.leader_id, after.leader_epoch) == (4, 1)
    assert partition(store, "alpha", 2).leader_id == 3  # the other topics' kept parts stay right


def test_reassignment_shows_in_the_next_metadata_log_dirs_and_reassignments():
    store = make_store()
    assert partition(store, "gamma", 0).replica_nodes == [1, 2]
    assert ("gamma", 0) not in log_dir(store, 3)
    assert moving(store) == {}

    def add_three(doc):
        doc["partitions"]["0"] = [3, 1, 2]
        doc["adding_replicas"] = {"0": [3]}
        doc["removing_replicas"] = {"0": [1]}

    store.set_reassignment({("gamma", 0): [3, 2]}, None)
    store.update_topic("gamma", add_three)
    assert partition(store, "gamma", 0).replica_nodes == [3, 1, 2]
    assert log_dir(store, 3)[("gamma", 0)] == 1000
    assert moving(store) == {("gamma", 0): ([3, 1, 2], [3], [1])}


def test_dead_broker_shows_in_the_next_metadata():
    store = make_store()
    assert partition(store, "alpha", 1).offline_replicas == []
    store.deregister(2)
    p = partition(store, "alpha", 1)
    assert (p.leader_id, p.error_code, p.offline_replicas) == (-1, 5, [2])  # LEADER_NOT_AVAILABLE
    store.register(2, 1.0)
    assert partition(store, "alpha", 1).offline_replicas == []


def test_throttle_change_leaves_the_kept_answers_right():
    store = make_store()
    first = every_topic(store, 12), log_dir(store, 1), moving(store)
    store.alter_config("brokers", "1", {"leader.replication.throttled.rate": "1000"}, [])
    assert (every_topic(store, 12), log_dir(store, 1), moving(store)) == first
    assert every_topic(store, 12) == named(store, 12)


def test_metadata_kept_for_one_version_serves_every_other_version_right():
    store = make_store()
    for version in range(MetadataResponse.max_version, 0, -1):
        assert every_topic(store, version) == named(store, version)


def test_metadata_topics_encoded_once_serve_every_version_of_the_same_layout(monkeypatch):
    """Metadata v10 to v13 encode a topic alike (v13 adds only a top-level error): the answer the
    start made at v13 serves a client asking v12 without encoding a topic again, and a change
    shows at both (librdkafka and kafka-python ask different versions of the same broker)."""
    assert layout(MetadataResponse, "topics", 12) == layout(MetadataResponse, "topics", 13)
    assert layout(MetadataResponse, "topics", 9) != layout(MetadataResponse, "topics", 10)  # v10 adds topic ids
    store = make_store()
    every_topic(store, 13)
    made = []
    monkeypatch.setattr(handlers, "encode_entry", lambda *a: made.append(a[2].name) or encode_entry(*a))
    assert every_topic(store, 12) == named(store, 12)
    assert made == []

    def add_three(doc):
        doc["partitions"]["1"] = [3, 4, 1]
    store.update_topic("beta", add_three)
    assert partition(store, "beta", 1, 13).replica_nodes == [3, 4, 1]
    assert partition(store, "beta", 1, 12).replica_nodes == [3, 4, 1]
    assert made == ["beta"]  # the changed topic only, once for both versions
    assert every_topic(store, 12) == named(store, 12) and every_topic(store, 13) == named(store, 13)


def test_log_dirs_kept_is_the_answer_made_whole():
    store = make_store()
    ctx = Context(store, 2, "kit-test")
    asked = DescribeLogDirsRequest.DescribableLogDirTopic
    lowest = min(r[DESCRIBE_LOG_DIRS][0] for r in RANGES)
    highest = max(r[DESCRIBE_LOG_DIRS][1] for r in RANGES)
    for version in range(lowest, highest + 1):
        every = DescribeLogDirsRequest(version=version, topics=[asked(topic=t, partitions=list(range(4)))
                                                                for t in TOPICS])
        whole = encoded(logdirs.describe_log_dirs(ctx, every, version), version).body
        kept = logdirs.describe_log_dirs(ctx, DescribeLogDirsRequest(version=version, topics=None), version).body
        assert kept == whole


def all_log_dirs(store: MemoryStore, broker: int, version: int = 4):
    """The broker's kept DescribeLogDirs answer for every partition (the object itself)."""
    return logdirs.describe_log_dirs(Context(store, broker, "kit-test"),
                                     DescribeLogDirsRequest(version=version, topics=None), version)


def test_log_dirs_kept_with_a_copy_under_way_is_the_answer_made_whole():
    store = make_store()
    store.update_topic("gamma", lambda doc: doc["partitions"].update({"0": [3, 1, 2]}))
    store.write_progress({"left": {"gamma": {"0": {"3": 400}}}})
    asked = DescribeLogDirsRequest.DescribableLogDirTopic
    for version in range(1, max(r[DESCRIBE_LOG_DIRS][1] for r in RANGES) + 1):
        every = DescribeLogDirsRequest(version=version, topics=[asked(topic=t, partitions=list(range(4)))
                                                                for t in TOPICS])
        whole = encoded(logdirs.describe_log_dirs(Context(store, 3, "kit-test"), every, version), version).body
        assert all_log_dirs(store, 3, version).body == whole
    assert log_dir(store, 3)[("gamma", 0)] == 600  # 1000 bytes, 400 still to copy


def test_a_reassignment_changes_the_log_dirs_of_the_brokers_it_touches_only():
    store = make_store()
    kept = {b: all_log_dirs(store, b) for b in range(1, 5)}
    store.update_topic("gamma", lambda doc: doc["partitions"].update({"0": [3, 2]}))  # gamma-0 from 1 to 3
    assert ("gamma", 0) not in log_dir(store, 1)
    assert log_dir(store, 3)[("gamma", 0)] == 1000
    for b in (1, 3):
        assert all_log_dirs(store, b) is not kept[b]
    for b in (2, 4):  # gamma-0 stays on 2; 4 never had it
        assert all_log_dirs(store, b) is kept[b]


def test_a_copy_progressing_changes_the_log_dir_of_its_new_replica_only():
    store = make_store()
    store.update_topic("gamma", lambda doc: doc["partitions"].update({"0": [3, 1, 2]}))
    store.write_progress({"left": {"gamma": {"0": {"3": 900}}}})
    kept = {b: all_log_dirs(store, b) for b in range(1, 5)}
    store.write_progress({"left": {"gamma": {"0": {"3": 500}}}})
    assert log_dir(store, 3)[("gamma", 0)] == 500
    assert all(all_log_dirs(store, b) is kept[b] for b in (1, 2, 4))
    store.drop_progress()
    assert log_dir(store, 3)[("gamma", 0)] == 1000
    assert all(all_log_dirs(store, b) is kept[b] for b in (1, 2, 4))


def test_leadership_throttles_and_deaths_leave_the_kept_log_dirs():
    store = make_store()
    kept = {b: all_log_dirs(store, b) for b in range(1, 5)}
    store.update_state("beta", 2, lambda st: st.update(leader=st["isr"][-1]))
    store.alter_config("brokers", "1", {"leader.replication.throttled.rate": "1000"}, [])
    store.deregister(2)
    assert all(all_log_dirs(store, b) is kept[b] for b in range(1, 5))


def test_replicas_held_kept_per_broker_are_those_of_the_whole_cluster():
    """The store's per-broker index, followed change by change, is what the whole cluster says."""
    store = make_store()

    def move(doc):
        doc["partitions"].update({"0": [3, 4, 1, 2], "2": [4, 3]})
        doc["adding_replicas"] = {"0": [3, 4]}
        doc["removing_replicas"] = {"0": [1, 2]}
    store.update_topic("alpha", move)
    store.write_progress({"left": {"alpha": {"0": {"3": 10, "4": 999}}}})
    store.update_state("beta", 1, lambda st: st.update(isr=[3], leader=3))
    store.update_topic("beta", lambda doc: doc["partitions"].update({"1": [3]}))  # off broker 2
    for b in range(1, 5):
        assert store.held(b) == Store.held(store, b)
    assert store.held(4)[0] == ("alpha", 0, 1000, 999.0)


@pytest.mark.parametrize("version", range(MetadataResponse.max_version + 1))
def test_metadata_partitions_packed_are_kafka_pythons_bytes(version):
    """context.entry_packer gives the bytes of kafka-python's generated encoder, at every
    version, for partitions with no replica, a leader gone, and more replicas than a one-byte
    compact array count holds (the generic path)."""
    from kit.sim.kraft.context import EncodeBuffer, entry_packer, fields

    schema = handlers.PARTITION
    flexible = MetadataResponse.flexible_version_q(version)
    pack = entry_packer(schema, version, flexible)
    encode = schema.compiled_encode_into(version, compact=flexible, tagged=flexible)
    for row in [(0, 3, 2, 7, [2, 1], [2], []), (5, 0, -1, 0, [4, 3], [], [4, 3]), (0, 9, 1, 1, [], [], []),
                (0, 1, 1, 2, list(range(1, 200)), list(range(1, 128)), [126])]:
        out = EncodeBuffer()
        encode(fields(**dict(zip(handlers.PARTITION_FIELDS, row))), out)
        assert pack(row) == bytes(out.buf[:out.pos])
