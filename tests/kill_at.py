"""`kit` run in this process and SIGKILLed (or paused with SIGSTOP) at one named point: a crash
or a stall at a known place for the fault tests, with no fault hook in kit itself (one function
is wrapped here).

    python tests/kill_at.py POINT KIT_ARGUMENTS...

POINT is one of:
  after-preflight      kit.cluster.zk.changes.preflight has returned (nothing written yet)
  after-rollback-file  the rollback file is written (kit.cluster.zk.changes.write_atomic has returned)
  before-commit        a ZooKeeper transaction is about to be sent (apply's one transaction)
  after-commit         that transaction is committed; nothing printed yet
  after-first-config   the first ZooKeeper transaction sent asynchronously has committed
                       (verify's clearing: one entity's throttle keys and its notification)
  sigint-after-preflight, sigint-after-commit
                       SIGINT (Ctrl-C) instead of SIGKILL at those points
  sigint-after-submit  SIGINT once a reassignment is submitted, on either backend (ZooKeeper:
                       that transaction committed; Admin API: AlterPartitionReassignments answered)
  sigint-after-verify  SIGINT once kit verify --wait's first check is done (its progress bar
                       updated), on either backend
  pause-before-take-over
                       SIGSTOP just before the throttle loop's start-up takes over the cluster's
                       throttles (connected, nothing read yet); the test sends SIGCONT
"""
from __future__ import annotations

import functools
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kazoo.client import TransactionRequest  # noqa: E402

import kit.cluster.kafka.backend  # noqa: E402
import kit.cluster.zk.changes  # noqa: E402
import kit.progress  # noqa: E402
import kit.throttle.loop  # noqa: E402
from kit.cli import main  # noqa: E402


def die() -> None:
    """SIGKILL this process: no cleanup, no finally blocks, no closed ZooKeeper session."""
    os.kill(os.getpid(), signal.SIGKILL)


def interrupt() -> None:
    """SIGINT this process, as Ctrl-C does: its handler runs in the main thread right away."""
    os.kill(os.getpid(), signal.SIGINT)


def pause() -> None:
    """SIGSTOP this process; it goes on where it stopped when the test sends SIGCONT."""
    os.kill(os.getpid(), signal.SIGSTOP)


def pause_before(owner, name: str) -> None:
    """Replace owner.name by a function that pauses just before its first call (only the
    first: a call retried after the fault goes through)."""
    real = getattr(owner, name)
    calls = []

    @functools.wraps(real)
    def wrapper(*args, **kwargs):
        if not calls:
            calls.append(1)
            pause()
        return real(*args, **kwargs)
    setattr(owner, name, wrapper)


def wrap(owner, name: str, before: bool = False, wait=None, end=die) -> None:
    """Replace owner.name by a function that dies (or `end`s otherwise) just before its first
    call, or just after it returns (after `wait(result)` when given: an asynchronous result
    waited for)."""
    real = getattr(owner, name)

    @functools.wraps(real)
    def wrapper(*args, **kwargs):
        if before:
            end()
        out = real(*args, **kwargs)
        if wait is not None:
            wait(out)
        end()
        return out
    setattr(owner, name, wrapper)


POINTS = {
    "after-preflight": lambda: wrap(kit.cluster.zk.changes, "preflight"),
    "after-rollback-file": lambda: wrap(kit.cluster.zk.changes, "write_atomic"),
    "before-commit": lambda: wrap(TransactionRequest, "commit", before=True),
    "after-commit": lambda: wrap(TransactionRequest, "commit"),
    "after-first-config": lambda: wrap(TransactionRequest, "commit_async", wait=lambda r: r.get()),
    "sigint-after-preflight": lambda: wrap(kit.cluster.zk.changes, "preflight", end=interrupt),
    "sigint-after-commit": lambda: wrap(TransactionRequest, "commit", end=interrupt),
    "sigint-after-submit": lambda: (wrap(TransactionRequest, "commit", end=interrupt),
                                    wrap(kit.cluster.kafka.backend.AdminBackend, "_start", end=interrupt)),
    "sigint-after-verify": lambda: wrap(kit.progress.Progress, "update", end=interrupt),
    "pause-before-take-over": lambda: pause_before(kit.throttle.loop.ThrottleLoop, "take_over"),
}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in POINTS:
        sys.exit(f"usage: kill_at.py {{{'|'.join(POINTS)}}} KIT_ARGUMENTS...")
    POINTS[sys.argv[1]]()
    sys.exit(main(sys.argv[2:]))
