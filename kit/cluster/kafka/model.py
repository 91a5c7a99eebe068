"""Kafka's Admin API answers, as kit's model: pure, no client here (`kit.cluster.kafka.backend`
makes the calls).

The shapes are kafka-python 3.x's: `describe_cluster()`'s dict,
`list_partition_reassignments()`'s ``{TopicPartition: {"replicas", "adding_replicas",
"removing_replicas"}}``, `describe_configs()`'s ``{"topic"|"broker": {name: {key: {"value",
...}}}}``, and the Metadata and DescribeLogDirs responses as its generated classes decode them,
read field by field: the dicts `describe_topics()` and `to_dict()` would make of every
partition and replica cost most of a read at 200,000 partitions.
"""
from __future__ import annotations

from kit.formats import cluster_from_snapshot
from kit.model import Cluster
from kit.throttle.configs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS

BROKER_KEYS = (LEADER_RATE, FOLLOWER_RATE)
TOPIC_KEYS = (LEADER_REPLICAS, FOLLOWER_REPLICAS)


def reassignment_doc(reassignments: dict) -> dict | None:
    """The reassignment in flight as Kafka's JSON (each partition's target replicas), None when none.

    KIP-455: while a partition moves, its replica set is the target followed by the replicas
    being removed, so the target is that set without `removing_replicas`, in its order.
    """
    entries = []
    for tp, r in reassignments.items():
        removing = set(r.get("removing_replicas") or ())
        entries.append({"topic": tp.topic, "partition": tp.partition,
                        "replicas": [b for b in r.get("replicas") or () if b not in removing]})
    if not entries:
        return None
    return {"version": 1, "partitions": sorted(entries, key=lambda e: (e["topic"], e["partition"]))}


def replica_sizes(log_dirs: list[tuple[int, list]]) -> tuple[dict[tuple[str, int], int], dict[int, dict[str, int]]]:
    """Partition sizes and brokers' storage from DescribeLogDirs.

    Parameters
    ----------
    log_dirs : list of (int, list)
        Each broker that answered and its DescribeLogDirs response's results (log dirs), as
        kafka-python decodes them.

    Returns
    -------
    (dict, dict)
        ``{(topic, partition): bytes}`` (the largest current replica: a copy still growing, or a
        future replica moving between disks, is not the partition's size) and ``{broker:
        {"storage_total", "storage_free"}}`` summed over its log dirs (only where Kafka 2.8+
        says so: -1 is unknown).
    """
    sizes: dict[tuple[str, int], int] = {}
    disks: dict[int, dict[str, int]] = {}
    for broker, results in log_dirs:
        total = free = 0
        known = bool(results)
        for d in results:
            if d.error_code:
                continue  # an offline log dir says nothing of its size
            for t in d.topics or ():
                name = t.name
                for p in t.partitions or ():
                    if p.is_future_key:
                        continue
                    key = (name, p.partition_index)
                    sizes[key] = max(sizes.get(key, 0), int(p.partition_size or 0))
            # total_bytes and usable_bytes are v4's: absent from an older answer.
            t_bytes, u_bytes = getattr(d, "total_bytes", None), getattr(d, "usable_bytes", None)
            if t_bytes is None or u_bytes is None or t_bytes < 0 or u_bytes < 0:
                known = False
            else:
                total += t_bytes
                free += u_bytes
        if known:
            disks[broker] = {"storage_total": total, "storage_free": free}
    return sizes, disks


def build_cluster(described: dict, topics: list, sizes: dict[tuple[str, int], int],
                  disks: dict[int, dict[str, int]], partition_meta: dict | None = None,
                  broker_metrics: dict | None = None) -> Cluster:
    """The cluster from DescribeCluster and Metadata (`topics`: its response's, decoded), with
    sizes and storage from DescribeLogDirs, else from the metrics directory (kafka-kit's
    ``{topic: {partition: {"Size"}}}`` and ``{broker: {"StorageFree"}}``).

    A fenced broker is registered but not alive; a broker named in a replica list but not
    registered is dead (`kit.formats.cluster_from_snapshot`), as ZooKeeper mode reads them.
    """
    partition_meta, broker_metrics = partition_meta or {}, broker_metrics or {}
    brokers = []
    for b in sorted(described.get("brokers") or (), key=lambda b: b["broker_id"]):
        entry = {"id": b["broker_id"], "rack": b.get("rack") or None, "alive": not b.get("is_fenced", False)}
        disk = disks.get(b["broker_id"])
        if disk is not None:
            entry.update(disk)
        else:
            free = (broker_metrics.get(str(b["broker_id"])) or {}).get("StorageFree")
            if free is not None:
                entry["storage_free"] = int(free)
        brokers.append(entry)
    parts = []
    for t in topics:
        if t.error_code and not t.partitions:
            continue  # deleted meanwhile, or not ours to see
        name = t.name
        for p in t.partitions or ():
            key = (name, p.partition_index)
            # The decoded lists are this answer's own: taken as they are, not copied.
            entry = {"topic": name, "partition": key[1], "replicas": p.replica_nodes, "isr": p.isr_nodes or []}
            if p.leader_id >= 0:
                entry["leader"] = p.leader_id
            size = sizes.get(key)
            if size is None:
                size = ((partition_meta.get(key[0]) or {}).get(str(key[1])) or {}).get("Size")
            if size is not None:
                entry["size"] = int(size)
            parts.append(entry)
    return cluster_from_snapshot({"version": 1, "brokers": brokers, "partitions": parts}, "the Admin API")


def throttle_keys(described: dict, kind: str) -> dict[str, dict[str, str]]:
    """``{name: {key: value}}`` of the throttle keys set on each resource of `kind` ("topic" or
    "broker") in a `describe_configs` answer, only resources carrying one."""
    keys = TOPIC_KEYS if kind == "topic" else BROKER_KEYS
    out = {}
    for name, configs in (described.get(kind) or {}).items():
        found = {k: configs[k]["value"] for k in keys if k in configs and configs[k].get("value") is not None}
        if found:
            out[str(name)] = found
    return out
