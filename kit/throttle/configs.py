"""Replication throttle arithmetic: which replicas and brokers a reassignment throttles.

Pure: the ZooKeeper writes live in kit/cluster/zk/changes.py. The shapes follow Kafka's own
reassignment tool: on each moving topic, `leader.replication.throttled.replicas` lists
the partition's current replicas (the sources) and `follower.replication.throttled.replicas`
the replicas being added (the destinations), as "partition:broker" pairs; every broker
taking part gets both rate keys.
"""
from __future__ import annotations

from kit.model import Cluster

LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"


def throttle_configs(cluster: Cluster, moves: list[dict], rate: float) -> tuple[dict, dict]:
    """Topic and broker configs for a reassignment at `rate` bytes/s.

    Returns ({topic: {key: value}}, {broker: {key: value}}); partitions whose replica set
    does not grow (a change of order) need no throttle and are left out.
    """
    current = {(p.topic, p.partition): p.replicas for p in cluster.partitions}
    leaders: dict[str, list[str]] = {}
    followers: dict[str, list[str]] = {}
    brokers: set[int] = set()
    for m in moves:
        old = current[(m["topic"], m["partition"])]
        added = [b for b in m["replicas"] if b not in old]
        if not added:
            continue
        leaders.setdefault(m["topic"], []).extend(f"{m['partition']}:{b}" for b in old)
        followers.setdefault(m["topic"], []).extend(f"{m['partition']}:{b}" for b in added)
        brokers.update(old)
        brokers.update(added)
    topics = {t: {LEADER_REPLICAS: ",".join(leaders[t]), FOLLOWER_REPLICAS: ",".join(followers[t])}
              for t in sorted(leaders)}
    value = str(int(rate))
    return topics, {b: {LEADER_RATE: value, FOLLOWER_RATE: value} for b in sorted(brokers)}


def broker_rates(broker_configs: dict) -> dict[int | str, dict[str, float]]:
    """Each throttled broker's leader and follower rate in force (bytes/s), by id, from its
    configs (``{name: {key: value}}``, a backend's `throttles()[0]`); a broker with neither
    rate key is left out (unthrottled)."""
    out = {}
    for name, keys in broker_configs.items():
        rates = {role: float(keys[key]) for role, key in (("leader", LEADER_RATE), ("follower", FOLLOWER_RATE))
                 if key in keys}
        if rates:
            out[int(name) if str(name).isdigit() else name] = rates
    return out
