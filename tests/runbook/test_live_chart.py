"""The live throttle chart during a change: a frame every few seconds where someone may watch
the notebook, once a minute under `kit run` (nobody sees the frames; each is a PNG drawn in the
kernel, and the final chart replaces the last one)."""
from __future__ import annotations

from types import SimpleNamespace

from kit.runbook import change as change_module
from kit.runbook.display import unwatched_run
from kit.runbook.processes import RUN_TAG

GB = 10 ** 9


class Clock:
    """The watch's clock: each sleep moves it on, so a 100 s watch takes no time."""

    def __init__(self):
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Session:
    """A cluster with `left` partitions to go, one fewer at each look."""

    def __init__(self, left: int):
        self.left = left

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def follow(self):
        pass

    def close(self):
        pass

    def status(self):
        self.left -= 1
        return {"bytes_left": self.left * GB, "reassigning_partitions": self.left}


def frames_drawn(tmp_path, monkeypatch, looks: int) -> list:
    """Watch an auto-throttled change of `looks` looks (half a second apart); the frames the
    live chart was given."""
    clock = Clock()
    monkeypatch.setattr(change_module, "time", clock)
    monkeypatch.setattr(change_module, "throttle_chart", lambda result: result.wall_seconds)
    events = tmp_path / "events.jsonl"
    events.write_text("")
    session = Session(looks)
    env = SimpleNamespace(backend=lambda: session, simulated=False, bootstrap="", cap_map=None)
    change = SimpleNamespace(env=env, throttle="auto", clock="wall", events=str(events), samples="",
                             rollback="", started="", applied_wall="")
    shown = change_module._Progress(live=False, with_chart=True)
    frames: list = []
    shown.text, shown.chart = (lambda line: None), frames.append
    progress, done = change_module._monitor(change, None, clock.monotonic(), 600.0, shown, None)
    assert done is not None and progress[-1]["partitions_left"] == 0
    return frames


def test_a_watched_change_redraws_the_live_chart_every_five_seconds(tmp_path, monkeypatch):
    monkeypatch.delenv(RUN_TAG, raising=False)
    frames = frames_drawn(tmp_path, monkeypatch, looks=200)  # 100 s of looks
    assert frames == [5.0 * k for k in range(1, 20)]


def test_under_kit_run_the_live_chart_is_redrawn_once_a_minute(tmp_path, monkeypatch):
    monkeypatch.setenv(RUN_TAG, "a-run")
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    assert unwatched_run()
    frames = frames_drawn(tmp_path, monkeypatch, looks=300)  # 150 s of looks
    assert frames == [60.0, 120.0]


def etas_worked_out(tmp_path, monkeypatch, looks: int) -> tuple[list, list]:
    """Watch a change on the simulated cluster (a new replica sample at each look); when the
    ETA by the copies' physics was worked out, and the progress lines shown."""
    clock = Clock()
    monkeypatch.setattr(change_module, "time", clock)
    monkeypatch.setattr(change_module, "simulated_now", lambda samples: 10.0 * clock.now)
    figured: list = []

    def time_left(session, samples):
        figured.append(clock.now)
        return {"seconds": 600.0, "why": "", "copies": 4, "left": 8 * GB, "grouped": ""}

    monkeypatch.setattr(change_module, "_time_left", time_left)
    session = Session(looks)
    env = SimpleNamespace(backend=lambda: session, simulated=True, bootstrap="", cap_map=None)
    change = SimpleNamespace(env=env, throttle="100000000", clock="simulated", events="", samples="",
                             rollback="", started="", applied_wall="")
    shown = change_module._Progress(live=False, with_chart=False)
    lines: list = []
    shown.text = lines.append
    change_module._monitor(change, None, clock.monotonic(), 600.0, shown, None)
    return figured, lines


def test_a_watched_change_works_the_eta_out_at_each_new_sample(tmp_path, monkeypatch):
    monkeypatch.delenv(RUN_TAG, raising=False)
    figured, lines = etas_worked_out(tmp_path, monkeypatch, looks=200)
    assert figured == [0.5 * k for k in range(199)]  # every look but the last (nothing left)
    assert all("at the throttles now" in line for line in lines[:-1])


def test_under_kit_run_the_eta_is_worked_out_once_a_minute_and_shown_only_for_its_sample(tmp_path, monkeypatch):
    monkeypatch.setenv(RUN_TAG, "a-run")
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    figured, lines = etas_worked_out(tmp_path, monkeypatch, looks=300)
    assert figured == [0.0, 60.0, 120.0]
    by_physics = [k for k, line in enumerate(lines) if "at the throttles now" in line]
    assert by_physics == [0, 120, 240]  # the looks it was worked out for; the others say another basis
    assert "ETA" in lines[1] and "at the throttles now" not in lines[1]
