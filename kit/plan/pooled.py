"""Plan each topic pool on its own brokers, one pool after the other."""
from __future__ import annotations

import re

from kit.model import Cluster, Plan
from kit.plan.pools import Pool, topics_by_pool
from kit.plan.select import broker_changes


def plan_pooled(cluster: Cluster, pools: list[Pool], plan_one, action: str) -> Plan:
    """Run `plan_one(cluster, topics=REGEX, brokers=IDS)` for every pool that holds topics,
    each on the cluster as the pools before it left it; topics on brokers outside their pool
    move into it. Returns one plan for the whole cluster, with each pool's topics and brokers
    in `plan.groups`."""
    owners = topics_by_pool(cluster, pools)
    current = cluster
    warnings, notes, reasons, selected, targets, offline = [], [], {}, set(), set(), set()
    groups = {}
    # Twice round: the first round moves each pool's topics onto its brokers, but a pool
    # planned early still counted the replicas of later pools that were about to leave.
    for round_ in (1, 2):
        for pool in pools:
            topics = owners[pool.name]
            live = [b for b in pool.brokers if cluster.brokers[b].alive]
            if not topics:
                if round_ == 1:
                    notes.append(f"pool {pool.name}: no topic matches {pool.topics!r}")
                continue
            sub = plan_one(current, topics="|".join(re.escape(t) for t in topics), brokers=live)
            current = current.with_assignment(sub.after)
            if round_ == 2:
                warnings += [f"pool {pool.name}: {w}" for w in sub.warnings]
                notes += [f"pool {pool.name}: {n}" for n in sub.notes]
            reasons.update(sub.reasons)
            selected.update(sub.selected)
            offline.update(sub.offline)
            targets.update(sub.targets)
            groups[pool.name] = {"topics": topics, "brokers": sorted(sub.targets)}
    targets_l = sorted(targets)
    return Plan(cluster=cluster, action=f"{action} (pools)", after=[list(p.replicas) for p in current.partitions],
                targets=targets_l, selected=sorted(selected), warnings=warnings, notes=notes, reasons=reasons,
                broker_changes=broker_changes(cluster, targets_l), groups=groups, offline=sorted(offline))
