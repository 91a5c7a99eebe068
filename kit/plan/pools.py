"""Topic pools: groups of topics that live on their own brokers (kafka-kit's capacity units).

A pools file, YAML or JSON, names each pool's topics (a regular expression matched against
whole topic names) and its brokers (ids, or "first-last" ranges)::

    pools:
      pool1: {topics: "test_topic.*", brokers: ["1001-1005"]}
      pool2: {topics: "orders|payments", brokers: [1006, 1007, 1008]}
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from kit import validate
from kit.errors import BadInput
from kit.formats import load_yaml
from kit.model import Cluster


@dataclass(frozen=True)
class Pool:
    name: str
    topics: str
    brokers: tuple[int, ...]


# No cluster has more brokers than this in one pool; a wider range is a typo, not a pool.
MAX_RANGE = 10_000


def _brokers(value, where: str) -> tuple[int, ...]:
    items = value if isinstance(value, list) else [value]
    out: list[int] = []
    for item in items:
        if isinstance(item, int) and not isinstance(item, bool):
            out.append(validate.broker_id(item, f"{where}: broker"))
            continue
        m = re.fullmatch(r"\s*(\d+)\s*(?:-|\.\.)\s*(\d+)\s*", item) if isinstance(item, str) else None
        if not m or int(m.group(1)) > int(m.group(2)):
            raise BadInput(f"{where}: broker {str(item)[:40]!r} is neither an id nor a FIRST-LAST range")
        first = validate.broker_id(int(m.group(1)), f"{where}: range {item}")
        last = validate.broker_id(int(m.group(2)), f"{where}: range {item}")
        if last - first >= MAX_RANGE:
            raise BadInput(f"{where}: range {item} spans more than {MAX_RANGE} brokers")
        out.extend(range(first, last + 1))
    if not out:
        raise BadInput(f"{where}: no brokers")
    return tuple(sorted(set(out)))


def parse_pools(doc, source: str = "pools") -> list[Pool]:
    """Validate a pools document (already parsed from YAML or JSON)."""
    if isinstance(doc, dict) and "pools" in doc:
        doc = doc["pools"]
    if not isinstance(doc, dict) or not doc:
        raise BadInput(f"{source}: expected a mapping of pool names to {{topics, brokers}}")
    pools = []
    for name, spec in sorted(doc.items(), key=lambda kv: str(kv[0])):
        where = f"{source}: pool {name}"
        if not isinstance(spec, dict) or "topics" not in spec or "brokers" not in spec:
            raise BadInput(f"{where} needs 'topics' and 'brokers'")
        if not isinstance(spec["topics"], str) or not spec["topics"]:
            raise BadInput(f"{where}: topics must be a regular expression (a string)")
        try:
            re.compile(str(spec["topics"]))
        except re.error as e:
            raise BadInput(f"{where}: topics {spec['topics']!r} is not a valid regular expression ({e})") from None
        pools.append(Pool(str(name), str(spec["topics"]), _brokers(spec["brokers"], where)))
    # A pool is balanced over its own brokers alone: a broker in two pools would be filled by
    # each plan as if the other's replicas were not there.
    holder: dict[int, str] = {}
    for pool in pools:
        for b in pool.brokers:
            if b in holder:
                raise BadInput(f"{source}: broker {b} is in two pools, {holder[b]} and {pool.name} "
                               "(a pool's brokers are its own)")
            holder[b] = pool.name
    return pools


def load_pools(path: str) -> list[Pool]:
    """Read a pools file (YAML, of which JSON is a subset)."""
    return parse_pools(load_yaml(path, "pools"), f"pools {path}")


def topics_by_pool(cluster: Cluster, pools: list[Pool]) -> dict[str, list[str]]:
    """Which topics each pool holds; a topic in two pools, or a pool broker the cluster does
    not have, is bad input."""
    owner: dict[str, str] = {}
    out: dict[str, list[str]] = {p.name: [] for p in pools}
    for pool in pools:
        for b in pool.brokers:
            if b not in cluster.brokers or not cluster.brokers[b].known:
                raise BadInput(f"pool {pool.name} names broker {b}, which the cluster does not have")
        rx = re.compile(pool.topics)
        for t in cluster.topics():
            if rx.fullmatch(t):
                if t in owner:
                    raise BadInput(f"topic {t} is in two pools: {owner[t]} and {pool.name}")
                owner[t] = pool.name
                out[pool.name].append(t)
        if not out[pool.name]:
            raise BadInput(f"pool {pool.name}: topics {pool.topics!r} match no topic of the cluster")
    return out


__all__ = ["Pool", "parse_pools", "load_pools", "topics_by_pool"]
