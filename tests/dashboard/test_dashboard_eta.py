"""The dashboard's ETA and what it rests on, and the page's parts from one poll (issue 39).

No wall timing: the simulated clock's pace is driven with a stand-in for `time.monotonic`, and
the page's parts are compared by the stamps they show, never by when they were drawn.
"""
from __future__ import annotations

import html
import json
import re
from dataclasses import replace

import numpy as np
import pytest
from conftest import falling_rate_copy

pytest.importorskip("panel")
pytest.importorskip("holoviews")

from kit.dashboard import readers, tiles  # noqa: E402
from kit.dashboard.poller import State  # noqa: E402
from kit.sim import clock as sim_clock  # noqa: E402
from kit.text import utc_label  # noqa: E402

EPOCH = 1767225600.0  # the samples' epoch: simulated second 0
STATUS = {"brokers": [{"id": 1013, "alive": True}], "under_replicated": ["t-0"], "reassigning_partitions": 150,
          "bytes_left": 1e12, "throttled_brokers": [1013]}


class Wall:
    """A stand-in for the wall clock (`time.monotonic`), moved by the test."""

    def __init__(self):
        self.t = 5000.0

    def __call__(self):
        return self.t


def _wall_seconds(text: str) -> int:
    """The wall-clock ETA a tile states ("≈ 2m 07s wall ..."), in seconds."""
    found = re.search(r"≈ (?:(\d+)h (\d+)m|(\d+)m (\d+)s|(\d+)s) wall", text)
    assert found, text
    h, m1, m2, s2, s3 = (int(x) if x else 0 for x in found.groups())
    return h * 3600 + (m1 + m2) * 60 + s2 + s3


def test_the_wall_eta_on_a_simulated_cluster_comes_from_its_clock_and_holds(tmp_path, monkeypatch):
    """The issue: at --speed 100 the page said "≈ 2m 07s wall at ×69" and the copy ended 2m 50s
    later. Here the machine gets busy half-way (the auto-throttle's rounds take longer, and the
    clock waits for each at its barrier): the clock goes at ×100, then ×50. Once it has gone at
    ×50 for the pace's window, the tile's wall ETA lands within 10% of the actual end."""
    wall = Wall()
    monkeypatch.setattr(sim_clock.time, "monotonic", wall)
    samples = tmp_path / "samples"
    clock = sim_clock.Clock(str(samples), speed=100.0)
    total, rate, step = 2000e9, 100e6, 300.0  # 20,000 simulated seconds of copy, one round of the loop each 300 s
    sim, history, shown = 0.0, [], []
    clock.publish(sim, idle=False)
    wall.t += 40.0  # the auto-throttle starting: the clock waits at 0, which is not its pace
    clock.publish(sim, idle=False)
    busy_from = None
    while sim * rate < total:
        busy = sim >= 3000.0
        if busy and busy_from is None:
            busy_from = wall.t
        wall.t += 6.0 if busy else 3.0  # 300 simulated seconds at ×100, or ×50 with the rounds' waits
        sim += step
        clock.publish(sim, idle=False)
        copied = min(total, sim * rate)
        history.append((EPOCH + sim, copied, rate, wall.t))
        progress = {"total": total, "copied": copied, "rate": rate, "started": EPOCH, "basis": "replica sizes"}
        st = replace(State(), version=len(history), updated=wall.t, status=STATUS, history=tuple(history),
                     clock=EPOCH + sim, clock_source="samples", progress=progress, copy_basis="throttle",
                     pace=readers.sim_pace(str(samples)))
        e = tiles.eta(st.progress, st.history)
        if e["seconds"]:
            text = tiles.progress_view(st.status, e, detail=st.progress, copy_basis=st.copy_basis,
                                       clock_source=st.clock_source, pace=st.pace).object
            shown.append((wall.t, _wall_seconds(text), text))
    end = wall.t
    steady = [(t, w, text) for t, w, text in shown if t >= busy_from + sim_clock.PACE_WINDOW_S and end - t >= 60]
    assert len(steady) >= 10
    for t, w, text in steady:
        assert abs(w - (end - t)) <= 0.1 * (end - t), (t, w, end - t, text)
    # The tile says what it assumes: the clock's pace and its window, the --speed, the rate and its window.
    text = html.unescape(steady[-1][2])
    assert "at ×50, the simulated clock's pace over its last 1m 00s of wall time (--speed 100)" in text, text
    assert "at 100.0 MB/s: bytes copied over the last 10m 00s of the simulated clock" in text, text


def test_the_clock_publishes_its_speed_and_its_pace_not_the_wait_for_its_actors(tmp_path, monkeypatch):
    wall = Wall()
    monkeypatch.setattr(sim_clock.time, "monotonic", wall)
    clock = sim_clock.Clock(str(tmp_path), speed=2000.0)
    clock.publish(0.0, idle=False)
    wall.t += 100.0  # held at 0 while the awaited actors start
    clock.publish(0.0, idle=False)
    assert readers.sim_pace(str(tmp_path)) == {"speed": 2000.0, "pace": None, "window_s": None, "now": EPOCH}
    for step in range(1, 21):
        wall.t += 1.5
        clock.publish(1500.0 * step, idle=False)
    got = readers.sim_pace(str(tmp_path))
    # From the first move on (19 steps of 1500 s over 28.5 wall s): ×1000, whatever the wait before.
    assert got["speed"] == 2000.0 and got["pace"] == pytest.approx(1000.0) and got["window_s"] == pytest.approx(28.5)
    assert got["now"] == EPOCH + 30000.0
    # Time left on the wall is counted from the clock's time, which the newest sample (300 s
    # back) lags: 3,300 simulated seconds left as of the sample are 3,000 from now, 3 s at ×1000.
    wall_left, why = tiles.wall_eta(3300.0, got, as_of=EPOCH + 29700.0)
    assert wall_left == pytest.approx(3.0) and "at ×1000" in why and "--speed 2000" in why
    # A reader on a cluster with no simulated clock gets none.
    assert readers.sim_pace(str(tmp_path / "elsewhere")) is None and readers.sim_pace(None) is None


def test_the_eta_rests_on_the_bytes_copied_over_a_stated_window_of_the_clusters_clock():
    """A steady copy at 40 MB/s while the throttles would allow 100 MB/s: the rate the throttles
    allow is not the ETA's rate once the bytes copied have been seen for long enough."""
    total = 100e9
    history = [(EPOCH + t, 40e6 * t, 100e6, 0.0) for t in range(0, 1201, 30)]
    e = tiles.eta({"total": total, "copied": 40e6 * 1200, "rate": 100e6}, history)
    assert e["basis"] == "bytes copied" and e["rate"] == pytest.approx(40e6) and e["window"] == pytest.approx(600.0)
    assert e["seconds"] == pytest.approx((total - 48e9) / 40e6)  # the actual time left at the steady rate
    # Less than the least span (a copy seen for 90 s): the rate allowed now, and said so.
    short = tiles.eta({"total": total, "copied": 40e6 * 90, "rate": 100e6}, history[:4])
    assert short["basis"] == "copy rate within throttles" and short["rate"] == 100e6 and short["window"] is None
    # The throttles came down to 10 MB/s (the auto-throttle stopped, or failed safe): the bytes
    # copied over the window would say so only minutes later; the ETA never assumes more.
    down = tiles.eta({"total": total, "copied": 40e6 * 1200, "rate": 10e6}, history)
    assert down["basis"] == "copy rate within throttles" and down["rate"] == 10e6
    assert down["seconds"] == pytest.approx((total - 48e9) / 10e6)
    html = tiles.progress_view(STATUS, e, detail={"total": total, "copied": 48e9, "rate": 100e6, "into": 100e6},
                               copy_basis="throttle", clock_source="wall").object
    assert "at 40.0 MB/s: bytes copied over the last 10m 00s of the wall clock; allowed now 100.0 MB/s (throttle; " \
           "into destinations 100.0 MB/s)" in html, html
    assert "wall at" not in html  # a cluster of yours: its clock is the wall's
    html = tiles.progress_view(STATUS, short, detail={"total": total, "copied": 3.6e9}, copy_basis="throttle").object
    assert "at 100.0 MB/s (throttle): the rate the throttles allow now; wall clock" in html, html


def test_the_live_tiles_show_the_simulated_clocks_pace():
    from kit.dashboard.app import LiveTiles

    st = replace(State(), version=3, updated=EPOCH + 99, status=STATUS, clock=EPOCH + 600, clock_source="samples",
                 progress={"total": 100e9, "copied": 10e9, "rate": 50e6, "started": EPOCH},
                 history=((EPOCH + 600, 10e9, 50e6, 0.0),), pace={"speed": 150.0, "pace": None, "window_s": None})
    live = LiveTiles("test", "records/")
    live.show(st)
    # 90 GB at 50 MB/s is 30m of the simulated clock; at most ×150 before the clock's pace is known.
    assert "≈ 12s wall at least: at ×150 (--speed 150; the clock's own pace not known yet)" in \
        html.unescape(live.progress.object)
    assert f"read {utc_label(st.updated)}" in live.progress.object


def _throttle_events(path):
    """The auto-throttle's decisions: 1001 sends at 40 MB/s, 1013 receives at 50 MB/s."""
    path.write_text("".join(json.dumps({"time": "2026-01-01T00:00:00Z", "source": "throttle", "kind": "rate",
                                        "brokers": [b], "role": role, "old": None, "new": rate, "reason": "x"}) + "\n"
                            for b, role, rate in ((1001, "leader", 40e6), (1013, "follower", 50e6))))


def test_the_chart_legend_and_tiles_show_one_poll_even_when_a_poll_lands_between_the_reads(tmp_path, monkeypatch):
    """The issue: the chart ended at the same minute in two screenshots 27 s apart while the
    tiles and legend had moved. The page reads one State, and the chart gets that State's rows
    and no later poll's, streamed (its sources grow, never rebuilt)."""
    from types import SimpleNamespace

    from kit.dashboard import poller as dash_poller
    from kit.dashboard.app import Dashboard
    from kit.formats import cluster_from_snapshot

    wall = SimpleNamespace(t=EPOCH + 3600.0)

    def now():
        wall.t += 10.0  # each poll 10 s after the one before: their stamps differ
        return wall.t
    monkeypatch.setattr(dash_poller, "time", SimpleNamespace(time=now, monotonic=now))
    events = tmp_path / "events.jsonl"
    _throttle_events(events)

    class Racing(dash_poller.Poller):
        """A poller whose thread publishes its next poll while the page reads the rows."""

        def rows_since(self, seen, upto=None):
            got = super().rows_since(seen, upto)
            self.poll()
            return got

    poller = Racing(events=str(events))
    poller.poll()
    cluster = cluster_from_snapshot({"version": 1, "brokers": [{"id": b, "rack": "r"} for b in (1001, 1013)],
                                     "partitions": []})
    page = Dashboard(poller, cluster, cluster, {}, "test", "records/")
    streamed = []
    source_type = type(page.charts.charts["leader"].dots)
    stream = source_type.stream
    monkeypatch.setattr(source_type, "stream", lambda self, data, rollover=None: (
        streamed.append(len(data["time"])), stream(self, data, rollover))[1])
    for polls in (1, 2, 3):
        st = poller.state  # what the page's refresh will read
        page.refresh()
        assert poller.state.version > st.version  # a poll landed during the refresh
        newest = page.charts.newest_time()
        assert newest == np.datetime64(int(st.updated * 1e3), "ms"), (newest, st.updated)
        read = utc_label(st.updated)
        assert f"read {read}" in page.live.progress.object
        for role in ("leader", "follower"):
            assert f"the poll of {read} (wall clock)" in page.charts.legends[role].object
        leader = page.charts.charts["leader"].lines[1001][0]
        assert len(leader.data["time"]) == polls  # one point per poll the page has shown
    # Each refresh streamed one poll's points per line (2 lines per broker, 2 brokers), the first
    # one too: nothing was rebuilt from the whole history.
    assert streamed and set(streamed) == {1} and len(streamed) == 3 * 4


def test_the_eta_runs_the_estimates_physics_per_broker_on_the_bytes_left_and_says_so():
    """Issue 39: one rate for the whole copy lands early when the busiest broker's last copies go
    on alone. Broker 1 leads three partitions copying to broker 3, broker 2 one; each leads at
    50 MB/s (its throttle), broker 3 takes 100 MB/s (its NIC, unthrottled). 10 GB left of each:
    600 s by the estimate's physics (both at 50 MB/s for 200 s, then broker 1 alone for 400 s),
    where one rate (the 100 MB/s the throttles allow into broker 3) says 400 s."""
    from kit.dashboard.ledger import CopyLedger, copy_bound
    from kit.report.copies import time_left_now

    cluster, running = falling_rate_copy()
    throttles = {1: {"leader": 50e6}, 2: {"leader": 50e6}}
    nic = {1: 100e6, 2: 100e6, 3: 100e6}
    sampled = {("t", i, 3): 2e9 for i in range(4)}  # 2 GB of each copied
    progress = CopyLedger().update(cluster, running, EPOCH + 900, None, sizes=sampled, clock_source="samples")
    assert progress["copies"] == {("t", i, 3): 10e9 for i in range(4)}
    seconds, why = time_left_now(cluster, running, progress["copies"], throttles, nic)
    assert seconds == pytest.approx(600.0) and why == ""
    bound = copy_bound({1, 2}, {3}, throttles, {}, nic)
    assert bound["rate"] == pytest.approx(100e6)  # what one rate would have assumed
    detail = {**progress, "rate": bound["rate"], "into": bound["into"], "out_of": bound["out_of"],
              "physics_s": seconds, "physics_why": why}
    history = [(EPOCH + t, 8e9 * t / 900, 100e6, 0.0) for t in range(0, 901, 300)]
    e = tiles.eta(detail, history)
    assert e["basis"] == "physics" and e["seconds"] == pytest.approx(600.0)
    assert e["rate"] == pytest.approx(40e9 / 600) and e["measured"] == pytest.approx(8e9 / 900)
    text = html.unescape(tiles.progress_view(STATUS, e, detail=detail, copy_basis="throttle",
                                             clock_source="samples").object)
    assert "ETA" in text and "10m 00s" in text, text
    assert ("at the throttles now, per broker, as the estimate models: 4 copies from their bytes left in the "
            "replica samples, 66.7 MB/s on average; simulated clock (samples); bytes copied over the last "
            "10m 00s: 8.9 MB/s; allowed now 100.0 MB/s (throttle; into destinations 100.0 MB/s, out of sources "
            "100.0 MB/s)") in text, text

    # One copy the replica samples do not describe: its bytes left are unknown, so the ETA is the
    # one rate, and the tile says why.
    partial = CopyLedger().update(cluster, running, EPOCH + 900, None, sizes=dict(list(sampled.items())[:3]),
                                  clock_source="samples")
    assert partial["copies"] is None
    seconds, why = time_left_now(cluster, running, partial["copies"], throttles, nic)
    assert seconds is None and why == "the replica samples do not give every copy's bytes left"
    e = tiles.eta({**partial, "rate": bound["rate"], "physics_s": None, "physics_why": why}, history[:1])
    assert e["basis"] == "copy rate within throttles" and e["fallback"] == why
    text = html.unescape(tiles.progress_view(STATUS, e, detail=partial, copy_basis="throttle").object)
    assert "the rate the throttles allow now; wall clock (not per broker: the replica samples do not give every " \
           "copy's bytes left)" in text, text


def test_one_copy_is_singular_in_the_eta_tile():
    status = {"brokers": [], "under_replicated": [], "reassigning_partitions": 1, "bytes_left": 1e9}
    e = {"rate": 1e6, "seconds": 100.0, "left": 1e8, "done_fraction": 0.5, "basis": "physics", "window": None,
         "measured": None, "measured_window": None, "fallback": ""}
    for pending, words in ((1, "1 copy from its"), (2, "2 copies from their")):
        text = html.unescape(tiles.progress_view(status, e, detail={"pending": pending, "total": 2e8, "copied": 1e8},
                                                 clock_source="samples").object)
        assert f"as the estimate models: {words} bytes left" in text, text



def test_the_eta_tile_says_when_the_physics_follows_the_copies_in_groups():
    """Past the estimate's budget of copy-finishing steps the physics lets copies finish in
    groups (`kit.report.estimate.in_groups`); the tile says so beside the count."""
    from kit.report.estimate import in_groups

    status = {"brokers": [], "under_replicated": [], "reassigning_partitions": 450, "bytes_left": 1e9}
    progress = {"total": 2e8, "copied": 1e8, "physics_s": 100.0, "physics_grouped": in_groups(450)}
    e = tiles.eta(progress)
    assert e["grouped"] == in_groups(450) != ""
    text = html.unescape(tiles.progress_view(status, e, detail={"pending": 450, "total": 2e8, "copied": 1e8},
                                             clock_source="samples").object)
    assert ("as the estimate models: 450 copies from their bytes left in the replica samples, finishing in "
            "groups of up to 3 (for speed; within 10% of one by one), ") in text, text
    e = tiles.eta({**progress, "physics_grouped": ""})
    text = html.unescape(tiles.progress_view(status, e, detail={"pending": 4, "total": 2e8, "copied": 1e8},
                                             clock_source="samples").object)
    assert "groups" not in text and "4 copies from their bytes left in the replica samples, " in text, text
