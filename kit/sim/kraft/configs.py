"""DescribeConfigs and IncrementalAlterConfigs for topics and brokers.

Dynamic configs live in the cluster's store (kit.sim.store) by kind and entity, as a
ZooKeeper-mode Kafka keeps them (/config/topics/T, /config/brokers/ID, /config/brokers/<default>
for the cluster-wide broker default): the simulated controller reads the brokers' throttles
from there. Only the dynamic keys set are described
beside the defaults of the dynamic keys Kafka would list for them (`TOPIC_DEFAULTS`,
`BROKER_DEFAULTS`, source DEFAULT_CONFIG). A topic key outside them is refused as Kafka
refuses an unknown topic config name; a broker key outside them is taken as Kafka takes a
custom broker config (DynamicConfig.Broker.validate allows custom names) and described as
Kafka describes a name it has no type for: value null, sensitive, read-only (ConfigHelper,
KafkaConfig.maybeSensitive). There are no static broker configs: no server.properties.
"""
from __future__ import annotations

import contextlib
import re

from kafka.protocol.admin import DescribeConfigsResponse, IncrementalAlterConfigsResponse
from kit.sim.kraft.context import (CLUSTER_AUTHORIZATION_FAILED, INVALID_CONFIG, INVALID_REQUEST, NONE,
                                   TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION, Context)
from kit.sim.kraft.faults import ALTER_CONFIGS_CLUSTER, ALTER_CONFIGS_TOPIC
from kit.sim.store import Conflict
from kit.throttle.configs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS

TOPIC, BROKER = 2, 4  # ConfigResource.Type
# ConfigSource
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, DEFAULT_CONFIG = 1, 2, 3, 5
INT, LONG, STRING, LIST = 3, 5, 2, 7  # ConfigType
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # AlterConfigOp
DEFAULT_BROKER = "<default>"  # Kafka's entity name for the cluster-wide broker default
UNLIMITED = str(2**63 - 1)  # Long.MAX_VALUE: Kafka's default replication quota (none)
# Kafka's defaults (LogConfig, DynamicConfig.Broker) of the keys the simulated cluster serves.
TOPIC_DEFAULTS = {LEADER_REPLICAS: "", FOLLOWER_REPLICAS: "", "retention.ms": "604800000", "retention.bytes": "-1",
                  "cleanup.policy": "delete", "min.insync.replicas": "1", "segment.bytes": "1073741824",
                  "max.message.bytes": "1048588"}
BROKER_DEFAULTS = {LEADER_RATE: UNLIMITED, FOLLOWER_RATE: UNLIMITED,
                   "replica.alter.log.dirs.io.max.bytes.per.second": UNLIMITED}
TYPES = {LEADER_RATE: LONG, FOLLOWER_RATE: LONG, LEADER_REPLICAS: LIST, FOLLOWER_REPLICAS: LIST,
         "replica.alter.log.dirs.io.max.bytes.per.second": LONG, "retention.ms": LONG, "retention.bytes": LONG,
         "cleanup.policy": LIST, "min.insync.replicas": INT, "segment.bytes": INT, "max.message.bytes": INT}
_REPLICA_LIST = re.compile(r"^(\*|\s*\d+\s*:\s*\d+\s*(,\s*\d+\s*:\s*\d+\s*)*)?$")


def _entity(ctx: Context, rtype: int, name: str, describing: bool) -> tuple[str | None, int, str | None]:
    """(config kind, error code, message) for a resource; kind None when it has an error."""
    if rtype == TOPIC:
        if name not in ctx.store.view([name]).topics:
            return None, UNKNOWN_TOPIC_OR_PARTITION, f"topic {name} does not exist"
        return "topics", NONE, None
    if rtype == BROKER:
        if name == "":
            return "brokers", NONE, None
        if not name.isdigit():
            return None, INVALID_REQUEST, f"broker id must be an integer, not {name!r}"
        if describing and int(name) != ctx.broker_id:
            # A broker describes only its own config (Kafka's ConfigHelper).
            return None, INVALID_REQUEST, (f"Unexpected broker id, expected {ctx.broker_id} or empty string, but "
                                           f"received {name}")
        return "brokers", NONE, None
    return None, INVALID_REQUEST, f"resource type {rtype} is not served by the simulated cluster"


def _described(name: str, value: str | None, source: int, synonyms: list, version: int, custom: bool = False):
    """One described key; a `custom` (broker) key as Kafka describes a name it has no type for."""
    Entry = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult
    return Entry(name=name, value=None if custom else value, read_only=custom, config_source=source,
                 is_default=source == DEFAULT_CONFIG, is_sensitive=custom,
                 synonyms=synonyms if version >= 1 else [], config_type=TYPES.get(name, 0), documentation=None)


def _broker_configs(ctx: Context, name: str, synonyms: bool, version: int) -> list:
    """A broker's dynamic keys, its own over the cluster-wide default's (with synonyms: both)."""
    Syn = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult.DescribeConfigsSynonym
    default = ctx.store.config("brokers", DEFAULT_BROKER)
    own = ctx.store.config("brokers", name) if name else {}
    out = []
    for key in sorted(set(own) | set(default) | set(BROKER_DEFAULTS)):
        custom = key not in BROKER_DEFAULTS
        chain = ([(own[key], DYNAMIC_BROKER_CONFIG)] if key in own else []) + \
                ([(default[key], DYNAMIC_DEFAULT_BROKER_CONFIG)] if key in default else []) + \
                ([(BROKER_DEFAULTS[key], DEFAULT_CONFIG)] if key in BROKER_DEFAULTS else [])
        syns = [Syn(name=key, value=None if custom else v, source=s) for v, s in chain] if synonyms else []
        out.append(_described(key, chain[0][0], chain[0][1], syns, version, custom))
    return out


def _topic_configs(ctx: Context, name: str, synonyms: bool, version: int) -> list:
    """A topic's dynamic keys, and the defaults of the others."""
    Syn = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult.DescribeConfigsSynonym
    own = ctx.store.config("topics", name)
    out = []
    for key in sorted(set(own) | set(TOPIC_DEFAULTS)):
        chain = ([(own[key], DYNAMIC_TOPIC_CONFIG)] if key in own else []) + \
                ([(TOPIC_DEFAULTS[key], DEFAULT_CONFIG)] if key in TOPIC_DEFAULTS else [])
        syns = [Syn(name=key, value=v, source=s) for v, s in chain] if synonyms else []
        out.append(_described(key, chain[0][0], chain[0][1], syns, version))
    return out


def describe_configs(ctx: Context, req, version: int):
    """DescribeConfigs: the dynamic keys of each TOPIC or BROKER resource ("" is the
    cluster-wide broker default), filtered by the keys asked for."""
    Result = DescribeConfigsResponse.DescribeConfigsResult
    results = []
    for r in req.resources:
        kind, err, msg = _entity(ctx, r.resource_type, r.resource_name, describing=True)
        configs = []
        if kind == "topics":
            configs = _topic_configs(ctx, r.resource_name, req.include_synonyms, version)
        elif kind == "brokers":
            configs = _broker_configs(ctx, r.resource_name, req.include_synonyms, version)
        if r.configuration_keys is not None:
            configs = [c for c in configs if c.name in set(r.configuration_keys)]
        results.append(Result(error_code=err, error_message=msg, resource_type=r.resource_type,
                              resource_name=r.resource_name, configs=configs))
    return DescribeConfigsResponse(version=version, throttle_time_ms=0, results=results)


def _check_value(key: str, value: str | None) -> str | None:
    """Why a SET value is refused (None when it is fine): the throttle keys the simulated
    controller reads must parse as Kafka would parse them."""
    if value is None:
        return f"Null value not supported for : {key}"
    if key in (LEADER_RATE, FOLLOWER_RATE) and not (value.strip().isdigit()):
        return f"Invalid value {value} for configuration {key}: Not a number of type LONG"
    if key in (LEADER_REPLICAS, FOLLOWER_REPLICAS) and not _REPLICA_LIST.match(value):
        return (f"Invalid value {value} for configuration {key}: must be the literal '*' or a list of replicas in "
                "the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")
    return None


def _refused(ctx: Context, rtype: int) -> int:
    """The authorization error of a resource the principal may not alter (NONE when it may):
    ALTER_CONFIGS on the CLUSTER for a BROKER resource, on the TOPIC for a topic (Kafka's
    AuthHelper.configsAuthorizationApiError; checked before the resource is looked up)."""
    if rtype == BROKER and ctx.denies(ALTER_CONFIGS_CLUSTER):
        return CLUSTER_AUTHORIZATION_FAILED
    if rtype == TOPIC and ctx.denies(ALTER_CONFIGS_TOPIC):
        return TOPIC_AUTHORIZATION_FAILED
    return NONE


def _parts(value: str | None) -> list[str]:
    """A LIST config's values, empty ones left out (ConfigurationControlManager.getParts)."""
    return [v for v in (value or "").split(",") if v]


def _changes(kind: str, r, current: dict[str, str]) -> tuple[dict, list, int, str | None]:
    """(updates, deletes, error, message) of one resource's ops over its `current` dynamic
    configs; APPEND adds the values not already in the list, SUBTRACT removes them, each on a
    LIST key only (ConfigurationControlManager.incrementalAlterConfigResource)."""
    updates, deletes = {}, []
    for c in r.configs:
        if kind == "topics" and c.name not in TOPIC_DEFAULTS:  # a broker takes custom names (see above)
            return {}, [], INVALID_CONFIG, f"Unknown topic config name: {c.name}"
        if c.config_operation == SET:
            value = c.value.strip() if c.name in TYPES else c.value
        elif c.config_operation == DELETE:
            deletes.append(c.name)
            continue
        elif c.config_operation in (APPEND, SUBTRACT):
            if TYPES.get(c.name) != LIST:  # a custom broker key has no type: not splittable either
                verb = "APPEND" if c.config_operation == APPEND else "SUBTRACT"
                return {}, [], INVALID_CONFIG, f"Can't {verb} to key {c.name} because its type is not LIST."
            # An unset key starts from its default (a topic's; a broker serves no LIST key).
            parts = _parts(current.get(c.name, TOPIC_DEFAULTS.get(c.name) if kind == "topics" else None))
            for v in c.value.split(","):
                if c.config_operation == APPEND and v not in parts:
                    parts.append(v)
                elif c.config_operation == SUBTRACT and v in parts:
                    parts.remove(v)
            value = ",".join(parts)
        else:
            return {}, [], INVALID_REQUEST, f"unknown config operation {c.config_operation} on {c.name}"
        why = _check_value(c.name, value)
        if why:
            return {}, [], INVALID_CONFIG, why
        updates[c.name] = value
    return updates, deletes, NONE, None


def _alter_one(ctx: Context, r, validate_only: bool) -> tuple[int, str | None]:
    refused = _refused(ctx, r.resource_type)
    if refused != NONE:
        return refused, None  # Kafka's ApiError for it carries no message
    kind, err, msg = _entity(ctx, r.resource_type, r.resource_name, describing=False)
    if kind is None:
        return err, msg
    names = [c.name for c in r.configs]
    if len(set(names)) != len(names):
        return INVALID_REQUEST, f"Error due to duplicate config keys in {r.resource_name!r}"
    # Checked on the broker before the controller sees the request (ConfigAdminManager.preprocess).
    nulls = [c.name for c in r.configs if c.config_operation != DELETE and c.value is None]
    if nulls:
        return INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}"
    entity = r.resource_name if kind == "topics" or r.resource_name else DEFAULT_BROKER
    # APPEND and SUBTRACT read before they write: the in-memory store's lock makes the two one
    # step, as Kafka's controller applies one request at a time; a store without one (ZooKeeper's)
    # refuses a write over a changed document (Conflict), and it is read and merged again.
    with getattr(ctx.store, "lock", None) or contextlib.nullcontext():
        for _ in range(5):
            updates, deletes, err, msg = _changes(kind, r, ctx.store.config(kind, entity))
            if err != NONE or validate_only:
                return err, msg
            try:
                ctx.store.alter_config(kind, entity, updates, deletes)
                return NONE, None
            except Conflict:
                continue
    return INVALID_REQUEST, f"config of {r.resource_name!r} kept changing; nothing was written"


def incremental_alter_configs(ctx: Context, req, version: int):
    """IncrementalAlterConfigs: SET, DELETE, and APPEND / SUBTRACT on LIST keys, per key on
    TOPIC and BROKER resources ("" the cluster-wide default), each resource all or nothing;
    nothing written with validate_only.
    A resource the principal may not alter (kit sim deny) gets 31 (broker) or 29 (topic)."""
    Resp = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
    out = []
    for r in req.resources:
        err, msg = _alter_one(ctx, r, req.validate_only)
        out.append(Resp(error_code=err, error_message=msg, resource_type=r.resource_type,
                        resource_name=r.resource_name))
    return IncrementalAlterConfigsResponse(version=version, throttle_time_ms=0, responses=out)
