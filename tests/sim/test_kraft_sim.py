"""The simulated KRaft cluster (`kit sim start --kraft`) through two independent Kafka clients:
kafka-python's KafkaAdminClient and confluent-kafka's AdminClient (librdkafka, a separate C
implementation of the protocol), plus raw frames built with kafka-python's protocol classes."""
from __future__ import annotations

import json
import os
import socket
import struct
import threading

import pytest
from confluent_kafka import ElectionType as CkElectionType
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource as CkConfigResource
from confluent_kafka.admin import ResourceType
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient
from kafka.errors import (ElectionNotNeededError, InvalidReplicationAssignmentError, NoReassignmentInProgressError,
                          PreferredLeaderNotAvailableError, UnknownTopicOrPartitionError)
from kafka.protocol.admin import (AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
                                  CreateTopicsRequest, ElectionType)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.structs import TopicPartition

from kit.sim.kraft.cluster import answers, refuses
from tests.conftest import run_kit, wait_for

MB = 10**6
RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"


def snapshot_doc() -> dict:
    """Five brokers in three racks; topic `elect` has partitions led by a non-preferred replica
    (0, 1: electable; 2: preferred replica out of the ISR), the `move*` topics are reassigned."""
    brokers = [{"id": b, "rack": f"rack-{'abc'[b % 3]}", "alive": True, "storage_total": 1000 * MB * 1000,
                "storage_free": 900 * MB * 1000, "net_capacity": 125 * MB} for b in range(1, 6)]
    parts = [{"topic": t, "partition": p, "replicas": [1 + (p % 5), 1 + ((p + 1) % 5)], "size": 100 * MB}
             for t in ("alpha", "move", "cancel", "bad", "ck") for p in range(3)]
    parts += [{"topic": "elect", "partition": 0, "replicas": [1, 2], "leader": 2, "size": MB},
              {"topic": "elect", "partition": 1, "replicas": [3, 4], "leader": 4, "size": MB},
              {"topic": "elect", "partition": 2, "replicas": [2, 3], "isr": [3], "leader": 3, "size": MB},
              {"topic": "elect", "partition": 3, "replicas": [4, 5], "leader": 5, "size": MB}]
    return {"version": 1, "brokers": brokers, "partitions": parts}


def small_snapshot(path):
    """`snapshot_doc` with its first three partitions only, written to `path` (returned): a
    cluster that starts quickly."""
    doc = snapshot_doc()
    doc["partitions"] = doc["partitions"][:3]
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture(scope="module")
def kraft(tmp_path_factory):
    """One simulated KRaft cluster for the module, started and stopped through the CLI:
    (state dir, bootstrap line, {broker: port})."""
    root = tmp_path_factory.mktemp("kraft")
    snap, state = root / "cluster.json", root / "state"
    snap.write_text(json.dumps(snapshot_doc()))
    r = run_kit("sim", "start", "--kraft", "--snapshot", snap, "--state", state, "--speed", "50", timeout=180)
    assert r.returncode == 0, r.stderr
    bootstrap = (state / "bootstrap").read_text().strip()
    assert r.stdout.strip().splitlines()[-1] == bootstrap
    ports = {int(b): p for b, p in json.loads((state / "cluster.json").read_text())["ports"].items()}
    yield state, bootstrap, ports
    assert run_kit("sim", "stop", "--state", state).returncode == 0


@pytest.fixture(scope="module")
def admin(kraft):
    client = KafkaAdminClient(bootstrap_servers=kraft[1], request_timeout_ms=60000)
    yield client
    client.close()


@pytest.fixture(scope="module")
def ck_admin(kraft):
    return AdminClient({"bootstrap.servers": kraft[1], "log_level": 3})


def partition(admin, topic: str, p: int) -> dict:
    return next(x for x in admin.describe_topics([topic])[0]["partitions"] if x["partition_index"] == p)


def frame_roundtrip(port: int, request, version: int) -> bytes:
    """Send one request built with kafka-python's classes; the response frame (b"" if the
    connection was closed instead)."""
    request.with_header(correlation_id=42, client_id="kit-test")
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(bytes(request.encode(version=version, header=True, framed=True)))
        return recv_frame(s)


def recv_frame(s: socket.socket) -> bytes:
    head = b""
    while len(head) < 4:
        chunk = s.recv(4 - len(head))
        if not chunk:
            return b""
        head += chunk
    size, body = struct.unpack(">i", head)[0], b""
    while len(body) < size:
        chunk = s.recv(size - len(body))
        assert chunk, "connection closed mid-response"
        body += chunk
    return body


def test_describe_cluster_and_topics_follow_the_snapshot(admin, kraft):
    _, _, ports = kraft
    c = admin.describe_cluster()
    assert {b["broker_id"]: b["port"] for b in c["brokers"]} == ports
    assert {b["broker_id"]: b["rack"] for b in c["brokers"]}[2] == "rack-c"
    assert c["controller_id"] in ports and c["cluster_id"]
    p = partition(admin, "elect", 0)
    assert (p["replica_nodes"], p["leader_id"], p["isr_nodes"], p["offline_replicas"]) == ([1, 2], 2, [1, 2], [])
    assert len(admin.describe_topics(["alpha"])[0]["partitions"]) == 3


def test_unknown_topic_is_unknown_topic_or_partition(admin):
    [t] = admin.describe_topics(["no-such-topic"])
    assert t["error_code"] == UnknownTopicOrPartitionError.errno and t["partitions"] == []


def test_incremental_alter_configs_set_and_delete_throttles(admin):
    res = admin.alter_configs([
        ConfigResource(ConfigResourceType.BROKER, "3", configs={RATE: (AlterConfigOp.SET, "50000000"),
                                                                FOLLOWER_RATE: (AlterConfigOp.SET, "40000000")}),
        ConfigResource(ConfigResourceType.TOPIC, "alpha",
                       configs={"leader.replication.throttled.replicas": (AlterConfigOp.SET, "0:1,1:2")})])
    assert res == {"broker": {"3": "OK"}, "topic": {"alpha": "OK"}}
    got = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "3"),
                                  ConfigResource(ConfigResourceType.TOPIC, "alpha")])
    assert got["broker"]["3"][RATE]["value"] == "50000000"
    assert got["broker"]["3"][RATE]["config_source"] == "DYNAMIC_BROKER_CONFIG"
    assert got["topic"]["alpha"]["leader.replication.throttled.replicas"]["value"] == "0:1,1:2"
    assert admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "3",
                                               configs={RATE: (AlterConfigOp.DELETE, None)})]) == {"broker": {"3": "OK"}}
    after = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "3")])["broker"]["3"]
    assert RATE not in after and after[FOLLOWER_RATE]["value"] == "40000000"  # DELETE touches only its key
    bad = admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "3", configs={RATE: "fast"})])
    assert "InvalidConfigurationError" in bad["broker"]["3"]


def test_reassignment_shows_adding_and_removing_then_completes(admin):
    tp = TopicPartition("move", 0)
    before = partition(admin, "move", 0)["replica_nodes"]  # [1, 2]
    target = [3, 2]
    # Broker 3 may take in one byte a second: the copy is still under way when listed.
    admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "3", configs={FOLLOWER_RATE: "1"})])
    assert admin.alter_partition_reassignments({tp: target}) == {tp: None}
    listed = admin.list_partition_reassignments()[tp]
    assert listed == {"replicas": [3, 2, 1], "adding_replicas": [3], "removing_replicas": [1]}
    assert before == [1, 2]
    assert admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "3",
                                               configs={FOLLOWER_RATE: (AlterConfigOp.DELETE, None)})]) \
        == {"broker": {"3": "OK"}}
    wait_for("the reassignment completing", lambda: tp not in admin.list_partition_reassignments(), 60)
    p = partition(admin, "move", 0)
    assert (p["replica_nodes"], p["leader_id"], sorted(p["isr_nodes"])) == (target, 3, [2, 3])


def test_cancel_reverts_and_cancelling_nothing_is_no_reassignment_in_progress(admin):
    tp = TopicPartition("cancel", 1)  # replicas [2, 3]
    admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "5", configs={FOLLOWER_RATE: "1"})])
    try:
        assert admin.alter_partition_reassignments({tp: [5, 3]}) == {tp: None}
        assert admin.list_partition_reassignments()[tp]["adding_replicas"] == [5]
        assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
        assert tp not in admin.list_partition_reassignments()
        p = partition(admin, "cancel", 1)
        assert sorted(p["replica_nodes"]) == [2, 3] and 5 not in p["isr_nodes"]
        assert admin.alter_partition_reassignments({tp: None}) == {tp: NoReassignmentInProgressError}
    finally:
        admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "5",
                                            configs={FOLLOWER_RATE: (AlterConfigOp.DELETE, None)})])


def test_invalid_replica_assignments_and_unknown_partitions_are_refused(admin, kraft):
    bad = {TopicPartition("bad", 0): [3, 3], TopicPartition("bad", 1): [99],
           TopicPartition("bad", 7): [1, 2], TopicPartition("no-such-topic", 0): [1, 2]}
    got = admin.alter_partition_reassignments(bad)
    assert got == {TopicPartition("bad", 0): InvalidReplicationAssignmentError,
                   TopicPartition("bad", 1): InvalidReplicationAssignmentError,
                   TopicPartition("bad", 7): UnknownTopicOrPartitionError,
                   TopicPartition("no-such-topic", 0): UnknownTopicOrPartitionError}
    # An empty list (kafka-python refuses to send one): built with its protocol classes instead.
    Topic = AlterPartitionReassignmentsRequest.ReassignableTopic
    req = AlterPartitionReassignmentsRequest(timeout_ms=30000, topics=[
        Topic(name="bad", partitions=[Topic.ReassignablePartition(partition_index=2, replicas=[])])])
    resp = AlterPartitionReassignmentsResponse.decode(frame_roundtrip(kraft[2][1], req, 0), version=0, header=True)
    assert resp.responses[0].partitions[0].error_code == InvalidReplicationAssignmentError.errno
    assert not any(tp.topic == "bad" for tp in admin.list_partition_reassignments())  # nothing was started


def test_elect_leaders_preferred(admin):
    res = admin.elect_leaders(ElectionType.PREFERRED, {"elect": [0, 2]}, raise_errors=False)
    codes = {r.partition_id: r.error_code for t in res.replica_election_results for r in t.partition_result}
    assert codes == {0: 0, 2: PreferredLeaderNotAvailableError.errno}
    assert partition(admin, "elect", 0)["leader_id"] == 1
    again = admin.elect_leaders(ElectionType.PREFERRED, {"elect": [0]}, raise_errors=False)
    assert again.replica_election_results[0].partition_result[0].error_code == ElectionNotNeededError.errno


def test_describe_log_dirs_gives_sizes_and_disk(admin):
    [entry] = admin.describe_log_dirs(brokers=[4])
    [d] = entry["log_dirs"]
    sizes = {(t["name"], p["partition_index"]): p["partition_size"] for t in d["topics"] for p in t["partitions"]}
    assert sizes[("alpha", 2)] == 100 * MB and ("alpha", 0) not in sizes  # broker 4 holds alpha-2, not alpha-0
    assert d["total_bytes"] == 1000 * MB * 1000 and 0 < d["usable_bytes"] < d["total_bytes"]


def test_confluent_kafka_sees_the_same_cluster(ck_admin, kraft):
    _, _, ports = kraft
    md = ck_admin.list_topics(timeout=30)
    assert {b.id: b.port for b in md.brokers.values()} == ports
    assert sorted(p.replicas for p in md.topics["elect"].partitions.values())[0] == [1, 2]
    desc = ck_admin.describe_cluster().result(timeout=30)
    assert sorted(n.id for n in desc.nodes) == sorted(ports)


def test_confluent_kafka_alters_and_describes_configs(ck_admin, admin):
    res = CkConfigResource(ResourceType.BROKER, "4", incremental_configs=[
        ConfigEntry(RATE, "30000000", incremental_operation=AlterConfigOpType.SET)])
    for fut in ck_admin.incremental_alter_configs([res]).values():
        fut.result(timeout=30)
    [fut] = ck_admin.describe_configs([CkConfigResource(ResourceType.BROKER, "4")]).values()
    assert fut.result(timeout=30)[RATE].value == "30000000"
    # kafka-python reads what librdkafka wrote: one cluster state, two implementations
    assert admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "4")])["broker"]["4"][RATE]["value"] \
        == "30000000"
    topic = CkConfigResource(ResourceType.TOPIC, "ck", incremental_configs=[
        ConfigEntry("follower.replication.throttled.replicas", "*", incremental_operation=AlterConfigOpType.SET)])
    for fut in ck_admin.incremental_alter_configs([topic]).values():
        fut.result(timeout=30)
    [fut] = ck_admin.describe_configs([CkConfigResource(ResourceType.TOPIC, "ck")]).values()
    assert fut.result(timeout=30)["follower.replication.throttled.replicas"].value == "*"


def test_confluent_kafka_elects_leaders(ck_admin, admin):
    fut = ck_admin.elect_leaders(CkElectionType.PREFERRED, [CkTopicPartition("elect", 1)])
    assert CkTopicPartition("elect", 1) in fut.result(timeout=60)
    assert partition(admin, "elect", 1)["leader_id"] == 3


def test_api_versions_v3_and_v4_are_answered_as_kafka_4_0_answers_them(kraft):
    """The default release is Kafka 4.0, whose ApiVersions goes to v4 (a version beyond it gets
    error 35: tests/sim/test_kraft_release.py, with Kafka 3.7's ranges)."""
    _, _, ports = kraft
    port = ports[1]
    body = frame_roundtrip(port, ApiVersionsRequest(client_software_name="t", client_software_version="1"), 4)
    resp = ApiVersionsResponse.decode(body, version=4, header=True)
    assert resp.header.correlation_id == 42 and resp.error_code == 0
    assert {k.api_key: k.max_version for k in resp.api_keys}[18] == 4
    ok = ApiVersionsResponse.decode(frame_roundtrip(port, ApiVersionsRequest(), 3), version=3, header=True)
    assert ok.error_code == 0 and {k.api_key for k in ok.api_keys} >= {3, 18, 32, 35, 43, 44, 45, 46, 60}


def test_unserved_apis_and_bad_frames_close_the_connection_only(kraft):
    _, _, ports = kraft
    port = ports[2]
    assert frame_roundtrip(port, CreateTopicsRequest(topics=[], timeout_ms=1000), 5) == b""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        cut = b"\x00\x03\x00\x09\x00\x00\x00\x01\x00\x50"  # Metadata v9 whose client id is cut short
        s.sendall(struct.pack(">i", len(cut)) + cut)
        assert recv_frame(s) == b""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(struct.pack(">i", -5))
        assert recv_frame(s) == b""
    body = frame_roundtrip(port, MetadataRequest(topics=None), 12)  # the broker still serves
    assert len(MetadataResponse.decode(body, version=12, header=True).brokers) == len(ports)


def test_many_concurrent_clients(kraft):
    _, _, ports = kraft
    results: list[bool] = []
    threads = [threading.Thread(target=lambda p=p: results.append(answers(p, timeout=30)))
               for p in list(ports.values()) * 8]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert results == [True] * len(threads)


def test_killed_brokers_listener_refuses_and_clients_fail_over(kraft):
    state, bootstrap, ports = kraft
    assert run_kit("sim", "kill", "--state", state, "--broker", "1").returncode == 0
    try:
        assert refuses(ports[1])
        # bootstrapped on every broker, the dead first: the client uses another
        client = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{ports[1]}," + bootstrap, request_timeout_ms=60000)
        try:
            # KRaft keeps the dead broker registered, fenced: kafka-python asks for fenced brokers.
            described = {b["broker_id"]: b["is_fenced"] for b in client.describe_cluster()["brokers"]}
            assert described == {1: True, 2: False, 3: False, 4: False, 5: False}
            # replicas [1, 2]: 2 leads once the election is seen. Brokers answer from a view up to
            # FRESH_S old, so a read just after the kill may still name 1, answered as no leader
            # (LEADER_NOT_AVAILABLE, as a real client sees during an election): wait for it, bounded.
            def failed_over():
                p = partition(client, "alpha", 0)
                return (p["offline_replicas"], p["leader_id"]) == ([1], 2)
            wait_for("alpha-0 led by 2, 1 offline", failed_over, 60)
        finally:
            client.close()
    finally:
        assert run_kit("sim", "revive", "--state", state, "--broker", "1").returncode == 0
    assert answers(ports[1])


def test_start_refuses_bad_input_and_stop_leaves_no_process(tmp_path):
    snap, state = tmp_path / "cluster.json", tmp_path / "state"
    missing = run_kit("sim", "start", "--kraft", "--snapshot", tmp_path / "none.json", "--state", state)
    assert missing.returncode == 2 and not state.exists()
    small_snapshot(snap)
    assert run_kit("sim", "start", "--kraft", "--snapshot", snap, "--state", state, timeout=180).returncode == 0
    pids = [int((state / "server.pid").read_text())]  # the whole cluster: no ZooKeeper, no other process
    assert not (state / "zk").exists()
    ports = json.loads((state / "cluster.json").read_text())["ports"].values()
    again = run_kit("sim", "start", "--kraft", "--snapshot", snap, "--state", state)
    assert again.returncode == 2 and "already runs" in again.stderr
    assert run_kit("sim", "stop", "--state", state).returncode == 0
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1][:3]
    assert all(refuses(p) for p in ports)


def test_a_port_is_held_from_the_moment_it_is_chosen_until_the_server_listens(tmp_path, monkeypatch):
    """kit sim start chose ports free and the server bound them a second later, once Python had
    started it: on two loaded cores another test's simulator took one meanwhile ("broker 1005
    cannot listen on port 13083: Address already in use", CI of 2ba154a). Now each port is held
    as it is chosen and the server inherits the socket: a stranger binding any of them just
    before the server is spawned is refused, and the cluster starts on them."""
    from kit.sim.kraft import cluster as kraft, state as kraft_state

    spawn, tried = kraft._spawn, []

    def a_stranger_binds_first(state_dir, name, argv, **how):
        config = json.loads((tmp_path / "state" / "cluster.json").read_text())
        for port in [*config["ports"].values(), config["control"]]:
            with socket.socket() as stranger:
                try:
                    stranger.bind(("127.0.0.1", port))
                    tried.append((port, "bound"))
                except OSError:
                    tried.append((port, "refused"))
        return spawn(state_dir, name, argv, **how)
    monkeypatch.setattr(kraft, "_spawn", a_stranger_binds_first)
    snap, state = small_snapshot(tmp_path / "cluster.json"), tmp_path / "state"
    try:
        line = kraft.start(str(snap), str(state))
        ports = json.loads((state / "cluster.json").read_text())["ports"]
        assert len(tried) == len(ports) + 1 and all(how == "refused" for _, how in tried), tried
        assert line == ",".join(f"127.0.0.1:{p}" for p in ports.values()) and all(answers(p) for p in ports.values())
    finally:
        kraft_state.stop(str(state))
    assert all(refuses(p) for p in ports.values())


def test_held_ports_refuse_other_binders_and_a_taken_one_is_named():
    """A held port refuses a binder that allows reuse (as a free-port check does); holding the
    ports of a cluster resumed, one another process took is named with its broker."""
    from kit.cluster.zk.server import free_port, port_free
    from kit.sim.kraft import server

    port = free_port()
    held = server.bind_all({1: port})
    try:
        assert not port_free(port)
        with socket.socket() as other:
            other.bind(("127.0.0.1", 0))
            other.listen(1)
            taken = other.getsockname()[1]
            with pytest.raises(OSError, match=f"broker 7 cannot listen on port {taken}"):
                server.bind_all({6: free_port(), 7: taken})
    finally:
        held[1].close()
    assert port_free(port)


def test_a_refused_snapshot_starts_nothing_and_writes_nothing(tmp_path):
    """The snapshot is checked whole before the state directory is made or the server started:
    a bad partition is bad input (exit 2, one line) and nothing is written."""
    doc = snapshot_doc()
    doc["partitions"] = doc["partitions"][:3]
    doc["partitions"][1]["replicas"] = [doc["partitions"][1]["replicas"][0]] * 2
    snap, state = tmp_path / "cluster.json", tmp_path / "state"
    snap.write_text(json.dumps(doc))
    r = run_kit("sim", "start", "--kraft", "--snapshot", snap, "--state", state, timeout=180)
    assert r.returncode == 2 and "twice in its replicas" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not state.exists()


def test_start_waits_for_listeners_slower_than_a_minute_and_says_so(tmp_path, monkeypatch, capsys):
    """On two loaded cores the same start took over 60 s (CI: a runbook's simulated KRaft cluster
    "did not answer within 60 s"). `start` waits for the listeners themselves, says on stderr what
    it waits for, and gives up only at its bound. The start's own clock is made to run fast: each
    of its pauses counts ten seconds until 80 s have passed (then the clock stands still, however
    long the real processes take to come up), and the listeners are not asked before 70 s."""
    import time as real_time

    from kit.sim.kraft import cluster as kraft, state as kraft_state

    class FastClock:
        now = 0.0

        @classmethod
        def monotonic(cls):
            return cls.now

        @classmethod
        def sleep(cls, seconds):
            if cls.now < 80.0:
                cls.now += 10.0
            else:
                real_time.sleep(seconds)

    really_answers = kraft.answers
    monkeypatch.setattr(kraft, "time", FastClock)
    monkeypatch.setattr(kraft, "answers", lambda port: FastClock.now > 70.0 and really_answers(port))
    snap, state = small_snapshot(tmp_path / "cluster.json"), tmp_path / "state"
    try:
        line = kraft.start(str(snap), str(state))
        assert line.count("127.0.0.1:") == len(json.loads((state / "cluster.json").read_text())["ports"])
        assert "broker listeners answer; waiting up to" in capsys.readouterr().err
    finally:
        kraft_state.stop(str(state))


def test_a_port_taken_since_seen_free_is_passed_over_and_a_resumed_cluster_names_a_taken_one(tmp_path, monkeypatch):
    """Here another simulated cluster holds a port, answering Kafka's ApiVersions as any broker
    would. A new cluster whose free-port check offers it that port (taken since it was seen
    free) passes it over and starts on others, the other cluster untouched. A stopped cluster
    keeps its ports for life: resumed while another process holds one, the start fails, names
    the broker and the port, and leaves nothing running (a client there would be answered by
    a stranger)."""
    from kit.errors import Stuck
    from kit.sim.kraft import cluster as kraft, state as kraft_state

    snap = small_snapshot(tmp_path / "cluster.json")
    other, state = tmp_path / "other", tmp_path / "state"
    taken = int(kraft.start(str(snap), str(other)).split(",")[0].rsplit(":", 1)[1])
    try:
        seen_free, offers = kraft.localzk.free_port, iter([taken])
        monkeypatch.setattr(kraft.localzk, "free_port", lambda: next(offers, None) or seen_free())
        line = kraft.start(str(snap), str(state))
        assert f"127.0.0.1:{taken}" not in line.split(",") and len(line.split(",")) == 5
        kraft_state.stop(str(state))
        broker, port = min(json.loads((state / "cluster.json").read_text())["ports"].items())
        with socket.socket() as stranger:
            stranger.bind(("127.0.0.1", port))
            stranger.listen(1)
            with pytest.raises(Stuck) as failed:
                kraft.start(None, str(state))
        assert f"broker {broker} cannot listen on port {port}" in str(failed.value), failed.value
        assert not kraft_state.running(str(state))
        assert answers(taken)  # the other cluster's broker, untouched
    finally:
        kraft_state.stop(str(other))
        kraft_state.stop(str(state))
