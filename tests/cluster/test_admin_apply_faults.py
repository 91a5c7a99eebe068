"""`kit apply` through the Admin API when one broker does not answer the throttle writes: the
others' writes are recorded per broker, taken back and the ones that may remain named (a fake
admin client standing for kafka-python's, so that which broker answers is certain)."""
from __future__ import annotations

import pytest
from kafka import errors as kerr

from kit.cluster.kafka.backend import AdminBackend
from kit.errors import Unreachable
from kit.throttle.configs import FOLLOWER_RATE, LEADER_RATE


class FakeAdmin:
    """kafka-python's alter_configs as it behaves against a cluster where broker `slow` never
    answers: the other brokers' configs are changed, then the whole call times out."""

    config = {"request_timeout_ms": 1500}

    def __init__(self, slow: str, topics_late_once: bool = False):
        self.slow, self.configs = slow, {}
        self.topics_late_once = topics_late_once  # the first topics' write goes unanswered (held)

    def alter_configs(self, resources, raise_on_unknown=False, incremental=True):
        out, late = {}, False
        if self.topics_late_once and any(r.resource_type.name == "TOPIC" for r in resources):
            self.topics_late_once = False
            raise kerr.KafkaTimeoutError("Request timed out")
        for r in resources:
            kind = "broker" if r.resource_type.name == "BROKER" else "topic"
            if kind == "broker" and r.name == self.slow:
                late = True
                continue
            cfg = self.configs.setdefault((kind, r.name), {})
            for k, (op, v) in r.configs.items():
                if op.name == "SET":
                    cfg[k] = v
                else:
                    cfg.pop(k, None)
            out.setdefault(kind, {})[r.name] = "OK"
        if late:
            raise kerr.KafkaTimeoutError("Request timed out")
        return out


def test_an_apply_cut_short_by_a_broker_not_answering_takes_back_every_other_brokers_throttle_and_names_it():
    backend = object.__new__(AdminBackend)
    backend.admin, backend.bootstrap = FakeAdmin(slow="3"), "127.0.0.1:9092"
    rate = {LEADER_RATE: "1000", FOLLOWER_RATE: "1000"}
    written: list = []
    with pytest.raises(Unreachable) as e:  # kafka-python's timeout, as kit's (translate_errors)
        backend.set_throttles(brokers={b: rate for b in (1, 2, 3, 4)}, topics={}, written=written)
    assert sorted(name for kind, name, *_ in written if kind == "broker") == ["1", "2", "3", "4"]
    err = backend._undone(e.value, written, [])
    assert all(not cfg for cfg in backend.admin.configs.values()), backend.admin.configs
    assert isinstance(err, Unreachable)
    assert "the throttles it had set on broker 3 could not be removed" in str(err), err
    assert "were removed" not in str(err)


def test_a_write_not_answered_is_said_to_may_yet_land_even_when_taking_it_back_was_answered():
    """Seen in tests/sim/test_kraft_faults.py: kafka-python sent the topics' throttle write to
    the slow broker, which held it; kit took it back through another broker and said "the
    throttles it had set were removed: nothing was changed", though the held write is carried
    out when the broker gets to it."""
    backend = object.__new__(AdminBackend)
    backend.admin, backend.bootstrap = FakeAdmin(slow="none", topics_late_once=True), "127.0.0.1:9092"
    rate = {LEADER_RATE: "1000", FOLLOWER_RATE: "1000"}
    written: list = []
    with pytest.raises(Unreachable) as e:
        backend.set_throttles(brokers={1: rate}, topics={"t": {"leader.replication.throttled.replicas": "0:1"}},
                              written=written)
    assert [(kind, name, answered) for kind, name, _, answered in written] == [("topic", "t", False)]
    err = str(backend._undone(e.value, written, []))
    assert "the write to topic t was not answered and may yet be carried out" in err, err
    assert "kit verify --bootstrap 127.0.0.1:9092" in err and "nothing was changed" not in err, err
