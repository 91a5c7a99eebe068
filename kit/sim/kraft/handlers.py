"""The simulated KRaft broker's answers: one function per Kafka API, from the cluster's store.

Each handler takes the broker's `Context`, the decoded request (kafka-python's generated
class) and its version, and returns the response object; kit.sim.kraft.server frames it.
Requests and responses are kafka-python's classes generated from Kafka's JSON schemas; what
each field means and which error a case gets follows Kafka's own broker and controller
(KafkaApis, ReplicationControlManager, ConfigurationControlManager) as kit reads them.
"""
from __future__ import annotations

import uuid

from kafka.protocol.metadata import ApiVersionsResponse, MetadataResponse
from kafka.protocol.admin import DescribeClusterResponse

from kit.sim.kraft import configs, logdirs, reassign, sasl
from kit.sim.kraft.context import (LEADER_NOT_AVAILABLE, NONE, UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION,
                                   UNSUPPORTED_VERSION, Context, encode_entry, encoded_with, entry_packer,
                                   fields, layout, spliced)
from kit.sim.kraft.versions import (ALTER_REASSIGNMENTS, API_VERSIONS, DESCRIBE_CLUSTER, DESCRIBE_CONFIGS,
                                    DESCRIBE_LOG_DIRS, ELECT_LEADERS, INCREMENTAL_ALTER_CONFIGS, LIST_REASSIGNMENTS,
                                    METADATA, SASL_AUTHENTICATE, SASL_HANDSHAKE)

NO_AUTHORIZED_OPERATIONS = None  # "not requested" (INT32_MIN): kafka-python encodes it from None
TOPIC = MetadataResponse.fields["topics"].array_of  # the schema of a topic's entry
PARTITION = TOPIC.fields["partitions"].array_of  # and of a partition's
PARTITION_FIELDS = tuple(PARTITION.fields)  # error_code, partition_index, leader_id, leader_epoch, replica_nodes, ...


def topic_id(topic: str) -> uuid.UUID:
    """A topic's id (KIP-516), stable for its name: the simulated cluster never recreates a topic."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"kit-sim-topic:{topic}")


def api_versions(ctx: Context, req, version: int):
    """ApiVersions: the APIs and version ranges this simulated broker answers (those of the
    Kafka release it answers as, kit.sim.kraft.versions)."""
    keys = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(ctx.versions.items())]
    return ApiVersionsResponse(version=version, error_code=NONE, api_keys=keys, throttle_time_ms=0)


def unsupported_api_versions(ctx: Context):
    """Kafka's answer to an ApiVersions request of a version it does not know: error 35 in a v0
    response naming the ApiVersions versions it does (ApiVersionsRequest.getErrorResponse)."""
    lo, hi = ctx.versions[API_VERSIONS]
    return ApiVersionsResponse(version=0, error_code=UNSUPPORTED_VERSION, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=API_VERSIONS, min_version=lo, max_version=hi)])


def metadata(ctx: Context, req, version: int):
    """Metadata: live brokers, the controller, and the topics asked for (all when the list is
    null, or empty at v0); a named topic the cluster lacks gets UNKNOWN_TOPIC_OR_PARTITION, an
    unknown topic id UNKNOWN_TOPIC_ID. Partitions: leader, epoch, replicas, ISR, offline
    replicas (those on brokers not alive); LEADER_NOT_AVAILABLE where none leads. In the
    answer for every topic each topic's part is kept, encoded, until that topic or the live
    brokers change (clients ask for it often, and at 200,000 partitions it takes seconds to
    make whole)."""
    asked = req.topics
    if asked is None or (version == 0 and not asked):
        return every_topic(ctx, version)
    return _metadata(ctx, asked, version)


def every_topic(ctx: Context, version: int):
    """The Metadata answer for every topic, kept until the cluster changes; then encoded from
    the kept parts of the topics (a topic's rows are kept for every version, its encoding per
    layout: the versions whose topic entries encode alike share it, so a client that asks one
    below the newest, as librdkafka asks v12 of a 4.0 broker, costs only the first encoding),
    made again for the topics changed only. The partitions (200,000 at real sizes) are packed
    directly (`entry_packer`: the bytes kafka-python's encoder makes, in a fraction of its time)."""
    store = ctx.store
    flexible = MetadataResponse.flexible_version_q(version)
    pack = entry_packer(PARTITION, version, flexible)

    def part(view, t: str) -> bytes:
        head, rows = store.topic_kept(("metadata",), t, lambda: _topic_rows(view, t))
        if pack is None:
            return encode_entry(MetadataResponse, "topics", _topic_entry(head, rows), version)
        return spliced(TOPIC.fields, head, encode_entry(MetadataResponse, "topics", head, version), version,
                       flexible, "partitions", [pack(r) for r in rows])

    def whole():
        view, parts = store.per_topic(("metadata", layout(MetadataResponse, "topics", version)), part)
        return encoded_with(_response(ctx, view, [], version), version, "topics", parts)
    return store.cached(("metadata", version), whole)


def _metadata(ctx: Context, asked, version: int):
    """The Metadata response for the topics `asked`."""
    view = ctx.store.view()
    Topic = MetadataResponse.MetadataResponseTopic
    by_id = {topic_id(t): t for t in view.topics}
    out = []
    for entry in asked:
        name = entry.name if entry.name is not None else by_id.get(entry.topic_id)
        if name in view.topics:
            out.append(_topic_entry(*_topic_rows(view, name)))
        elif entry.name is None:
            out.append(Topic(error_code=UNKNOWN_TOPIC_ID, name=None, topic_id=entry.topic_id, partitions=[]))
        else:
            out.append(Topic(error_code=UNKNOWN_TOPIC_OR_PARTITION, name=name, topic_id=None, partitions=[]))
    return _response(ctx, view, out, version)


def _response(ctx: Context, view, topics: list, version: int):
    brokers = [MetadataResponse.MetadataResponseBroker(node_id=b.id, host=b.host, port=b.port, rack=b.rack)
               for b in view.brokers.values()]
    return MetadataResponse(version=version, throttle_time_ms=0, brokers=brokers, cluster_id=ctx.cluster_id,
                            controller_id=view.controller(), topics=topics,
                            authorized_operations=NO_AUTHORIZED_OPERATIONS, error_code=NONE)


def _topic_rows(view, t: str) -> tuple:
    """Topic `t`'s Metadata entry without its partitions, and each partition's fields as a
    tuple in the schema's order (`PARTITION_FIELDS`)."""
    live = view.brokers
    rows = [(NONE if p.leader in live else LEADER_NOT_AVAILABLE, p.partition, p.leader if p.leader in live else -1,
             p.leader_epoch, p.replicas, p.isr, [b for b in p.replicas if b not in live])
            for p in view.topic_partitions(t)]
    return fields(error_code=NONE, name=t, topic_id=topic_id(t), is_internal=False, partitions=[],
                  authorized_operations=NO_AUTHORIZED_OPERATIONS), rows


def _topic_entry(head, rows: list[tuple]):
    """A topic's whole Metadata entry, for kafka-python's encoder, from `_topic_rows`."""
    return fields(**{**vars(head), "partitions": [fields(**dict(zip(PARTITION_FIELDS, r))) for r in rows]})


def describe_cluster(ctx: Context, req, version: int):
    """DescribeCluster: the cluster id, the controller and the unfenced brokers; at v2, to a
    client that sets IncludeFencedBrokers, the fenced ones too, marked (KIP-1073: KafkaApis
    lists the metadata cache's broker nodes, fenced included, instead of the alive ones)."""
    view = ctx.store.view()
    listed = dict(view.brokers)
    if version >= 2 and req.include_fenced_brokers:
        listed.update(view.fenced)
    Broker = DescribeClusterResponse.DescribeClusterBroker
    return DescribeClusterResponse(
        version=version, throttle_time_ms=0, error_code=NONE, error_message=None, endpoint_type=1,
        cluster_id=ctx.cluster_id, controller_id=view.controller(),
        brokers=[Broker(broker_id=b.id, host=b.host, port=b.port, rack=b.rack, is_fenced=b.id in view.fenced)
                 for _, b in sorted(listed.items())],
        authorized_operations=NO_AUTHORIZED_OPERATIONS)


HANDLERS = {API_VERSIONS: api_versions, METADATA: metadata, DESCRIBE_CLUSTER: describe_cluster,
            DESCRIBE_CONFIGS: configs.describe_configs, INCREMENTAL_ALTER_CONFIGS: configs.incremental_alter_configs,
            ALTER_REASSIGNMENTS: reassign.alter_partition_reassignments,
            LIST_REASSIGNMENTS: reassign.list_partition_reassignments, ELECT_LEADERS: reassign.elect_leaders,
            DESCRIBE_LOG_DIRS: logdirs.describe_log_dirs,
            # Before authentication a SASL listener's Session answers these (kit.sim.kraft.sasl).
            SASL_HANDSHAKE: sasl.handshake_after_login, SASL_AUTHENTICATE: sasl.authenticate_after_login}

