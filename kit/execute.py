"""Apply a plan to a ZooKeeper-mode Kafka cluster: pre-flight, rollback file, throttles,
then the reassignment, the way Kafka's own reassignment tool writes them.

All writes of one kind are issued together (kazoo's async API), not one round trip at a
time: kafka-kit sleeps 250 ms per topic; kit sets 2,000 topics' throttles in about a second.
"""
from __future__ import annotations

import json

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from .errors import BadInput, Unsafe
from .formats import dumps, write_atomic
from .model import Cluster
from .throttle import throttle_configs
from .zookeeper import read_cluster

REASSIGN = "/admin/reassign_partitions"


def preflight(client: KazooClient, moves: list[dict]) -> Cluster:
    """Check a plan against the live cluster; returns the cluster as it is now.

    BadInput for a plan that names partitions the cluster lacks or lists a broker twice;
    Unsafe when a reassignment is already running or a broker in the plan is not registered.
    """
    cluster, running = read_cluster(client)
    if running is not None or client.exists(REASSIGN):
        raise Unsafe(f"a reassignment is already in progress ({REASSIGN} exists); nothing was changed")
    known = {p.key for p in cluster.partitions}
    live = {b.id for b in cluster.brokers.values() if b.alive}
    for m in moves:
        key = (m["topic"], m["partition"])
        if key not in known:
            raise BadInput(f"the plan names {key[0]}-{key[1]}, which the cluster does not have")
        if len(set(m["replicas"])) != len(m["replicas"]):
            raise BadInput(f"the plan lists a broker twice for {key[0]}-{key[1]}")
        missing = [b for b in m["replicas"] if b not in live]
        if missing:
            raise Unsafe(f"broker {missing[0]} in the plan ({key[0]}-{key[1]}) is not registered; nothing was changed")
    return cluster


def rollback_document(cluster: Cluster, moves: list[dict]) -> dict:
    """The current assignment of the plan's partitions, as a reassignment that undoes it."""
    current = {(p.topic, p.partition): list(p.replicas) for p in cluster.partitions}
    return {"version": 1, "partitions": [
        {"topic": m["topic"], "partition": m["partition"], "replicas": current[(m["topic"], m["partition"])]}
        for m in moves]}


def _merge_configs(client: KazooClient, kind: str, updates: dict) -> None:
    """Merge config keys into /config/<kind>/<name> for many entities at once, then notify
    the brokers with one sequential /config/changes/config_change_ node per entity."""
    paths = {name: f"/config/{kind}/{name}" for name in updates}
    reads = {name: client.get_async(path) for name, path in paths.items()}
    writes = []
    for name, result in reads.items():
        try:
            raw, stat = result.get()
            doc = json.loads(raw.decode() or "{}")
        except NoNodeError:
            doc, stat = None, None
        config = dict((doc or {}).get("config", {}))
        config.update(updates[name])
        body = json.dumps({"version": 1, "config": config}).encode()
        if stat is None:
            writes.append(client.create_async(paths[name], body, makepath=True))
        else:
            writes.append(client.set_async(paths[name], body, version=stat.version))
    for w in writes:
        w.get()
    notes = [client.create_async("/config/changes/config_change_",
                                 json.dumps({"version": 2, "entity_path": f"{kind}/{name}"}).encode(),
                                 sequence=True, makepath=True) for name in updates]
    for n in notes:
        n.get()


def set_throttles(client: KazooClient, cluster: Cluster, moves: list[dict], rate: float) -> tuple[int, int]:
    """Throttle the plan's topics and brokers at `rate` bytes/s; returns (topics, brokers)."""
    topics, brokers = throttle_configs(cluster, moves, rate)
    client.ensure_path("/config/topics")
    client.ensure_path("/config/brokers")
    client.ensure_path("/config/changes")
    _merge_configs(client, "topics", topics)
    _merge_configs(client, "brokers", {str(b): cfg for b, cfg in brokers.items()})
    return len(topics), len(brokers)


def apply_plan(client: KazooClient, moves: list[dict], throttle: float | None = None,
               rollback_out: str | None = None) -> dict:
    """Pre-flight, rollback file, throttles, then /admin/reassign_partitions. Returns what was done."""
    cluster = preflight(client, moves)
    if rollback_out:
        write_atomic(rollback_out, dumps(rollback_document(cluster, moves)))
    done = {"partitions": len(moves), "throttled_topics": 0, "throttled_brokers": 0}
    if throttle:
        done["throttled_topics"], done["throttled_brokers"] = set_throttles(client, cluster, moves, throttle)
    client.ensure_path("/admin")
    try:
        client.create(REASSIGN, json.dumps({"version": 1, "partitions": moves}).encode())
    except NodeExistsError:
        raise Unsafe(f"another reassignment started meanwhile ({REASSIGN} appeared); "
                     "throttles set by this run are still in place") from None
    return done
