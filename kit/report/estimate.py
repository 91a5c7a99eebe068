"""The duration estimate: what `kit simulate` (and the runbook's run) will take, predicted fast.

`predict` runs kit/report/fluid.py's fluid model of the simulator's physics (every copy at
once, the clients' traffic of kit/traffic.py, the caps of kit's auto-throttle or of a fixed
throttle, max-min fair) over a plan's copies, beside the physical lower bound of
kit/physics.py, and says in plain words what the figure assumes; `time_left` runs the same
model from the bytes copies under way have left, at the caps in force. The model runs within
a budget: past `max_events` copies it lets several copies finish within one step, past
MAX_DECISIONS rounds in the run's expected length it models the auto-throttle's rounds further
apart (the budget below; tests/report/test_estimate.py checks the budgeted figure stays within
10% of the exact one), and past MAX_COPIES copies the figure is the analytic one.
Pure: no I/O.
"""
from __future__ import annotations

import math

import numpy as np

from kit.array_ops import Lists, distinct
from kit.errors import BadInput
from kit.model import Cluster
from kit.physics import copy_arrays, lower_bound
from kit.report.fluid import FluidRun
from kit.report.starting import analytic_estimate, expected_length, known_capacities, starting_rates
from kit.throttle.decide import Settings
from kit.traffic import layout, traffic_array

# The fluid model's budget (issue 38): every event it follows (copies finishing, an auto-throttle
# round changing a cap) costs a filling of the caps, 0.1-0.25 ms at 30 brokers, and following
# every one cost 1.4 CPU s on a 5,000-copy run (6,047 of them). So it follows at most
# MAX_EVENTS copy-finishing steps (past that many copies, copies finish in groups) and
# MAX_DECISIONS auto-throttle rounds over the run's expected length (past that, the rounds are
# modelled further apart), and says so. What that moves: docs/benchmarks.md.
MAX_EVENTS = 200
MAX_DECISIONS = 200
# Past this many copies the fluid model costs minutes (measured: 200,000 copies on 150 brokers,
# 14 min): the estimate is then the analytic figure of `kit.report.starting.analytic_estimate`, and says so.
MAX_COPIES = 20_000


def prepare(cluster: Cluster) -> None:
    """Read now what `predict`, `kit.report.waves.duration_report` and the review's figures
    read of `cluster` before any plan (its layout for the live brokers, kept by
    `kit.traffic.layout` with its replica lists): `kit plan` does it where its planner would
    only wait (`kit.concurrency.idle`; about 0.2 s at 200,000 partitions). Not its traffic
    figures (0.1 s at 1,000,000 partitions): kept from then, their 16 MB raised the peak
    memory of a 1,000,000-partition rebalance, which is reached while it plans."""
    layout(cluster, {b.id for b in cluster.brokers.values() if b.alive})


def predict(cluster: Cluster, moves: list[dict], throttle: float | str | None = "auto",
            client_load: float | None = None, settings: Settings | None = None, cap_map: dict | None = None,
            max_events: int = MAX_EVENTS, first_decision_s: float = 0.0, replay: bool = False,
            lists: Lists | None = None) -> dict:
    """Predicted completion of a reassignment run all at once, in simulated seconds.

    Parameters
    ----------
    cluster, moves
        The cluster and the reassignment (Kafka's JSON partitions list, or a dict partition
        index -> replica list).
    throttle
        "auto" (kit's auto-throttle with `settings`), a rate in bytes/s for every broker, or
        None (no throttle: copies take the whole NIC).
    client_load
        None: the snapshot's traffic figures; a share F: kit/traffic.py's what-if.
    first_decision_s
        With the auto-throttle: when its first decision comes. Until then the plan runs at the
        minimum rate it was applied with (the runbooks apply at the minimum; on the simulated
        cluster the loop's first round finds no samples yet, so its first decision is one
        interval in).
    replay
        Every auto-throttle round through `AutoThrottle.decide` itself (slow: tens of thousands
        of rounds at 200,000 partitions), the reference the fast rounds are checked against;
        the figures are the same.
    lists
        With a dict of `moves`, ``kit.array_ops.Lists.of(moves)`` when the caller has it.

    Returns
    -------
    dict
        ``estimate_s`` (None when a broker's capacity is unknown), ``lower_bound_s``,
        ``lower_bound_leaves_out`` (copying brokers whose clients leave no NIC capacity free:
        the bound does not cover them), ``assumptions`` (short strings), ``steps`` (rate recomputations), ``unknown`` (brokers
        without a capacity).
    """
    settings = settings or Settings()
    try:
        figures = traffic_array(cluster, client_load)
    except BadInput as e:  # a what-if load needs the brokers' capacities: unknown, and said
        return {"estimate_s": None, "lower_bound_s": None, "lower_bound_leaves_out": [], "steps": 0,
                "assumptions": [str(e)],
                "unknown": sorted(b.id for b in cluster.brokers.values() if b.alive and b.net_capacity is None)}
    brokers = {b.id: b for b in cluster.brokers.values() if b.alive}
    live = set(brokers)
    # The targets read once, for the copies, the bound and the partitions finished at once.
    lists = (lists or Lists.of(moves)) if isinstance(moves, dict) else None
    targets, source, dest, size, part = copy_arrays(cluster, moves, live, lists)
    lists = lists or Lists.of(targets)
    copies = (source, dest, size)
    assumptions = _assumptions(len(moves), client_load, throttle, settings, bool(figures.any()))
    cap = known_capacities(brokers, cap_map)
    involved = set(distinct(source, dest).tolist())
    # A fixed throttle is a rate for every broker: only the others need the capacities.
    unknown = sorted(b for b in involved if b not in cap) if throttle == "auto" or throttle is None else []
    result = {"estimate_s": None, "lower_bound_s": None, "lower_bound_leaves_out": [], "assumptions": assumptions,
              "steps": 0, "unknown": unknown}
    if unknown:
        return result
    left_out: list[int] = []
    known = all(b in cap for b in involved)
    bound = lower_bound(cluster, targets, copies, figures, cap, left_out, lists) if known else None
    result.update(lower_bound_s=bound, lower_bound_leaves_out=left_out)
    if not len(source):
        result["estimate_s"] = 0.0
        return result
    if len(source) > MAX_COPIES:
        t = analytic_estimate(copies, *starting_rates(cluster, figures, live, cap, throttle, settings))
        assumptions.append(f"{len(source):,} copies, too many to follow one by one (past {MAX_COPIES:,}): the figure "
                           "is the busiest broker's bytes at its starting rate, as if no rate changed while copies "
                           "end, and never below the best case; expect longer")
        result["estimate_s"] = max(t, bound or 0.0)
        return result
    run = FluidRun(cluster, figures, live, targets, source, dest, size, part, cap, lists)
    horizon = expected_length(cluster, figures, live, cap, copies, bound, settings) if throttle == "auto" else (0.0, "")
    interval = run.throttle(throttle, settings, horizon, MAX_DECISIONS, first_decision_s, assumptions, replay)
    group = group_size(len(source), max_events)
    if group > 1:
        assumptions.append(f"{len(source):,} copies followed {in_groups(len(source), max_events)}")
    estimate, steps = run.run(interval, first_decision_s, group)
    if bound is not None and estimate < bound:
        # Only a rate floor above the free capacity (the minimum rate on a broker its clients
        # nearly fill) gets here: such copies displace clients; the figure stays at the bound.
        assumptions.append("raised to the best case (the minimum rate is above what some brokers' clients leave "
                           "free: those copies take NIC capacity from their clients)")
        estimate = bound
    result.update(estimate_s=estimate, steps=steps)
    return result


def group_size(copies: int, max_events: int = MAX_EVENTS) -> int:
    """Copies the fluid model lets finish in one step: 1 up to `max_events` copies, then as
    many as keep the steps within `max_events` (the budget above)."""
    return max(1, math.ceil(copies / max_events))


def in_groups(copies: int, max_events: int = MAX_EVENTS) -> str:
    """How `copies` copies are followed, in the words an estimate or an ETA says it with:
    "" when one by one, else "finishing in groups of up to N (...)"."""
    group = group_size(copies, max_events)
    return f"finishing in groups of up to {group} (for speed; within 10% of one by one)" if group > 1 else ""


def time_left(cluster: Cluster, targets: dict[int, list[int]], source, dest, left, part,
              out_cap: dict[int, float], in_cap: dict[int, float], max_events: int = MAX_EVENTS) -> float:
    """Seconds until copies under way end, each broker held at the caps it has now: `predict`'s
    fluid model (max-min fair over the brokers' caps, a copy that ends freeing its share) from
    the bytes each copy has left, with no throttle decision ahead.

    Parameters
    ----------
    cluster : Cluster
        The cluster as it is now (the partitions' in-sync replicas say who copies from whom).
    targets : dict
        Partition index -> its target replica list, for each partition still copying.
    source, dest, left, part : array-like
        One entry per copy: the broker it copies from, to, its bytes left, its partition's index.
    out_cap, in_cap : dict
        Each broker's replication rate out and in (bytes/s); a broker absent from one is not
        bounded there, and a copy whose two ends are both unbounded is refused.

    Returns
    -------
    float
        Seconds on the clock `left` was measured on. BadInput when a copy cannot progress (a
        cap of 0) or has no bound at either end.
    """
    source, dest = np.asarray(source, dtype=np.int64), np.asarray(dest, dtype=np.int64)
    left, part = np.maximum(np.asarray(left, dtype=float), 0.0), np.asarray(part, dtype=np.int64)
    if not len(source):
        return 0.0
    unbounded = [(int(s), int(d)) for s, d in zip(source, dest) if s not in out_cap and d not in in_cap]
    if unbounded:
        raise BadInput(f"no rate known for the copy from broker {unbounded[0][0]} to {unbounded[0][1]}")
    live = {b.id for b in cluster.brokers.values() if b.alive} | set(source.tolist()) | set(dest.tolist())
    run = FluidRun(cluster, traffic_array(cluster, None), live, targets, source, dest, left, part, {})
    run.out_cap[:] = [out_cap.get(b, math.inf) for b in run.ids]
    run.in_cap[:] = [in_cap.get(b, math.inf) for b in run.ids]
    seconds, _ = run.run(math.inf, 0.0, group_size(len(source), max_events))
    return seconds


def _assumptions(moves: int, client_load: float | None, throttle: float | str | None,
                 settings: Settings, traffic: bool = True) -> list[str]:
    """What every estimate assumes, in plain words: the moves at once, the client traffic (the
    partitions' own figures, none when the cluster gives none, or the what-if load), the throttle."""
    out = [f"all {moves} partition(s) moved at once"]
    if client_load is None:
        out.append("client traffic as the partitions' bytes_in/bytes_out give it, steady" if traffic else
                   "no client traffic (the cluster gives no traffic figures)")
    else:
        out.append(f"client traffic at the what-if {client_load:.0%} of the brokers' NIC capacity on average, steady")
    if throttle == "auto":
        out.append(f"the auto-throttle deciding every {settings.interval:g} s, each broker copying at "
                   f"{settings.share:.0%} of the NIC capacity its clients leave free, at least "
                   f"{settings.minimum / 1e6:.0f} MB/s")
    elif throttle is None:
        out.append("no throttle: copies may take the whole NIC")
    else:
        out.append(f"fixed throttle {float(throttle) / 1e6:.0f} MB/s per broker and direction")
    return out


__all__ = ["predict", "time_left", "group_size", "in_groups", "MAX_EVENTS", "MAX_DECISIONS", "MAX_COPIES"]
