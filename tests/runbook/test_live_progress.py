"""The live progress line: a pure function of the looks at the cluster so far, the plan's
estimate and the clock. Its ETA leans on the plan's estimate until the measured rate is steady."""
from __future__ import annotations

import re

import pytest

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from conftest import falling_rate_copy

from kit.runbook.steps import STEADY_LOOKS, STEADY_WINDOW, progress_line, steady_rate
from kit.text import human_duration

TOTAL = 1_200_000_000_000  # 1.2 TB to copy


def line(history, estimate_s=None, clock="simulated", partitions=87):
    return progress_line({"bytes_left": history[-1][1], "reassigning_partitions": partitions}, TOTAL, history,
                         estimate_s, clock)


def test_a_slow_start_shows_the_plans_estimate_not_a_wild_eta():
    # As seen: 0.9% done 1900 s (cluster clock) into a run the plan estimated at 3h 36m. The
    # copy ran at the 10 MB/s minimum until the auto-throttle's first decision, and a partition
    # counts as copied only once in sync: the rate since apply said "ETA 58h 04m".
    history = [(float(t), TOTAL - int(0.009 * TOTAL * (t / 1900) ** 3)) for t in range(0, 1901, 100)]
    text = line(history, estimate_s=3 * 3600 + 36 * 60)
    assert "ETA 3h 04m (the plan's estimate; measured rate not steady yet; the simulated cluster's clock)" in text
    assert "58h" not in text and "0.9%" in text and "31m 40s since apply" in text


def test_before_anything_is_measured_the_line_says_so():
    first = [(0.0, TOTAL)]
    assert line(first, 12960).endswith("ETA 3h 36m (the plan's estimate; measured rate not steady yet; "
                                       "the simulated cluster's clock)")
    assert line(first, None, "wall").endswith("ETA - (measured rate not steady yet; wall clock)")
    assert "0.0 MB/s" not in line(first, 12960)


def test_past_the_estimate_without_a_steady_rate_the_eta_is_not_invented():
    history = [(float(t), TOTAL) for t in range(0, 20001, 500)]  # nothing in sync yet
    assert "ETA - (past the plan's estimate of 3h 36m; measured rate not steady yet; wall clock)" in \
        line(history, 12960, "wall")


def test_a_steady_rate_times_the_rest_on_its_clock():
    rate = 100e6  # 100 MB/s from the start, looked at every 60 s
    history = [(float(t), TOTAL - int(rate * t)) for t in range(0, 3601, 60)]
    assert abs(steady_rate(history) - rate) < 1.0
    left = history[-1][1]
    assert line(history, 12960, "wall").endswith(f"100.0 MB/s, ETA {human_duration(left / rate)} (measured rate; "
                                                 "wall clock)")


@settings(max_examples=200, deadline=None)
@given(rate=st.floats(1e6, 1e9), every=st.floats(0.5, 600), looks=st.integers(2, 400),
       estimate=st.one_of(st.none(), st.floats(1, 1e6)), clock=st.sampled_from(["simulated", "wall"]))
def test_a_constant_rate_is_measured_exactly_once_there_are_enough_looks(rate, every, looks, estimate, clock):
    history = [(i * every, TOTAL - int(rate * i * every)) for i in range(looks) if rate * i * every < TOTAL]
    measured = steady_rate(history)
    text = line(history, estimate, clock)
    assert text.endswith(("the simulated cluster's clock)" if clock == "simulated" else "wall clock)"))
    bar = re.match(r"\[([#.]{30})\] +(\d+\.\d)%", text)
    assert bar and 0.0 <= float(bar.group(2)) <= 100.0
    if measured is not None:
        assert abs(measured - rate) <= 1e-6 * rate + 2 / every  # bytes are whole numbers
        assert "(measured rate;" in text
    else:
        assert "measured rate not steady yet" in text
        now = history[-1][0]
        window = {t for t, _ in history if t >= now * (1 - STEADY_WINDOW)}
        copied_share = 1 - history[-1][1] / TOTAL
        # only too few looks in the window, or too little copied, keep a constant rate unmeasured
        assert len(window) < STEADY_LOOKS or copied_share < 0.05 * 3
        if estimate is not None and estimate > now:
            assert f"ETA {human_duration(estimate - now)} (the plan's estimate;" in text


@settings(max_examples=200, deadline=None)
@given(slow=st.floats(1e6, 5e7), factor=st.floats(2.0, 20.0), every=st.floats(1, 120), looks=st.integers(30, 300))
def test_a_rate_that_changes_within_the_window_is_not_steady(slow, factor, every, looks):
    # The first half of the latest third at one rate, the second at `factor` times it.
    now = looks * every
    switch = now * 5 / 6
    def left_at(t):
        copied = slow * min(t, switch) + slow * factor * max(t - switch, 0)
        return max(TOTAL - int(copied), 1)
    # Still copying at the last look: a copy that ended in the window has no second rate.
    assume(left_at(now) > 1)
    history = [(i * every, left_at(i * every)) for i in range(looks + 1)]
    assert steady_rate(history) is None
    assert "measured rate not steady yet" in line(history, 7200)


@given(st.lists(st.tuples(st.floats(0, 1e5), st.integers(0, TOTAL)), min_size=1, max_size=60),
       st.one_of(st.none(), st.floats(0, 1e6)))
def test_any_history_gives_one_line_that_names_its_clock(looks, estimate):
    history = sorted(looks)
    text = line(history, estimate, "wall")
    assert "\n" not in text and text.endswith("wall clock)") and "ETA " in text
    assert line(history, estimate, "wall") == text  # the same inputs, the same line


class _Cluster:
    """A cluster as the progress line's ETA reads it (`WatchedCluster`): its placement, the
    throttles in force, no simulated facts."""

    def __init__(self, cluster, running, throttles):
        self.cluster, self.running, self.rates = cluster, running, throttles

    def read(self):
        return self.cluster, self.running

    def throttles(self):
        return self.rates, {}

    def sim_facts(self):
        return None


def test_with_each_copys_bytes_left_the_eta_is_the_estimates_physics_as_the_dashboards(tmp_path):
    """Issue 39's one ETA rule, the dashboard's scenario: broker 1 leads three partitions copying
    to broker 3, broker 2 one; each leads at 50 MB/s (its throttle), broker 3 takes 100 MB/s (its
    NIC). 10 GB left of each by the replica samples: 600 s by the estimate's physics, where the
    steady measured rate (100 MB/s) said 400 s, early, as the busiest broker's last copies go on
    alone."""
    from kit.report.copies import time_left_now
    from kit.runbook.change import time_left_by_samples
    from kit.throttle.configs import LEADER_RATE

    cluster, running = falling_rate_copy()
    (tmp_path / "replica").mkdir()
    (tmp_path / "replica" / "20260101T000000Z.jsonl").write_text("".join(
        f'{{"ts": "2026-01-01T00:15:00Z", "broker": 3, "topic": "t", "partition": {i}, "size_bytes": 2000000000}}\n'
        for i in range(4)))
    backend = _Cluster(cluster, running, {"1": {LEADER_RATE: "50000000"}, "2": {LEADER_RATE: "50000000"}})
    physics = time_left_by_samples(backend, str(tmp_path))
    assert physics == {"seconds": pytest.approx(600.0), "why": "", "copies": 4, "left": 40e9, "grouped": ""}
    # The dashboard's rule on the same figures: one rule, one figure.
    assert time_left_now(cluster, running, {("t", i, 3): 10e9 for i in range(4)}, {1: {"leader": 50e6},
                         2: {"leader": 50e6}}, {1: 100e6, 2: 100e6, 3: 100e6}) == (pytest.approx(600.0), "")
    total = 48_000_000_000
    history = [(float(t), total - int(100e6 * t)) for t in range(0, 81, 5)]  # steady 100 MB/s
    st_ = {"bytes_left": history[-1][1], "reassigning_partitions": 4}
    assert "ETA 6m 40s (measured rate;" in progress_line(st_, total, history, None, "simulated")
    text = progress_line(st_, total, history, None, "simulated", physics)
    assert text.endswith("ETA 10m 00s (at the throttles now, per broker, as the estimate models: 4 copies from "
                         "their 40.0 GB left in the replica samples, 66.7 MB/s on average; the simulated "
                         "cluster's clock)"), text

    # Done: the last sample's time left is not shown as the time left.
    done = progress_line({"bytes_left": 0, "reassigning_partitions": 0}, total, history + [(85.0, 0)], None,
                         "simulated", physics)
    assert "at the throttles now" not in done and "0 partition(s)" in done, done

    # One copy the samples do not describe: today's line (the measured rate), not a wrong figure.
    (tmp_path / "replica" / "20260101T000000Z.jsonl").write_text(
        '{"ts": "2026-01-01T00:15:00Z", "broker": 3, "topic": "t", "partition": 0, "size_bytes": 2000000000}\n')
    partial = time_left_by_samples(backend, str(tmp_path))
    assert partial["seconds"] is None and partial["why"] == "the replica samples do not give every copy's bytes left"
    assert "ETA 6m 40s (measured rate; the simulated cluster's clock)" in progress_line(st_, total, history, None,
                                                                                        "simulated", partial)


def test_past_the_estimates_budget_of_copies_the_eta_says_they_finish_in_groups(tmp_path):
    """The ETA is the estimate's physics, which follows at most MAX_EVENTS copy-finishing steps:
    450 copies finish in groups of up to 3 there, and the line says so, as the estimate's
    assumptions do; 4 copies are followed one by one and the line says nothing of groups."""
    from kit.formats import cluster_from_snapshot
    from kit.report.estimate import MAX_EVENTS, in_groups
    from kit.runbook.change import time_left_by_samples
    from kit.throttle.configs import LEADER_RATE

    n = 450
    assert 2 * MAX_EVENTS < n <= 3 * MAX_EVENTS
    cluster = cluster_from_snapshot({"version": 1, "brokers": [{"id": b, "rack": "r", "net_capacity": 100e6}
                                                               for b in (1, 2, 3)],
                                     "partitions": [{"topic": "t", "partition": i, "replicas": [1 + i % 2, 3],
                                                     "isr": [1 + i % 2], "size": 1e9} for i in range(n)]})
    running = {"partitions": [{"topic": "t", "partition": i, "replicas": [1 + i % 2, 3]} for i in range(n)]}
    (tmp_path / "replica").mkdir()
    (tmp_path / "replica" / "20260101T000000Z.jsonl").write_text("".join(
        f'{{"ts": "2026-01-01T00:15:00Z", "broker": 3, "topic": "t", "partition": {i}, "size_bytes": 500000000}}\n'
        for i in range(n)))
    backend = _Cluster(cluster, running, {"1": {LEADER_RATE: "50000000"}, "2": {LEADER_RATE: "50000000"}})
    physics = time_left_by_samples(backend, str(tmp_path))
    assert physics["copies"] == n and physics["grouped"] == in_groups(n)
    assert physics["grouped"].startswith("finishing in groups of up to 3 ")
    text = progress_line({"bytes_left": n * 5e8, "reassigning_partitions": n}, int(n * 1e9), [(0.0, n * 5e8)],
                         None, "simulated", physics)
    assert f"{n} copies from their 225.0 GB left in the replica samples, finishing in groups of up to 3 (" in text, text
    assert in_groups(4) == "" and "groups" not in progress_line(
        {"bytes_left": 4e9, "reassigning_partitions": 4}, int(8e9), [(0.0, 4e9)], None, "simulated",
        {**physics, "copies": 4, "left": 4e9, "grouped": in_groups(4)})
