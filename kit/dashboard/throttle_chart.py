"""The live throttle chart: throttle and measured rates per broker over time, one chart per role.

`LiveThrottleChart`: a Bokeh figure the rows of each poll (`THROTTLE_COLUMNS`) are streamed
into, and its legend's HTML (`legend_html`). No I/O, no threads.
"""
from __future__ import annotations

import math

import pandas as pd
from bokeh.models import ColumnDataSource, DataRange1d, HoverTool
from bokeh.plotting import figure

__all__ = ["THROTTLE_COLUMNS", "broker_colors", "legend_html", "LiveThrottleChart", "PALETTE"]

# A throttle row's keys: one row per broker and role per poll. Rates in MB/s (people read MB/s).
THROTTLE_COLUMNS = ["time", "broker", "role", "throttle", "measured", "replication"]


# The throttle chart's colours, one per broker in the order of their ids (Category20's).
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7",
           "#dbdb8d", "#9edae5"]


def broker_colors(brokers) -> dict[int, str]:
    """One colour per broker, by the order of their ids (the same brokers, the same colours)."""
    return {b: PALETTE[i % len(PALETTE)] for i, b in enumerate(sorted(set(int(x) for x in brokers)))}


# Brokers named in a throttle chart's legend; more would push the page down (the search narrows).
LEGEND_MAX = 24


def legend_html(newest: dict, now: set, had: set, brokers=None, when: str | None = None) -> str:
    """The chart's legend as HTML, from each broker's newest ``throttle`` and
    ``measured`` (MB/s, NaN when none), the brokers in the newest poll (`now`), those that ever
    had a throttle (`had`), the broker search (`brokers`, None: all) and the poll's time."""
    if brokers is not None:
        brokers = set(int(b) for b in brokers)
        newest = {b: r for b, r in newest.items() if b in brokers}
        now = set(now) & brokers
    if not newest:
        return '<div style="font-size:11px;color:#666">no broker takes part</div>'
    colors = broker_colors(newest)
    items = []
    for b in sorted(newest):
        r = newest[b]
        if b not in now:
            continue
        if len(items) == LEGEND_MAX:
            items.append(f'<span style="color:#666">… and {len(now) - LEGEND_MAX} more (the broker search '
                         'narrows the chart)</span>')
            break
        thr = f"{r['throttle']:.1f}" if r["throttle"] == r["throttle"] else "cleared" if b in had else "none"
        meas = f"{r['measured']:.1f}" if r["measured"] == r["measured"] else "–"
        items.append(f'<span style="margin-right:12px;white-space:nowrap"><span style="display:inline-block;'
                     f'width:14px;height:3px;background:{colors[b]};vertical-align:middle"></span> '
                     f'<b>{b}</b> throttle {thr} · measured {meas}</span>')
    gone = sorted(set(newest) - set(now))
    tail = (f'<span style="color:#666">no longer taking part: {", ".join(map(str, gone[:10]))}'
            f'{" …" if len(gone) > 10 else ""}</span>') if gone else ""
    poll = f"the poll of {when} (wall clock)" if when else "newest poll"
    return (f'<div class="kit-legend" style="font-size:11px;line-height:1.6">MB/s, {poll}: '
            f'{"".join(items)}{tail}</div>')


# Hover of the throttle chart: broker, what was measured or set, the value and when.
HOVER_TIPS = [("broker", "@broker"), ("", "@series"), ("MB/s", "@{MB/s}{0.0}"), ("time", "@time{%H:%M:%S} UTC")]


# Points kept per broker and line in a live chart: at a poll every 2 s, over 11 hours.
POINTS_KEPT = 20_000


def _ms(t) -> float:
    """A poll's time as Bokeh's datetime axis counts it (milliseconds since the epoch, UTC)."""
    return float(pd.Timestamp(t).value) / 1e6


class LiveThrottleChart:
    """One role's live throttle chart: a Bokeh figure whose data grows by streaming.

    Each broker has two sources (measured and throttle: ``time``, ``MB/s``, ``broker``,
    ``series``) and a line on each. A poll's rows are appended with
    `ColumnDataSource.stream`, so the browser gets that poll's points only and the server never
    rebuilds the chart (rebuilding hours of rows on every poll, for every tab, starved the
    poller's thread: issue 39). A NaN point ends a line: a cleared throttle, or a poll the
    broker was not in. The current throttle is a dot and each line's broker id is written at
    its end, both redrawn from one row per broker.

    Parameters
    ----------
    role : {"leader", "follower"}
        Leader: the sources' outbound throttle against their measured tx. Follower: the
        destinations' inbound throttle against their measured rx.
    """

    def __init__(self, role: str):
        self.role = role
        self.lines: dict[int, tuple] = {}  # broker -> (measured source, throttle source, renderers)
        self.newest: dict[int, dict] = {}  # broker -> its newest row
        self.had: set[int] = set()  # brokers that had a throttle at some poll
        self.present: set[int] = set()  # brokers in the newest poll of this role
        self.newest_time = None  # the newest poll's time (numpy datetime64), None before any
        self.brokers: set[int] | None = None  # the broker search, None: all
        # From zero to a little above the highest rate of the brokers shown.
        self.figure = figure(x_axis_type="datetime", height=260, min_width=420, sizing_mode="stretch_width",
                             y_range=DataRange1d(start=0, only_visible=True, range_padding=0.15),
                             x_axis_label="time (UTC, wall clock)", y_axis_label="MB/s",
                             tools="pan,wheel_zoom,box_zoom,reset,save")
        self.figure.title.text_font_size = "10pt"
        self.ends = ColumnDataSource({"time": [], "MB/s": [], "broker": [], "color": []})
        self.dots = ColumnDataSource({"time": [], "MB/s": [], "broker": [], "color": []})
        self.figure.scatter("time", "MB/s", source=self.dots, color="color", size=7)
        self.figure.text("time", "MB/s", text="broker", source=self.ends, text_color="color", text_font_size="8pt",
                         text_align="left", text_baseline="middle")
        self.hover = HoverTool(renderers=[], tooltips=HOVER_TIPS, formatters={"@time": "datetime"})
        self.figure.add_tools(self.hover)
        self._title()

    def add(self, rows) -> None:
        """New throttle rows (dicts with `THROTTLE_COLUMNS`, any role, oldest first) into the chart."""
        polls: dict = {}
        for r in rows:
            if r["role"] == self.role:
                polls.setdefault(r["time"], []).append(r)
        points: dict[int, dict] = {}
        nan = math.nan

        def point(b, t, measured, throttle):
            p = points.setdefault(b, {"time": [], "measured": [], "throttle": []})
            p["time"].append(_ms(t))
            p["measured"].append(measured)
            p["throttle"].append(throttle)
        for t in sorted(polls):
            now = {int(r["broker"]) for r in polls[t]}
            for b in self.present - now:
                point(b, t, nan, nan)  # not in this poll: its lines end
            for r in polls[t]:
                b = int(r["broker"])
                point(b, t, float(r["measured"]), float(r["throttle"]))
                self.newest[b] = {"time": t, "throttle": float(r["throttle"]), "measured": float(r["measured"])}
                if r["throttle"] == r["throttle"]:
                    self.had.add(b)
            self.present, self.newest_time = now, t
        new = [b for b in points if b not in self.lines]
        for b in new:
            self._line(b)
        for b, p in points.items():
            for source, series in zip(self.lines[b][:2], ("measured", "throttle")):
                source.stream({"time": p["time"], "MB/s": p[series], "broker": [str(b)] * len(p["time"]),
                               "series": [series] * len(p["time"])}, rollover=POINTS_KEPT)
        if new:
            self._recolor()
        if polls:
            self._marks()
            self._title()

    def search(self, brokers) -> None:
        """Show only these brokers (the broker search; None: all)."""
        self.brokers = None if brokers is None else set(int(b) for b in brokers)
        for b, (_, _, renderers) in self.lines.items():
            for r in renderers:
                r.visible = self._shown(b)
        self._recolor()
        self._marks()
        self._title()

    def legend(self, when: str | None = None) -> str:
        """The legend's HTML for the brokers shown (`legend_html`), `when` the newest poll's time."""
        return legend_html(self.newest, self.present, self.had, self.brokers, when)

    def _shown(self, b: int) -> bool:
        return self.brokers is None or b in self.brokers

    def _line(self, b: int) -> None:
        measured, throttle = (ColumnDataSource({"time": [], "MB/s": [], "broker": [], "series": []})
                              for _ in range(2))
        renderers = (self.figure.line("time", "MB/s", source=measured, line_width=2),
                     self.figure.line("time", "MB/s", source=throttle, line_width=2, line_dash="dashed"))
        for r in renderers:
            r.visible = self._shown(b)
        self.hover.renderers = [*self.hover.renderers, *renderers]
        self.lines[b] = (measured, throttle, renderers)

    def _colors(self) -> dict[int, str]:
        # The brokers shown, in the order of their ids: the legend's colours (legend_html's).
        return broker_colors([b for b in self.newest if self._shown(b)])

    def _recolor(self) -> None:
        colors = self._colors()
        for b, (_, _, renderers) in self.lines.items():
            for r in renderers:
                r.glyph.line_color = colors.get(b, PALETTE[0])

    def _marks(self) -> None:
        """The current throttle's dots (where the newest row still has one) and the broker ids
        at the lines' ends (the newest measured value, else the throttle)."""
        colors = self._colors()
        dots = {"time": [], "MB/s": [], "broker": [], "color": []}
        ends = {"time": [], "MB/s": [], "broker": [], "color": []}
        for b, r in sorted(self.newest.items()):
            if not self._shown(b):
                continue
            for target, v in ((dots, r["throttle"]), (ends, r["measured"] if r["measured"] == r["measured"]
                                                      else r["throttle"])):
                if v == v:
                    target["time"].append(_ms(r["time"]))
                    target["MB/s"].append(v)
                    target["broker"].append(str(b))
                    target["color"].append(colors[b])
        self.dots.data, self.ends.data = dots, ends

    def _title(self) -> None:
        n = len([b for b in self.present if self._shown(b)])
        self.figure.title.text = (
            f"OUT of {n} source broker{'s' if n != 1 else ''} now: leader throttle (dashed) vs measured tx (solid)"
            if self.role == "leader" else
            f"INTO {n} destination broker{'s' if n != 1 else ''} now: follower throttle (dashed) vs measured rx "
            "(solid)")
