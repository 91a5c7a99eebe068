"""Decisions as events: one JSON object per line, plus a human line for the log.

The auto-throttle and the doctor write here; the dashboard and the runbook records read it.
One event:

    {"time": "2026-01-01T00:00:30Z", "source": "throttle", "kind": "rate",
     "brokers": [1001], "role": "leader", "old": 100000000.0, "new": 90000000.0,
     "reason": "tx 40.0 MB/s of 125.0 MB/s used by clients"}

`time` is ISO-8601 UTC (simulated time in the simulator); `source` is `throttle` or `doctor`;
`kind` names the decision (`rate`, `clear`, `failsafe`, `override`, `heal`, `alert`, ...);
`old`/`new` are bytes/s (null when not set); `reason` is one sentence for a person.
Fields a decision does not use may be absent.
"""
from __future__ import annotations

import json
import os
import threading
from datetime import datetime, timezone
from typing import IO, Iterable, Iterator

from kit.text import rate_text


def utc_now() -> str:
    """The wall clock as the events' ISO-8601 UTC string (records stamp it so too)."""
    return stamp(datetime.now(timezone.utc))


def stamp(t: datetime) -> str:
    """A UTC datetime as events, records and samples stamp it."""
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime:
    """An event's, a record's or a sample's stamp as a UTC datetime (fractions of a second and
    the zone letter ignored: every stamp is UTC)."""
    return datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)


def epoch(text: str) -> float:
    """`parse_time` as epoch seconds (the clock samples are compared on)."""
    return parse_time(text).timestamp()


def event(time: str, source: str, kind: str, reason: str, brokers: Iterable[int] = (), **fields) -> dict:
    """Build one event with its fields in a fixed order (the same decision, the same bytes)."""
    out = {"time": time, "source": source, "kind": kind, "brokers": sorted(int(b) for b in brokers)}
    out.update(fields)
    out["reason"] = reason
    return out


def human_line(e: dict) -> str:
    """The event as a person reads it in a log, e.g.
    `2026-01-01T00:00:30Z throttle rate broker 1001 leader: 100.0 MB/s -> 90.0 MB/s (reason)`."""
    who = ""
    if e.get("brokers"):
        ids = ",".join(str(b) for b in e["brokers"][:8]) + ("…" if len(e["brokers"]) > 8 else "")
        who = f" broker{'s' if len(e['brokers']) > 1 else ''} {ids}"
    role = f" {e['role']}" if e.get("role") else ""
    change = f": {rate_text(e.get('old'))} -> {rate_text(e.get('new'))}" if "old" in e or "new" in e else ""
    return f"{e['time']} {e['source']} {e['kind']}{who}{role}{change} ({e['reason']})"


class EventLog:
    """Append events to a JSON-lines file (and optionally a human log stream); flushed per event
    so a dashboard tailing the file sees each decision at once. Threads may write at once (a
    connection watch reports from its own thread): each event stays one whole line."""

    def __init__(self, path: str | None = None, human: IO[str] | None = None):
        self.path, self.human = path, human
        self._fh = None
        if path:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            self._fh = open(path, "a", encoding="utf-8")
        self.events: list[dict] = []
        self._lock = threading.Lock()

    def write(self, e: dict) -> dict:
        with self._lock:
            self.events.append(e)
            if self._fh:
                self._fh.write(json.dumps(e, sort_keys=False, separators=(",", ":")) + "\n")
                self._fh.flush()
            if self.human:
                self.human.write(human_line(e) + "\n")
                self.human.flush()
        return e

    def close(self) -> None:
        with self._lock:
            if self._fh:
                self._fh.close()
                self._fh = None


def read_events(path: str, newest_first: bool = False) -> list[dict]:
    """Every well-formed event in a JSON-lines file (a partly written last line is skipped)."""
    out = list(iter_events(path))
    return out[::-1] if newest_first else out


def iter_events(path: str) -> Iterator[dict]:
    try:
        fh = open(path, encoding="utf-8")
    except FileNotFoundError:
        return
    with fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                e = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line still being written
            if isinstance(e, dict) and "time" in e and "kind" in e:
                yield e
