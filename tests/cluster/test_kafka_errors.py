"""kafka-python's errors, as the Admin API backend turns them into kit's: each error code the
issue names becomes one line and the exit code kit uses for its kind (the simulated KRaft
cluster answering them is tests/sim/test_kraft_sim.py's and test_kraft_faults.py's)."""
from __future__ import annotations

import kafka.errors as kerr
import pytest

from kit.cluster.kafka.connect import translate
from kit.errors import BadInput, Unreachable, Unsafe

CASES = [
    # (kafka-python's error, kit's class, exit code, words the line must hold)
    (kerr.UnknownTopicOrPartitionError, BadInput, 2, "unknown topic or partition"),
    (kerr.InvalidReplicationAssignmentError, BadInput, 2, "refused the replica assignment"),
    (kerr.NoReassignmentInProgressError, BadInput, 2, "no reassignment is in progress"),
    (kerr.ReassignmentInProgressError, Unsafe, 3, "already in progress; nothing was changed"),
    (kerr.ClusterAuthorizationFailedError, BadInput, 2, "the principal lacks a right on the CLUSTER"),
    (kerr.TopicAuthorizationFailedError, BadInput, 2, "the principal lacks a right on the topic"),
    (kerr.SaslAuthenticationFailedError, BadInput, 2, "check the credentials"),
    (kerr.KafkaConnectionError, Unreachable, 2, "unreachable"),
    (kerr.NodeNotReadyError, Unreachable, 2, "unreachable"),
    (kerr.RequestTimedOutError, Unreachable, 2, "request.timeout.ms"),
]


@pytest.mark.parametrize("error, kind, code, words", CASES, ids=[c[0].__name__ for c in CASES])
def test_each_kafka_error_is_one_line_with_the_exit_code_of_its_kind(error, kind, code, words):
    mapped = translate(error("broker says\nsomething long"))
    assert type(mapped) is kind and mapped.exit_code == code
    assert words in str(mapped) and "\n" not in str(mapped), str(mapped)


def test_an_error_from_outside_kafka_python_is_left_alone():
    assert translate(KeyError("x")) is None
