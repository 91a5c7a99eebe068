"""The live throttle chart: throttle and measured rates per broker over time, one chart per role.

A frame of throttle samples in (`THROTTLE_COLUMNS`), a HoloViews overlay or its legend's
HTML out: no I/O, no threads.
"""
from __future__ import annotations

import math

import holoviews as hv
import pandas as pd

__all__ = ["THROTTLE_COLUMNS", "empty_throttle_frame", "broker_colors", "current_brokers", "throttle_view",
           "throttle_legend", "PALETTE"]

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
