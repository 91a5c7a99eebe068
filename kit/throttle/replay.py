"""The auto-throttle's events replayed: which rate was in force on which broker and role when
(`rate_history`, `rates_in_force`), and how long brokers were held at the minimum or the
fail-safe (`floor_time`), read over one window (`event_window`). The runbook record, its
throttle chart and the dashboard all read the events through here, so they cannot disagree.

What an event does to the rates in force is decided once, in `effects` (the loop's own
meaning, kit/throttle/decide.py and loop.py):

- `rate`, `failsafe` and `override` set their role's rate (both roles when the event names
  none: a broker override) on their brokers to `new` (null: unset); the first one about a
  broker role says in `old` what was in force before it (the rate applied with the plan);
- `clear` unsets every role of its brokers; `done` ends every rate followed (the reassignment
  finished: the loop cleared what it set, and nothing copies any more at any rate).

Only events whose `source` is ``throttle`` count.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Iterable

from kit.events import parse_time
from kit.throttle.decide import Settings

ROLES = ("leader", "follower")
# The decisions that set a rate; the others (clear, done, alert, idle, ...) set none.
SETTING = ("rate", "failsafe", "override")


def throttle_events(events: Iterable[dict]) -> list[dict]:
    """The auto-throttle's own events, in the order given."""
    return [e for e in events if e.get("source") == "throttle"]


def roles_of(e: dict) -> list[str]:
    """The roles an event speaks of: its `role`, or both when it names none."""
    return [e["role"]] if e.get("role") else list(ROLES)


def effects(e: dict, known: Iterable[tuple[int, str]]) -> list[tuple[tuple[int, str], float | None]]:
    """What one event does to the rates in force: ``[((broker, role), bytes/s or None)]``, None
    meaning no throttle any more. `known` are the broker roles a `clear` or `done` may unset
    (those in force, or held, so far)."""
    kind = e.get("kind")
    if kind == "done":
        return [(k, None) for k in known]
    brokers = [int(b) for b in e.get("brokers") or []]
    if kind == "clear":
        return [(k, None) for k in known if k[0] in brokers]
    if kind in SETTING:
        new = e.get("new")
        return [((b, role), None if new is None else float(new)) for b in brokers for role in roles_of(e)]
    return []


def rate_history(events: Iterable[dict]) -> dict[tuple[int, str], list[tuple[str | None, float | None]]]:
    """Each broker role's rate in force after each change, oldest events first.

    Returns
    -------
    dict
        ``{(broker, role): [(the event's time stamp, bytes/s or None), ...]}``, None where it was
        unset. The first point is ``(None, old)`` when the first decision about it names the rate
        before it: the rate applied with the plan, in force from the change's start.
    """
    history: dict[tuple[int, str], list] = {}
    for e in throttle_events(events):
        when = e.get("time")
        for key, rate in effects(e, list(history)):
            if key not in history and e.get("kind") in SETTING and e.get("old") is not None:
                history[key] = [(None, float(e["old"]))]
            history.setdefault(key, []).append((when, rate))
    return history


def rates_in_force(events: Iterable[dict]) -> dict[int, dict[str, float]]:
    """The throttle in force per broker and role after every event (oldest first) is replayed:
    ``{broker: {role: bytes/s}}``, brokers with none left out."""
    out: dict[int, dict[str, float]] = {}
    for (b, role), points in sorted(rate_history(events).items()):
        if points[-1][1] is not None:
            out.setdefault(b, {})[role] = points[-1][1]
    return out


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


def floor_time(events: Iterable[dict], start: datetime | None, end: datetime | None,
               minimum: float | None = None, failsafe_only: bool = False, applied_to=(),
               wall_span: tuple | None = None) -> dict:
    """How long the auto-throttle held brokers at its minimum rate, from its events: a broker's
    role is held from a `failsafe` decision (or a rate at the minimum, or the plan's applied
    minimum before the first decision) until a higher rate, or until `effects` unsets it
    (`clear`, `done`), or `end`. With `failsafe_only`, only the fail-safe proper counts
    (metrics missing or stale).

    `applied_to` are the brokers the plan was applied to at the minimum that send or receive a
    copy (never a dead broker, nor a follower that stays: throttled with the plan, they copy
    nothing): one the loop never set a rate for (a copy that ended before the loop's first
    round, a loop slow to start that found the broker's partitions done and cleared it) copied
    at that rate, for want of metrics, until the loop cleared it or the copy ended. Returns
    {"seconds": time any broker was held, "brokers": {broker: seconds}, "rate": bytes/s}."""
    floor = Settings().minimum if minimum is None else minimum
    events = throttle_events(events)
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
        for key, rate in effects(e, list(held)):
            if rate is not None and (_metrics_missing(e) or (rate <= floor * 1.0001 and not failsafe_only)):
                held.setdefault(key, t)
            else:
                release(key, t)
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
        if first is None or first["kind"] not in SETTING:
            held[(b, "leader")] = start
    for e in events:
        for b in e.get("brokers") or []:
            for role in roles_of(e):
                if (b, role) in seen:
                    continue
                seen.add((b, role))
                if e["kind"] in SETTING and e.get("old") is not None \
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
