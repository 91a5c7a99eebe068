"""The simulated cluster's clock (virtual time), kept as files in its samples directory.

The simulated controller owns the clock (`Clock`): it publishes its simulated time
(``_clock/now.json``) and never advances past the earliest wake time of the actors registered
with it (``_clock/actors/NAME.json``) until that actor has acted for that time: a barrier. An
actor (`Actor`: the auto-throttle loop) registers its next wake time, waits until the clock has
reached it, acts on the cluster as of that simulated second, then registers the next one. So
what the actors decide, and when on the cluster's clock, does not depend on how fast the wall
clock runs or how busy the machine is; ``--speed`` only paces the wall clock.

Files, not ZooKeeper: the samples directory is what every actor on a simulated cluster
already knows, for the ZooKeeper and the KRaft simulator alike. Files are written whole
(`kit.files.write_atomic`); a reader meeting a missing or unreadable file keeps what it read
before. An actor that dies (its pid gone) or stays silent for `SILENT_S` wall seconds while the
clock waits on it is dropped from the barrier, and that is said (`Clock.limit`'s `on_drop`, and
the ``dropped`` list of ``now.json``), never silently.
"""
from __future__ import annotations

import glob
import json
import math
import os
import time
from collections import deque

from kit.clock_file import CLOCK_DIR, NOW, read_now
from kit.errors import BadInput
from kit.files import read_json_object, write_atomic
from kit.pids import alive
from kit.sim.physics import sim_stamp

ACTORS = "actors"
# Wall seconds the clock waits on an actor that has not acted for its wake time before dropping
# it (a process stopped, or stuck): generous, a loaded machine's round of the loop takes seconds.
SILENT_S = 120.0
# Wall seconds the clock waits for an awaited actor to register (`kit sim run --await-actor`),
# and an actor for the clock to appear (the controller starting beside it).
AWAIT_S = 120.0
# Wall seconds between two looks at the other side's file while waiting on it.
POLL_S = 0.01
# Fewest wall seconds between two acts of an actor while the clock stands still in a state it
# has acted in (`Actor.still_every`): a simulated interval divided by a high speed would make it
# read the cluster many times a second for nothing.
MIN_STILL_S = 0.5
# Wall seconds the clock's published pace (simulated seconds per wall second) is measured over:
# a minute, so that a reader's wall-clock estimate (the dashboard's ETA) rests on how fast the
# clock has gone, the waits at the barrier included, not on a few seconds of it.
PACE_WINDOW_S = 60.0


def stamp(sim_seconds: float) -> str:
    """A simulated second as events stamp it (ISO UTC, counted from the samples' epoch)."""
    return sim_stamp(sim_seconds)


class Clock:
    """The owner's side (the simulated controller): publish the time, and how far it may go.

    Parameters
    ----------
    samples_dir : str
        The simulated cluster's samples directory; the clock's files go in its ``_clock/``.
    awaited : iterable of str
        Actors the clock waits for before it first advances (for up to `await_s` wall seconds),
        so that one started beside the controller misses no simulated second.
    on_drop : callable, optional
        Told one line each time an actor is dropped from the barrier.
    speed : float, optional
        The controller's ``--speed`` (simulated seconds per wall second at most), published.
    """

    def __init__(self, samples_dir: str, awaited=(), on_drop=None, silent_s: float = SILENT_S,
                 await_s: float = AWAIT_S, speed: float | None = None):
        self.root = os.path.join(samples_dir, CLOCK_DIR)
        os.makedirs(os.path.join(self.root, ACTORS), exist_ok=True)
        self.awaited, self.on_drop = set(awaited), on_drop
        self.silent_s, self.await_s = silent_s, await_s
        self.created = time.monotonic()
        self.dropped: list[str] = []
        self._gone: set[tuple[str, int]] = set()  # (name, pid) dropped: not waited on again
        self._known: dict[str, dict] = {}  # each actor's last readable registration
        self._waiting: dict[str, tuple] = {}  # name -> ((pid, wake), wall since the clock waits on it)
        self._published: tuple | None = None
        self.speed = speed
        self._marks: deque = deque()  # (wall monotonic, simulated s) where it moved, one a wall second at most
        self._last_sim: float | None = None

    def pace(self, sim_seconds: float, idle: bool) -> tuple[float | None, float]:
        """(simulated seconds per wall second, over how many wall seconds): from the first time
        it moved in the last `PACE_WINDOW_S` wall seconds it was not idle, to now. Marks are taken
        only where the time moved, so on the barrier's whole steps the figure has no rounding, and
        the wait for the awaited actors to start is not counted; (None, span) before 10 wall
        seconds of it."""
        now = time.monotonic()
        moved = self._last_sim is not None and sim_seconds != self._last_sim
        self._last_sim = sim_seconds
        if idle:
            self._marks.clear()
            return None, 0.0
        if moved and (not self._marks or now - self._marks[-1][0] >= 1.0):
            self._marks.append((now, sim_seconds))
        while len(self._marks) > 2 and now - self._marks[1][0] >= PACE_WINDOW_S:
            self._marks.popleft()
        span = now - self._marks[0][0] if self._marks else 0.0
        return ((sim_seconds - self._marks[0][1]) / span if span >= 10.0 else None), span

    def publish(self, sim_seconds: float, idle: bool, stopped: bool = False) -> None:
        """Say the simulated time (and whether it stands still: `idle`, nothing to advance for;
        `stopped`, the controller ended). Written only when something else than the pace changed
        (the pace alone would rewrite the file every pass while the clock waits at the barrier)."""
        pace, span = self.pace(sim_seconds, idle)
        state = (sim_seconds, idle, stopped, len(self.dropped))
        if state == self._published:
            return
        write_atomic(os.path.join(self.root, NOW),
                     json.dumps({"version": 1, "sim_seconds": sim_seconds, "time": stamp(sim_seconds), "idle": idle,
                                 "stopped": stopped, "pid": os.getpid(), "dropped": self.dropped, "speed": self.speed,
                                 "pace": pace, "pace_window_s": round(span, 1)}))
        self._published = state

    def _drop(self, name: str, pid, why: str) -> None:
        self._gone.add((name, pid))
        self._waiting.pop(name, None)
        line = f"simulated clock: {name} (pid {pid}) {why}; the clock no longer waits for it"
        self.dropped.append(line)
        if self.on_drop:
            self.on_drop(line)

    def limit(self, sim_seconds: float) -> float:
        """The simulated second the clock may advance to now: the earliest wake time of the
        registered actors (infinity when none), `sim_seconds` itself while an awaited actor has
        not registered yet. Drops (and says) an actor whose pid is gone, or that has not acted
        for `silent_s` wall seconds while the clock waited on it."""
        now = time.monotonic()
        for path in glob.glob(os.path.join(self.root, ACTORS, "*.json")):
            name = os.path.basename(path)[:-len(".json")]
            doc = read_json_object(path)
            if doc is not None:
                self._known[name] = doc
        for name in [n for n in self._known if not os.path.exists(os.path.join(self.root, ACTORS, n + ".json"))]:
            del self._known[name]  # its file went: nothing to wait for
            self._waiting.pop(name, None)
        # An awaited actor is awaited until it has registered once: one that left since (it
        # ended, or failed at start, perhaps before the clock first looked) is not waited for.
        self.awaited -= set(self._known)
        if self.awaited:
            if now - self.created <= self.await_s:
                return sim_seconds
            for name in sorted(self.awaited):
                self._drop(name, None, f"did not register within {self.await_s:.0f} s")
            self.awaited.clear()
        wakes = []
        for name, doc in sorted(self._known.items()):
            pid, wake = doc.get("pid"), doc.get("wake_s")
            if (name, pid) in self._gone or doc.get("left"):
                continue
            if not isinstance(pid, int) or not alive(pid):
                self._drop(name, pid, "is gone")
                continue
            if not isinstance(wake, (int, float)):
                continue
            if wake <= sim_seconds:
                key = (pid, wake)
                if self._waiting.get(name, (None,))[0] != key:
                    self._waiting[name] = (key, now)
                if now - self._waiting[name][1] > self.silent_s:
                    self._drop(name, pid, f"did not act for simulated second {wake:g} within {self.silent_s:.0f} s")
                    continue
            wakes.append(float(wake))
        return min(wakes, default=math.inf)


class Hold:
    """A registration made for an actor before it runs: the clock goes no further than its time
    now until the actor (started next) has acted for it.

    The simulated KRaft cluster's controller runs from `kit sim start` on and waits for no
    actor: a change applied before its auto-throttle registers would be copied for as many
    simulated seconds as the loop takes wall seconds to start, times the speed. Made by the
    process that starts the actor, with its own pid; `hand_over` gives it the actor's pid (so
    that an actor dying before it registers is dropped at once), `release` takes it back.
    """

    def __init__(self, samples_dir: str, name: str):
        self.path = os.path.join(samples_dir, CLOCK_DIR, ACTORS, name + ".json")
        doc = read_now(samples_dir)
        self.wake = float(doc["sim_seconds"]) if doc and isinstance(doc.get("sim_seconds"), (int, float)) else 0.0
        self._write(os.getpid())

    def _write(self, pid: int) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        write_atomic(self.path, json.dumps({"version": 1, "pid": pid, "wake_s": self.wake, "held": True}))

    def _still_held(self) -> bool:
        doc = read_json_object(self.path)
        return doc is not None and doc.get("held") is True and doc.get("pid") == os.getpid()

    def hand_over(self, pid: int) -> None:
        """The actor runs as `pid`: the registration is its own until it writes one itself."""
        if self._still_held():
            self._write(pid)

    def release(self) -> None:
        """No actor comes (the change failed before it started): the clock goes on without it."""
        if self._still_held():
            write_atomic(self.path, json.dumps({"version": 1, "pid": os.getpid(), "left": True}))


class Actor:
    """One actor's side (the auto-throttle loop): register, wait for its simulated second, act,
    register the next.

    Parameters
    ----------
    samples_dir : str
        The simulated cluster's samples directory.
    name : str
        The actor's name in the clock's files (one actor per name on a cluster).
    interval : float
        Simulated seconds between its wake times: it wakes at whole multiples of it.
    """

    def __init__(self, samples_dir: str, name: str, interval: float):
        self.samples_dir, self.name, self.interval = samples_dir, name, interval
        self.path = os.path.join(samples_dir, CLOCK_DIR, ACTORS, name + ".json")
        self.time = 0.0  # the simulated second it acts at (the clock's last time it read)
        self.wake: float | None = None
        self._acted: tuple | None = None  # the clock's (time, idle, stopped) it last acted in

    def now(self) -> float:
        """The simulated second the actor is at (for decisions' clocks)."""
        return self.time

    def register(self) -> None:
        """Join the barrier: wake at the clock's time now (0 before it has one)."""
        doc = read_now(self.samples_dir)
        self.time = float(doc["sim_seconds"]) if doc and isinstance(doc.get("sim_seconds"), (int, float)) else 0.0
        self._write(self.time)

    def _write(self, wake: float) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        write_atomic(self.path, json.dumps({"version": 1, "pid": os.getpid(), "wake_s": wake,
                                            "interval": self.interval}))
        self.wake = wake

    def acted(self) -> None:
        """Done with the time it woke for: the next wake is the next whole multiple of the interval."""
        self._write((math.floor(self.time / self.interval) + 1) * self.interval)

    def leave(self) -> None:
        """Leave the barrier (the actor ends). Its file stays, saying it left: a clock that
        awaits it and had not looked yet knows it came and went."""
        try:
            write_atomic(self.path, json.dumps({"version": 1, "pid": os.getpid(), "left": True}))
        except OSError:
            pass  # the samples directory went with its cluster: no clock waits on it
        self.wake = None

    def still_every(self, speed) -> float:
        """Wall seconds between two acts while the clock stands still in a state the actor has
        acted in: the wall seconds its interval takes at the clock's `speed` (as a loop on the
        wall clock would wait), at least `MIN_STILL_S`; its interval when the speed is unknown."""
        if isinstance(speed, (int, float)) and speed > 0:
            return max(self.interval / speed, MIN_STILL_S)
        return self.interval

    def wait(self, stop, idle_every: float | None = None, await_s: float = AWAIT_S, woken=None) -> bool:
        """Block until it is time to act: the clock at its wake time, or standing still (idle,
        stopped, or its owner gone) in a state it has not acted in yet; while it stands still
        in one it has, when `woken` (an Event: the cluster said something changed, e.g. a
        watch on the reassignment) is set, or every `idle_every` wall seconds (None:
        `still_every` at the published speed). `woken` is cleared when the wait ends, so a
        change said while the actor acts wakes its next wait. False when `stop` (an Event) is
        set; BadInput when no clock appeared within `await_s` wall seconds."""
        deadline = time.monotonic() + await_s
        idle_since = None
        while not stop.is_set():
            doc = read_now(self.samples_dir)
            if doc is None or not isinstance(doc.get("sim_seconds"), (int, float)):
                if time.monotonic() > deadline:
                    raise BadInput(f"no simulated cluster's clock in {os.path.join(self.samples_dir, CLOCK_DIR)} "
                                   f"after {await_s:.0f} s (kit sim run --samples {self.samples_dir} writes it)")
                stop.wait(POLL_S * 10)
                continue
            t = float(doc["sim_seconds"])
            gone = doc.get("stopped") or not (isinstance(doc.get("pid"), int) and alive(doc["pid"]))
            state = (t, bool(doc.get("idle")), bool(gone))
            if self.wake is not None and t >= self.wake:
                break
            if state[1] or state[2]:
                if state != self._acted or (woken is not None and woken.is_set()):
                    break
                idle_since = idle_since or time.monotonic()
                every = self.still_every(doc.get("speed")) if idle_every is None else idle_every
                if time.monotonic() - idle_since >= every:
                    break
            else:
                idle_since = None
            stop.wait(POLL_S)
        else:
            return False
        if woken is not None:
            woken.clear()
        self.time, self._acted = t, state
        return True
