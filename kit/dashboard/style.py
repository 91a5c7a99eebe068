"""The dashboard's colours and sizes, one place for every view that draws.

Colours chosen to survive a dim laptop screen at night: dark leader, light follower, and a
red that is only ever used for trouble.
"""
from __future__ import annotations

LEADER_COLOR = "#1f4e79"
FOLLOWER_COLOR = "#9dc3e6"
BEFORE_COLOR = "#111111"
STORAGE_COLOR = "#7f9f5f"
DEGREE_COLOR = "#8c6bb1"
TROUBLE = "#c0392b"
OK = "#2e7d32"

# Pixels per broker bar: enough for a rotated four-digit id at 7.5 pt, so 150 brokers in three
# racks (PANEL_PX + 50 * BAR_PX each, plus margins) fit side by side on a 1600-pixel screen.
BAR_PX = 9
# A rack panel's width beside its bars: the y axis, its label and ticks.
PANEL_PX = 60
# Pixels per character of a panel's title (12 pt bold): a small group's title is not cut.
TITLE_CHAR_PX = 8
