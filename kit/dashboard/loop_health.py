"""Whether the auto-throttle looks after the running reassignment, as the dashboard judges it.

`throttle_health` judges (pure); `LoopWatch` gathers what it judges from: the events file's
last write and the `kit throttle run` processes found in /proc (`throttle_processes`).
"""
from __future__ import annotations

import os

# The auto-throttle is stale after this many of its intervals without a decision (and no
# live process writing the events file is found on this host).
STALE_INTERVALS = 3

# Its interval when no process says (`kit throttle run`'s default, kit.throttle.decide.Settings).
DEFAULT_LOOP_INTERVAL = 30.0


def throttle_processes(events_path: str) -> list[tuple[int, float | None]] | None:
    """`kit throttle run` processes on this host writing this events file.

    Returns
    -------
    list of (int, float or None), or None
        ``(pid, --interval in seconds or None)`` of each; None where the process table cannot be
        read (no /proc): then only the events file tells.
    """
    if not os.path.isdir("/proc/self"):
        return None
    want = os.path.realpath(events_path)
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                args = [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
            if "throttle" not in args or "run" not in args:
                continue
            value = _option(args, "--events")
            if value is None:
                continue
            path = value if os.path.isabs(value) else os.path.join(os.readlink(f"/proc/{pid}/cwd"), value)
        except OSError:
            continue  # exited meanwhile, or not ours to read
        if os.path.realpath(path) == want:
            interval = _option(args, "--interval")
            try:
                out.append((int(pid), float(interval) if interval is not None else None))
            except ValueError:
                out.append((int(pid), None))
    return sorted(out)


def _option(args: list[str], name: str) -> str | None:
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def throttle_health(running: bool, now: float, last_write: float | None, watched_since: float,
                    interval: float | None, alive: list[int] | None, gone_since: float | None,
                    last_decision: str | None) -> dict:
    """Whether the auto-throttle looks after the running reassignment.

    Parameters
    ----------
    running : bool
        A reassignment runs.
    now : float
        Wall seconds.
    last_write : float or None
        Wall seconds of the events file's last write (None: no file).
    watched_since : float
        Wall seconds since which the dashboard has seen this reassignment run.
    interval : float or None
        The loop's interval (its ``--interval``; None: `DEFAULT_LOOP_INTERVAL`).
    alive : list of int or None
        Pids of live `kit throttle run` processes writing the file (None: cannot tell).
    gone_since : float or None
        Wall seconds when a process seen earlier was found gone.
    last_decision : str or None
        The newest decision's own time stamp (the cluster's clock).

    Returns
    -------
    dict
        ``state``: ``"idle"`` (no reassignment), ``"running"``, ``"waiting"`` (no process found,
        not yet stale), ``"stale"`` or ``"stopped"`` (both trouble); ``since`` (wall seconds the
        trouble is dated from, or None), ``last_decision``, ``interval`` and ``basis`` (one
        sentence: what the judgement rests on).
    """
    every = interval or DEFAULT_LOOP_INTERVAL
    limit = STALE_INTERVALS * every
    out = {"state": "idle", "since": None, "last_decision": last_decision, "interval": every}
    seen = "events file " + ("never written" if last_write is None else "last written")
    if not running:
        return {**out, "basis": "no reassignment running"}
    if alive:
        return {**out, "state": "running", "basis": f"process {', '.join(map(str, alive))} alive (every {every:g} s)"}
    if gone_since is not None:
        return {**out, "state": "stopped", "since": gone_since,
                "basis": "its process exited; " + seen}
    reference = max(last_write or 0.0, watched_since)
    where = "no process on this host" if alive is not None else "process table not readable"
    if now - reference > limit:
        return {**out, "state": "stale", "since": last_write,
                "basis": f"{where}; no decision for over {STALE_INTERVALS} x {every:g} s; {seen}"}
    return {**out, "state": "waiting", "basis": f"{where}; {seen}"}


class LoopWatch:
    """The I/O behind `throttle_health`: the events file's last write and the loop's processes.

    Parameters
    ----------
    events : str
        The events file `kit throttle run --events` writes.
    """

    def __init__(self, events: str):
        self.events = events
        self.pids: set[int] = set()
        self.interval: float | None = None
        self.gone_since: float | None = None
        self.watched_since: float | None = None

    def check(self, now: float, events: tuple, running: bool, idle: str = "no reassignment running") -> dict:
        """`throttle_health` now; `events` newest first; `idle` says why nothing runs."""
        try:
            last_write = os.stat(self.events).st_mtime
        except OSError:
            last_write = None
        procs = throttle_processes(self.events)
        alive = None if procs is None else [p for p, _ in procs]
        if procs:
            self.pids, self.gone_since = set(alive), None
            self.interval = next((i for _, i in procs if i), self.interval)
        elif self.pids and procs is not None and self.gone_since is None:
            self.gone_since = now  # the process seen before is gone
        self.watched_since = (self.watched_since or now) if running else None
        last = next((e["time"] for e in events if e.get("source") == "throttle"), None)
        out = throttle_health(running, now, last_write, self.watched_since or now, self.interval, alive,
                              self.gone_since if running else None, last)
        return {**out, "basis": idle} if out["state"] == "idle" else out
