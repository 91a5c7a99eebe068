"""Whether a process runs here (kit.pids): one rule for the lease, `kit run`'s clean-up and the
local ZooKeeper."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

from conftest import wait_for
from kit.pids import alive
from kit.throttle.lease import Lease, holder_gone, this_place


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


def test_a_process_that_ended_unreaped_holds_no_lease():
    """An auto-throttle loop started by a runbook's kernel that has ended but that its parent
    has not reaped yet (a zombie) is gone: its lease may be taken over at once, as `kit run`'s
    clean-up and the runbook environment already judged it. (The lease counted it as running
    until its lease expired.)"""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        wait_for("the child ended, not reaped", lambda: _state(child.pid) == "Z", limit=120)
        assert not alive(child.pid)
        lease = dataclasses.replace(Lease.mine(), pid=child.pid)
        assert lease.place == this_place() and lease.expires is None
        assert holder_gone(lease)
    finally:
        child.wait(timeout=120)
    assert not alive(child.pid)  # reaped: no such process


def test_running_processes_and_what_no_pid_names():
    assert alive(os.getpid()) and alive(1)  # pid 1 may be another user's: it runs
    assert not any(alive(p) for p in (0, -1, -os.getpid(), 2 ** 80))
