"""Whether a process runs on this host: the one rule the auto-throttle's lease, `kit run`'s
clean-up of its processes and the local ZooKeeper's pid file are judged by."""
from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """Whether process `pid` runs here.

    One of another user's counts as running (it exists, and is not ours to judge); a zombie
    (ended, not yet reaped by its parent) counts as gone: it holds nothing and does nothing.
    No wait here: a child's exit status is its parent's to collect."""
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return False  # 0 and negatives name process groups, not a process
    theirs = False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        theirs = True  # it exists
    except (OverflowError, ValueError):
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        # Ended since the probe; unless /proc hides other users' processes, or there is none.
        return theirs or not os.path.isdir("/proc/self")
    except (OSError, IndexError):
        return True  # it exists, its state cannot be read here
