"""Credentials and names that Kafka refuses, said as what they are: a simulated KRaft cluster
whose listeners ask for SASL/PLAIN (`kit sim start --kraft --sasl-plain FILE`), and bootstrap
hosts that do not resolve."""
from __future__ import annotations

import json
import os
import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from kit.errors import BadInput
from kit.cluster.kafka.connect import new_client
from kit.sim.kraft import sasl
from tests.conftest import run_kit

USER, PASSWORD = "ops", "s3cret-right"
WRONG = "wr0ng-pass"
# A default.api.timeout.ms far beyond the test's bound: a refusal said only when the bootstrap
# gives up (kafka-python logging in again and again) cannot pass.
PATIENT_MS = 900_000


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """(state dir, bootstrap line) of a simulated KRaft cluster asking for SASL/PLAIN."""
    root = tmp_path_factory.mktemp("kraft-sasl")
    snap, state, users = root / "cluster.json", root / "state", root / "users"
    snap.write_text(json.dumps({"version": 1, "brokers": [{"id": b, "rack": f"r{b}"} for b in (1, 2, 3)],
                                "partitions": [{"topic": "t", "partition": p, "replicas": [1 + p % 3, 1 + (p + 1) % 3]}
                                               for p in range(3)]}))
    users.write_text(f"{USER}:{PASSWORD}\n")
    r = run_kit("sim", "start", "--kraft", "--snapshot", snap, "--state", state, "--sasl-plain", users, timeout=300)
    assert r.returncode == 0, r.stderr
    try:
        yield state, (state / "bootstrap").read_text().strip()
    finally:
        run_kit("sim", "stop", "--state", state, timeout=120)


def client_env(tmp_path, password: str) -> dict:
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                     f'username="{USER}" password="{password}";\n'
                     f"default.api.timeout.ms={PATIENT_MS}\n")
    return dict(os.environ, KIT_KAFKA_COMMAND_CONFIG=str(props))


def test_a_wrong_password_is_said_as_refused_credentials_after_one_login_naming_the_user_not_the_password(
        sim, tmp_path):
    state, bootstrap = sim
    started = time.monotonic()
    r = run_kit("snapshot", "--bootstrap", bootstrap, "--out", tmp_path / "snap.json",
                env=client_env(tmp_path, WRONG), timeout=240)
    took = time.monotonic() - started
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("kit: ") and r.stderr.count("\n") == 1, r.stderr
    assert f"Kafka refused the credentials (SASL PLAIN user '{USER}')" in r.stderr, r.stderr
    assert "Invalid username or password" in r.stderr, r.stderr
    assert WRONG not in r.stderr + r.stdout and PASSWORD not in r.stderr + r.stdout
    assert not (tmp_path / "snap.json").exists()
    # default.api.timeout.ms is 15 minutes: only a refusal said at the first login ends this soon.
    assert took < PATIENT_MS / 1000 / 3, took

    ok = run_kit("snapshot", "--bootstrap", bootstrap, "--out", tmp_path / "snap.json",
                 env=client_env(tmp_path, PASSWORD), timeout=240)
    assert ok.returncode == 0, ok.stderr
    assert {p["topic"] for p in json.loads((tmp_path / "snap.json").read_text())["partitions"]} == {"t"}


def test_librdkafka_is_refused_and_admitted_by_the_simulated_listener_as_by_kafka(sim):
    _, bootstrap = sim
    seen: list = []

    def admin(password: str) -> AdminClient:
        return AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                            "sasl.mechanism": "PLAIN", "sasl.username": USER, "sasl.password": password,
                            "error_cb": seen.append, "log_level": 0})

    refused = admin(WRONG)
    # The refused client never gets its metadata: the call ends at its own timeout whatever the
    # listener does (it waited all of a 20 s one), so a short one; the wait for the
    # authentication error below has the generous bound.
    with pytest.raises(KafkaException):
        refused.list_topics(timeout=2)
    deadline = time.monotonic() + 120
    while not any(e.code() == KafkaError._AUTHENTICATION for e in seen) and time.monotonic() < deadline:
        refused.poll(1)  # librdkafka hands its errors to error_cb from poll
    auth = [e for e in seen if e.code() == KafkaError._AUTHENTICATION]
    assert auth and "Invalid username or password" in auth[0].str(), seen
    assert "t" in admin(PASSWORD).list_topics(timeout=60).topics


def test_a_plaintext_client_on_a_sasl_listener_and_a_mechanism_it_does_not_offer_are_refused(sim, tmp_path):
    _, bootstrap = sim
    props = tmp_path / "scram.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                     f'username="{USER}" password="{PASSWORD}";\n')
    r = run_kit("snapshot", "--bootstrap", bootstrap, "--out", tmp_path / "snap.json",
                env=dict(os.environ, KIT_KAFKA_COMMAND_CONFIG=str(props)), timeout=240)
    assert r.returncode == 2, r.stderr
    assert f"Kafka refused the credentials (SASL SCRAM-SHA-256 user '{USER}'): the brokers do not offer that " \
           "mechanism" in r.stderr, r.stderr
    assert PASSWORD not in r.stderr


def test_check_plain_follows_rfc_4616_and_kafka():
    users = {"ops": "pw"}
    assert sasl.check_plain(users, b"\0ops\0pw") and sasl.check_plain(users, b"ops\0ops\0pw")
    assert not sasl.check_plain(users, b"\0ops\0nope")
    assert not sasl.check_plain(users, b"other\0ops\0pw")  # acting for another user: Kafka refuses
    assert not sasl.check_plain(users, b"\0nobody\0pw") and not sasl.check_plain(users, b"ops\0pw")


def test_sim_start_refuses_a_credentials_file_without_user_and_password(tmp_path):
    bad = tmp_path / "users"
    bad.write_text("just-a-user\n")
    r = run_kit("sim", "start", "--kraft", "--snapshot", tmp_path / "none.json", "--state", tmp_path / "state",
                "--sasl-plain", bad, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "USER:PASSWORD" in r.stderr, r.stderr
    assert not (tmp_path / "state").exists()


def test_a_bootstrap_host_that_does_not_resolve_is_said_at_once_as_a_dns_failure():
    with pytest.raises(BadInput) as e:
        new_client("no-such-host.invalid:9092", None, {"default_api_timeout_ms": 60_000})
    assert "no such host: no-such-host.invalid" in str(e.value) and "(DNS)" in str(e.value), e.value
