"""The simulated KRaft cluster as a named Kafka release: a killed broker stays registered and
fenced (KRaft), the API version ranges of Kafka 4.0 and 3.7 (`--kafka-version`), and
IncrementalAlterConfigs APPEND / SUBTRACT on LIST keys, seen through kafka-python,
confluent-kafka (librdkafka) and raw frames built with kafka-python's protocol classes."""
from __future__ import annotations

import json
import socket
import struct

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource as CkConfigResource
from confluent_kafka.admin import ResourceType
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient
from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.structs import TopicPartition

from tests.conftest import run_kit, wait_for
from tests.sim.test_kraft_sim import frame_roundtrip, recv_frame

LEADER_REPLICAS = "leader.replication.throttled.replicas"


def snapshot_doc() -> dict:
    """Four brokers; broker 4 holds nothing (a destination, as in a broker replacement)."""
    brokers = [{"id": b, "rack": f"rack-{'abc'[b % 3]}", "alive": True} for b in range(1, 5)]
    parts = [{"topic": "t", "partition": p, "replicas": [1 + p % 3, 1 + (p + 1) % 3], "size": 10**6} for p in range(3)]
    return {"version": 1, "brokers": brokers, "partitions": parts}


def start(root, *extra) -> tuple:
    """(state dir, bootstrap, {broker: port}) of a cluster started with `extra` options."""
    snap, state = root / "cluster.json", root / "state"
    snap.write_text(json.dumps(snapshot_doc()))
    r = run_kit("sim", "start", "--kraft", "--snapshot", snap, "--state", state, "--speed", "50", *extra, timeout=180)
    assert r.returncode == 0, r.stderr
    ports = {int(b): p for b, p in json.loads((state / "cluster.json").read_text())["ports"].items()}
    return state, (state / "bootstrap").read_text().strip(), ports


@pytest.fixture(scope="module")
def kraft(tmp_path_factory):
    """A cluster answering as the default release (Kafka 4.0)."""
    got = start(tmp_path_factory.mktemp("kraft-release"))
    yield got
    run_kit("sim", "stop", "--state", got[0], timeout=120)


def ranges(port: int, version: int = 3) -> dict[int, tuple[int, int]]:
    resp = ApiVersionsResponse.decode(frame_roundtrip(port, ApiVersionsRequest(), version), version=version, header=True)
    assert resp.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


def api_versions_of_version(port: int, version: int) -> ApiVersionsResponse:
    """ApiVersions sent as `version`: a v4 request's frame whose header names `version` (a
    client newer than the broker sends a version the broker does not know)."""
    req = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    req.with_header(correlation_id=42, client_id="kit-test")
    frame = bytearray(req.encode(version=4, header=True, framed=True))
    struct.pack_into(">h", frame, 6, version)  # after the length (4) and the api key (2)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(bytes(frame))
        return ApiVersionsResponse.decode(recv_frame(s), version=0, header=True)


def describe_cluster_v2(port: int, include_fenced: bool) -> dict[int, bool]:
    req = DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=1,
                                 include_fenced_brokers=include_fenced)
    resp = DescribeClusterResponse.decode(frame_roundtrip(port, req, 2), version=2, header=True)
    return {b.broker_id: b.is_fenced for b in resp.brokers}


# ------------------------------------------------------------------ a dead broker is fenced


def test_a_killed_broker_stays_registered_and_fenced_and_kit_says_it_is_dead(kraft, tmp_path):
    """KRaft fences a broker whose heartbeats stop; it stays registered. Metadata lists the
    unfenced brokers only; DescribeCluster v2 lists the fenced one to a client that asks
    (kafka-python does); librdkafka does not ask. `kit status` counts it dead; `kit apply` onto
    it is refused, saying it is dead; Kafka's controller itself accepts a move onto it."""
    state, bootstrap, ports = kraft
    assert run_kit("sim", "kill", "--state", state, "--broker", 4).returncode == 0
    try:
        assert describe_cluster_v2(ports[1], include_fenced=True) == {1: False, 2: False, 3: False, 4: True}
        assert describe_cluster_v2(ports[1], include_fenced=False) == {1: False, 2: False, 3: False}
        meta = MetadataResponse.decode(frame_roundtrip(ports[2], MetadataRequest(topics=None), 12), version=12,
                                       header=True)
        assert sorted(b.node_id for b in meta.brokers) == [1, 2, 3]
        client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=60000)
        try:
            described = client.describe_cluster()
            assert {b["broker_id"]: b["is_fenced"] for b in described["brokers"]} == \
                {1: False, 2: False, 3: False, 4: True}
            # Kafka's controller takes any registered broker (validateManualPartitionAssignment).
            assert client.alter_partition_reassignments({TopicPartition("t", 0): [1, 4]}) == \
                {TopicPartition("t", 0): None}
            assert client.alter_partition_reassignments({TopicPartition("t", 0): None}) == \
                {TopicPartition("t", 0): None}
            wait_for("t-0 back on [1, 2]", lambda: not client.list_partition_reassignments(), 120)
        finally:
            client.close()
        ck = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
        assert sorted(n.id for n in ck.describe_cluster(request_timeout=60).result(timeout=120).nodes) == [1, 2, 3]
        assert sorted(ck.list_topics(timeout=60).brokers) == [1, 2, 3]
        r = run_kit("status", "--bootstrap", bootstrap)
        assert r.returncode == 0 and "brokers: 3 live, 1 dead (4)" in r.stdout, r.stdout + r.stderr
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 1, "replicas": [2, 4]}]}))
        r = run_kit("apply", plan, "--bootstrap", bootstrap)
        assert r.returncode == 3 and r.stderr.count("\n") == 1, r.stderr
        assert "broker 4 in the plan (t-1) is dead (registered, fenced); nothing was changed" in r.stderr
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 1, "replicas": [2, 9]}]}))
        r = run_kit("apply", plan, "--bootstrap", bootstrap)
        assert r.returncode == 3 and "broker 9 in the plan (t-1) is not registered" in r.stderr, r.stderr
    finally:
        assert run_kit("sim", "revive", "--state", state, "--broker", 4).returncode == 0
    assert describe_cluster_v2(ports[1], include_fenced=True) == {1: False, 2: False, 3: False, 4: False}
    r = run_kit("status", "--bootstrap", bootstrap)
    assert "brokers: 4 live, 0 dead" in r.stdout, r.stdout + r.stderr


# ------------------------------------------------------------------ ApiVersions per release


def test_the_default_release_is_kafka_4_0(kraft):
    """Kafka 4.0's ranges: ApiVersions 0-4, Metadata 0-13, DescribeCluster 0-2,
    AlterPartitionReassignments 0 (v1 is 4.1's); ApiVersions v5 gets error 35 naming 0-4."""
    state, _, ports = kraft
    got = ranges(ports[1])
    assert (got[18], got[3], got[60], got[45], got[46], got[32], got[35], got[44], got[43]) == \
        ((0, 4), (0, 13), (0, 2), (0, 0), (0, 0), (1, 4), (1, 4), (0, 1), (0, 2))
    assert ranges(ports[1], 4) == got
    resp = api_versions_of_version(ports[1], 5)
    assert resp.header.correlation_id == 42 and resp.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(18, 0, 4)]
    assert json.loads((state / "cluster.json").read_text())["kafka_version"] == "4.0"


def test_kafka_3_7_ranges_are_kept_when_the_cluster_resumes(tmp_path):
    """`--kafka-version 3.7`: ApiVersions 0-3 (v4 gets error 35 naming 0-3), Metadata 0-12,
    DescribeCluster 0-1 (no fenced brokers to see); kept in DIR/cluster.json, so a cluster
    stopped and started again without the option answers as 3.7 still. librdkafka negotiates
    with it too."""
    state, bootstrap, ports = start(tmp_path, "--kafka-version", "3.7")
    try:
        for _ in range(2):
            got = ranges(ports[2])
            assert (got[18], got[3], got[60], got[45]) == ((0, 3), (0, 12), (0, 1), (0, 0))
            resp = api_versions_of_version(ports[2], 4)
            assert resp.error_code == 35 and [(k.api_key, k.max_version) for k in resp.api_keys] == [(18, 3)]
            assert json.loads((state / "cluster.json").read_text())["kafka_version"] == "3.7"
            client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=60000)
            try:  # kafka-python falls back on DescribeCluster v1: the live brokers, no fenced field
                assert sorted(b["broker_id"] for b in client.describe_cluster()["brokers"]) == [1, 2, 3, 4]
            finally:
                client.close()
            ck = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
            assert sorted(ck.list_topics(timeout=60).brokers) == [1, 2, 3, 4]
            assert run_kit("sim", "stop", "--state", state, timeout=120).returncode == 0
            r = run_kit("sim", "start", "--kraft", "--state", state, timeout=180)
            assert r.returncode == 0, r.stderr
        # Without DescribeCluster v2 kit knows a dead broker only from the replica lists naming
        # it, as on a real 3.7 cluster: 1 (a replica of t-0 and t-2) is seen, 4 (empty) is not.
        for broker in (1, 4):
            assert run_kit("sim", "kill", "--state", state, "--broker", broker).returncode == 0
        r = run_kit("status", "--bootstrap", bootstrap)
        assert r.returncode == 0 and "brokers: 2 live, 1 dead (1)" in r.stdout, r.stdout + r.stderr
    finally:
        run_kit("sim", "stop", "--state", state, timeout=120)


def test_an_unknown_release_is_refused_in_one_line_and_nothing_is_written(tmp_path):
    snap, state = tmp_path / "cluster.json", tmp_path / "state"
    snap.write_text(json.dumps(snapshot_doc()))
    for bad in ("3.8", "latest", ""):
        r = run_kit("sim", "start", "--kraft", "--snapshot", snap, "--state", state, "--kafka-version", bad)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert "is not a Kafka release the simulated cluster answers as (3.7 or 4.0)" in r.stderr
        assert not state.exists()


# ------------------------------------------------------------------ APPEND and SUBTRACT


def described(client, topic: str, key: str) -> str:
    return client.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic, [key])])["topic"][topic][key][
        "value"]


def test_append_and_subtract_on_list_configs_as_kafka_does(kraft):
    """APPEND adds the values not in the list yet, SUBTRACT removes those in it (from the
    default when unset: cleanup.policy's "delete"); on a key that is not a LIST: 40
    INVALID_CONFIG, nothing written. kafka-python and confluent-kafka alike."""
    _, bootstrap, _ = kraft
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=60000)
    ck = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    try:
        def alter(key, op, value):
            return client.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "t", configs={key: (op, value)})])

        assert alter(LEADER_REPLICAS, AlterConfigOp.APPEND, "0:1,1:2") == {"topic": {"t": "OK"}}
        assert alter(LEADER_REPLICAS, AlterConfigOp.APPEND, "1:2,2:3") == {"topic": {"t": "OK"}}
        assert described(client, "t", LEADER_REPLICAS) == "0:1,1:2,2:3"
        assert alter(LEADER_REPLICAS, AlterConfigOp.SUBTRACT, "1:2,9:9") == {"topic": {"t": "OK"}}
        assert described(client, "t", LEADER_REPLICAS) == "0:1,2:3"
        got = alter("retention.ms", AlterConfigOp.APPEND, "5")["topic"]["t"]
        assert "Error 40" in got and "because its type is not LIST" in got
        got = alter(LEADER_REPLICAS, AlterConfigOp.APPEND, "*")["topic"]["t"]  # "0:1,2:3,*" is no valid list
        assert "Error 40" in got and described(client, "t", LEADER_REPLICAS) == "0:1,2:3"

        def ck_alter(key, op, value):
            res = CkConfigResource(ResourceType.TOPIC, "t", incremental_configs=[
                ConfigEntry(key, value, incremental_operation=op)])
            return ck.incremental_alter_configs([res])[res].result(timeout=120)

        ck_alter("cleanup.policy", AlterConfigOpType.APPEND, "compact")
        assert described(client, "t", "cleanup.policy") == "delete,compact"
        ck_alter(LEADER_REPLICAS, AlterConfigOpType.SUBTRACT, "0:1,2:3")
        assert described(client, "t", LEADER_REPLICAS) == ""
        with pytest.raises(KafkaException) as refused:
            ck_alter("min.insync.replicas", AlterConfigOpType.SUBTRACT, "1")
        assert refused.value.args[0].code() == 40
    finally:
        for key in (LEADER_REPLICAS, "cleanup.policy"):
            alter(key, AlterConfigOp.DELETE, None)
        client.close()
