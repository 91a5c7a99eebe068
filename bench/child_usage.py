"""Run a command and write its wall time, CPU time and peak memory, its own alone, as JSON.

  child_usage.py RESULT.json COMMAND [ARG ...]

Linux carries a process's memory high-water mark across exec: a child forked (or vforked, as
Python's subprocess does) from a benchmark holding a 200,000-partition snapshot starts with that
snapshot's RSS as its peak, whatever it uses itself (seen: `true` run from a parent holding
400 MB reported a 411 MiB peak through wait4). This launcher is started fresh, so the command it
forks inherits only its few megabytes, and it reads the command's own figures with wait4.

RESULT.json: {"wall_s", "cpu_s" (user + system, the command's and the children it waited for),
"peak_kib" (the largest RSS among them), "exit" (the exit code, or minus the signal)}.
Nothing but the standard library is imported, to keep this process small.
"""
import json
import os
import sys
import time


def main() -> int:
    result, cmd = sys.argv[1], sys.argv[2:]
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(cmd[0], cmd)
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    with open(result, "w") as f:
        json.dump({"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_kib": usage.ru_maxrss,
                   "exit": os.waitstatus_to_exitcode(status)}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
