"""The broker distribution: per-broker figures as a frame, and the per-rack bar charts.

Plain data in (a `Cluster`, an assignment), a pandas frame or a HoloViews layout out: no I/O,
no threads. The per-broker figures are kit/report/figures.py's `broker_figures`, so the
dashboard's leaders, followers, degree and free storage are the numbers `kit plan` prints,
to the byte.
"""
from __future__ import annotations

import math
import re
from dataclasses import replace

import holoviews as hv
import numpy as np
import pandas as pd
import panel as pn

from kit.dashboard.style import (BAR_PX, BEFORE_COLOR, DEGREE_COLOR, FOLLOWER_COLOR, LEADER_COLOR, PANEL_PX,
                                 STORAGE_COLOR, TITLE_CHAR_PX, TROUBLE)
from kit.model import Cluster
from kit.report.figures import broker_figures

__all__ = ["broker_frame", "select_brokers", "side", "ordered", "distribution_view", "panel_width_for_title",
           "with_free_storage", "NO_RACK", "DEAD_GROUP", "SORT_KEYS"]

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


def side(frame: pd.DataFrame, which: str) -> pd.DataFrame:
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


def ordered(rows: pd.DataFrame, sort_by: str) -> pd.DataFrame:
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
    rows = ordered(side(select_brokers(frame, racks, search), which), sort_by)
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


def with_free_storage(cluster: Cluster, free: dict | None) -> Cluster:
    """The cluster with each broker's free storage from the newest samples where they give it
    (the metrics znode's figure stays for the others)."""
    if not free:
        return cluster
    brokers = {b: (replace(info, storage_free=int(free[b])) if b in free else info)
               for b, info in cluster.brokers.items()}
    return Cluster(brokers=brokers, partitions=cluster.partitions)
