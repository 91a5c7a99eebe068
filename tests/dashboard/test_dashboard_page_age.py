"""The page's age and pace on a loaded machine (issue 39): the page says how old the figures it
shows are, counted in the browser, and a browser that is behind gets the newest poll rather
than a queue of old ones.

No wall timing, no browser: the ages are given clocks, the browser's script runs in Node, and
the browser's word is given by the test.
"""
from __future__ import annotations

import json

import pytest

pytest.importorskip("panel")

from kit.dashboard.poller import Poller  # noqa: E402

AGES = [(None, 0.0), (100.0, 100.0), (100.0, 99.0), (100.0, 107.9), (100.0, 130.0), (100.0, 230.4),
        (100.0, 100.0 + 3 * 3600 + 5 * 60 + 7)]


def test_the_page_says_how_old_its_figures_are_and_that_it_is_behind():
    """Issue 39: at load 14 the page showed a poll two minutes old ("read 07:19:03 UTC") and did
    not say so. The age line says it, in red past the stale bound."""
    from kit.dashboard.page_age import age_label

    assert age_label(None, 5.0) == ("no poll shown yet", False)
    assert age_label(100.0, 107.9) == ("figures read 7s ago (this browser's clock)", False)
    assert age_label(100.0, 99.0) == ("figures read 0s ago (this browser's clock)", False)
    text, old = age_label(100.0, 230.4)
    assert text == "figures read 2m 10s ago (this browser's clock): this page is behind the cluster" and old
    assert age_label(100.0, 130.0, stale=30.0)[1] is False and age_label(100.0, 131.0, stale=30.0)[1] is True


def test_the_browser_counts_the_age_by_the_same_rule(tmp_path):
    """The browser counts the age (its script, `AGE_JS`): run here in Node, it says what
    `age_label` says, word for word."""
    import shutil
    import subprocess

    from kit.dashboard.page_age import AGE_JS, age_label

    node = shutil.which("node")
    if node is None:
        pytest.skip("no node to run the page's script")
    script = tmp_path / "age.js"
    script.write_text(AGE_JS + f"\nconsole.log(JSON.stringify({json.dumps(AGES)}.map(([r, n]) => kitAge(r, n, 30))));")
    got = json.loads(subprocess.run([node, str(script)], capture_output=True, text=True, check=True,
                                    timeout=120).stdout)
    assert [tuple(g) for g in got] == [age_label(r, n, 30.0) for r, n in AGES]


def test_a_page_the_browser_has_not_shown_yet_skips_to_the_newest_poll(tmp_path, monkeypatch):
    """Before, a served page sent every poll (one every half second in the browser test) however
    far behind the browser was, and a loaded browser worked through minutes of them. Now the
    next poll waits for the browser's word (`PageAge.shown`) that it shows the last; then the
    newest goes, with every throttle row since (the chart misses none), and without that word
    it goes after CONFIRM_WAIT_S, so the page never freezes."""
    from types import SimpleNamespace

    from kit.dashboard import app
    from kit.dashboard.page_age import CONFIRM_WAIT_S
    from kit.formats import cluster_from_snapshot
    from kit.text import utc_label

    events = tmp_path / "events.jsonl"
    events.write_text("".join(json.dumps({"time": "2026-01-01T00:00:00Z", "source": "throttle", "kind": "rate",
                                          "brokers": [b], "role": role, "old": None, "new": 40e6, "reason": "x"})
                              + "\n" for b, role in ((1001, "leader"), (1013, "follower"))))
    wall = SimpleNamespace(t=1767225600.0)
    monkeypatch.setattr(app, "time", SimpleNamespace(time=lambda: wall.t, monotonic=lambda: wall.t))
    poller = Poller(events=str(events), interval=0.5)
    cluster = cluster_from_snapshot({"version": 1, "brokers": [{"id": b, "rack": "r"} for b in (1001, 1013)],
                                     "partitions": []})
    first = poller.poll()
    page = app.Dashboard(poller, cluster, cluster, {}, "test", "records/")
    page.await_browser = True  # as in a served page (a notebook's has no browser to wait for)
    page.refresh()
    assert page.age.read == first.updated and page.age.shown is None

    def points():
        return len(page.charts.charts["leader"].lines[1001][0].data["time"])
    assert points() == 1
    for _ in range(3):
        poller.poll()
    wall.t += 5.0
    page.refresh()  # the browser has not shown the first poll yet: nothing is sent
    assert page.age.read == first.updated and points() == 1
    page.age.shown = page.age.read  # the browser's word, as its script sends it
    newest = poller.state
    page.refresh()
    assert page.age.read == newest.updated and points() == 4  # the newest poll, and every row since
    assert f"read {utc_label(newest.updated)}" in page.live.progress.object
    # No word from the browser: the next poll goes once CONFIRM_WAIT_S have passed, not before.
    poller.poll()
    wall.t += CONFIRM_WAIT_S - 1
    page.refresh()
    assert page.age.read == newest.updated
    wall.t += 2
    page.refresh()
    assert page.age.read == poller.state.updated and points() == 5


def test_the_distribution_is_redrawn_at_most_every_so_often_and_once_per_refresh(monkeypatch):
    """Measured (issue 39): a re-draw of the 150-broker distribution took 15 CPU s, and it ran
    whenever the placement or the free storage moved, twice when both did, in the server's loop
    every tab's updates wait on. Now one re-draw takes both, and the next waits REDRAW_EVERY
    wall seconds (four times the last re-draw's, if longer), then shows the newest."""
    from dataclasses import replace
    from types import SimpleNamespace

    import panel as pn
    from bokeh.document import Document

    from kit.dashboard import app
    import holoviews as hv

    from kit.formats import cluster_from_snapshot
    from kit.text import utc_label

    hv.extension("bokeh", logo=False)  # as `dashboard` loads it
    wall = SimpleNamespace(t=1767225600.0)
    monkeypatch.setattr(app, "time", SimpleNamespace(time=lambda: wall.t, monotonic=lambda: wall.t))
    cluster = cluster_from_snapshot({"version": 1, "brokers": [{"id": b, "rack": "r"} for b in (1, 2)],
                                     "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]})
    poller = Poller(interval=0.5)
    poller.state = replace(poller.state, version=1, updated=wall.t, cluster=cluster, cluster_version=1, storage={1: 10**9},
                           storage_version=1)
    page = app.Dashboard(poller, None, cluster, {}, "test", "records/")
    drawn = []
    real = page.distribution
    views = []
    page.distribution = lambda *a: (drawn.append(a[-2:]), views.append(real(*a)), views[-1])[2]  # versions drawn
    pn.panel(page).get_root(Document())
    drawn.clear()

    def poll(**moved):
        poller.state = replace(poller.state, version=poller.state.version + 1, updated=wall.t, **moved)
        page.refresh()
    poll(cluster_version=2, storage_version=2)
    assert drawn == [(2, 2)]  # both moved: one re-draw
    wall.t += 5
    poll(cluster_version=3)
    wall.t += app.REDRAW_EVERY - 6
    poll(storage_version=3)
    assert drawn == [(2, 2)] and (page.cluster_version, page.storage_version) == (2, 2)
    wall.t += 2
    poll()  # nothing new this poll, but the re-draw put off is due: the newest goes
    assert drawn == [(2, 2), (3, 3)]
    # It says which poll's placement it shows (the one it was re-drawn at), on which clock.
    head = views[-1].objects[0].object
    assert f"Placement as read by the poll of {utc_label(poller.state.updated)} (wall clock)" in head, head
