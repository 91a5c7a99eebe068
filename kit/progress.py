"""Progress of long work on stderr: a bar with an ETA in a terminal, a line every few seconds
otherwise. stdout stays the command's result.

Work that ends quickly shows nothing: the first report comes after `after` seconds (one in
a terminal, ten in a log), so a 2 s `kit plan`, or one refused after a second of reading,
prints exactly what it always printed.
A ticker thread keeps reporting while a long call (a planner, a Spark job) runs without
calling back: the stage's name and the time spent in it are then the progress.

    with Progress("kit plan") as progress:
        progress.stage("reading the snapshot")
        ...
        progress.stage("planning az-loss")
        ...

    with Progress("kit verify --wait", unit="partition(s)") as progress:
        progress.update(done, total)
"""
from __future__ import annotations

import sys
import threading
import time
from typing import IO

from kit.text import human_duration

BAR_WIDTH = 24


class Progress:
    """Report a named piece of work on `stream` (default stderr) until closed.

    Parameters
    ----------
    label : str
        What is running, e.g. ``"kit plan"``.
    unit : str
        What `update` counts (``"partition(s)"``); the bar and the ETA need a total.
    stream : file, optional
        Where to write (default ``sys.stderr``); a terminal gets a redrawn bar.
    every : float
        Seconds between lines when `stream` is not a terminal.
    after : float, optional
        Seconds before anything appears (default 1 in a terminal, 10 in a log).
    clock : callable
        Monotonic seconds (tests give their own).
    """

    def __init__(self, label: str, unit: str = "", stream: IO[str] | None = None, every: float = 5.0,
                 after: float | None = None, clock=time.monotonic):
        self.label, self.unit = label, unit
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every, self.clock = every, clock
        self.after = after if after is not None else (1.0 if self.tty else 10.0)
        self.started = self.clock()
        self._stage, self._stage_started = "", self.started
        self._done: float | None = None
        self._total: float | None = None
        self._first_count: tuple[float, float] | None = None  # (time, done) when counting began
        self._last_report = self.started
        self._drawn = False
        self._lock = threading.Lock()
        self._report_lock = threading.Lock()  # the ticker and update() never interleave lines
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    # -- what the work says ------------------------------------------------------------------

    def stage(self, name: str) -> None:
        """A new step of the work begins (its elapsed time is reported while it runs)."""
        with self._lock:
            self._stage, self._stage_started = name, self.clock()
            self._done = self._total = self._first_count = None
        self._start_ticker()

    def update(self, done: float, total: float | None = None, detail: str = "") -> None:
        """`done` of `total` units so far; reports when one is due."""
        with self._lock:
            now = self.clock()
            if self._first_count is None or (self._done is not None and done < self._done):
                self._first_count = (now, done)
            self._done, self._total = done, total
            if detail:
                self._stage = detail
        self._start_ticker()
        self._maybe_report()

    # -- reporting ---------------------------------------------------------------------------

    def line(self) -> str:
        """The progress as one line (without the terminal's carriage return)."""
        with self._lock:
            now = self.clock()
            parts = [self.label]
            if self._total:
                share = min(max(self._done / self._total, 0.0), 1.0)
                filled = int(share * BAR_WIDTH)
                parts.append(f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {share:4.0%}")
                parts.append(f"{self._done:,.0f} of {self._total:,.0f} {self.unit}".rstrip())
                eta = self._eta(now)
                parts.append(f"ETA {human_duration(eta)}" if eta is not None else "ETA -")
            if self._stage:
                parts.append(f"{self._stage} ({human_duration(now - self._stage_started)})")
            parts.append(f"elapsed {human_duration(now - self.started)} (wall clock)")
            return " · ".join(parts) if not self.tty else "  ".join(parts)

    def _eta(self, now: float) -> float | None:
        # The rate since counting began: the simplest figure that does not swing with each poll.
        if self._first_count is None or not self._total or self._done is None:
            return None
        t0, d0 = self._first_count
        if self._done <= d0 or now <= t0:
            return None
        return (self._total - self._done) / ((self._done - d0) / (now - t0))

    def _maybe_report(self) -> None:
        with self._report_lock:
            if not self._stop.is_set():
                self._report(self.clock())

    def _report(self, now: float) -> None:
        if now - self.started < self.after:
            return
        if self.tty:
            self._write("\r\x1b[2K" + self.line())
            self._drawn = True
        elif now - self._last_report >= self.every:
            self._last_report = now
            self._write(self.line() + "\n")

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass  # a closed stderr must not stop the work it reports on

    def _start_ticker(self) -> None:
        if self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name="kit-progress", daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(0.5 if self.tty else min(max(self.every, 0.2), 1.0)):
            self._maybe_report()

    def close(self) -> None:
        """Stop reporting (closing twice is harmless); a terminal's bar line is cleared so
        whatever is printed next starts on a clean line."""
        self._stop.set()
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join(timeout=5)
        with self._lock:
            drawn, self._drawn = self._drawn, False
        if drawn:
            self._write("\r\x1b[2K")

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["Progress"]
