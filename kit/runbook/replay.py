"""A change on the cluster's clock: the simulated controller's own clock (its samples, its
report), a change's span (`ChangeResult`), and its events file replayed over that span for the
record (`throttle_series`, `floor_time`). The replay itself is kit.throttle.replay's, which the
dashboard reads the events with too.
"""
from __future__ import annotations

import glob
import json
import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from kit.events import parse_time, read_events
from kit.sim.physics import SAMPLE_EPOCH
from kit.throttle import replay
from kit.throttle.replay import event_window, rate_history, throttle_events


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
    """Each broker role's rate in force (MB/s) over the change, from the auto-throttle's events
    (`kit.throttle.replay.rate_history`): (curves, start, end, own_clock), the rate applied with
    the plan dated from the window's start."""
    events = throttle_events(read_events(result.events_path))
    if not events:
        return {}, None, None, False
    start, end, _, own = change_window(events, result)
    curves = {key: [(parse_time(when) if when else start, None if rate is None else rate / 1e6)
                    for when, rate in points]
              for key, points in rate_history(events).items()}
    return curves, start, end, own


def floor_time(events_path: str, start: datetime | None, end: datetime | None, **how) -> dict:
    """`kit.throttle.replay.floor_time` over a change's events file."""
    return replay.floor_time(read_events(events_path), start, end, **how)
