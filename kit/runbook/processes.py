"""Every process one `kit run` started, found and stopped by the tag in its environment.

A runbook's kernel starts processes that outlive it on purpose: the simulated cluster's
ZooKeeper and brokers and the simulated KRaft cluster (each in a session of its own), the
simulated controller and the auto-throttle loop. Killing the kernel, or its process group,
leaves them running, and once the kernel is gone they are no longer anybody's children that
`kit run` knows. What each of them keeps is the environment it inherited: `kit run` puts
`RUN_TAG=<a new id>` into the kernel's, and on Linux /proc/PID/environ shows it for every
process started below the kernel, whatever its session, its parent or its pid file (Jenkins'
ProcessTreeKiller finds a build's processes the same way). A process that drops its inherited
environment escapes it; none of kit's do, and the simulated clusters are also stopped through
their own pid files (`kit.runbook.steps.stop_simulated`).
"""
from __future__ import annotations

import os
import signal
import time
import uuid

from kit.pids import alive

RUN_TAG = "KIT_RUN_ID"
# How long a process has to end on SIGTERM before SIGKILL (the simulated brokers deregister,
# the auto-throttle leaves its rates in force and gives up its lease, ZooKeeper closes).
GRACE_S = 15.0


def new_tag() -> str:
    """A tag no other run has."""
    return uuid.uuid4().hex


def tagged_environment(tag: str) -> dict[str, str]:
    """This process's environment with the run's tag, for the kernel it starts."""
    return {**os.environ, RUN_TAG: tag}


def tagged(tag: str) -> list[int]:
    """The live processes carrying the tag (never this one), in pid order. Processes of other
    users, whose environment cannot be read, are not ours."""
    marker = f"{RUN_TAG}={tag}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                env = fh.read().split(b"\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if marker in env and alive(int(entry)):
            found.append(int(entry))
    return sorted(found)


def end(pids: list[int], grace: float = GRACE_S) -> None:
    """SIGTERM each process, then SIGKILL the ones still running after `grace` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:  # already gone
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(alive(p) for p in pids):
            time.sleep(0.1)
        pids = [p for p in pids if alive(p)]
        if not pids:
            return


def stop(tag: str, grace: float = GRACE_S, rounds: int = 5) -> list[int]:
    """Stop every process carrying the tag (`end`), looking again for any started meanwhile,
    at most `rounds` times. Returns the pids stopped."""
    stopped: list[int] = []
    for _ in range(rounds):
        pids = tagged(tag)
        if not pids:
            break
        end(pids, grace)
        stopped += pids
    return stopped
