"""The cluster's clock and the auto-throttle's events replayed on it: stamps, the simulated
controller's own clock (its samples, its report), a change's span (`ChangeResult`), and from
its events the rate each broker was held at (`throttle_series`) and the time held at the
minimum or the fail-safe (`floor_time`), each read over one window (`event_window`).
"""
from __future__ import annotations

import glob
import json
import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from kit.events import read_events
from kit.sim.physics import SAMPLE_EPOCH
from kit.throttle.decide import Settings


def now() -> str:
    """The wall clock now, as records and events stamp it (UTC)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def parse_time(stamp: str) -> datetime:
    """A record's or an event's stamp as a UTC datetime."""
    return datetime.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)


def stamp(t: datetime) -> str:
    """A UTC datetime as records and events stamp it."""
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ChangeResult:
    """A change as it went: done, throttles cleared, its files, and its span on each clock (what
    the throttle chart and the decisions table replay its events over)."""
    done: bool
    wall_seconds: float
    simulated_seconds: float | None
    events_path: str
    samples_dir: str
    rollback_path: str
    cleared: bool
    progress: list = field(default_factory=list)
    started: str | None = None  # when the change started, on the cluster's clock
    clock: str = "wall"  # "simulated" on the simulated cluster
    actual_s: float | None = None  # apply to done, on the cluster's clock
    wall_span: tuple | None = None  # (apply, done or None) on the wall clock, as event stamps


def simulated_now(samples_dir: str) -> float:
    """The simulated controller's clock (seconds since it picked the plan up), from the name of
    its latest replica sample (<UTC stamp>.jsonl); 0 before the first."""
    try:
        names = [n for n in os.listdir(os.path.join(samples_dir, "replica")) if n.endswith(".jsonl")]
    except OSError:
        return 0.0
    if not names:
        return 0.0
    latest = datetime.strptime(max(names)[:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
    return (latest - SAMPLE_EPOCH).total_seconds()


def simulated_copy_seconds(samples_dir: str, report: str | None = None) -> tuple[float | None, bool]:
    """The simulated controller's own clock from the reassignment's start to its end:
    (seconds, finished). Its `--report` file says it exactly (`completion_s`); without one,
    its replica samples (`ts`, `reassigning`) do, to a sample's spacing: the controller writes
    a sample when it picks the reassignment up and one when nothing is left to copy."""
    if report and os.path.exists(report):
        with open(report, encoding="utf-8") as fh:
            done = json.load(fh).get("completion_s")
        if done is not None:
            return float(done), True

    files = sorted(glob.glob(os.path.join(samples_dir, "replica", "*.jsonl")))
    first = last = None
    for path in files:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        line = text.split("\n", 1)[0]
        if not line:
            continue
        ts = parse_time(json.loads(line)["ts"])
        first = first or ts
        last = ts
        if '"reassigning":true' not in text:
            return (ts - first).total_seconds(), True
    return ((last - first).total_seconds() if first else None), False


def copy_end(samples_dir: str, wait_s: float) -> tuple[float | None, bool]:
    """`simulated_copy_seconds` from the samples, waiting up to `wait_s` wall seconds for the
    sample that shows the copy ended."""
    deadline = time.monotonic() + wait_s
    while True:
        actual, copied = simulated_copy_seconds(samples_dir)
        if copied or time.monotonic() > deadline:
            return actual, copied
        time.sleep(0.2)


def event_window(events: list[dict], start: datetime | None, end: datetime | None,
                 wall_span: tuple | None = None) -> tuple:
    """The span the auto-throttle's events are read on: (start, end, scale, own_clock).

    Normally the change's span on the cluster's clock. When the events are on another clock
    (the loop found no samples on the simulated cluster and stamped them with the wall
    clock), the change's span on that clock (`wall_span`: apply and done, wall stamps; else
    the events' own first to last), with `scale` converting its seconds to the cluster's."""
    first, last = parse_time(events[0]["time"]), parse_time(events[-1]["time"])
    if start is None:
        return first, max(end or last, last), 1.0, False
    limit = (end or start) + timedelta(days=7)
    if start - timedelta(hours=1) <= first <= limit:
        return start, max(end or last, start), 1.0, False
    if wall_span and wall_span[0]:
        first = parse_time(wall_span[0])
        last = parse_time(wall_span[1]) if wall_span[1] else max(last, first)
    own = max((last - first).total_seconds(), 1.0)
    scale = (end - start).total_seconds() / own if end is not None else 1.0
    return first, last, scale, True


def change_span(started: str | None, actual_s: float | None) -> tuple[datetime | None, datetime | None]:
    """A change's start and end on the cluster's clock, from its start stamp and its duration
    (apply to done); None where not known."""
    start = parse_time(started) if started else None
    end = start + timedelta(seconds=actual_s) if start is not None and actual_s is not None else None
    return start, end


def change_window(events: list[dict], result: ChangeResult) -> tuple:
    """`event_window` over the change's span: the one reading of a change's events that the
    throttle chart and the decisions table share."""
    return event_window(events, *change_span(result.started, result.actual_s), result.wall_span)


def throttle_series(result: ChangeResult) -> tuple:
    """Each broker role's rate in force (MB/s) over time, from the auto-throttle's events."""
    curves: dict[tuple[int, str], list] = {}
    events = [e for e in read_events(result.events_path) if e.get("source") == "throttle"]
    if not events:
        return {}, None, None, False
    for e in events:
        when = parse_time(e["time"])
        for b in e.get("brokers") or []:
            if e["kind"] == "clear":  # every role of the broker drops to no throttle
                for key in [k for k in curves if k[0] == b]:
                    curves[key].append((when, None))
            elif e["kind"] in ("rate", "failsafe", "override") and e.get("new") is not None:
                for role in ([e["role"]] if e.get("role") else ["leader", "follower"]):
                    if (b, role) not in curves and e.get("old") is not None:  # the rate applied with the plan
                        curves[(b, role)] = [(None, e["old"] / 1e6)]
                    curves.setdefault((b, role), []).append((when, e["new"] / 1e6))
    start, end, scale, own = change_window(events, result)
    for pts in curves.values():
        if pts[0][0] is None:
            pts[0] = (start, pts[0][1])
    return curves, start, end, own


def floor_time(events_path: str, start: datetime | None, end: datetime | None,
               minimum: float | None = None, failsafe_only: bool = False, applied_to=(),
               wall_span: tuple | None = None) -> dict:
    """How long the auto-throttle held brokers at its minimum rate, from its events: a broker's
    role is held from a `failsafe` decision (or a rate at the minimum, or the plan's applied
    minimum before the first decision) until a higher rate, a `clear`, `done`, or `end`. With
    `failsafe_only`, only the fail-safe proper counts (metrics missing or stale).

    `applied_to` are the brokers the plan was applied to at the minimum that send or receive a
    copy (never a dead broker, nor a follower that stays: throttled with the plan, they copy
    nothing): one the loop never set a rate for (a copy that ended before the loop's first
    round, a loop slow to start that found the broker's partitions done and cleared it) copied
    at that rate, for want of metrics, until the loop cleared it or the copy ended. Returns
    {"seconds": time any broker was held, "brokers": {broker: seconds}, "rate": bytes/s}."""
    floor = Settings().minimum if minimum is None else minimum
    events = [e for e in read_events(events_path) if e.get("source") == "throttle"]
    if not events:
        if start is None or end is None or end <= start or not applied_to:
            return {"seconds": 0.0, "brokers": {}, "rate": floor}
        span = (end - start).total_seconds()
        return {"seconds": span, "brokers": {int(b): span for b in sorted(applied_to)}, "rate": floor}
    start, end, scale, _ = event_window(events, start, end, wall_span)
    held = _held_from_start(events, start, floor, failsafe_only, applied_to)
    spans: list[tuple[int, datetime, datetime]] = []

    def release(key, t):
        since = held.pop(key, None)
        if since is not None and t > since:
            spans.append((key[0], since, t))
    for e in events:
        t = min(max(parse_time(e["time"]), start), end)
        roles = [e["role"]] if e.get("role") else ["leader", "follower"]
        brokers = e.get("brokers") or []
        if e["kind"] == "done":
            for key in list(held):
                release(key, t)
        elif e["kind"] == "clear":
            for key in [k for k in held if k[0] in brokers]:
                release(key, t)
        elif e["kind"] in ("failsafe", "rate", "override") and e.get("new") is not None:
            at_floor = _metrics_missing(e) or (float(e["new"]) <= floor * 1.0001 and not failsafe_only)
            for b in brokers:
                for role in roles:
                    if at_floor:
                        held.setdefault((b, role), t)
                    else:
                        release((b, role), t)
    for key in list(held):
        release(key, end)
    per: dict[int, float] = {}
    for b in sorted({s[0] for s in spans}):
        per[b] = _union([(s, e) for x, s, e in spans if x == b]) * scale
    return {"seconds": _union([(s, e) for _, s, e in spans]) * scale, "brokers": per, "rate": floor}


def _held_from_start(events: list[dict], start: datetime, floor: float, failsafe_only: bool,
                     applied_to) -> dict[tuple[int, str], datetime]:
    """For `floor_time`: the (broker, role)s held at the minimum from `start`, before the loop's
    first decision about them."""
    held: dict[tuple[int, str], datetime] = {}
    # Before its first decision a broker copies at the rate applied with the plan (the event's
    # `old`): the auto-throttle's minimum, until the loop has metrics. One the loop never set a
    # rate for (it cleared it, or the copy ended first) copied at that minimum until then.
    seen: set = set()
    for b in map(int, applied_to):
        first = next((e for e in events if b in (e.get("brokers") or [])), None)
        if first is None or first["kind"] not in ("failsafe", "rate", "override"):
            held[(b, "leader")] = start
    for e in events:
        for b in e.get("brokers") or []:
            for role in [e["role"]] if e.get("role") else ["leader", "follower"]:
                if (b, role) in seen:
                    continue
                seen.add((b, role))
                if e["kind"] in ("failsafe", "rate", "override") and e.get("old") is not None \
                        and float(e["old"]) <= floor * 1.0001 and (not failsafe_only or _metrics_missing(e)):
                    held[(b, role)] = start
    return held


def _metrics_missing(e: dict) -> bool:
    """A decision taken for want of metrics: the fail-safe, or the minimum until the first ones."""
    return e["kind"] == "failsafe" or "no metrics" in (e.get("reason") or "")


def _union(spans: list) -> float:
    total, reach = 0.0, None
    for s, e in sorted(spans):
        if reach is None or s > reach:
            total += (e - s).total_seconds()
            reach = e
        elif e > reach:
            total += (e - reach).total_seconds()
            reach = e
    return total
