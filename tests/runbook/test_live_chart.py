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
