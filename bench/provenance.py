"""Where a benchmark table comes from: the command, the date, the commit and the machine.

Every table under docs/bench/ is written whole by the run it describes; these are the facts
its header states, and the atomic write that replaces the last good table only with a
finished one.
"""
from __future__ import annotations

import os
import platform
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def utc_now() -> str:
    """Minutes are enough to tell runs apart."""
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime())


def memory() -> str:
    """The machine's memory, as /proc/meminfo's MemTotal says (Linux), else ""."""
    try:
        with open("/proc/meminfo") as f:
            kib = next((int(ln.split()[1]) for ln in f if ln.startswith("MemTotal:")), 0)
    except (OSError, ValueError, IndexError):
        kib = 0
    return f"{kib / 2**20:.1f} GiB memory" if kib else ""


def machine() -> str:
    """The CPU model and count, as /proc/cpuinfo names them (Linux), else the platform's word,
    and the memory."""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        model = ""
    mem = memory()
    return f"{model or platform.processor() or platform.machine()}, {os.cpu_count()} CPUs" + (f", {mem}" if mem else "")


def code_version() -> str:
    """The commit the run measured, and whether kit/ or bench/ differed from it."""
    def git(*args: str) -> str:
        r = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                           stdin=subprocess.DEVNULL)
        return r.stdout.strip() if r.returncode == 0 else ""
    commit = git("rev-parse", "--short=12", "HEAD") or "unknown commit"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "kit", "bench")
    return commit + (" with uncommitted changes to kit/ or bench/" if dirty else "")


def load_average() -> str:
    """The 1-minute load average: a busy machine is said, not hidden."""
    return f"{os.getloadavg()[0]:.2f}"


def header(command: str, started: str, load_before: str) -> list[str]:
    """The provenance lines of a generated table (markdown), ended now."""
    return [
        "Written by the run it describes; do not edit by hand (regenerate with the command below).",
        "",
        f"- command: `{command}`",
        f"- date: {started} to {utc_now()} (UTC)",
        f"- code: {code_version()}",
        f"- machine: {machine()}; Python {platform.python_version()}; load average "
        f"{load_before} before, {load_average()} after (1 min)",
    ]


def write_atomically(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file beside it, so a half-written table never
    replaces the last good one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
