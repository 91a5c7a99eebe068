"""The text summary of a plan, in topicmappr's sections, from `kit plan`'s report.

Pure: no I/O, nothing printed; the figures come from `kit.report.figures`, never recomputed.
"""
from __future__ import annotations

import numpy as np

from kit.model import Plan
from kit.report.figures import PlanArrays
from kit.report.waves import duration_lines

__all__ = ["summary_text"]

# Per-broker storage lines: beyond this many brokers, only the largest changes.
_STORAGE_LINES_MAX = 40


def _brackets(reps) -> str:
    return "[" + " ".join(map(str, reps)) + "]"


def _reason(old, new) -> str:
    if set(old) != set(new):
        return "replaced broker"
    if old[:1] != new[:1]:
        return "preferred leader"
    return "follower order"


def _storage_lines(plan: Plan, delta: dict[int, int], before: dict, after: dict) -> list[str]:
    """topicmappr's per-broker storage lines: free before -> after (change, `delta`), and a
    warning when the plan widens the range of free space."""
    brokers = plan.cluster.brokers
    out = []
    shown = [b for b in plan.targets if brokers[b].storage_free is not None]
    if len(shown) > _STORAGE_LINES_MAX:
        # On large clusters only the brokers whose free space changes most.
        biggest = sorted(shown, key=lambda b: (-abs(delta.get(b, 0)), b))[:_STORAGE_LINES_MAX]
        hidden = len(shown) - len(biggest)
        shown = sorted(biggest)
    else:
        hidden = 0
    for b in shown:
        free = brokers[b].storage_free
        d = delta.get(b, 0)
        pct = d / free * 100 if free else 0.0
        out.append(f"  Broker {b}: {free / 1e9:.2f} -> {(free + d) / 1e9:.2f} ({d / 1e9:+.2f}GB, {pct:+.2f}%)")
    if hidden:
        out.append(f"  ... and {hidden} brokers whose free space changes less")
    if after["storage_free_range_spread_pct"] > before["storage_free_range_spread_pct"]:
        out.append(f"  WARN: the range of free storage grows ({before['storage_free_range_spread_pct']:.2f}% -> "
                   f"{after['storage_free_range_spread_pct']:.2f}%)")
    return out


def summary_text(plan: Plan, report: dict, max_changes: int = 100, arrays: PlanArrays | None = None,
                 duration_options: dict | None = None) -> str:
    """A topicmappr-style text summary of a plan.

    Parameters
    ----------
    plan : Plan
        The plan to describe.
    report : dict
        ``plan_report(plan)``; the figures are taken from it, not recomputed.
    max_changes : int
        Partition map changes listed before the rest is only counted.
    arrays : PlanArrays, optional
        ``PlanArrays(plan)``, when the caller has it already (`plan_report` read it too).
    duration_options : dict, optional
        How the Duration estimate section (with ``report["duration"]``) is said:
        `kit.report.waves.duration_lines`'s keywords (the clock, waves or all at once).

    Returns
    -------
    str
        Sections Topics, Broker change summary, Action, WARN, Partition map changes,
        Broker distribution, Movement, Balance and (with storage figures) Storage free
        change estimations, ending with a newline. Same plan, same text.

    Notes
    -----
    ``plan.broker_changes`` may hold ``removed``, ``replacing``, ``added`` (new, empty
    brokers) and ``missing`` (dead brokers still in the map); "Replacing N" counts the
    brokers being vacated, removed or replaced.
    """
    arrays = arrays or PlanArrays(plan)
    out = _topic_lines(plan)
    out += ["", "Broker change summary:"] + _broker_change_lines(plan, arrays.targets, arrays.holders)
    out += ["", "Action:", f"  {plan.action}"]
    out += ["", "WARN:"] + ([f"  {w}" for w in plan.warnings] or ["  [none]"])
    if plan.notes:
        out += ["", "NOTE:"] + [f"  {n}" for n in plan.notes]
    out += _offline_lines(report, max_changes)
    out += ["", "Partition map changes:"] + _change_lines(plan, arrays.changed, max_changes)
    b, a, mv = report["before"], report["after"], report["movement"]
    out += ["", "Broker distribution:",
            f"  degree [min/max/avg]: {b['degree_min']}/{b['degree_max']}/{b['degree_avg']:.2f}"
            f" -> {a['degree_min']}/{a['degree_max']}/{a['degree_avg']:.2f}", "  -"]
    out += _distribution_lines(arrays)
    out += ["", "Movement:"] + _movement_lines(mv)
    out += ["", "Balance:"] + [f"  {label}: {b[key]} -> {a[key]}" for key, label in _BALANCE_LINES]
    if "storage_free_range_spread_pct" in a and "storage_free_range_spread_pct" in b:
        out += ["", "Storage free change estimations:"] + _storage_estimate_lines(b, a) + _storage_lines(
            plan, arrays.storage_delta, b, a)
    if report.get("pools"):
        out += ["", "Pools:"] + _pool_lines(report["pools"])
    if "duration" in report:
        out += ["", "Duration estimate:"] + duration_lines(report["duration"], **(duration_options or {}))
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- summary: offline partitions


def _offline_lines(report: dict, max_listed: int) -> list[str]:
    """The Offline partitions section (none without them): each partition the plan left out,
    why it has no leader and what brings it back, the first `max_listed`; the report lists
    every one. Their replicas on dead brokers stay there: the movement figures' forced
    additions and lower bounds, which count every replica off the targets, count them too."""
    offline = report.get("offline_partitions") or []
    if not offline:
        return []
    out = ["", f"Offline partitions: {len(offline)}, left out of the plan (no live in-sync replica: no leader, "
               "nothing to copy from; a reassignment of one could never finish and would block every later one)"]
    for o in offline[:max_listed]:
        out.append(f"  {o['topic']} p{o['partition']} {_brackets(o['replicas'])} isr {_brackets(o['isr'])}: "
                   f"{o['cause']}; back with {o['recovery']}")
    if len(offline) > max_listed:
        out.append(f"  ... and {len(offline) - max_listed} more (every one in the report's offline_partitions)")
    out.append("  their replicas stay where they are: the Movement section's forced additions and lower bounds "
               "count those on dead brokers; the replica additions do not")
    return out


# ---------------------------------------------------------------- summary: the other sections


# The Balance section: (figure, label), in the order printed.
_BALANCE_LINES = (("replica_count_spread", "replica count spread"),
                  ("replica_count_spread_within_racks", "replica count spread within racks"),
                  ("leader_count_spread", "leader count spread"),
                  ("topic_leader_excess_spread_max", "topic leader excess spread, max"),
                  ("failover_excess_spread_max", "failover excess spread, max"),
                  ("rack_violations", "rack violations"))


def _topic_lines(plan: Plan) -> list[str]:
    """The Topics section: the selected topics, the first 20 named."""
    parts = plan.cluster.partitions
    out = ["Topics:"]
    topics = sorted({parts[i].topic for i in plan.selected})
    out += [f"  {t}" for t in topics[:20]] or ["  [none]"]
    if len(topics) > 20:
        out.append(f"  ... and {len(topics) - 20} more")
    return out


def _broker_change_lines(plan: Plan, targets: set[int], holders: set[int]) -> list[str]:
    """The brokers removed, replaced, missing and added, and the counts topicmappr prints."""
    bc = plan.broker_changes
    removed, replacing = list(bc.get("removed", [])), list(bc.get("replacing", []))
    added, missing = list(bc.get("added", [])), list(bc.get("missing", []))
    out = [f"  Broker {b} marked for removal" for b in sorted(removed)]
    out += [f"  Broker {b} marked for replacement" for b in sorted(set(replacing) - set(removed))]
    out += [f"  Broker {b} is missing (dead)" for b in sorted(missing)]
    out += [f"  New broker {b}" for b in sorted(added)]
    out.append(f"  Replacing {len(set(removed) | set(replacing))}, added {len(added)}, missing {len(missing)}, "
               f"total count changed by {len(targets) - len(holders)}")
    return out


def _change_lines(plan: Plan, changed_rows: np.ndarray, max_changes: int) -> list[str]:
    """Each changed partition (`PlanArrays.changed`), old -> new replica list and why, the first
    `max_changes`."""
    parts = plan.cluster.partitions
    out = []
    changed = np.flatnonzero(changed_rows).tolist()
    for i in changed[:max_changes]:
        old, new = list(parts[i].replicas), list(plan.after[i])
        why = plan.reasons.get(i) or _reason(old, new)
        out.append(f"  {parts[i].topic} p{parts[i].partition}: {_brackets(old)} -> {_brackets(new)} {why}")
    if len(changed) > max_changes:
        out.append(f"  ... and {len(changed) - max_changes} more (full list in the plan file)")
    if not changed:
        out.append("  [no changes]")
    return out


def _distribution_lines(arrays: PlanArrays) -> list[str]:
    """Each broker's leader, follower and total replicas after, with what it had before
    where that differs."""
    out = []
    was, now = arrays.roles(after=False), arrays.roles()
    for bid in sorted(arrays.targets | arrays.holders | {k for k, v in now.items() if v[2]}):
        line = f"  Broker {bid} - leader: {now[bid][0]}, follower: {now[bid][1]}, total: {now[bid][2]}"
        if was[bid] != now[bid]:
            line += " (was {}/{}/{})".format(*was[bid])
        out.append(line)
    return out


def _movement_lines(mv: dict) -> list[str]:
    """Replica additions, data moved and partitions changed, each with the least a balanced
    result would need: a bound on balancing plans, said as such, since a plan that does not
    balance (a replacement keeps the old counts) may well copy less."""
    return [f"  replica additions: {mv['replica_additions']} (forced {mv['forced_additions']}: replicas of brokers "
            f"leaving; a result with even replica counts would need at least "
            f"{mv['additions_lower_bound_count_balanced']})",
            f"  data moved: {mv['bytes_moved_gb']:.3f} GB (a result with no broker above the mean storage would "
            f"move at least {mv['bytes_lower_bound_to_mean_gb']:.3f} GB)",
            f"  partitions changed: {mv['partitions_changed']}",
            f"  leader-only changes: {mv['leader_only_changes']}"]


def _storage_estimate_lines(b: dict, a: dict) -> list[str]:
    """Free storage's range spread, deviation and minimum, before -> after."""
    return [f"  range spread: {b['storage_free_range_spread_pct']:.2f}% -> {a['storage_free_range_spread_pct']:.2f}%",
            f"  std. deviation: {b['storage_free_stddev_gb']:.2f}GB -> {a['storage_free_stddev_gb']:.2f}GB",
            f"  min free: {b['storage_free_min_gb']:.2f}GB -> {a['storage_free_min_gb']:.2f}GB"]


def _pool_lines(pools: dict) -> list[str]:
    """One line per topic pool: its topics, brokers, spreads and additions."""
    out = []
    for name, g in pools.items():
        fa = g["after"]
        out.append(f"  {name}: {g['topics']} topic(s) on {len(g['brokers'])} broker(s); "
                   f"replica spread {g['before']['replica_count_spread']} -> {fa['replica_count_spread']}, "
                   f"leader spread {g['before']['leader_count_spread']} -> {fa['leader_count_spread']}, "
                   f"additions {g['movement']['replica_additions']}")
    return out
