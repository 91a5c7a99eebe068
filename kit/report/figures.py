"""Plan-quality figures: problems, balance and movement before and after a plan.

The figures are the ones `shared/tools/evaluate_plan.py` computes (design.md, "Plan
quality"), key for key and value for value, so a kit report can be compared with the
evaluator's verdict, or with another tool's plan, without running it. The work is done
on numpy arrays (kit.report.arrays).

Pure: no I/O, nothing printed.
"""
from __future__ import annotations

import statistics
from functools import cached_property

import numpy as np

from kit.array_ops import Lists, distinct, row_entries
from kit.model import Cluster, Plan
from kit.report.arrays import FigureContext, FlatAssignment, context
from kit.offline import describe as describe_offline
from kit.plan.failover import excess_by_leader, heirs, worst_excess
from kit.plan.racks import racks_needed

__all__ = ["PlanArrays", "assignment_figures", "broker_figures", "movement_figures", "plan_report"]

# Above this many cells a (row, column) count table is built sparsely (sort) instead of
# densely (bincount); dense is several times faster but costs 8 bytes per cell.
DENSE_CELLS_MAX = 1 << 22

# float64 sums of integers are exact below 2**53; above it, per-broker bytes are summed
# as int64 instead (slower), so storage figures never depend on rounding.
FLOAT_EXACT = 1 << 53

# evaluate_plan lists at most this many problems (and counts them all).
_PROBLEMS_LISTED = 20


def _cell_counts(rows: np.ndarray, cols: np.ndarray, n_cols: int, n_cells: int):
    """Distinct (row, col) pairs with their multiplicity, sorted by row then col."""
    code = rows * n_cols + cols
    if n_cells <= DENSE_CELLS_MAX:
        table = np.bincount(code, minlength=n_cells)
        cell = np.flatnonzero(table)
        count = table[cell]
    else:
        cell, count = np.unique(code, return_counts=True)
    return cell // n_cols, cell % n_cols, count


def _used_bytes(ctx: FigureContext, flat: FlatAssignment) -> np.ndarray:
    """Bytes each broker holds under an assignment (int64, exact)."""
    weights = ctx.sizes[flat.part_of]
    n = len(ctx.ids)
    if int(weights.sum(dtype=np.int64)) < FLOAT_EXACT and (weights >= 0).all():
        return np.bincount(flat.idx, weights=weights, minlength=n).astype(np.int64)
    used = np.zeros(n, dtype=np.int64)
    np.add.at(used, flat.idx, weights)
    return used


def _leaders(flat: FlatAssignment) -> tuple[np.ndarray, np.ndarray]:
    """Rows with a replica list, and their preferred leader."""
    rows = np.flatnonzero(flat.lengths > 0)
    return rows, flat.idx[flat.starts[rows]]


# --------------------------------------------------------------------------- figures


def _spread(values: np.ndarray) -> int:
    return int(values.max() - values.min())


def _duplicate_rows(flat: FlatAssignment) -> np.ndarray:
    dup = np.zeros(len(flat.lengths), dtype=bool)
    for n, (rows, m) in flat.groups.items():
        if n > 1:
            s = np.sort(m, axis=1)
            dup[rows] = (s[:, 1:] == s[:, :-1]).any(axis=1)
    return dup


def _rack_violations(ctx: FigureContext, flat: FlatAssignment) -> int:
    """Replica sets that span fewer racks than the rack rule needs (`kit.plan.racks`); as in
    evaluate_plan, a set with a replica without a rack is not judged."""
    if not ctx.n_racks:
        return 0
    total = 0
    for n, (_, m) in flat.groups.items():
        r = ctx.rack[m]
        # A replica without a rack makes the partition unjudgeable, as in evaluate_plan.
        racked = (r >= 0).all(axis=1)
        s = np.sort(r, axis=1)
        distinct = 1 + (s[:, 1:] != s[:, :-1]).sum(axis=1)
        total += int(np.count_nonzero(racked & (distinct < racks_needed(n, ctx.n_racks))))
    return total


def _degrees(ctx: FigureContext, flat: FlatAssignment) -> np.ndarray:
    """Distinct target peers of every target broker."""
    n = len(ctx.ids)
    if n * n <= DENSE_CELLS_MAX:
        # Which (broker, broker) pairs share a partition, marked in a table: the same pairs as
        # the sparse count's below, without concatenating and counting every pair of replicas.
        pairs = np.zeros((n, n), dtype=bool)
        for k, (_, m) in flat.groups.items():
            on = ctx.is_target[m]
            for a in range(k):
                for b in range(a + 1, k):
                    keep = on[:, a] & on[:, b]
                    pairs[m[keep, a], m[keep, b]] = True
        pairs |= pairs.T
        pairs[np.arange(n), np.arange(n)] = False  # a broker listed twice is not its own peer
        return pairs.sum(axis=1)[ctx.tidx]
    lo_parts, hi_parts = [], []
    for k, (_, m) in flat.groups.items():
        for a in range(k):
            for b in range(a + 1, k):
                x, y = m[:, a], m[:, b]
                keep = (x != y) & ctx.is_target[x] & ctx.is_target[y]
                lo_parts.append(np.minimum(x, y)[keep])
                hi_parts.append(np.maximum(x, y)[keep])
    deg = np.zeros(n, dtype=np.int64)
    if lo_parts:
        lo, hi, _ = _cell_counts(np.concatenate(lo_parts), np.concatenate(hi_parts), n, n * n)
        deg += np.bincount(lo, minlength=n) + np.bincount(hi, minlength=n)
    return deg[ctx.tidx]


def _topic_leader_excess(ctx: FigureContext, flat: FlatAssignment) -> int:
    rows, lead = _leaders(flat)
    if not len(rows):
        return 0
    n_t = len(ctx.tidx)
    topic = ctx.topic[rows]
    led = np.bincount(topic, minlength=ctx.n_topics)
    on = ctx.is_target[lead]
    tp, _, cnt = _cell_counts(topic[on], lead[on], len(ctx.ids), ctx.n_topics * len(ctx.ids))
    hi = np.zeros(ctx.n_topics, dtype=np.int64)
    lo = np.zeros(ctx.n_topics, dtype=np.int64)
    if len(tp):
        first = np.flatnonzero(np.r_[True, tp[1:] != tp[:-1]])
        group = tp[first]
        hi[group] = np.maximum.reduceat(cnt, first)
        # The minimum over targets is 0 unless every target leads something in the topic.
        full = np.diff(np.r_[first, len(tp)]) == n_t
        lo[group[full]] = np.minimum.reduceat(cnt, first)[full]
    has = led > 0
    excess = hi[has] - lo[has] - (led[has] % n_t != 0)
    return max(0, int(excess.max())) if len(excess) else 0


def _failover_excess(ctx: FigureContext, flat: FlatAssignment) -> int:
    """The worst target broker's failover excess (`kit.plan.failover`)."""
    lead_parts, next_parts = [], []
    for k, (_, m) in flat.groups.items():
        if k > 1:
            keep = ctx.is_target[m[:, 0]]
            lead_parts.append(m[keep, 0])
            next_parts.append(m[keep, 1])
    if not lead_parts:
        return 0
    n = len(ctx.ids)
    x_of, y_of, cnt = _cell_counts(np.concatenate(lead_parts), np.concatenate(next_parts), n, n * n)
    # A single target broker has nobody to fail over to and no excess (evaluate_plan fails there).
    by_leader = excess_by_leader(x_of, y_of, cnt, ctx.tidx.tolist(),
                                 lambda x: heirs(x, ctx.tidx, ctx.rack, ctx.n_racks))
    return worst_excess(by_leader)


def _figures(ctx: FigureContext, flat: FlatAssignment) -> dict:
    n = len(ctx.ids)
    t = ctx.tidx
    count = np.bincount(flat.idx, minlength=n)
    _, lead = _leaders(flat)
    leaders = np.bincount(lead, minlength=n)
    used = _used_bytes(ctx, flat)
    cnts = count[t]
    degs = _degrees(ctx, flat).tolist()
    within = 0
    for r in distinct(ctx.rack[t]).tolist():
        within = max(within, _spread(cnts[ctx.rack[t] == r]))
    out = {
        "partitions": len(flat.lengths),
        "replicas_off_target": int(np.count_nonzero(~ctx.is_target[flat.idx])),
        "duplicate_replica_sets": int(np.count_nonzero(_duplicate_rows(flat))),
        "rack_violations": _rack_violations(ctx, flat),
        "replica_count_min": int(cnts.min()),
        "replica_count_max": int(cnts.max()),
        "replica_count_spread": _spread(cnts),
        "replica_count_spread_within_racks": within,
        "leader_count_spread": _spread(leaders[t]),
        "topic_leader_excess_spread_max": _topic_leader_excess(ctx, flat),
        "degree_min": min(degs),
        # statistics, not numpy, for the per-broker means: evaluate_plan's exact rounding.
        "degree_avg": round(statistics.mean(degs), 2),
        "degree_max": max(degs),
        "failover_excess_spread_max": _failover_excess(ctx, flat),
    }
    uv = used[t].tolist()
    if ctx.storage_free is not None:
        before = _used_bytes(ctx, ctx.snapshot)[t].tolist()
        fv = [f + b - u for f, b, u in zip(ctx.storage_free, before, uv)]
        out["storage_free_range_spread_pct"] = round((max(fv) - min(fv)) / max(min(fv), 1) * 100, 3)
        out["storage_free_stddev_gb"] = round(statistics.pstdev(fv) / 1e9, 3)
        out["storage_free_min_gb"] = round(min(fv) / 1e9, 3)
    mean_u = statistics.mean(uv) or 1
    out["storage_used_spread_pct_of_mean"] = round((max(uv) - min(uv)) / mean_u * 100, 3)
    return out


def _changed_rows(before: FlatAssignment, after: FlatAssignment) -> np.ndarray:
    """Partitions whose replica list differs, order included."""
    changed = before.lengths != after.lengths
    for n, (rows, m) in after.groups.items():
        same = rows[before.lengths[rows] == n]
        if len(same):
            mb = before.idx[before.starts[same][:, None] + np.arange(n)]
            ma = after.idx[after.starts[same][:, None] + np.arange(n)]
            changed[same] = (mb != ma).any(axis=1)
    return changed


def _set_changes(ctx: FigureContext, added_dropped: tuple[np.ndarray, np.ndarray], p: int):
    """Per partition (`p` of them): distinct brokers added, distinct brokers dropped, from
    `_added_dropped`'s codes."""
    n = len(ctx.ids)
    new, gone = added_dropped
    return np.bincount(new // n, minlength=p), np.bincount(gone // n, minlength=p)


def _added_dropped(ctx: FigureContext, before: FlatAssignment, after: FlatAssignment, changed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(partition, broker) codes, partition * brokers + broker index, of the replicas each
    changed partition gains and loses (distinct brokers), sorted."""
    n = len(ctx.ids)

    def codes(flat: FlatAssignment) -> np.ndarray:
        rows = flat.part_of
        keep = changed[rows]
        # np.unique's answer, by a sort: its hash table was most of the time of this figure. The
        # codes come nearly sorted (rows in order): a stable sort (timsort) is 8x faster there.
        code = np.sort(rows[keep] * n + flat.idx[keep], kind="stable")
        return code[np.r_[True, code[1:] != code[:-1]]] if len(code) else code

    a, b = codes(after), codes(before)
    return a[~np.isin(a, b, assume_unique=True)], b[~np.isin(b, a, assume_unique=True)]


def _movement(ctx: FigureContext, before: FlatAssignment, after: FlatAssignment, changed: np.ndarray,
              added_dropped: tuple[np.ndarray, np.ndarray]) -> dict:
    """evaluate_plan's ``movement()``; `changed` is `_changed_rows`, `added_dropped` its
    `_added_dropped`."""
    new, gone = _set_changes(ctx, added_dropped, len(changed))
    n = len(ctx.ids)
    n_t = len(ctx.target_set)
    on = ctx.is_target[before.idx]
    c = np.bincount(before.idx[on], minlength=n)[ctx.tidx]
    total = int(after.lengths.sum())
    lo, hi = total // n_t, -(-total // n_t)
    forced = int(np.count_nonzero(~on))
    rf_growth = int(np.maximum(after.lengths - before.lengths, 0).sum())
    excess = int(np.maximum(c - hi, 0).sum())
    deficit = int(np.maximum(lo - c, 0).sum())
    used = _used_bytes(ctx, before).tolist()
    by_id = dict(zip(ctx.ids.tolist(), used))
    mean = sum(used) / n_t
    off = sum(u for b, u in by_id.items() if b not in ctx.target_set)
    # A float sum depends on its order; evaluate_plan adds in set order, so this does too.
    bytes_lb = off + sum(max(0, by_id[b] - mean) for b in ctx.target_set)
    return {
        "partitions_changed": int(np.count_nonzero(changed)),
        "leader_only_changes": int(np.count_nonzero(changed & (new == 0) & (gone == 0))),
        "replica_additions": int(new.sum()),
        "bytes_moved_gb": round(int((new * ctx.sizes).sum()) / 1e9, 3),
        "forced_additions": forced,
        "additions_lower_bound_count_balanced": max(forced + excess, deficit, rf_growth),
        "bytes_lower_bound_to_mean_gb": round(bytes_lb / 1e9, 3),
    }


# --------------------------------------------------------------------------- public


def assignment_figures(cluster: Cluster, assignment, targets) -> dict:
    """Plan-quality figures of one assignment, as evaluate_plan's ``metrics()``.

    Parameters
    ----------
    cluster : Cluster
        The cluster; its own assignment is the "before" that free storage is measured from.
    assignment : list of list of int
        One replica list per partition, aligned with ``cluster.partitions``.
    targets : iterable of int
        Target broker ids (non-empty).

    Returns
    -------
    dict
        The same keys, values and rounding as ``evaluate_plan.metrics``.
    """
    ctx, (flat,) = context(cluster, targets, [assignment])
    return _figures(ctx, flat)


def movement_figures(cluster: Cluster, before, after, targets) -> dict:
    """Data-movement figures from ``before`` to ``after``, as evaluate_plan's ``movement()``.

    Parameters
    ----------
    cluster : Cluster
        Supplies partition sizes and broker facts.
    before, after : list of list of int
        Replica lists aligned with ``cluster.partitions``.
    targets : iterable of int
        Target broker ids (non-empty).

    Returns
    -------
    dict
        Changes, replica additions, bytes moved, and their lower bounds.
    """
    ctx, (b, a) = context(cluster, targets, [before, after])
    changed = _changed_rows(b, a)
    return _movement(ctx, b, a, changed, _added_dropped(ctx, b, a, changed))


def _problems(ctx: FigureContext, after: FlatAssignment, changed: np.ndarray, offline: list[int]) -> tuple[list[str], int]:
    """evaluate_plan's problems (unknown brokers, anywhere but the `offline` partitions) and
    kit's own (changed partitions only)."""
    p = len(after.lengths)
    rows = after.part_of
    unknown = np.bincount(rows[~ctx.known[after.idx]], minlength=p) > 0
    # An offline partition stays where it is (kit.offline): the dead brokers it names, which
    # a cluster read from ZooKeeper no longer registers, are not the plan's doing.
    unknown[offline] = False
    dup = _duplicate_rows(after) & changed
    stray = ctx.known[after.idx] & ~ctx.is_target[after.idx]
    off = (np.bincount(rows[stray], minlength=p) > 0) & changed
    empty = (after.lengths == 0) & changed
    kinds = np.stack([unknown, dup, off, empty])
    count = int(kinds.sum())
    parts = ctx.cluster.partitions
    ids = ctx.ids
    listed: list[str] = []
    for i in np.flatnonzero(kinds.any(axis=0)).tolist():
        if len(listed) >= _PROBLEMS_LISTED:
            break
        name = parts[i].name
        reps = ids[after.idx[after.starts[i]:after.starts[i] + after.lengths[i]]].tolist()
        if unknown[i]:
            listed.append(f"{name} names an unknown broker")
        if dup[i]:
            twice = next(b for b in reps if reps.count(b) > 1)
            listed.append(f"{name} lists broker {twice} twice")
        if off[i]:
            bad = sorted({b for b in reps if b not in ctx.target_set and b in ctx.cluster.brokers
                          and ctx.cluster.brokers[b].known})
            listed.append(f"{name} places replicas on non-target broker(s) {', '.join(map(str, bad))}")
        if empty[i]:
            listed.append(f"{name} has no replicas")
    return listed[:_PROBLEMS_LISTED], count


class PlanArrays:
    """A plan's assignments before and after as arrays, and what both `plan_report` and
    `summary_text` read of them (which partitions change, the brokers each gains and loses):
    made once per plan and given to both, as `kit plan` does, they are computed once.

    Parameters
    ----------
    plan : Plan
        The plan; it must not change while this is in use.
    """

    def __init__(self, plan: Plan):
        self.ctx, (self.before, self.after) = context(plan.cluster, plan.targets, [None, plan.after])

    @cached_property
    def changed(self) -> np.ndarray:
        """Per partition, whether its replica list changes (order included)."""
        return _changed_rows(self.before, self.after)

    @cached_property
    def changed_rows(self) -> list[int]:
        """The partitions whose replica list changes, ascending: ``plan.changed()``."""
        return np.flatnonzero(self.changed).tolist()

    @cached_property
    def figures_before(self) -> dict:
        """`assignment_figures` of the assignment before the plan (the report's ``before``)."""
        return _figures(self.ctx, self.before)

    @cached_property
    def figures_after(self) -> dict:
        """`assignment_figures` of the plan's assignment (the report's ``after``)."""
        return _figures(self.ctx, self.after)

    def lists(self, rows: list[int]) -> Lists:
        """The replica lists after the plan of the partitions `rows` (ascending), flat:
        ``Lists.of({i: plan.after[i] for i in rows})``."""
        at = np.asarray(rows, dtype=np.int64)
        lens = self.after.lengths[at]
        entries = row_entries(self.after.starts[at], lens)
        return Lists(at, lens, np.repeat(np.arange(len(at), dtype=np.int64), lens), self.ctx.ids[self.after.idx[entries]])

    @cached_property
    def added_dropped(self) -> tuple[np.ndarray, np.ndarray]:
        """`_added_dropped`: the (partition, broker) codes each changed partition gains and loses."""
        return _added_dropped(self.ctx, self.before, self.after, self.changed)

    @property
    def targets(self) -> set[int]:
        """The plan's target broker ids."""
        return self.ctx.target_set

    @cached_property
    def holders(self) -> set[int]:
        """The brokers holding a replica before the plan."""
        return set(self.ctx.ids[np.bincount(self.before.idx, minlength=len(self.ctx.ids)) > 0].tolist())

    def roles(self, after: bool = True) -> dict[int, tuple[int, int, int]]:
        """Broker id -> (leader, follower, total) replica counts, after the plan or before it."""
        return _roles(self.ctx, self.after if after else self.before)

    @cached_property
    def storage_delta(self) -> dict[int, int]:
        """Broker id -> bytes of free space the plan gives it (taken: negative), for the
        brokers whose replica set changes."""
        return _storage_delta(self.ctx, self.added_dropped)


def plan_report(plan: Plan, arrays: PlanArrays | None = None) -> dict:
    """Everything `kit plan --report` writes: problems, figures before and after, movement.

    Parameters
    ----------
    plan : Plan
        The plan; its cluster's assignment is "before".
    arrays : PlanArrays, optional
        ``PlanArrays(plan)``, when the caller has it already (it shares it with
        `kit.report.summary.summary_text`).

    Returns
    -------
    dict
        Keys ``action, targets, problems, problem_count, before, after, movement,
        warnings, notes, broker_changes, offline_partitions``. ``problems`` lists at most 20
        (as evaluate_plan); ``problem_count`` counts them all. ``offline_partitions`` lists
        every partition the plan left out for having no live in-sync replica, with why and
        what brings it back (`kit.offline.describe`).
    """
    arrays = arrays or PlanArrays(plan)
    ctx, before, after = arrays.ctx, arrays.before, arrays.after
    problems, count = _problems(ctx, after, arrays.changed, plan.offline)
    report = {
        "action": plan.action,
        "targets": sorted(ctx.target_set),
        "problems": problems,
        "problem_count": count,
        "before": dict(arrays.figures_before),
        "after": dict(arrays.figures_after),
        "movement": _movement(ctx, before, after, arrays.changed, arrays.added_dropped),
        "warnings": list(plan.warnings),
        "notes": list(plan.notes),
        "broker_changes": {k: list(v) for k, v in plan.broker_changes.items()},
        "offline_partitions": describe_offline(plan.cluster, plan.offline),
    }
    if plan.groups:
        report["pools"] = {name: _pool_figures(plan, g) for name, g in plan.groups.items()}
    return report


def _pool_figures(plan: Plan, group: dict) -> dict:
    """A pool's figures as if it were a cluster of its own: its topics over its brokers."""
    topics = set(group["topics"])
    rows = [i for i, p in enumerate(plan.cluster.partitions) if p.topic in topics]
    sub = Cluster(brokers=plan.cluster.brokers, partitions=tuple(plan.cluster.partitions[i] for i in rows))
    before, after = sub.assignment(), [plan.after[i] for i in rows]
    return {"topics": len(topics), "brokers": group["brokers"],
            "before": assignment_figures(sub, before, group["brokers"]),
            "after": assignment_figures(sub, after, group["brokers"]),
            "movement": movement_figures(sub, before, after, group["brokers"])}


def _roles(ctx: FigureContext, flat: FlatAssignment) -> dict[int, tuple[int, int, int]]:
    """Broker id -> (leader, follower, total) replica counts."""
    n = len(ctx.ids)
    total = np.bincount(flat.idx, minlength=n)
    _, lead = _leaders(flat)
    leader = np.bincount(lead, minlength=n)
    return {b: (int(l), int(t - l), int(t)) for b, l, t in zip(ctx.ids.tolist(), leader, total)}


def _storage_delta(ctx: FigureContext, added_dropped: tuple[np.ndarray, np.ndarray]) -> dict[int, int]:
    """Broker id -> bytes of free space the plan gives it (taken: negative), for the brokers
    whose replica set changes (`_added_dropped`'s codes)."""
    new, gone = added_dropped
    n = len(ctx.ids)
    if len(new) + len(gone) and int(ctx.sizes.max()) * (len(new) + len(gone)) >= 1 << 62:
        # Sums that could pass int64: Python's integers, pair by pair.
        sizes, ids = ctx.sizes.tolist(), ctx.ids.tolist()
        delta: dict[int, int] = {}
        for codes, sign in ((new, -1), (gone, 1)):
            for c in codes.tolist():
                b = ids[c % n]
                delta[b] = delta.get(b, 0) + sign * sizes[c // n]
        return delta
    moved = np.zeros(n, dtype=np.int64)
    np.add.at(moved, gone % n, ctx.sizes[gone // n])
    np.subtract.at(moved, new % n, ctx.sizes[new // n])
    touched = distinct(new % n, gone % n)
    return dict(zip(ctx.ids[touched].tolist(), moved[touched].tolist()))


def broker_figures(cluster: Cluster, assignment, targets) -> dict[int, dict]:
    """Per-broker figures of one assignment: the numbers `summary_text` prints per broker.

    Parameters
    ----------
    cluster : Cluster
        The cluster; its own assignment is the "before" that free storage is measured from.
    assignment : list of list of int or None
        One replica list per partition, aligned with ``cluster.partitions``; None for the
        cluster's own assignment.
    targets : iterable of int
        Target broker ids (non-empty); degrees count target peers only, as
        ``assignment_figures`` does.

    Returns
    -------
    dict of int to dict
        For every broker the cluster knows, the targets name or a replica list names:
        ``leaders``, ``followers``, ``replicas`` (counts), ``degree`` (distinct target peers;
        None for a broker that is not a target), ``used_bytes`` (bytes held under the
        assignment) and ``storage_free`` (bytes free once the assignment is in place; None
        when the broker reports no free storage).

    Raises
    ------
    ValueError
        When ``targets`` is empty or the assignment does not match the partitions.
    """
    ctx, (before, flat) = context(cluster, targets, [None, assignment])
    roles = _roles(ctx, flat)
    degree = dict(zip(ctx.ids[ctx.tidx].tolist(), _degrees(ctx, flat).tolist()))
    used = _used_bytes(ctx, flat).tolist()
    # Free storage moves by what the assignment adds to or takes from the disk now.
    was = _used_bytes(ctx, before).tolist()
    out = {}
    for i, bid in enumerate(ctx.ids.tolist()):
        info = cluster.brokers.get(bid)
        free = None if info is None or info.storage_free is None else int(info.storage_free) + was[i] - used[i]
        lead, follow, total = roles[bid]
        out[bid] = {"leaders": lead, "followers": follow, "replicas": total, "degree": degree.get(bid),
                    "used_bytes": int(used[i]), "storage_free": free}
    return out
