"""What every wire handler shares: the answering broker's context and Kafka's error codes."""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable

import kafka.errors as errors
from kafka.protocol.schemas.fields.codecs import EncodeBuffer, Int32, UnsignedVarInt32
from kit.sim.kraft import versions
from kit.sim.kraft.faults import Faults
from kit.sim.store import Store

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = errors.UnknownTopicOrPartitionError.errno  # 3
LEADER_NOT_AVAILABLE = errors.LeaderNotAvailableError.errno  # 5
REQUEST_TIMED_OUT = errors.RequestTimedOutError.errno  # 7
TOPIC_AUTHORIZATION_FAILED = errors.TopicAuthorizationFailedError.errno  # 29
CLUSTER_AUTHORIZATION_FAILED = errors.ClusterAuthorizationFailedError.errno  # 31
UNSUPPORTED_SASL_MECHANISM = errors.UnsupportedSaslMechanismError.errno  # 33
ILLEGAL_SASL_STATE = errors.IllegalSaslStateError.errno  # 34
UNSUPPORTED_VERSION = errors.UnsupportedVersionError.errno  # 35
INVALID_REPLICATION_FACTOR = errors.InvalidReplicationFactorError.errno  # 38
INVALID_REPLICA_ASSIGNMENT = errors.InvalidReplicationAssignmentError.errno  # 39
INVALID_CONFIG = errors.InvalidConfigurationError.errno  # 40
INVALID_REQUEST = errors.InvalidRequestError.errno  # 42
SASL_AUTHENTICATION_FAILED = errors.SaslAuthenticationFailedError.errno  # 58
PREFERRED_LEADER_NOT_AVAILABLE = errors.PreferredLeaderNotAvailableError.errno  # 80
ELECTION_NOT_NEEDED = errors.ElectionNotNeededError.errno  # 84
NO_REASSIGNMENT_IN_PROGRESS = errors.NoReassignmentInProgressError.errno  # 85
UNKNOWN_TOPIC_ID = errors.UnknownTopicIdError.errno  # 100


@dataclass
class Context:
    """The broker answering, its cluster's id, the store holding the cluster (kit.sim.store: the
    memory of the simulated KRaft cluster's process), the faults an operator put on the
    cluster (none when None) and the version ranges it advertises (kit.sim.kraft.versions: those
    of the Kafka release it answers as)."""

    store: Store
    broker_id: int
    cluster_id: str
    faults: Faults | None = None
    versions: dict[int, tuple[int, int]] = field(default_factory=lambda: versions.ranges(None))

    def denies(self, right: str) -> bool:
        """Whether the principal lacks `right` (kit.sim.kraft.faults.RIGHTS) now."""
        return self.faults is not None and self.faults.denies(right)


@dataclass(frozen=True)
class Encoded:
    """A response encoded already (its body, without header or frame), as a handler returns
    an answer it keeps for a state that has not changed (kit.sim.memstore's `cached`)."""

    body: bytes
    flexible: bool  # answered with response header v1 (tagged fields), not v0


def encoded(resp, version: int) -> Encoded:
    """`resp` (kafka-python's response class, built for `version`) encoded once."""
    return Encoded(bytes(resp.encode(version=version)), type(resp).flexible_version_q(version))


def fields(**values) -> SimpleNamespace:
    """An entry of a large response array (a partition of Metadata or DescribeLogDirs): the
    generated encoders read its fields by name, and this is made in a fraction of the time
    kafka-python's own data classes take (200,000 partitions: seconds less)."""
    return SimpleNamespace(**values)


def layout(resp_class, array: str, version: int) -> tuple:
    """What decides how an entry of `resp_class`'s array field `array` is encoded at `version`:
    the fields present there (and within them, each nested struct's), which of them are tagged or
    nullable, and whether the version is flexible (compact strings and arrays, tagged fields).
    Two versions with the same layout encode an entry to the same bytes (Metadata's topics: v10
    to v13 alike, where v13 only adds a top-level error), so an entry encoded for one serves the
    others: `encode_entry`'s output can be kept by layout, not by version."""
    return (resp_class.flexible_version_q(version), _struct_layout(resp_class.fields[array].array_of, version))


def _struct_layout(struct, version: int) -> tuple:
    out = []
    for f in struct.fields.values():
        if not f.for_version_q(version):
            continue
        inner = f.array_of if f.is_struct_array() else f if f.is_struct() else None
        out.append((f.name, f.type_str, f.tagged_field_q(version), f.nullable_for_version_q(version),
                    None if inner is None else _struct_layout(inner, version)))
    return tuple(out)


def encode_entry(resp_class, array: str, entry, version: int) -> bytes:
    """One entry of `resp_class`'s array field `array` (a topic of Metadata), encoded on its own
    for `version` as it sits inside the response: `encoded_with` puts kept entries together."""
    flexible = resp_class.flexible_version_q(version)
    encode = resp_class.fields[array].array_of.compiled_encode_into(version, compact=flexible, tagged=flexible)
    out = EncodeBuffer()
    encode(entry, out)
    return bytes(out.buf[:out.pos])


def encoded_with(resp, version: int, array: str, entries: list[bytes]) -> Encoded:
    """`resp` encoded with its array field `array` (left empty in `resp`) made of `entries`,
    each from `encode_entry`: the same bytes as encoding the whole response, without
    encoding again the entries a cluster change did not touch."""
    cls = type(resp)
    flexible = cls.flexible_version_q(version)
    return Encoded(spliced(cls.fields, resp, bytes(resp.encode(version=version)), version, flexible, array, entries),
                   flexible)


def spliced(schema: dict, value, whole: bytes, version: int, flexible: bool, array: str,
            entries: list[bytes]) -> bytes:
    """`whole` (`value` encoded for `version`, its array field `array` left empty; `schema` the
    fields of `value`'s type: a response class's, or an array entry's) with that array made of
    `entries`, each encoded already."""
    # `value`'s own fields before the array, each as `value`'s encoding has them.
    head = 0
    for name, spec in schema.items():
        if name == array:
            break
        if spec.for_version_q(version) and not spec.tagged_field_q(version):
            head += len(spec.encode(getattr(value, name), version=version, compact=flexible, tagged=flexible))
    empty = len(UnsignedVarInt32.encode(1)) if flexible else 4  # the empty array's length
    count = UnsignedVarInt32.encode(len(entries) + 1) if flexible else Int32.encode(len(entries))
    return b"".join([whole[:head], count, *entries, whole[head + empty:]])


SCALARS = {"int16": "h", "int32": "i"}


def entry_packer(struct_field, version: int, flexible: bool) -> Callable[[tuple], bytes] | None:
    """A packer of one entry of the array of structs `struct_field` (a Metadata partition),
    encoded for `version` (`flexible`: a flexible version of its response: compact arrays,
    tagged fields) as kafka-python's generated encoder encodes it, from a tuple of
    its field values in the schema's order (every field the schema has at any version; those
    absent at `version` are skipped). Made for entries counted in hundreds of thousands,
    whose fields are int16, int32 and arrays of int32 only: None for a struct with anything
    else at `version` (a string, a nested struct, a nullable or tagged field), which the
    generic encoder then encodes."""
    plan = []
    for i, f in enumerate(struct_field.fields.values()):
        if not f.for_version_q(version):
            continue
        if f.tagged_field_q(version) or f.nullable_for_version_q(version) or \
                f.type_str not in ("int16", "int32", "[]int32"):
            return None
        plan.append((i, SCALARS.get(f.type_str)))
    formats: dict[tuple, struct.Struct] = {}

    def pack(values: tuple) -> bytes:
        args, shape = [], []
        for i, code in plan:
            v = values[i]
            if code is None:  # an array of int32: its count (compact: n + 1, an unsigned varint), its items
                n = len(v) + 1 if flexible else len(v)
                if flexible and n >= 0x80:  # not one byte as a varint: rare enough for the generic path
                    return slow(values)
                shape.append(len(v))
                args.append(n)
                args.extend(v)
            else:
                args.append(v)
        if flexible:
            args.append(0)  # no tagged fields
        key = tuple(shape)
        fmt = formats.get(key)
        if fmt is None:
            text, arrays = ">", iter(shape)
            for _, code in plan:
                text += code if code is not None else ("B" if flexible else "i") + "i" * next(arrays)
            fmt = formats[key] = struct.Struct(text + ("B" if flexible else ""))
        return fmt.pack(*args)

    names = list(struct_field.fields)
    encode = struct_field.compiled_encode_into(version, compact=flexible, tagged=flexible)

    def slow(values: tuple) -> bytes:
        out = EncodeBuffer()
        encode(SimpleNamespace(**dict(zip(names, values))), out)
        return bytes(out.buf[:out.pos])
    return pack
