"""The auto-throttle's arithmetic and decisions (kit/throttle/decide.py), and `kit simulate --throttle auto`."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import run_kit as kit
from kit.throttle.decide import (FOLLOWER, LEADER, AutoThrottle, NetSample, Settings, capacities, headroom_rate,
                                 role_rates)
from kit.errors import BadInput
from kit.formats import cluster_from_snapshot
from kit.sim.physics import simulate

MB = 1e6
CAP = 125 * MB


# kafka-kit's formula with its defaults (90% of the free capacity, 10 MB/s floor):
# rate = max((capacity - (used - previous)+ - (used - capacity)+) x 0.9, 10 MB/s)
@pytest.mark.parametrize("used, previous, expected", [
    (50, None, 67.5),   # nothing throttled yet: clients use 50 of 125
    (100, 40, 58.5),    # 40 of the 100 used was replication at the previous throttle
    (20, 40, 112.5),    # replication used less than its throttle: no client traffic assumed
    (140, 40, 10.0),    # over capacity by 15: (125 - 100 - 15) x 0.9 = 9, floored at 10
    (125, 0, 10.0),     # clients take the whole NIC
])
def test_kafka_kit_arithmetic_for_the_default_settings(used, previous, expected):
    got = headroom_rate(CAP, used * MB, None if previous is None else previous * MB)
    assert got == pytest.approx(expected * MB)


def test_measured_replication_tells_clients_apart_where_the_previous_throttle_would_not():
    # A source sending 5 MB/s under a 60 MB/s throttle, clients at 70: kafka-kit sees
    # 75 - 60 = 15 MB/s of clients and offers 99 MB/s, enough to saturate the NIC.
    guessed = headroom_rate(CAP, 75 * MB, 60 * MB)
    measured = headroom_rate(CAP, 75 * MB, 60 * MB, replication=5 * MB)
    assert guessed == pytest.approx(99 * MB)
    assert measured == pytest.approx(49.5 * MB)  # (125 - 70) x 0.9
    assert 70 * MB + measured <= CAP


def sample(t, rx=0.0, tx=0.0, r_rx=0.0, r_tx=0.0):
    return NetSample(t, rx * MB, tx * MB, r_rx * MB, r_tx * MB)


def test_roles_get_their_direction_and_done_brokers_are_cleared_at_once():
    auto = AutoThrottle(Settings(interval=30), {1: CAP, 2: CAP, 3: CAP})
    d = auto.decide(0, "t0", sources={1}, destinations={2}, metrics={1: sample(0, tx=50), 2: sample(0, rx=20)})
    assert d.rates == {1: {LEADER: pytest.approx(67.5 * MB)}, 2: {FOLLOWER: pytest.approx(94.5 * MB)}}
    assert [e["kind"] for e in d.events] == ["rate", "rate"]
    # Broker 2's copies are in sync: it stops taking part and loses its throttle this round.
    d = auto.decide(30, "t1", sources={1}, destinations={3},
                    metrics={1: sample(30, tx=50 + 67.5, r_tx=67.5), 3: sample(30, rx=20)})
    assert d.clear == [2] and 2 not in auto.applied
    assert 1 not in d.rates  # same clients, same rate: nothing to write
    assert d.rates[3] == {FOLLOWER: pytest.approx(94.5 * MB)}


def test_small_changes_are_skipped_but_a_cut_the_nic_needs_is_not():
    auto = AutoThrottle(Settings(interval=30, change_threshold=0.10), {1: CAP})
    auto.decide(0, "t0", {1}, set(), {1: sample(0, tx=50)})  # 67.5 MB/s
    d = auto.decide(30, "t1", {1}, set(), {1: sample(30, tx=46 + 67.5, r_tx=67.5)})  # 71.1: +5%
    assert d.rates == {}
    d = auto.decide(60, "t2", {1}, set(), {1: sample(60, tx=55 + 67.5, r_tx=67.5)})  # 63.0: -6.7%, but 55 + 67.5 > 112.5
    assert d.rates[1][LEADER] == pytest.approx(63 * MB)


def test_missing_metrics_hold_the_rate_then_fail_safe_to_the_minimum_loudly():
    auto = AutoThrottle(Settings(interval=30, stale_intervals=2), {1: CAP})
    auto.decide(0, "t0", {1}, set(), {1: sample(0, tx=50)})
    assert auto.decide(30, "t1", {1}, set(), {}).rates == {}  # late: held
    assert auto.decide(60, "t2", {1}, set(), {}).rates == {}
    d = auto.decide(90, "t3", {1}, set(), {})
    assert d.rates == {1: {LEADER: 10 * MB}} and d.events[0]["kind"] == "failsafe"
    assert "no metrics" in d.events[0]["reason"]
    assert auto.decide(120, "t4", {1}, set(), {}).events == []  # said once, not every round
    # An old sample that never changes is as bad as none.
    d = auto.decide(150, "t5", {1}, set(), {1: sample(150, tx=50)})
    assert d.rates[1][LEADER] == pytest.approx(67.5 * MB)


_MBS = st.floats(0, 200).map(lambda x: round(x, 1) * MB)  # rounded: ties and exact thresholds happen


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([50 * MB, CAP, 1e9]), _MBS, _MBS, _MBS, _MBS,
                          st.one_of(st.none(), _MBS), st.one_of(st.none(), _MBS), st.booleans(), st.booleans()),
                min_size=1, max_size=8),
       st.sampled_from([0.0, 0.1, 0.25]), st.sampled_from([0.5, 0.9, 1.0]))
def test_the_rule_over_arrays_decides_as_the_auto_throttle(brokers, threshold, share):
    # role_rates is what the duration estimate replays; it must set the rates decide sets.
    s = Settings(interval=30, share=share, change_threshold=threshold)
    cap = {b: c for b, (c, *_) in enumerate(brokers)}
    auto = AutoThrottle(s, cap)
    for b, (_, _, _, _, _, lead, follow, _, _) in enumerate(brokers):
        for role, rate in ((LEADER, lead), (FOLLOWER, follow)):
            if rate is not None:
                auto.applied.setdefault(b, {})[role] = rate
    sources = {b for b, x in enumerate(brokers) if x[7]}
    dests = {b for b, x in enumerate(brokers) if x[8]}
    metrics = {b: NetSample(90, rx, tx, r_rx, r_tx) for b, (_, rx, tx, r_rx, r_tx, *_) in enumerate(brokers)}
    old = {b: dict(r) for b, r in auto.applied.items()}
    d = auto.decide(90, "t", sources, dests, metrics)

    col = [np.array(x, dtype=float) for x in zip(*[(c, tx, r_tx, rx, r_rx, np.nan if lead is None else lead,
                                                    np.nan if follow is None else follow)
                                                   for c, rx, tx, r_rx, r_tx, lead, follow, _, _ in brokers])]
    c, tx, r_tx, rx, r_rx, lead, follow = col
    n = len(brokers)
    roles = np.array([[b in sources for b in range(n)], [b in dests for b in range(n)]])
    applied = np.stack([lead, follow])
    cleared = ~np.isnan(applied).all(axis=0) & ~roles.any(axis=0)
    applied[:, cleared] = np.nan
    rates, setting = role_rates(s, np.stack([c, c]), np.stack([tx, rx]), np.stack([r_tx, r_rx]), applied, roles)
    assert sorted(d.clear) == np.flatnonzero(cleared).tolist()
    got = {b: {role: float(rates[k, b]) for k, role in enumerate((LEADER, FOLLOWER)) if setting[k, b]}
           for b in range(n) if setting[:, b].any()}
    assert got == d.rates
    after = {b: {role: float(rates[k, b]) for k, role in enumerate((LEADER, FOLLOWER)) if not np.isnan(rates[k, b])}
             for b in range(n) if not np.isnan(rates[:, b]).all()}
    assert after == auto.applied, old


def test_overrides_win_and_a_broker_override_holds_even_outside_a_reassignment():
    auto = AutoThrottle(Settings(), {1: CAP, 2: CAP})
    d = auto.decide(0, "t", {1}, {2}, {1: sample(0, tx=50), 2: sample(0)}, global_override=30 * MB)
    assert d.rates == {1: {LEADER: 30 * MB}, 2: {FOLLOWER: 30 * MB}}
    d = auto.decide(30, "t", set(), set(), {}, broker_overrides={2: 5 * MB})
    assert d.clear == [1] and d.rates == {2: {LEADER: 5 * MB, FOLLOWER: 5 * MB}}


def test_capacity_comes_from_the_map_by_instance_type_then_net_capacity():
    c = cluster_from_snapshot({"version": 1, "brokers": [
        {"id": 1, "instance_type": "big"}, {"id": 2, "net_capacity": 5e7}, {"id": 3, "instance_type": "odd"}],
        "partitions": [{"topic": "t", "partition": 0, "replicas": [1]}]})
    with pytest.raises(BadInput, match="broker 3 has instance type 'odd'"):
        capacities(c.brokers, {"big": 2.5e8})
    assert capacities(c.brokers, {"big": 2.5e8, "*": 1e8}) == {1: 2.5e8, 2: 5e7, 3: 1e8}


@pytest.mark.parametrize("bad", [dict(interval=0), dict(share=0), dict(share=1.5), dict(minimum=-1),
                                 dict(change_threshold=1), dict(stale_intervals=0)])
def test_settings_refuse_nonsense(bad):
    with pytest.raises(BadInput):
        Settings(**bad)


def replace_cluster(make_snapshot):
    from kit.formats import load_snapshot
    from kit.plan.actions.replace import plan_replace

    snap = make_snapshot("--brokers", "12", "--racks", "3", "--partitions", "600", "--seed", "3",
                         "--scenario", "replace", "--dead", "1")
    c = load_snapshot(str(snap))
    dead = next(b.id for b in c.brokers.values() if not b.alive and b.id in c.map_brokers())
    new = next(b for b in c.live_ids if b not in c.map_brokers())
    return snap, c, plan_replace(c, [(dead, new)]).reassignment()["partitions"]


def test_auto_replaces_a_broker_near_the_lower_bound_without_saturating(make_snapshot):
    _, c, moves = replace_cluster(make_snapshot)
    events = []
    res = simulate(c, moves, "auto", client_load=0.5, events=events)
    assert res["completion_s"] <= 1.25 * res["lower_bound_s"]
    assert res["saturated_broker_seconds"] == 0
    assert res["throttle_cleared_s"] <= res["interval_s"]
    assert events[-1]["kind"] == "clear" and all(e["source"] == "throttle" for e in events)
    # Static throttles with a client spike half-way through the copy: slow, or saturating.
    # (Client traffic is each broker's own: the new broker carries none, so a static rate that
    # suits the busiest source wastes less than under a uniform load: 1.5x slower or 5x the
    # saturation, where a uniform load gave 2x and 10x.)
    spike_at = res["lower_bound_s"] / 2
    auto_spike = simulate(c, moves, "auto", client_load=0.5, traffic="spike", spike_at=spike_at)
    for share in (0.1, 0.5, 0.95):
        static = simulate(c, moves, share * 125e6, client_load=0.5, traffic="spike", spike_at=spike_at)
        assert static["completion_s"] > 1.5 * auto_spike["completion_s"] or \
            static["saturated_broker_seconds"] > 5 * auto_spike["saturated_broker_seconds"]


def test_auto_reacts_to_a_client_spike_within_one_interval(make_snapshot):
    _, c, moves = replace_cluster(make_snapshot)
    res = simulate(c, moves, "auto", client_load=0.5, traffic="spike")
    # The spike lifts clients from 50% to 80% of the NIC; the rate in force then leaves too
    # little room until the next decision, at most one interval on the busiest brokers.
    assert 0 < res["saturated_broker_seconds"] <= res["interval_s"] * len(c.live_ids)


def test_kit_simulate_auto_writes_results_and_events(make_snapshot, tmp_path):
    snap, c, moves = replace_cluster(make_snapshot)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": moves}))
    out, ev = tmp_path / "r.json", tmp_path / "ev.jsonl"
    r = kit("simulate", "--snapshot", snap, "--plan", plan, "--throttle", "auto", "--client-load", "0.5",
            "--interval", "60", "--out", out, "--events", ev)
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())
    assert res["interval_s"] == 60 and res["throttle"] == "auto"
    lines = [json.loads(x) for x in ev.read_text().splitlines()]
    assert lines and {"time", "source", "kind", "brokers", "reason"} <= set(lines[0])
    again = tmp_path / "r2.json"
    kit("simulate", "--snapshot", snap, "--plan", plan, "--throttle", "auto", "--client-load", "0.5",
        "--interval", "60", "--out", again)
    assert again.read_bytes() == out.read_bytes()


@pytest.mark.parametrize("args, message", [
    (["--cap-map", "{not json"], "--cap-map"),
    (["--cap-map", '{"standard": -5}'], "--cap-map"),
    (["--cap-map", '{"other": 100}'], None),  # the brokers' net_capacity still applies
    (["--min-rate", "0"], "--min-rate"),
    (["--share", "0"], "--share"),
])
def test_bad_auto_throttle_settings_exit_2_and_write_nothing(make_snapshot, tmp_path, args, message):
    snap, c, moves = replace_cluster(make_snapshot)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": moves[:3]}))
    out = tmp_path / "r.json"
    r = kit("simulate", "--snapshot", snap, "--plan", plan, "--throttle", "auto", *args, "--out", out)
    if message is None:
        assert r.returncode == 0
        return
    assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not out.exists()
