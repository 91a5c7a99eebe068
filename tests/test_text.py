"""Figures as the operator reads them (kit.text): one way of writing each, wherever it shows."""
from __future__ import annotations

import pytest

from kit.events import human_line
from kit.text import hm, human_duration, ms, rate_text


def test_clock_readings_and_rates():
    assert (hm(None), hm(0), hm(583 * 60), hm(3599)) == ("", "0:00", "9:43", "1:00")
    assert (ms(None), ms(583), ms(59.6)) == ("", "9:43", "1:00")
    assert (rate_text(None), rate_text(12_345_678)) == ("unset", "12.3 MB/s")
    e = {"time": "2026-01-01T00:00:30Z", "source": "throttle", "kind": "rate", "brokers": [1001],
         "role": "leader", "old": None, "new": 9e7, "reason": "r"}
    assert human_line(e).endswith("leader: unset -> 90.0 MB/s (r)")


def test_the_dashboard_writes_a_time_left_as_the_record_and_the_cli_do():
    """Under a minute left, the dashboard's ETA tile said '0m 42s' where the record, the plan
    summary and the progress lines say '42s'."""
    pytest.importorskip("panel")
    from kit.dashboard import tiles

    e = tiles.eta({"total": 1000, "copied": 580, "rate": 10.0})
    assert e["seconds"] == pytest.approx(42.0)
    html = tiles.progress_view({"brokers": [{"id": 1, "alive": True}], "under_replicated": [],
                                "reassigning_partitions": 1, "bytes_left": 420, "throttled_brokers": []},
                               e, updated="01:00:00 UTC").object
    assert human_duration(42) == "42s" and ">42s<" in html and "0m 42s" not in html, html
