"""The dashboard's views: data in, HoloViews and Panel elements out (no I/O, no threads).

Every function here takes plain data (a `Cluster`, an assignment, a status dict, events,
records, a frame of throttle samples) and returns a pandas frame, a HoloViews element or a
Panel pane, so each can be tested without a server or a browser and reused in a notebook.

The per-broker figures are kit/report/figures.py's `broker_figures`, so the dashboard's
leaders, followers, degree and free storage are the numbers `kit plan` prints, to the byte.
"""
from __future__ import annotations

import html
import math
import re
from dataclasses import replace
from datetime import datetime, timezone

import holoviews as hv
import numpy as np
import pandas as pd
import panel as pn

from kit.report.figures import broker_figures
from kit.model import Cluster
from kit.text import human_duration

# Colours chosen to survive a dim laptop screen at night: dark leader, light follower, and a
# red that is only ever used for trouble.
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
NO_RACK = "no rack"
# Dead brokers lose their registration, and with it their rack: they get a group of their own.
DEAD_GROUP = "dead or unregistered"

SORT_KEYS = {
    "broker id": ("broker", True),
    "replicas": ("replicas", False),
    "leaders": ("leaders", False),
    "free storage": ("free_gb", True),
    "degree": ("degree", False),
    "change": ("change", False),
}

__all__ = ["broker_frame", "select_brokers", "distribution_view", "throttle_view",
           "throttle_legend", "current_brokers", "broker_colors", "progress_view", "loop_tile", "eta",
           "clock_speed", "with_free_storage", "events_frame", "events_view", "records_view", "THROTTLE_COLUMNS"]


# --------------------------------------------------------------------------- data


def broker_frame(cluster: Cluster, after: list[list[int]] | None = None, topics: str | None = None) -> pd.DataFrame:
    """One row per broker with its figures before and after a plan.

    Parameters
    ----------
    cluster : Cluster
        The cluster now ("before").
    after : list of list of int, optional
        The assignment after a plan (default: no plan, after = before).
    topics : str, optional
        A regular expression; leaders, followers and degree count only the partitions of
        matching topics (free storage always counts every partition: a disk is shared).

    Returns
    -------
    pandas.DataFrame
        Columns ``broker, label, rack, state, {leaders,followers,replicas,degree}_{before,after},
        free_{before,after}`` (bytes; NaN when the broker does not report storage) and
        ``storage_total``, sorted by rack then broker id. Every broker the cluster knows or a
        replica list names has a row.

    Raises
    ------
    re.error
        When ``topics`` is not a regular expression.
    """
    assignment = cluster.assignment() if after is None else after
    ids = sorted(set(cluster.brokers) | {b for reps in assignment for b in reps})
    keep = list(range(len(cluster.partitions)))
    if topics:
        pattern = re.compile(topics)
        keep = [i for i, p in enumerate(cluster.partitions) if pattern.search(p.topic)]
    sub = Cluster(brokers=cluster.brokers, partitions=tuple(cluster.partitions[i] for i in keep))
    # Every broker is a target here, so each gets a degree (its distinct peers).
    was = broker_figures(sub, None, ids)
    now = broker_figures(sub, [assignment[i] for i in keep], ids)
    order = sorted(now)  # every broker named, sorted
    # Free storage over the whole cluster: a topic filter must not hide what a plan puts on a disk.
    whole = len(keep) == len(cluster.partitions)
    disk_b = was if whole else broker_figures(cluster, None, ids)
    disk_a = now if whole else broker_figures(cluster, assignment, ids)

    rows = []
    for bid in order:
        info = cluster.brokers.get(bid)
        free = None if info is None or info.storage_free is None else info.storage_free
        state = "dead" if info is not None and not info.alive else "unknown" if info is None or not info.known \
            else "new" if was[bid]["replicas"] == 0 and disk_b[bid]["used_bytes"] == 0 else "live"
        rows.append({
            "broker": bid, "label": str(bid), "state": state,
            "rack": info.rack if info and info.rack else DEAD_GROUP if state in ("dead", "unknown") else NO_RACK,
            "leaders_before": was[bid]["leaders"], "followers_before": was[bid]["followers"],
            "replicas_before": was[bid]["replicas"],
            "leaders_after": now[bid]["leaders"], "followers_after": now[bid]["followers"],
            "replicas_after": now[bid]["replicas"],
            "degree_before": was[bid]["degree"] or 0, "degree_after": now[bid]["degree"] or 0,
            "free_before": math.nan if free is None else float(free),
            "free_after": math.nan if disk_a[bid]["storage_free"] is None else float(disk_a[bid]["storage_free"]),
            "storage_total": math.nan if info is None or info.storage_total is None else float(info.storage_total),
        })
    frame = pd.DataFrame(rows, columns=[
        "broker", "label", "rack", "state", "leaders_before", "followers_before", "replicas_before",
        "leaders_after", "followers_after", "replicas_after", "degree_before", "degree_after",
        "free_before", "free_after", "storage_total"])
    return frame.sort_values(["rack", "broker"], kind="stable").reset_index(drop=True)


def select_brokers(frame: pd.DataFrame, racks=None, search: str = "") -> pd.DataFrame:
    """The rows of the chosen racks whose id matches the search.

    Parameters
    ----------
    frame : pandas.DataFrame
        ``broker_frame``'s output.
    racks : list of str, optional
        Racks to keep (empty or None: all).
    search : str
        Broker ids, comma- or space-separated; each is a prefix (``10`` finds 1001..1099),
        a range ``1001-1010`` is inclusive. Empty: every broker.
    """
    out = frame if not racks else frame[frame["rack"].isin(list(racks))]
    terms = [t for t in re.split(r"[,\s]+", search or "") if t]
    if not terms:
        return out
    mask = np.zeros(len(out), dtype=bool)
    labels = out["label"].to_numpy()
    ids = out["broker"].to_numpy()
    for t in terms:
        lo, dash, hi = t.partition("-")
        if dash and lo.isdigit() and hi.isdigit():
            mask |= (ids >= int(lo)) & (ids <= int(hi))
        else:
            mask |= np.char.startswith(labels.astype(str), t)
    return out[mask]


def _which(frame: pd.DataFrame, which: str) -> pd.DataFrame:
    """The figures of one side (``before`` or ``after``) under plain names, plus the change."""
    other = "before" if which == "after" else "after"
    out = frame[["broker", "label", "rack", "state"]].copy()
    for k in ("leaders", "followers", "replicas", "degree"):
        out[k] = frame[f"{k}_{which}"]
        out[f"{k}_{other}"] = frame[f"{k}_{other}"]
    out["free_gb"] = frame[f"free_{which}"] / 1e9
    out[f"free_gb_{other}"] = frame[f"free_{other}"] / 1e9
    out["free_pct"] = 100 * frame[f"free_{which}"] / frame["storage_total"]
    out["change"] = (frame["replicas_after"] - frame["replicas_before"]).abs() + \
        (frame["leaders_after"] - frame["leaders_before"]).abs()
    return out


def _ordered(rows: pd.DataFrame, sort_by: str) -> pd.DataFrame:
    col, ascending = SORT_KEYS.get(sort_by, SORT_KEYS["broker id"])
    return rows.sort_values([col, "broker"], ascending=[ascending, True], kind="stable", na_position="last")


# --------------------------------------------------------------------------- distribution


def panel_width_for_title(title: str) -> int:
    """The width a rack panel needs for its whole title (y axis, then the title's characters)."""
    return PANEL_PX + 20 + TITLE_CHAR_PX * len(title)


def _group_order(name: str) -> tuple:
    """Racks first, by name; the dead/unregistered and rackless groups after them, so the racks
    share the first row of the page instead of a small group pushing the last rack down."""
    return (name in (DEAD_GROUP, NO_RACK), name)


def _rack_panel(rows: pd.DataFrame, rack: str, which: str, limits: dict, show_before: bool) -> hv.Layout:
    """Three aligned charts for one rack: leaders+followers, free storage, degree."""
    other = "before" if which == "after" else "after"
    labels = rows["label"].tolist()
    title = f"{rack} · {len(labels)} broker{'s' if len(labels) != 1 else ''} · {which}"
    width = max(PANEL_PX + BAR_PX * len(labels), panel_width_for_title(title))
    dim_x = hv.Dimension("label", label="broker")
    hover_cols = ["rack", "state", "leader_count", "follower_count", "replicas", f"replicas_{other}", "degree",
                  f"degree_{other}", "free_gb", f"free_gb_{other}"]
    # melt drops everything when a value column is also an id column: the hover copies get their own names.
    long = rows.assign(leader_count=rows["leaders"], follower_count=rows["followers"]).melt(id_vars=["label"] + hover_cols, value_vars=["leaders", "followers"], var_name="role",
                     value_name="count")
    # Stacked order: leaders at the bottom, where the eye compares them across brokers.
    long = long.sort_values("role", key=lambda r: r == "followers", kind="stable")
    common = dict(width=width, xrotation=90, fontsize={"xticks": "7.5pt", "yticks": "9pt", "ylabel": "9pt"},
                  tools=["hover"], default_tools=["save", "reset"], toolbar="above", show_grid=True)
    bars = hv.Bars(long, [dim_x, "role"], ["count"] + hover_cols).opts(
        stacked=True, cmap={"leaders": LEADER_COLOR, "followers": FOLLOWER_COLOR}, height=260,
        ylim=(0, limits["replicas"]), ylabel="replicas", xlabel="", title=title, show_legend=True,
        legend_position="top", legend_cols=2, line_color=None, **common)
    dist = bars
    if show_before:
        # A black dash at the other side's total: what changes is visible without a toggle.
        dist = bars * hv.Scatter(rows, dim_x, hv.Dimension(f"replicas_{other}", label=f"replicas {other}")).opts(
            marker="dash", size=BAR_PX, color=BEFORE_COLOR, line_width=2, tools=["hover"])
    # Under 10% free is a disk about to fill: red, so it is seen before it is hovered.
    rows = rows.assign(free_color=np.where(rows["free_pct"] < 10, TROUBLE, STORAGE_COLOR))
    free = hv.Bars(rows, dim_x, [hv.Dimension("free_gb", label="free GB"), "free_pct", f"free_gb_{other}",
                                 "rack", "free_color"]).opts(
        color="free_color", height=150, ylim=(0, limits["free_gb"]), ylabel="free GB", xlabel="", line_color=None, **common)
    if show_before and rows[f"free_gb_{other}"].notna().any():
        free = free * hv.Scatter(rows, dim_x, hv.Dimension(f"free_gb_{other}", label=f"free GB {other}")).opts(
            marker="dash", size=BAR_PX, color=BEFORE_COLOR, line_width=2, tools=["hover"])
    degree = hv.Bars(rows, dim_x, ["degree", f"degree_{other}", "rack"]).opts(
        color=DEGREE_COLOR, height=140, ylim=(0, limits["degree"]), ylabel="degree", xlabel="broker",
        line_color=None, **common)
    return (dist + free + degree).cols(1).opts(shared_axes=True)


def distribution_view(frame: pd.DataFrame, which: str = "after", sort_by: str = "broker id", racks=None,
                      search: str = "", show_before: bool = True):
    """Brokers grouped by rack: replicas (leaders dark, followers light), free storage, degree.

    Parameters
    ----------
    frame : pandas.DataFrame
        ``broker_frame``'s output.
    which : {"after", "before"}
        The side drawn as bars; the other side is a black dash per broker (``show_before``).
    sort_by : str
        A key of ``SORT_KEYS``; brokers are sorted within their rack.
    racks, search
        As ``select_brokers``.
    show_before : bool
        Draw the other side's totals as dashes (off when there is no plan: they would coincide).

    Returns
    -------
    panel.FlexBox
        One column of three charts per rack, wrapping on narrow screens; all racks share the
        same y scales, so bars compare across panels. Hover shows the exact figures.
    """
    rows = _ordered(_which(select_brokers(frame, racks, search), which), sort_by)
    if rows.empty:
        return pn.pane.Markdown("**No broker matches the rack filter and the search.**")
    limits = {
        "replicas": 1.08 * max(1, frame[["replicas_before", "replicas_after"]].to_numpy().max()),
        "degree": 1.08 * max(1, frame[["degree_before", "degree_after"]].to_numpy().max()),
        "free_gb": 1.08 * max(1.0, np.nanmax(frame[["free_before", "free_after"]].to_numpy() / 1e9, initial=0.0)),
    }
    groups = sorted(rows.groupby("rack", sort=False), key=lambda kv: _group_order(kv[0]))
    panels = [pn.pane.HoloViews(_rack_panel(g, rack, which, limits, show_before), linked_axes=False)
              for rack, g in groups]
    return pn.FlexBox(*panels, sizing_mode="stretch_width")


# --------------------------------------------------------------------------- live throttle chart

# The Buffer's frame: one row per broker and role per poll. Rates in MB/s (people read MB/s).
THROTTLE_COLUMNS = ["time", "broker", "role", "throttle", "measured", "replication"]


def empty_throttle_frame() -> pd.DataFrame:
    """The throttle Buffer's empty frame, with its columns typed."""
    return pd.DataFrame({"time": pd.Series([], dtype="datetime64[ns]"), "broker": pd.Series([], dtype="int64"),
                         "role": pd.Series([], dtype="object"), "throttle": pd.Series([], dtype="float64"),
                         "measured": pd.Series([], dtype="float64"), "replication": pd.Series([], dtype="float64")})


# The throttle chart's colours, one per broker in the order of their ids (Category20's).
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7",
           "#dbdb8d", "#9edae5"]


def broker_colors(brokers) -> dict[int, str]:
    """One colour per broker, by the order of their ids (the same brokers, the same colours)."""
    return {b: PALETTE[i % len(PALETTE)] for i, b in enumerate(sorted(set(int(x) for x in brokers)))}


def _paths(data: pd.DataFrame, column: str, now=None, colors=None, times=None) -> list[pd.DataFrame]:
    """One path per broker and unbroken run: a NaN (a throttle cleared) or a poll the broker was
    not in (it stopped taking part) ends the line, so nothing is drawn across the gap. `times`:
    every poll's time (default: those in `data`)."""
    out = []
    if len(data):
        polls = {t: i for i, t in enumerate(sorted(set(data["time"].unique()) | set(times if times is not None
                                                                                     else ())))}
    for broker, g in data.groupby("broker", sort=True):
        g = g.sort_values("time", kind="stable")
        index = g["time"].map(polls).to_numpy()
        values = g[column].to_numpy(dtype=float)
        run = []
        for i, (t, v) in enumerate(zip(g["time"], values)):
            if run and (v != v or index[i] != index[i - 1] + 1):
                out.append(run)
                run = []
            if v == v:
                run.append((t, v))
        if run:
            out.append(run)
        for k in range(len(out)):
            if isinstance(out[k], list):
                out[k] = pd.DataFrame({"time": pd.Series([t for t, _ in out[k]], dtype="datetime64[ns]"),
                                       "MB/s": [v for _, v in out[k]], "broker": str(broker),
                                       "color": (colors or {}).get(int(broker), PALETTE[0])})
    # HoloViews cannot colour an empty Path by a column: an invisible one-point path stands in.
    return out or [pd.DataFrame({"time": pd.Series([pd.NaT if now is None else now], dtype="datetime64[ns]"),
                                 "MB/s": [math.nan], "broker": [""], "color": [PALETTE[0]]})]


def current_brokers(data: pd.DataFrame, role: str) -> list[int]:
    """The brokers of one role in the newest poll: those taking part in the reassignment now."""
    d = data[data["role"] == role] if len(data) else data
    if not len(d):
        return []
    return sorted(int(b) for b in d.loc[d["time"] == d["time"].max(), "broker"].unique())


def throttle_view(data: pd.DataFrame, role: str, brokers=None, now=None) -> hv.Overlay:
    """One role's throttle (dashed) and measured traffic (solid) per broker over time.

    Parameters
    ----------
    data : pandas.DataFrame
        Rows with ``THROTTLE_COLUMNS``; rates in MB/s, times UTC (the wall clock of the polls).
    role : {"leader", "follower"}
        Leader: the sources' outbound throttle against their measured tx. Follower: the
        destinations' inbound throttle against their measured rx.
    brokers : iterable of int, optional
        Only these brokers (the broker search).
    now : pandas.Timestamp, optional
        Where the time axis sits while there is no data yet (instead of 1970).

    Returns
    -------
    holoviews.Overlay
        Always the same five elements (so a DynamicMap can stream into it): measured, throttle,
        the current throttle per broker as points, each line's broker id at its end (the
        legend, in the line's colour), and invisible points for the hover. The title counts the
        brokers in the newest poll (those taking part now); a cleared throttle's line ends.
    """
    d = data[data["role"] == role] if len(data) else data
    times = d["time"].unique() if len(d) else ()  # every poll, before the search narrows the brokers
    taking_part = set(current_brokers(d, role))
    if brokers is not None and len(d):
        d = d[d["broker"].isin(list(brokers))]
        taking_part &= set(brokers)
    n = len(taking_part)
    colors = broker_colors(d["broker"].unique() if len(d) else [])
    title = (f"OUT of {n} source broker{'s' if n != 1 else ''} now: leader throttle (dashed) vs measured tx (solid)"
             if role == "leader" else
             f"INTO {n} destination broker{'s' if n != 1 else ''} now: follower throttle (dashed) vs measured rx "
             "(solid)")
    kd, vd = [hv.Dimension("time", label="time (UTC, wall clock)")], [hv.Dimension("MB/s")]
    measured = hv.Path(_paths(d, "measured", now, colors, times), kd + vd, vdims=["broker", "color"])
    throttle = hv.Path(_paths(d, "throttle", now, colors, times), kd + vd, vdims=["broker", "color"])
    # The current throttle: only where the newest row of a broker still has one (a cleared
    # throttle has no dot held at its old value).
    newest = d.sort_values("time", kind="stable").groupby("broker").tail(1) if len(d) else d
    latest = newest.dropna(subset=["throttle"]) if len(newest) else newest
    points = hv.Points(latest.rename(columns={"throttle": "MB/s"}).assign(
        broker=lambda x: x["broker"].astype(str), color=lambda x: x["broker"].astype(int).map(colors))
        if len(latest) else _paths(latest, "throttle", now)[0], kd + vd, ["broker", "color"])
    ends = _line_ends(newest, colors, now)
    labels = hv.Labels(ends, kd + vd, ["broker", "color"])
    samples = hv.Points(_samples(d, now), kd + vd, ["broker", "series", "color"])
    # framewise: every frame sets its own y range, so it follows the newest data (the two charts
    # must also not share one axis: see app.py, linked_axes).
    # An explicit broker -> colour map: the lines, dots, ids and the HTML legend agree.
    cmap = {str(b): c for b, c in colors.items()} or {"": PALETTE[0]}
    common = dict(color="broker", cmap=cmap, framewise=True)
    # A line's hover names only its broker: the exact figures are on every sample's (invisible) point.
    tips = dict(tools=["hover"], hover_tooltips=HOVER_TIPS, hover_formatters={"@time": "datetime"})
    line_tip = dict(tools=["hover"], hover_tooltips=[("broker", "@broker")])
    # From zero to a little above the highest rate: a flat line (a throttle the copy runs at) would
    # otherwise get a zero-height range with ticks like 50.000000000000008.
    shown = pd.concat([d["measured"], d["throttle"]]).dropna() if len(d) else pd.Series(dtype=float)
    top = float(shown.max()) if len(shown) else 0.0
    return (measured.opts(line_width=2, **common, **line_tip)
            * throttle.opts(line_width=2, line_dash="dashed", **common, **line_tip)
            * points.opts(size=7, marker="circle", **common)
            * labels.opts(text_color="broker", cmap=cmap, text_font_size="8pt", text_align="left",
                          text_baseline="middle", framewise=True)
            * samples.opts(size=8, alpha=0, hover_alpha=1, **common, **tips)).opts(
        title=title, height=260, responsive=True, min_width=420, ylabel="MB/s", xlabel="time (UTC, wall clock)",
        ylim=(0, top * 1.15 if top > 0 else 1.0),
        show_legend=False, fontsize={"title": "10pt"})


def _line_ends(newest: pd.DataFrame, colors: dict, now=None) -> pd.DataFrame:
    """Where each broker's id is written: at its newest measured value, else its throttle."""
    rows = []
    for r in newest.itertuples(index=False) if len(newest) else ():
        v = r.measured if r.measured == r.measured else r.throttle
        if v == v:
            rows.append({"time": r.time, "MB/s": v, "broker": str(int(r.broker)), "color": colors.get(int(r.broker))})
    if rows:
        return pd.DataFrame(rows)
    return pd.DataFrame({"time": pd.Series([pd.NaT if now is None else now], dtype="datetime64[ns]"),
                         "MB/s": [math.nan], "broker": [""], "color": [PALETTE[0]]})


# Brokers named in a throttle chart's legend; more would push the page down (the search narrows).
LEGEND_MAX = 24


def throttle_legend(data: pd.DataFrame, role: str, brokers=None) -> str:
    """The chart's legend as HTML: per broker taking part now, its colour, its throttle (or
    "cleared"/"none") and measured MB/s in the newest poll; brokers no longer taking part are
    named after them."""
    d = data[data["role"] == role] if len(data) else data
    now = set(current_brokers(d, role))
    if brokers is not None and len(d):
        d = d[d["broker"].isin(list(brokers))]
        now &= set(brokers)
    if not len(d):
        return '<div style="font-size:11px;color:#666">no broker takes part</div>'
    colors = broker_colors(d["broker"].unique())
    newest = d.sort_values("time", kind="stable").groupby("broker").tail(1)
    items = []
    for r in newest.sort_values("broker").itertuples(index=False):
        b = int(r.broker)
        if b not in now:
            continue
        if len(items) == LEGEND_MAX:
            items.append(f'<span style="color:#666">… and {len(now) - LEGEND_MAX} more (the broker search '
                         'narrows the chart)</span>')
            break
        had = d[(d["broker"] == b) & d["throttle"].notna()]
        thr = f"{r.throttle:.1f}" if r.throttle == r.throttle else "cleared" if len(had) else "none"
        meas = f"{r.measured:.1f}" if r.measured == r.measured else "–"
        items.append(f'<span style="margin-right:12px;white-space:nowrap"><span style="display:inline-block;'
                     f'width:14px;height:3px;background:{colors[b]};vertical-align:middle"></span> '
                     f'<b>{b}</b> throttle {thr} · measured {meas}</span>')
    gone = sorted(set(int(b) for b in d["broker"].unique()) - now)
    tail = (f'<span style="color:#666">no longer taking part: {", ".join(map(str, gone[:10]))}'
            f'{" …" if len(gone) > 10 else ""}</span>') if gone else ""
    return (f'<div class="kit-legend" style="font-size:11px;line-height:1.6">MB/s, newest poll: '
            f'{"".join(items)}{tail}</div>')


# Hover of the throttle chart: broker, what was measured or set, the value and when.
HOVER_TIPS = [("broker", "@broker"), ("", "@series"), ("MB/s", "@{MB/s}{0.0}"), ("time", "@time{%H:%M:%S} UTC")]


def _samples(d: pd.DataFrame, now=None) -> pd.DataFrame:
    """Every sample of the chart as a point (time, MB/s, broker, series), for the hover."""
    parts = []
    colors = broker_colors(d["broker"].unique() if len(d) else [])
    for column, series in (("measured", "measured"), ("throttle", "throttle")):
        g = d[["time", "broker", column]].dropna() if len(d) else d
        if len(g):
            parts.append(pd.DataFrame({"time": g["time"], "MB/s": g[column], "broker": g["broker"].astype(str),
                                       "series": series, "color": g["broker"].astype(int).map(colors)}))
    if parts:
        return pd.concat(parts, ignore_index=True)
    return pd.DataFrame({"time": pd.Series([pd.NaT if now is None else now], dtype="datetime64[ns]"),
                         "MB/s": [math.nan], "broker": [""], "series": [""], "color": [PALETTE[0]]})


# --------------------------------------------------------------------------- progress


def eta(progress: dict | None, history=(), window: float = 600.0) -> dict:
    """Share done and time left of the running reassignment, on the cluster's clock.

    Parameters
    ----------
    progress : dict or None
        The poller's progress: ``total`` and ``copied`` bytes of the running reassignment (every
        replica it adds, counted from when it was first seen), and ``rate``: the copy rate the
        throttles allow (bytes/s per second of the cluster's clock; see
        `kit.dashboard.poller.copy_bound`), None when unknown.
    history : sequence of tuple
        ``(cluster seconds, bytes copied, rate, ...)`` observations, oldest first: the copy
        rate seen (bytes copied over cluster time) when no bound is known.
    window : float
        Cluster seconds of history the seen rate is measured over.

    Returns
    -------
    dict
        ``left`` (bytes to copy still), ``done_fraction`` (copied / to copy), ``rate``
        (bytes/s), ``seconds`` (ETA in cluster seconds: left / rate, so a higher rate never
        gives a later ETA; None when unknown, 0 when nothing is left) and ``basis`` (``"copy
        rate within throttles"`` or ``"bytes copied seen"``, None while unknown). All None
        without progress.
    """
    if not progress:
        return {"rate": None, "seconds": None, "done_fraction": None, "left": None, "basis": None}
    total, copied = float(progress["total"]), float(progress["copied"])
    left = max(0.0, total - copied)
    rate, basis = progress.get("rate"), "copy rate within throttles"
    if not rate:
        t1 = history[-1][0] if history else None
        recent = [h for h in history if t1 is not None and h[0] >= t1 - window]
        rate, basis = None, None
        if len(recent) > 1 and recent[-1][0] > recent[0][0] and recent[-1][1] > recent[0][1]:
            rate = (recent[-1][1] - recent[0][1]) / (recent[-1][0] - recent[0][0])
            basis = "bytes copied seen"
    seconds = 0.0 if left == 0 else (left / rate if rate else None)
    return {"rate": rate, "seconds": seconds, "left": left, "done_fraction": copied / total if total else None,
            "basis": basis}


def clock_speed(history) -> float | None:
    """Cluster seconds per wall second over the history (``(clock, ..., wall)`` entries): about
    1 on a real cluster, the speed-up on the simulated one; None while unknown."""
    if len(history) < 2 or len(history[0]) < 4:
        return None
    (c0, w0), (c1, w1) = (history[0][0], history[0][3]), (history[-1][0], history[-1][3])
    return (c1 - c0) / (w1 - w0) if w1 > w0 and c1 > c0 else None


def _bytes(n: float | None) -> str:
    if n is None:
        return "–"
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def _tile(label: str, value: str, bad: bool = False, note: str = "") -> str:
    color = TROUBLE if bad else "#222"
    return (f'<div class="kit-tile" style="border-left:6px solid {TROUBLE if bad else OK};padding:4px 12px;'
            f'margin:0 10px 4px 0;min-width:150px"><div style="font-size:12px;color:#555">{html.escape(label)}</div>'
            f'<div style="font-size:26px;font-weight:700;color:{color}">{html.escape(value)}</div>'
            f'<div style="font-size:11px;color:#666">{html.escape(note)}</div></div>')


def progress_view(status: dict | None, progress: dict | None = None, updated: str | None = None,
                  error: str | None = None, source: str = "", copy_basis: str | None = None,
                  detail: dict | None = None, loop: dict | None = None, clock_source: str = "wall",
                  speed: float | None = None) -> pn.pane.HTML:
    """Big tiles for the state of the cluster and the reassignment in flight.

    Parameters
    ----------
    status : dict or None
        `kit.cluster.zk.changes.status`'s dict (None when the source is a snapshot).
    progress : dict, optional
        ``eta``'s dict.
    updated : str, optional
        When the figures were read (shown so a stale page is noticed).
    error : str, optional
        Why the last read failed (shown in red, with the figures of the last good read).
    source : str
        Where the figures come from (e.g. ``ZooKeeper 10.0.0.1:2181/kafka``), without credentials.
    copy_basis : str, optional
        What bounds the copy rate (``measured``, ``throttle``, ``NIC``), shown beside it.
    detail : dict, optional
        The poller's progress dict (``total``, ``copied``, ``basis``, ``started``, ``into``,
        ``out_of``): what the share and the rate rest on.
    loop : dict, optional
        `kit.dashboard.poller.throttle_health`'s dict; stale or stopped is a red tile.
    clock_source : {"wall", "samples"}
        The cluster clock the ETA is counted on.
    speed : float, optional
        Cluster seconds per wall second (the simulator's speed-up), for the wall-clock ETA.
    """
    progress, detail = progress or {}, detail or {}
    if status is None:
        tiles = [_tile("reassignment", "no live source", note="snapshot file: distribution only")]
    else:
        tiles = _status_tiles(status, progress, copy_basis, detail, clock_source, speed)
    if loop is not None:
        tiles.append(loop_tile(loop))
    foot = f"{html.escape(source)} · read {html.escape(updated or 'never')}"
    if error:
        foot += f' · <b style="color:{TROUBLE}">last read failed: {html.escape(error)}</b>'
    return pn.pane.HTML(f'<div style="display:flex;flex-wrap:wrap">{"".join(tiles)}</div>'
                        f'<div style="font-size:11px;color:#666">{foot}</div>', sizing_mode="stretch_width")


def _status_tiles(status: dict, progress: dict, copy_basis: str | None, detail: dict, clock_source: str,
                  speed: float | None) -> list[str]:
    """`progress_view`'s tiles for a live cluster: the reassignment in flight, under-replicated
    partitions, brokers and throttles."""
    moving = int(status.get("reassigning_partitions", 0))
    brokers = status.get("brokers", [])
    dead = [b["id"] for b in brokers if not b.get("alive", True)]
    urp = status.get("under_replicated", [])
    frac = progress.get("done_fraction")
    clock = "simulated clock (samples)" if clock_source == "samples" else "wall clock"
    started = detail.get("started")
    copied_note = (f"{_bytes(detail.get('copied'))} of {_bytes(detail.get('total'))} copied"
                   + (f" since {utc_label(started)} ({clock})" if started else "")
                   + (f"; from {detail['basis']}" if detail.get("basis") else ""))
    rate = progress.get("rate")
    bounds = ", ".join(x for x in (
        f"into destinations {_bytes(detail['into'])}/s" if detail.get("into") is not None else "",
        f"out of sources {_bytes(detail['out_of'])}/s" if detail.get("out_of") is not None else "") if x)
    eta_note = ""
    if moving and rate:
        eta_note = (f"at {_bytes(rate)}/s" + (f" ({copy_basis}" + (f"; {bounds}" if bounds else "") + ")"
                                               if copy_basis else f" ({progress.get('basis')})")
                    + f"; {clock}")
        if speed and speed > 1.5 and progress.get("seconds"):
            eta_note += f"; ≈ {human_duration(progress['seconds'] / speed)} wall at ×{speed:.0f}"
    return [
        _tile("partitions reassigning", str(moving), note="none running" if not moving else "in flight"),
        _tile("copied", f"{frac:.0%}" if moving and frac is not None else "–" if moving else "0",
              note=copied_note if moving and detail else ""),
        _tile("bytes left to copy", _bytes(progress.get("left")) if moving and progress.get("left") is not None
              else "–" if moving else "0",
              note=f"{_bytes(status.get('bytes_left', 0))} in replicas not yet in the ISR (whole sizes)" if moving
              else ""),
        _tile("ETA", human_duration(progress.get("seconds")) if moving else "–",
              note=eta_note if moving and rate else "waiting for a copy rate" if moving else ""),
        _tile("under-replicated partitions", str(len(urp)), bad=bool(urp) and not moving,
              note=", ".join(urp[:3]) + (" …" if len(urp) > 3 else "")),
        _tile("brokers", f"{len(brokers) - len(dead)} up", bad=bool(dead),
              note=(f"dead: {', '.join(map(str, dead[:6]))}" + (" …" if len(dead) > 6 else "")) if dead else
              "all alive"),
        _tile("throttled brokers", str(len(status.get("throttled_brokers", []))),
              note=", ".join(map(str, status.get("throttled_brokers", [])[:6]))),
    ]


def loop_tile(loop: dict) -> str:
    """The auto-throttle's tile: red when it is stale or its process is gone, saying why."""
    state = loop.get("state")
    last = loop.get("last_decision")
    last_note = f"last decision {last} (its clock)" if last else "no decision yet"
    if state in ("stale", "stopped"):
        since = loop.get("since")
        when = utc_label(since) if since else "its start"
        value = "not running" if state == "stopped" else "stale"
        return _tile("auto-throttle", f"{value} since {when}", bad=True,
                     note=f"{last_note}; based on: {loop.get('basis', '')}")
    value = {"running": "running", "waiting": "no process seen", "idle": "idle"}.get(state, str(state))
    return _tile("auto-throttle", value, note=f"{last_note}; based on: {loop.get('basis', '')}")


def with_free_storage(cluster: Cluster, free: dict | None) -> Cluster:
    """The cluster with each broker's free storage from the newest samples where they give it
    (the metrics znode's figure stays for the others)."""
    if not free:
        return cluster
    brokers = {b: (replace(info, storage_free=int(free[b])) if b in free else info)
               for b, info in cluster.brokers.items()}
    return Cluster(brokers=brokers, partitions=cluster.partitions)


# --------------------------------------------------------------------------- events and records

_TROUBLE_KINDS = {"failsafe", "alert", "error", "failed"}


def events_frame(events: list[dict], limit: int = 200) -> pd.DataFrame:
    """Events (already newest first) as a table: time, source, kind, brokers, role, old/new MB/s, reason."""
    rows = []
    for e in events[:limit]:
        ids = [str(b) for b in e.get("brokers") or []]
        rows.append({
            "time": e.get("time", ""), "source": e.get("source", ""), "kind": e.get("kind", ""),
            "brokers": ", ".join(ids[:8]) + (f" +{len(ids) - 8}" if len(ids) > 8 else ""),
            "role": e.get("role") or "",
            "old MB/s": None if e.get("old") is None else round(float(e["old"]) / 1e6, 1),
            "new MB/s": None if e.get("new") is None else round(float(e["new"]) / 1e6, 1),
            "reason": e.get("reason", ""),
        })
    return pd.DataFrame(rows, columns=["time", "source", "kind", "brokers", "role", "old MB/s", "new MB/s",
                                       "reason"])


def _table(head: list[str], body: list[str]) -> str:
    th = "".join(f'<th style="text-align:left;padding:2px 8px;border-bottom:2px solid #999">{h}</th>' for h in head)
    return (f'<table style="border-collapse:collapse;font-size:12px;width:100%"><thead><tr>{th}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


def events_view(events: list[dict], limit: int = 200) -> pn.pane.HTML:
    """The auto-throttle's and the doctor's decisions, newest first; trouble in red."""
    frame = events_frame(events, limit)
    if frame.empty:
        return pn.pane.HTML("<i>No events yet.</i>", sizing_mode="stretch_width")
    body = []
    for r in frame.itertuples(index=False):
        style = f"color:{TROUBLE};font-weight:600" if r.kind in _TROUBLE_KINDS else ""
        cells = [r.time, r.source, r.kind, r.brokers, r.role,
                 "" if pd.isna(r[5]) else f"{r[5]:.1f}", "" if pd.isna(r[6]) else f"{r[6]:.1f}", r.reason]
        body.append(f'<tr style="{style};border-bottom:1px solid #eee">' +
                    "".join(f'<td style="padding:2px 8px;vertical-align:top">{html.escape(str(c))}</td>'
                            for c in cells) + "</tr>")
    more = f"<div style='font-size:11px;color:#666'>newest {limit} of {len(events)}</div>" if len(events) > limit \
        else ""
    return pn.pane.HTML(_table(list(frame.columns), body) + more, sizing_mode="stretch_width",
                        styles={"overflow-y": "auto", "max-height": "360px"})


def records_view(records: list[dict], base_url: str = "records/") -> pn.pane.HTML:
    """Executed runbooks, newest first, each linked to its HTML record.

    Parameters
    ----------
    records : list of dict
        As `kit.dashboard.poller.read_records` returns them (``runbook, started, finished,
        outcome, reason, html``; any may be missing).
    base_url : str
        Where the server serves the records folder.
    """
    if not records:
        return pn.pane.HTML("<i>No runbook records yet.</i>", sizing_mode="stretch_width")
    body = []
    for r in records:
        outcome = str(r.get("outcome") or "unknown")
        color = OK if outcome == "succeeded" else TROUBLE if outcome in ("failed", "stopped") else "#666"
        name = r.get("html")
        link = (f'<a href="{html.escape(base_url + name, quote=True)}" target="_blank">open</a>' if name
                else "<i>no HTML</i>")
        cells = [html.escape(str(r.get("runbook") or "?")), html.escape(str(r.get("started") or "")),
                 html.escape(str(r.get("finished") or "")),
                 f'<b style="color:{color}">{html.escape(outcome)}</b>', html.escape(str(r.get("reason") or "")),
                 link]
        body.append('<tr style="border-bottom:1px solid #eee">' +
                    "".join(f'<td style="padding:2px 8px;vertical-align:top">{c}</td>' for c in cells) + "</tr>")
    return pn.pane.HTML(_table(["runbook", "started", "finished", "outcome", "reason", "record"], body),
                        sizing_mode="stretch_width", styles={"overflow-y": "auto", "max-height": "360px"})


def utc_label(ts: float) -> str:
    """Wall-clock seconds as the page's UTC time of day."""
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%H:%M:%S UTC")
