"""Figures as the operator reads them, written one way wherever they appear (summaries,
records, progress lines, the dashboard, events): durations, clock readings and rates.

Plain text, no dependency: the CLI's progress lines load it without the planner or the
estimator.
"""
from __future__ import annotations

from datetime import datetime, timezone


def human_duration(seconds: float | None) -> str:
    """'2h 05m', '14m 03s', '42s'; 'unknown' for None."""
    if seconds is None:
        return "unknown"
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    if h:
        return f"{h}h {m:02d}m"
    if m:
        return f"{m}m {sec:02d}s"
    return f"{sec}s"


def hm(seconds: float | None) -> str:
    """Seconds as hours:minutes ('9:43'), '' when unknown: a column's or an axis's reading, whose
    header names the unit (h:mm) and the clock."""
    if seconds is None:
        return ""
    m = int(round(seconds / 60))
    return f"{m // 60}:{m % 60:02d}"


def ms(seconds: float | None) -> str:
    """Seconds as minutes:seconds ('9:43'), '' when unknown: `hm` for spans too short for hours."""
    return "" if seconds is None else hm(seconds * 60)


def rate_text(rate: float | None) -> str:
    """Bytes/s as people read a throttle or traffic figure: '12.3 MB/s'; 'unset' for None (no
    throttle)."""
    return "unset" if rate is None else f"{rate / 1e6:.1f} MB/s"


def utc_label(ts: float) -> str:
    """Wall-clock seconds as the page's UTC time of day."""
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%H:%M:%S UTC")
