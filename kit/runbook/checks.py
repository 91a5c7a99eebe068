"""Pre-checks: each a visible PASS/FAIL line kept in the record; a failure raises
`CheckFailed`, which stops the runbook (outcome "stopped")."""
from __future__ import annotations

from kit.errors import BadInput
from kit.model import Cluster
from kit.plan.pairs import pair_dead_with_new
from kit.runbook.environment import Environment
from kit.runbook.record import CheckFailed, Record


class Checks:
    """Pre-checks, each printed as a PASS/FAIL line and kept in the record."""

    def __init__(self, record: Record | None = None):
        self.record, self.failed = record, []

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        print(f"{'PASS' if ok else 'FAIL'}  {name}" + (f" — {detail}" if detail else ""))
        if self.record is not None:
            self.record.doc["checks"].append({"check": name, "ok": bool(ok), "detail": detail})
            self.record.save()
        if not ok:
            self.failed.append(f"{name}: {detail}" if detail else name)
        return ok

    def stop_if_failed(self) -> None:
        if self.failed:
            raise CheckFailed(f"pre-check failed: {self.failed[0]}")


def common_checks(env: Environment, checks: Checks) -> tuple[Cluster, dict | None]:
    """The cluster answers (ZooKeeper, or the Admin API) and no reassignment is running;
    returns the cluster."""
    cluster, running = env.read()
    # The address in full (every bootstrap broker; ZooKeeper's chroot too): what `kit dashboard`,
    # `kit throttle` or a rerun need to find the same cluster.
    if env.bootstrap:
        checks.check("the Admin API answers", True,
                     env.bootstrap + (" (simulated KRaft cluster)" if env.simulated else ""))
    else:
        checks.check("ZooKeeper answers", True, env.zk + (" (simulated cluster)" if env.simulated else ""))
    checks.check("no reassignment in progress", running is None,
                 "" if running is None else f"{len(running.get('partitions', []))} partition(s) moving now")
    return cluster, running


def replacement_pairs(cluster: Cluster, replace: str, checks: Checks) -> list[tuple[int, int]]:
    """The OLD:NEW pairs (given, or each dead broker with an empty live broker), checked:
    OLD holds replicas, NEW is live and empty, and in OLD's rack when that is known."""
    try:
        if replace:
            pairs = []
            for item in replace.split(","):
                old, _, new = item.partition(":")
                pairs.append((int(old), int(new)))
        else:
            pairs = pair_dead_with_new(cluster)
    except (ValueError, BadInput) as e:
        checks.check("brokers to replace", False, str(e) if isinstance(e, BadInput) else f"{replace!r}: expected OLD:NEW")
        return []
    held = set(cluster.map_brokers())
    for old, new in pairs:
        b_new = cluster.brokers.get(new)
        checks.check(f"broker {old} holds replicas", old in held, "" if old in held else "nothing to move off it")
        checks.check(f"broker {new} is live", bool(b_new and b_new.alive),
                     "" if b_new and b_new.alive else
                     "dead (registered, fenced)" if b_new is not None and b_new.known else
                     "not registered (no live broker has that id)")
        checks.check(f"broker {new} is empty", new not in held, "" if new not in held else "it already holds replicas")
        r_old, r_new = cluster.rack_of(old), cluster.rack_of(new)
        if r_old is not None:
            checks.check(f"broker {new} is in broker {old}'s rack", r_old == r_new, f"{r_new} vs {r_old}")
    return pairs


def lost_rack(cluster: Cluster) -> str | None:
    """The rack whose brokers are all dead, if one is; else, when dead brokers of unknown rack
    exist (ZooKeeper keeps no rack for a dead broker), a label for them that `plan_az_loss`
    takes as "the dead brokers"."""
    racks: dict[str, list[bool]] = {}
    for b in cluster.brokers.values():
        if b.rack:
            racks.setdefault(b.rack, []).append(b.alive)
    gone = sorted(r for r, alive in racks.items() if not any(alive))
    if gone:
        return gone[0]
    if any(not b.alive and b.rack is None for b in cluster.brokers.values()):
        return "unregistered"
    return None
