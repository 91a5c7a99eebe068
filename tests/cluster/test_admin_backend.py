"""The Admin API backend (kit/cluster/kafka) against a simulated KRaft cluster speaking Kafka's
protocol (`kit sim start --kraft`): reading, apply as Kafka's reassignment tool does it, the
refusal while a reassignment runs, verify until done with the throttles cleared (librdkafka reading
what kit wrote), throttles kept apart from other configs, and the errors' exit codes. Rollback,
elect and a bad plan are tests/cluster/test_execute.py's, on both backends."""
from __future__ import annotations

import json
import os
import socket
import threading
import time

import pytest
from kafka import errors as kerr
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

from conftest import run_kit
from kit.cluster.backend import ClusterAddress, ClusterBackend, open_backend
from kit.cluster.kafka.backend import AdminBackend
from kit.cluster.kafka import connect
from kit.cluster.kafka.connect import client_settings, read_properties
from kit.errors import BadInput, Unreachable, Unsafe
from kit.formats import load_snapshot
from kit.throttle.configs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS

CRAWL = 1000  # bytes/s: a reassignment throttled so that it runs until the test lets it go
SPEED = 1000  # simulated seconds per wall second


@pytest.fixture(scope="module")
def kraft(snapshots, tmp_path_factory):
    """A simulated KRaft cluster of the scale-out snapshot (three empty brokers): (bootstrap,
    state dir, the snapshot's cluster). kit's own state (overrides, metrics) in a folder of its own."""
    state = tmp_path_factory.mktemp("kraft")
    old = os.environ.get("KIT_STATE_DIR")
    os.environ["KIT_STATE_DIR"] = str(state / "kit")
    r = run_kit("sim", "start", "--kraft", "--snapshot", snapshots["scale-out"], "--state", state / "sim",
                "--speed", SPEED, timeout=180)
    assert r.returncode == 0, r.stderr
    bootstrap = (state / "sim" / "bootstrap").read_text().strip()
    assert r.stdout.strip().splitlines()[-1] == bootstrap
    try:
        yield bootstrap, state / "sim", load_snapshot(str(snapshots["scale-out"]))
    finally:
        run_kit("sim", "stop", "--state", state / "sim", timeout=120)
        if old is None:
            os.environ.pop("KIT_STATE_DIR", None)
        else:
            os.environ["KIT_STATE_DIR"] = old


def _moves(cluster, n=4, skip=0) -> list[dict]:
    """Move the last replica of `n` partitions onto the brokers that hold none (scale-out)."""
    empty = [b for b in cluster.live_ids if b not in cluster.map_brokers()]
    parts = cluster.partitions[skip:skip + n]
    return [{"topic": p.topic, "partition": p.partition, "replicas": list(p.replicas[:-1]) + [empty[i % len(empty)]]}
            for i, p in enumerate(parts)]


def _let_go(backend, moves) -> dict:
    """Lift the crawl throttle so the simulated controller finishes the copies; then verify
    until done (bounded by its stall)."""
    brokers = {b for m in moves for b in m["replicas"]} | {b for b in range(1001, 1016)}
    backend.set_throttles(brokers={b: {LEADER_RATE: str(10**12), FOLLOWER_RATE: str(10**12)} for b in brokers})
    return backend.verify_until_done(moves, interval=0.5, stall=60)


def _seen_by_librdkafka(bootstrap: str, brokers: dict, topics: dict) -> bool:
    """Whether confluent-kafka's AdminClient (librdkafka, an implementation of its own) describes
    the throttle configs kit's backend wrote, key for key."""
    from confluent_kafka.admin import AdminClient, ConfigResource as CkResource, ResourceType

    client = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 30000})
    wanted = [(CkResource(ResourceType.BROKER, str(b)), keys) for b, keys in brokers.items()]
    wanted += [(CkResource(ResourceType.TOPIC, t), keys) for t, keys in topics.items()]
    for resource, keys in wanted:
        [future] = client.describe_configs([resource]).values()
        described = future.result(timeout=60)
        if any(described[k].value != v for k, v in keys.items()):
            return False
    return True


def _idle(backend) -> None:
    """Leave the cluster as found: nothing running, no throttle."""
    _, running = backend.read()
    if running is not None:
        backend.cancel([(e["topic"], e["partition"]) for e in running["partitions"]])
    backend.verify()
    assert not backend.reassigning() and backend.throttles() == ({}, {})


def test_the_admin_backend_reads_the_cluster_as_the_snapshot_has_it(kraft):
    bootstrap, _, seeded = kraft
    with open_backend(ClusterAddress(bootstrap=bootstrap)) as backend:
        assert isinstance(backend, ClusterBackend) and isinstance(backend, AdminBackend)
        cluster, running = backend.read()
        st = backend.status()
    assert running is None and not st["reassigning"] and st["under_replicated"] == []
    assert {b.id: b.rack for b in cluster.brokers.values()} == {b.id: b.rack for b in seeded.brokers.values()}
    assert [(p.key, p.replicas, p.isr) for p in cluster.partitions] == \
        [(p.key, p.replicas, p.isr) for p in seeded.partitions]
    assert [p.size for p in cluster.partitions] == [p.size for p in seeded.partitions]  # DescribeLogDirs
    assert all(p.leader == p.replicas[0] for p in cluster.partitions)
    assert all(b.storage_total == seeded.brokers[b.id].storage_total for b in cluster.brokers.values())


def test_a_read_pauses_garbage_collection_and_leaves_it_as_it_was(kraft, monkeypatch):
    """A read of a large cluster makes millions of objects, none in a cycle: collections pause
    while the answers are decoded and the model built, and resume after (or stay off when
    they were), a failed read included."""
    import gc

    from kit.cluster.kafka import model

    bootstrap, _, seeded = kraft
    seen, build = [], model.build_cluster

    def watched(*args, **kwargs):
        seen.append(gc.isenabled())
        return build(*args, **kwargs)
    monkeypatch.setattr(model, "build_cluster", watched)
    with open_backend(ClusterAddress(bootstrap=bootstrap)) as backend:
        assert gc.isenabled()
        assert len(backend.read()[0].partitions) == len(seeded.partitions)
        assert seen == [False] and gc.isenabled()
        gc.disable()
        try:
            backend.read()
            assert not gc.isenabled()
        finally:
            gc.enable()

        def broken(*_, **__):
            raise RuntimeError("decoding failed")
        monkeypatch.setattr(model, "build_cluster", broken)
        with pytest.raises(RuntimeError):
            backend.read()
        assert gc.isenabled()


def test_apply_sets_throttles_then_the_reassignment_refuses_a_second_and_verify_clears_them(kraft, tmp_path):
    bootstrap, _, seeded = kraft
    moves, other = _moves(seeded), _moves(seeded, 2, skip=10)
    plan, second, rollback = tmp_path / "plan.json", tmp_path / "second.json", tmp_path / "rollback.json"
    plan.write_text(json.dumps({"version": 1, "partitions": moves}))
    second.write_text(json.dumps({"version": 1, "partitions": other}))
    r = run_kit("apply", plan, "--bootstrap", bootstrap, "--throttle", CRAWL, "--rollback-out", rollback)
    assert r.returncode == 0, r.stderr
    assert [e["replicas"] for e in json.loads(rollback.read_text())["partitions"]] == \
        [list(p.replicas) for p in seeded.partitions[:len(moves)]]
    with open_backend(ClusterAddress(bootstrap=bootstrap)) as backend:
        try:
            _, running = backend.read()
            assert running["partitions"] == sorted(moves, key=lambda m: (m["topic"], m["partition"]))
            brokers, topics = backend.throttles()
            assert sorted(topics) == sorted({m["topic"] for m in moves})
            assert all(set(k) == {LEADER_REPLICAS, FOLLOWER_REPLICAS} for k in topics.values())
            assert brokers and all(k == {LEADER_RATE: str(CRAWL), FOLLOWER_RATE: str(CRAWL)} for k in brokers.values())
            assert _seen_by_librdkafka(bootstrap, brokers, topics)

            r = run_kit("apply", second, "--bootstrap", bootstrap, "--throttle", "50000000")
            assert r.returncode == 3 and "already in progress" in r.stderr and r.stderr.count("\n") == 1, r.stderr
            assert backend.read()[1] == running and backend.throttles() == (brokers, topics)  # nothing changed
            with pytest.raises(Unsafe):
                backend.clear_leftover_throttles()

            res = _let_go(backend, moves)
            assert res["done"] and not res["running"]
            assert backend.throttles() == ({}, {}) and backend.progress(moves) == "in place"
            cluster, _ = backend.read()
            now = {p.key: list(p.replicas) for p in cluster.partitions}
            assert all(now[(m["topic"], m["partition"])] == m["replicas"] for m in moves)
        finally:
            _idle(backend)
        # Put the partitions back for the other tests (the same path: a reassignment, verified).
        back = json.loads(rollback.read_text())["partitions"]
        backend.apply(back)
        assert backend.verify_until_done(back, interval=0.5, stall=60)["done"]


def test_throttles_are_set_and_cleared_with_other_config_keys_kept(kraft):
    bootstrap, _, seeded = kraft
    topic = seeded.partitions[0].topic
    with open_backend(ClusterAddress(bootstrap=bootstrap)) as backend:
        try:
            backend.admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                                        {"retention.ms": (AlterConfigOp.SET, "3600000")})],
                                        raise_on_unknown=False, incremental=True)
            backend.set_throttles(brokers={1001: {LEADER_RATE: "7"}, "1002": {FOLLOWER_RATE: "8"}},
                                  topics={topic: {LEADER_REPLICAS: "0:1001"}})
            assert backend.throttles() == ({"1001": {LEADER_RATE: "7"}, "1002": {FOLLOWER_RATE: "8"}},
                                           {topic: {LEADER_REPLICAS: "0:1001"}})
            st = backend.status()
            assert st["throttled_brokers"] == [1001, 1002] and st["throttled_topics"] == [topic]
            assert st["throttles_without_reassignment"]
            assert backend.clear_throttles(brokers=[1001, 1003]) == (["1001"], [])
            assert backend.clear_leftover_throttles() == (1, 1) and backend.throttles() == ({}, {})
            kept = backend.admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic, ["retention.ms"])])
            assert kept["topic"][topic]["retention.ms"]["value"] == "3600000"
        finally:
            backend.admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                                        {"retention.ms": (AlterConfigOp.DELETE, None)})],
                                        raise_on_unknown=False, incremental=True)
            _idle(backend)


def test_overrides_and_metrics_live_in_the_state_file_and_metrics_directory(kraft, tmp_path):
    bootstrap, _, seeded = kraft
    state, metrics = tmp_path / "state.json", tmp_path / "metrics"
    with open_backend(ClusterAddress(bootstrap=bootstrap, state_file=str(state), metrics_dir=str(metrics))) as backend:
        assert backend.throttle_overrides() == {} and backend.remove_throttle_override() is None
        assert backend.broker_metrics() is None and backend.sim_facts() is None
        where = backend.store_throttle_override(b'{"rate": 30.0, "autoremove": true}')
        backend.store_throttle_override(b'{"rate": 20.0, "autoremove": false}', "1002")
        assert list(backend.throttle_overrides().values()) == [
            (None, b'{"rate": 30.0, "autoremove": true}'), ("1002", b'{"rate": 20.0, "autoremove": false}')]
        assert where.startswith(str(state))
        assert backend.remove_throttle_override() == b'{"rate": 30.0, "autoremove": true}'
        assert backend.remove_throttle_override("1002") == b'{"rate": 20.0, "autoremove": false}'
        assert list(backend.throttle_overrides().values()) == [(None, b"{}")]
        doc = {"1001": {"StorageFree": 7000, "NetRX": 1.0, "NetTX": 2.0}}
        backend.write_metrics({}, doc)
        assert backend.broker_metrics()[0] == doc
    r = run_kit("throttle", "set", "50000000", "--broker", "1003", "--bootstrap", bootstrap)
    assert r.returncode == 0, r.stderr
    with open_backend(ClusterAddress(bootstrap=bootstrap)) as backend:  # the default state file, shared by every kit process
        assert [name for name, _ in backend.throttle_overrides().values()] == [None, "1003"]
        assert run_kit("throttle", "remove", "--broker", "1003", "--bootstrap", bootstrap).returncode == 0
        assert [name for name, _ in backend.throttle_overrides().values()] == [None]


def test_a_dead_bootstrap_address_is_bad_input_and_kit_gives_up_on_it(tmp_path, monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    # kit gives up after default.api.timeout.ms of trying: 2 s here, through Kafka's own property,
    # rather than waiting out BOOTSTRAP_SECONDS (20 s, given to the client below); the generous
    # bound is for a busy machine.
    conf = tmp_path / "client.properties"
    conf.write_text("default.api.timeout.ms=2000\n")
    r = run_kit("status", "--bootstrap", f"127.0.0.1:{port}", "--command-config", conf, timeout=180)
    assert r.returncode == 2 and "no Kafka broker answers there" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    # Without the property, the client is given BOOTSTRAP_SECONDS to find a broker, and the same
    # one line when none answers (kafka-python's NoBrokersAvailable, raised at once here).
    given = {}

    def no_broker(**settings):
        given.update(settings)
        raise kerr.NoBrokersAvailable()
    monkeypatch.setattr(connect, "KafkaAdminClient", no_broker)
    with pytest.raises(Unreachable, match=f"--bootstrap 127.0.0.1:{port}: no Kafka broker answers there"):
        connect.new_client(f"127.0.0.1:{port}", None, {})
    assert given["bootstrap_timeout_ms"] == connect.BOOTSTRAP_SECONDS * 1000 == 20_000
    with pytest.raises(BadInput, match="expected HOST:PORT"):
        open_backend(ClusterAddress(bootstrap="127.0.0.1"))


def test_a_killed_bootstrap_broker_with_another_in_the_list_still_reaches_the_cluster(kraft):
    bootstrap, state, _ = kraft
    ports = json.loads((state / "cluster.json").read_text())["ports"]
    first = int(bootstrap.split(",")[0].rsplit(":", 1)[1])
    broker = next(int(b) for b, p in ports.items() if p == first)
    assert run_kit("sim", "kill", "--state", state, "--broker", broker).returncode == 0
    try:
        r = run_kit("status", "--bootstrap", ",".join(bootstrap.split(",")[:2]))
        assert r.returncode == 0, r.stderr
        assert f"1 dead ({broker})" in r.stdout or "14 live" in r.stdout, r.stdout
    finally:
        assert run_kit("sim", "revive", "--state", state, "--broker", broker).returncode == 0


def test_command_config_properties_become_client_settings_and_bad_ones_name_the_key_only(tmp_path):
    conf = tmp_path / "client.properties"
    conf.write_text("# SASL over TLS\nsecurity.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                    'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n'
                    '    username="alice" password="s3cr\\"et";\nssl.truststore.type=PEM\n'
                    "ssl.truststore.location=/etc/ca.pem\nssl.endpoint.identification.algorithm=\n")
    settings = client_settings(read_properties(str(conf)), "f")
    assert settings == {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                        "sasl_plain_username": "alice", "sasl_plain_password": 's3cr"et',
                        "ssl_cafile": "/etc/ca.pem", "ssl_check_hostname": False}
    conf.write_text("ssl.keystore.location=/etc/ks.jks\nssl.keystore.password=hunter2\n")
    with pytest.raises(BadInput, match="PEM") as e:
        client_settings(read_properties(str(conf)), "f")
    assert "hunter2" not in str(e.value)
    r = run_kit("status", "--bootstrap", "127.0.0.1:9", "--command-config", conf)
    assert r.returncode == 2 and "hunter2" not in r.stderr + r.stdout and r.stderr.count("\n") == 1, r.stderr
    r = run_kit("status", "--zk", "127.0.0.1:2181", "--command-config", conf)
    assert r.returncode == 2 and "--command-config goes with --bootstrap" in r.stderr


def test_the_auto_throttle_loop_drives_a_reassignment_to_its_end_through_the_admin_api(kraft, tmp_path):
    bootstrap, state, seeded = kraft
    moves = _moves(seeded, 3, skip=40)
    plan, events = tmp_path / "plan.json", tmp_path / "events.jsonl"
    plan.write_text(json.dumps({"version": 1, "partitions": moves}))
    assert run_kit("apply", plan, "--bootstrap", bootstrap, "--throttle", CRAWL).returncode == 0
    r = run_kit("throttle", "run", "--bootstrap", bootstrap, "--samples", state / "samples", "--until-idle",
                "--interval", "2", "--max-seconds", "300", "--clock", "samples", "--cap-map", '{"*": 125}',
                "--events", events, timeout=600)
    assert r.returncode == 0, r.stderr
    kinds = [json.loads(line)["kind"] for line in events.read_text().splitlines()]
    assert "done" in kinds, kinds
    with open_backend(ClusterAddress(bootstrap=bootstrap)) as backend:
        try:
            assert not backend.reassigning() and backend.throttles() == ({}, {})
            cluster, _ = backend.read()
            now = {p.key: list(p.replicas) for p in cluster.partitions}
            assert all(now[(m["topic"], m["partition"])] == m["replicas"] for m in moves)
        finally:
            _idle(backend)


def test_the_doctor_and_the_dashboards_poller_read_the_cluster_through_the_admin_api(kraft):
    from kit.dashboard.poller import Poller

    bootstrap, _, seeded = kraft
    r = run_kit("doctor", "--bootstrap", bootstrap)
    assert r.returncode == 0 and f"{len(seeded.partitions)} partition(s)" in r.stdout, r.stdout + r.stderr
    poller = Poller(ClusterAddress(bootstrap=bootstrap))
    try:
        # A poll the cluster does not answer in the dashboard's 5 s is shown as an error and the
        # next poll tries again (a loaded machine's first polls may); wait for an answered one.
        deadline = time.monotonic() + 180
        while (state := poller.poll()).error is not None and time.monotonic() < deadline:
            time.sleep(1)
        assert state.error is None and state.status["reassigning"] is False, state.error
        assert sorted(state.cluster.brokers) == sorted(seeded.brokers)
    finally:
        poller.stop()


def test_a_cluster_that_stops_answering_is_said_by_the_watch_and_raised_as_connection_lost(kraft):
    from kafka.errors import KafkaConnectionError, KafkaTimeoutError

    from kit.cluster.backend import ConnectionWatch

    bootstrap, _, _ = kraft
    with open_backend(ClusterAddress(bootstrap=bootstrap)) as backend:
        said = []
        watch = backend.watch_connection(1.0, said.append)
        try:
            assert isinstance(watch, ConnectionWatch) and not watch.down
            watch.raise_if_down()  # answering: nothing to say

            def gone(*_, **__):
                raise KafkaConnectionError("connection refused")  # as when every broker's listener closes
            answering, backend.admin.describe_cluster = backend.admin.describe_cluster, gone
            for _ in range(120):  # the probe notices: bounded polls
                if watch.down:
                    break
                time.sleep(0.25)
            assert watch.down and said == ["DescribeCluster unanswered: KafkaConnectionError"]
            with pytest.raises(backend.connection_lost):
                watch.raise_if_down()
            with pytest.raises(backend.connection_lost, match="unreachable"):
                backend.status()
            assert watch.gave_up.wait(60)  # its patience ran out: every wait has an end
            assert said == ["DescribeCluster unanswered: KafkaConnectionError"]  # once, not per probe

            backend.admin.describe_cluster = answering
            back = backend.watch_connection(600.0, said.append)  # a patient watch sees the cluster back
            try:
                backend.admin.describe_cluster = gone
                for _ in range(240):
                    if back.down:
                        break
                    time.sleep(0.25)
                backend.admin.describe_cluster = answering
                for _ in range(240):
                    if not back.down:
                        break
                    time.sleep(0.25)
                assert not back.down and said[1:] == ["DescribeCluster unanswered: KafkaConnectionError", None]
            finally:
                back.close()

            def slow(*_, **__):
                raise KafkaTimeoutError("request timed out")
            backend.admin.describe_topics = slow
            with pytest.raises(backend.connection_lost):
                backend.progress([{"topic": "topic-0000", "partition": 0, "replicas": [1001]}])
        finally:
            watch.close()


def test_a_probe_cut_short_by_the_watch_closing_says_nothing(kraft):
    """The loop closes its watch, then the client, as it ends: a probe in flight then fails
    because the client went, which says nothing of the cluster (CI: the loop's events ended
    with `unreachable` after the lease's `alert`)."""
    from kafka.errors import KafkaConnectionError

    bootstrap, _, _ = kraft
    with open_backend(ClusterAddress(bootstrap=bootstrap)) as backend:
        said, entered, let_go = [], threading.Event(), threading.Event()

        def in_flight(*_, **__):
            entered.set()
            assert let_go.wait(120)
            raise KafkaConnectionError("client closed")
        backend.admin.describe_cluster = in_flight
        watch = backend.watch_connection(600.0, said.append)
        assert entered.wait(120)
        watch.close()
        let_go.set()
        watch.thread.join(120)
        assert not watch.thread.is_alive() and said == [] and not watch.down


def test_the_auto_throttle_loop_says_the_admin_api_is_unreachable_and_gives_up_after_its_patience(kraft, tmp_path):
    from kafka.errors import KafkaConnectionError

    from kit.events import EventLog
    from kit.throttle.decide import Settings
    from kit.throttle.loop import run
    from kit.throttle.sources import SampleDirMetrics

    bootstrap, _, _ = kraft

    def gone(*_, **__):
        raise KafkaConnectionError("connection refused")  # as when every broker's listener closes
    with open_backend(ClusterAddress(bootstrap=bootstrap)) as backend:
        for call in ("describe_cluster", "describe_topics", "list_partition_reassignments", "describe_configs"):
            setattr(backend.admin, call, gone)
        log = EventLog()
        with pytest.raises(BadInput, match=r"^Kafka \(Admin API\) unreachable for 2 s; the throttles in force"):
            run(backend, Settings(interval=0.2), SampleDirMetrics(str(tmp_path / "none"), 0.2), log, patience=2.0)
    said = [e for e in log.events if e["kind"] == "unreachable"]
    assert said and all(e["reason"].startswith("Kafka (Admin API) unreachable (") for e in said)
    assert not any("ZooKeeper" in json.dumps(e) for e in log.events)  # nothing names what is not there


def _librdkafka(bootstrap: str):
    """confluent-kafka's AdminClient (librdkafka: another implementation of the protocol) and
    two calls through it: alter(restype, name, key, op, value) and described(broker, key) ->
    (value, is_sensitive, is_read_only, source) or None."""
    from confluent_kafka.admin import AdminClient, ConfigEntry, ConfigResource as CkResource, ResourceType

    client = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 30000})

    def alter(restype, name, key, op, value=None):
        entry = ConfigEntry(key, value, incremental_operation=op)
        [future] = client.incremental_alter_configs([CkResource(restype, name, incremental_configs=[entry])]).values()
        return future.result(timeout=60)

    def described(broker, key):
        [future] = client.describe_configs([CkResource(ResourceType.BROKER, str(broker))]).values()
        entry = future.result(timeout=60).get(key)
        return entry and (entry.value, entry.is_sensitive, entry.is_read_only, entry.source)
    return alter, described


def test_a_custom_broker_config_name_is_taken_and_its_value_hidden_as_kafka_does(kraft):
    """Kafka takes a config name it does not know on a BROKER resource (DynamicConfig.Broker
    allows custom names) and describes it with a null value, as sensitive and read-only (it has
    no type for it: KafkaConfig.maybeSensitive, ConfigHelper); on a TOPIC it refuses it
    (LogConfig.validateNames)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigSource, ResourceType

    bootstrap, _, seeded = kraft
    alter, described = _librdkafka(bootstrap)
    broker, topic = min(seeded.live_ids), seeded.partitions[0].topic
    alter(ResourceType.BROKER, str(broker), "kit.custom", AlterConfigOpType.SET, "1")
    assert described(broker, "kit.custom") == (None, True, True, ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    alter(ResourceType.BROKER, str(broker), "kit.custom", AlterConfigOpType.DELETE)
    assert described(broker, "kit.custom") is None
    with pytest.raises(KafkaException, match="Unknown topic config name: kit.custom"):
        alter(ResourceType.TOPIC, topic, "kit.custom", AlterConfigOpType.SET, "1")


def test_the_lease_marker_sits_on_the_cluster_wide_default_and_goes_when_released(kraft):
    """The auto-throttle's lease through the Admin API: a marker on the "" broker resource
    (which librdkafka cannot address: it sees the marker, hidden, in a broker's own
    description, from the default), its expiry set, nothing else written, gone once released."""
    from confluent_kafka.admin import ConfigSource

    from kit.throttle.lease import Lease, holder_gone

    bootstrap, _, seeded = kraft
    _, described = _librdkafka(bootstrap)
    broker, mine = min(seeded.live_ids), Lease.mine()
    with open_backend(ClusterAddress(bootstrap=bootstrap)) as backend:
        before = backend.throttles()
        assert backend.hold_lease(mine, 60.0, holder_gone) is None
        [held] = backend.leases()
        try:
            assert held.same_holder(mine) and held.expires is not None
            assert described(broker, held.marker()) == (None, True, True,
                                                         ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
            assert backend.hold_lease(mine, 60.0, holder_gone) is None  # kept, not rewritten: not due
            assert backend.leases() == [held] and backend.throttles() == before
        finally:
            backend.release_lease(mine)
        assert backend.leases() == [] and described(broker, held.marker()) is None
