"""Capacity planning: how many brokers a workload needs, on which instance type.

The method of kafka-kit's capacity units: size each workload (a topic, or a pool of
topics) separately along each dimension that can run out, take the largest, and price it
per instance type.

- inbound network: produce traffic, received once by the leader and once by each follower;
- outbound network: consumer traffic (fan-out x produce) plus replication to followers;
- storage: what the workload keeps (produce rate x retention, or today's partition sizes)
  times the replication factor.

Each dimension is filled only to `target_utilization`, leaving headroom for failures and
reassignments. Pure arithmetic: no I/O.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from kit.errors import BadInput
from kit.model import Cluster


@dataclass(frozen=True)
class InstanceType:
    """A broker machine: NIC bytes/s (each way), usable disk bytes, price per hour."""

    name: str
    net_bytes_per_sec: float
    storage_bytes: float
    cost_per_hour: float


@dataclass(frozen=True)
class Workload:
    """What a topic or pool asks of the brokers."""

    name: str
    bytes_in: float  # produce bytes/s
    bytes_out: float  # consumer bytes/s
    stored_bytes: float  # one copy of the data kept
    replication: int
    brokers_now: int = 0

    @property
    def fanout(self) -> float:
        return self.bytes_out / self.bytes_in if self.bytes_in else 0.0


def workloads(cluster: Cluster, groups: dict[str, str] | None = None,
              retention_seconds: float | None = None) -> list[Workload]:
    """One workload per topic, or per group (name -> topic regex; a topic in two groups is bad
    input). Stored bytes are produce rate x `retention_seconds` when given, else today's sizes."""
    owner: dict[str, str] = {}
    if groups:
        for name, pattern in groups.items():
            rx = re.compile(pattern)
            for t in cluster.topics():
                if rx.fullmatch(t):
                    if t in owner:
                        raise BadInput(f"topic {t} is in two groups: {owner[t]} and {name}")
                    owner[t] = name
    acc: dict[str, dict] = {}
    for p in cluster.partitions:
        name = owner.get(p.topic) if groups else p.topic
        if name is None:
            continue
        a = acc.setdefault(name, {"in": 0.0, "out": 0.0, "size": 0.0, "rf": 0, "brokers": set()})
        a["in"] += p.bytes_in
        a["out"] += p.bytes_out
        a["size"] += p.size
        a["rf"] = max(a["rf"], len(p.replicas))
        a["brokers"].update(p.replicas)
    return [Workload(name, a["in"], a["out"],
                     a["in"] * retention_seconds if retention_seconds is not None else a["size"],
                     a["rf"], len(a["brokers"]))
            for name, a in sorted(acc.items())]


def brokers_needed(w: Workload, it: InstanceType, target_utilization: float = 0.6) -> dict:
    """Brokers of type `it` the workload needs along each dimension, and the largest of them
    (never fewer than the replication factor)."""
    if not 0 < target_utilization <= 1:
        raise BadInput(f"target utilisation must be in (0, 1], got {target_utilization}")
    net = it.net_bytes_per_sec * target_utilization
    disk = it.storage_bytes * target_utilization
    inbound = math.ceil(w.bytes_in * w.replication / net) if net > 0 else math.inf
    outbound = math.ceil((w.bytes_out + w.bytes_in * (w.replication - 1)) / net) if net > 0 else math.inf
    storage = math.ceil(w.stored_bytes * w.replication / disk) if disk > 0 else math.inf
    needed = max(inbound, outbound, storage, w.replication)
    limit = max((("inbound network", inbound), ("outbound network", outbound), ("storage", storage)),
                key=lambda kv: kv[1])[0]
    return {"inbound": inbound, "outbound": outbound, "storage": storage, "brokers": needed, "limited_by": limit}


def cheapest(w: Workload, types: list[InstanceType], target_utilization: float = 0.6) -> list[dict]:
    """Every instance type with the brokers it needs and its cost per hour, cheapest first."""
    rows = []
    for it in types:
        need = brokers_needed(w, it, target_utilization)
        rows.append({"instance_type": it.name, **need, "cost_per_hour": need["brokers"] * it.cost_per_hour})
    return sorted(rows, key=lambda r: (r["cost_per_hour"], r["instance_type"]))


def grown(w: Workload, growth_per_month: float, months: float) -> Workload:
    """The workload after compound growth of traffic and data."""
    f = (1 + growth_per_month) ** months
    return Workload(w.name, w.bytes_in * f, w.bytes_out * f, w.stored_bytes * f, w.replication, w.brokers_now)


def plan_capacity(ws: list[Workload], types: list[InstanceType], current: InstanceType,
                  target_utilization: float = 0.6, growth_per_month: float = 0.0, months: float = 0.0) -> list[dict]:
    """Per workload: brokers needed now and after growth on the current type, how many to add,
    and the cheapest type for the grown workload."""
    out = []
    for w in ws:
        now = brokers_needed(w, current, target_utilization)
        later = brokers_needed(grown(w, growth_per_month, months), current, target_utilization)
        best = cheapest(grown(w, growth_per_month, months), types, target_utilization)[0]
        out.append({
            "workload": w.name, "brokers_now": w.brokers_now,
            "bytes_in_mb_s": round(w.bytes_in / 1e6, 3), "fanout": round(w.fanout, 2),
            "stored_gb": round(w.stored_bytes / 1e9, 1),
            "needed_now": now["brokers"], "limited_by": now["limited_by"],
            "needed_after_growth": later["brokers"],
            "brokers_to_add": max(0, later["brokers"] - w.brokers_now),
            "cheapest_type": best["instance_type"], "cheapest_brokers": best["brokers"],
            "cheapest_cost_per_hour": round(best["cost_per_hour"], 2),
        })
    return out
