"""The auto-throttle's events replayed once (kit.throttle.replay): the dashboard, the record's
throttle chart and its fail-safe time read the same rates from the same events."""
from __future__ import annotations

import json
from datetime import timedelta

from kit.dashboard.poller import Poller
from kit.events import parse_time
from kit.runbook.replay import ChangeResult, floor_time, throttle_series
from kit.throttle.replay import effects, rate_history, rates_in_force


def _event(time, kind, brokers, **fields):
    return {"time": time, "source": "throttle", "kind": kind, "brokers": brokers, **fields, "reason": "r"}


# A plan applied at 10 MB/s; the loop raises 1001's leader rate, holds 1002 at the fail-safe,
# an operator overrides 1003 (a broker override names no role: it is both), 1002 is cleared.
EVENTS = [
    _event("2026-01-01T00:00:30Z", "rate", [1001], role="leader", old=10e6, new=60e6),
    _event("2026-01-01T00:00:30Z", "failsafe", [1002], role="follower", old=10e6, new=10e6),
    _event("2026-01-01T00:01:00Z", "override", [1003], old=None, new=30e6),
    {"time": "2026-01-01T00:01:10Z", "source": "doctor", "kind": "rate", "brokers": [1004], "role": "leader",
     "new": 1e6, "reason": "not the auto-throttle's"},
    _event("2026-01-01T00:02:00Z", "clear", [1002]),
]


def _write(path, events):
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return str(path)


def test_a_broker_override_throttles_both_roles_on_the_dashboard_as_in_the_record(tmp_path):
    """Without ZooKeeper the dashboard takes the rates in force from the events: a broker
    override (no role) is in force as leader and as follower, as the record's chart draws it.
    (The dashboard's own copy of the replay skipped events without a role.)"""
    path = _write(tmp_path / "events.jsonl", EVENTS)
    poller = Poller(events=path)
    state = poller.poll()
    assert state.roles == ((1001, 1003), (1003,))
    rows, _ = poller.rows_since(0)
    assert {(r["broker"], r["role"]): r["throttle"] for r in rows} == {
        (1001, "leader"): 60.0, (1003, "leader"): 30.0, (1003, "follower"): 30.0}

    result = ChangeResult(True, 1.0, 120.0, path, "", "", True, started="2026-01-01T00:00:00Z", actual_s=180.0)
    curves, start, end, own = throttle_series(result)
    assert (start, end, own) == (parse_time("2026-01-01T00:00:00Z"), parse_time("2026-01-01T00:03:00Z"), False)
    last = {key: pts[-1][1] for key, pts in curves.items() if pts[-1][1] is not None}
    assert last == {(1001, "leader"): 60.0, (1003, "leader"): 30.0, (1003, "follower"): 30.0}
    # The rate applied with the plan is in force from the change's start.
    assert curves[(1001, "leader")][0] == (start, 10.0)
    assert rates_in_force(EVENTS) == {1001: {"leader": 60e6}, 1003: {"leader": 30e6, "follower": 30e6}}


def test_what_each_event_does_to_the_rates_in_force():
    known = [(1001, "leader"), (1002, "follower"), (1002, "leader")]
    assert effects(_event("t", "clear", [1002]), known) == [((1002, "follower"), None), ((1002, "leader"), None)]
    assert effects(_event("t", "done", []), known) == [(k, None) for k in known]
    assert effects(_event("t", "override", [7], new=5e6), known) == [((7, "leader"), 5e6), ((7, "follower"), 5e6)]
    assert effects(_event("t", "rate", [7], role="leader", new=None), known) == [((7, "leader"), None)]
    assert effects(_event("t", "alert", [7]), known) == []
    # After `done` nothing is in force; a doctor's event never counts.
    assert rates_in_force(EVENTS + [_event("2026-01-01T00:03:00Z", "done", [])]) == {}
    assert (1004, "leader") not in rate_history(EVENTS)


def test_the_dashboard_replays_events_whose_time_it_cannot_read():
    """The rates in force need no clock: a hand-written or foreign time stamp does not stop the
    dashboard's poller."""
    events = [_event("T1", "rate", [1], role="leader", old=None, new=5e7), _event("T2", "clear", [2])]
    assert rates_in_force(events) == {1: {"leader": 5e7}}


def test_the_fail_safe_follows_the_same_reading_of_clear_and_done(tmp_path):
    """Held at the fail-safe until the event that unsets the rate: 1002 from apply (the plan's
    minimum was in force before the fail-safe kept it) until its clear at 00:02:00; 1005 (a
    fail-safe naming no role) from 00:00:40 until `done`."""
    path = _write(tmp_path / "events.jsonl", EVENTS + [
        _event("2026-01-01T00:00:40Z", "failsafe", [1005], old=None, new=10e6),
        _event("2026-01-01T00:02:30Z", "done", [])])
    start = parse_time("2026-01-01T00:00:00Z")
    held = floor_time(path, start, start + timedelta(minutes=3), failsafe_only=True)
    assert held["brokers"] == {1002: 120.0, 1005: 110.0}, held
