"""Where a simulated cluster publishes its clock, and how it is read.

The simulator's clock (`kit.sim.clock.Clock`) writes ``_clock/now.json`` in the cluster's
samples directory; the dashboard reads it without importing the simulator. The file's place
and its reading live here, below both.
"""
from __future__ import annotations

import os

from kit.files import read_json_object

# The clock's folder in the samples directory; named with "_" because its files are not samples:
# readers that walk the directory for them (kit metrics, kit/metrics/edge.py) skip such folders.
CLOCK_DIR = "_clock"
NOW = "now.json"


def now_path(samples_dir: str) -> str:
    """The path of the published clock in `samples_dir`."""
    return os.path.join(samples_dir, CLOCK_DIR, NOW)


def read_now(samples_dir: str) -> dict | None:
    """The clock as its owner last published it (``sim_seconds``, ``time``: the same as events
    stamp it, ``idle``, ``stopped``, ``pid``, ``dropped``; ``speed``, its ``--speed``; ``pace``
    and ``pace_window_s``, the simulated seconds it went per wall second over that many of the
    last wall seconds it was not idle, None until it has gone on for some), or None when there
    is none (yet)."""
    return read_json_object(now_path(samples_dir))
