"""The rules every input meets before kit acts on it: Kafka's own limits, written once.

Every command, file loader and runbook asks these; a refusal is a `BadInput` (exit 2) whose
one line names the option or file and the problem. Pure: no I/O.

Kafka's limits (Apache Kafka's source): broker ids and partition numbers are non-negative
int32 values; a topic name is 1 to 249 characters of ``[a-zA-Z0-9._-]`` and neither ``.`` nor
``..`` (``org.apache.kafka.common.internals.Topic``); throttle rates are configs of type
long, in bytes/s, and a rate below 1 B/s is written as 0, which stops replication.
"""
from __future__ import annotations

import math
import re
from typing import Any

from kit.errors import BadInput

INT32_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
TOPIC_MAX_LENGTH = 249
# Byte counts and byte rates: exact in a float64 and far beyond any disk or NIC (8 PiB).
MAX_BYTES = 2**53
_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")


def _shown(value: Any) -> str:
    """A value as a refusal quotes it: repr, cut short, control characters escaped."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def whole(value: Any, where: str, minimum: int = 0, maximum: int = INT32_MAX) -> int:
    """An integer (not a bool) in [minimum, maximum]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadInput(f"{where}: expected an integer, got {_shown(value)}")
    if not minimum <= value <= maximum:
        raise BadInput(f"{where}: {value} is outside {minimum}..{maximum}")
    return value


def broker_id(value: Any, where: str) -> int:
    """A Kafka broker id: a non-negative int32."""
    return whole(value, where, 0, INT32_MAX)


def partition_number(value: Any, where: str) -> int:
    """A Kafka partition number: a non-negative int32."""
    return whole(value, where, 0, INT32_MAX)


def topic_name(value: Any, where: str) -> str:
    """A name Kafka would accept for a topic."""
    if not isinstance(value, str) or not value:
        raise BadInput(f"{where}: expected a topic name, got {_shown(value)}")
    if len(value) > TOPIC_MAX_LENGTH:
        raise BadInput(f"{where}: topic name of {len(value)} characters (Kafka allows at most {TOPIC_MAX_LENGTH})")
    if value in (".", "..") or not _TOPIC.fullmatch(value):
        raise BadInput(f"{where}: {_shown(value)} is not a legal Kafka topic name "
                       "(letters, digits, '.', '_', '-'; not '.' or '..')")
    return value


def number(value: Any, where: str, minimum: float | None = None, maximum: float | None = None,
           positive: bool = False) -> float:
    """A finite number (not a bool), optionally within bounds or strictly positive."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadInput(f"{where}: expected a number, got {_shown(value)}")
    if not math.isfinite(value):
        raise BadInput(f"{where}: expected a finite number, got {value}")
    if positive and not value > 0:
        raise BadInput(f"{where}: expected a positive number, got {value}")
    if minimum is not None and value < minimum:
        raise BadInput(f"{where}: expected at least {minimum:g}, got {value:g}")
    if maximum is not None and value > maximum:
        raise BadInput(f"{where}: expected at most {maximum:g}, got {value:g}")
    return value


def rate(value: Any, where: str) -> float:
    """A replication rate in bytes/s that Kafka can hold: at least 1, at most a long."""
    return number(value, where, minimum=1, maximum=LONG_MAX)


def parse_number(text: str, where: str) -> float:
    """A command-line number: finite; `BadInput` names the option."""
    try:
        return number(float(text), where)
    except ValueError:
        raise BadInput(f"{where}: expected a number, got {_shown(text)}") from None


__all__ = ["INT32_MAX", "LONG_MAX", "TOPIC_MAX_LENGTH", "MAX_BYTES", "whole", "broker_id", "partition_number", "topic_name",
           "number", "rate", "parse_number"]
