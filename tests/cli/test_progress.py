"""Progress on stderr: lines every few seconds in a log, a redrawn bar with an ETA in a terminal,
nothing for work that ends quickly. A fake clock drives it: nothing here depends on timing."""
from __future__ import annotations

import io
import json

from conftest import run_kit as kit
from kit.progress import Progress


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_log_gets_a_line_every_few_seconds_and_quick_work_gets_none():
    clock, out = Clock(), io.StringIO()
    with Progress("kit plan", stream=out, every=5.0, clock=clock) as p:
        p.stage("planning az-loss")
        clock.now += 9.0
        p._maybe_report()
        assert out.getvalue() == ""  # nine seconds in: nothing yet
        clock.now += 2.0
        p._maybe_report()
        p._maybe_report()  # due once, written once
        clock.now += 5.0
        p._maybe_report()
    lines = out.getvalue().splitlines()
    assert lines == ["kit plan · planning az-loss (11s) · elapsed 11s (wall clock)",
                     "kit plan · planning az-loss (16s) · elapsed 16s (wall clock)"]


def test_counts_give_a_bar_and_an_eta_from_the_rate_since_counting_began():
    clock, out = Clock(), io.StringIO()
    p = Progress("kit verify --wait", unit="partition(s) done", stream=out, every=0.0, after=0.0, clock=clock)
    p.update(0, 100)
    clock.now += 10
    p.update(25, 100)  # 25 in 10 s: 75 left at 2.5/s = 30 s
    p.close()
    last = out.getvalue().splitlines()[-1]
    assert "25 of 100 partition(s) done" in last and "25%" in last and "ETA 30s" in last
    assert "[######" in last


def test_a_terminal_bar_is_redrawn_in_place_and_cleared_at_the_end():
    clock, out = Clock(), Terminal()
    p = Progress("kit plan", stream=out, after=1.0, clock=clock)
    p.stage("reading")
    p._maybe_report()
    assert out.getvalue() == ""  # under a second: no bar
    clock.now += 2
    p._maybe_report()
    p.close()
    text = out.getvalue()
    assert text.startswith("\r\x1b[2Kkit plan  reading (2s)") and text.endswith("\r\x1b[2K") and "\n" not in text


def test_progress_never_writes_after_close():
    clock, out = Clock(), io.StringIO()
    p = Progress("x", stream=out, every=1.0, after=0.0, clock=clock)
    p.stage("a")
    p.close()
    clock.now += 100
    p._maybe_report()
    assert out.getvalue() == ""


def test_kit_plan_keeps_stdout_for_the_summary(snapshots, tmp_path):
    out = tmp_path / "plan.json"
    r = kit("plan", "scale-out", "--snapshot", snapshots["scale-out"], "--out", out)
    assert r.returncode == 0 and json.loads(out.read_text())["version"] == 1
    assert "Topics:" in r.stdout and "kit plan ·" not in r.stdout
    # Silent when quick; on a slow machine only progress lines, never anything else.
    assert r.stderr == "" and all(line.startswith("kit plan · ") for line in r.progress)
