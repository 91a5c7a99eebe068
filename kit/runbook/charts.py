"""The records' charts (matplotlib, imported where they are drawn): replicas and free storage
per broker, before and after a plan, and the auto-throttle's rates over a change, each a PNG
so a record's HTML shows it offline.
"""
from __future__ import annotations

import io

from kit.model import Cluster
from kit.runbook.display import brokers_text, by_rack, per_broker
from kit.runbook.replay import ChangeResult, throttle_series
from kit.text import hm, ms
from kit.throttle.decide import Settings

CHART_DPI = 130  # records are read printed and on laptop screens: sharp text, still small files

_WIDE = 40  # above this many brokers, bars run sideways (one row of text per broker)

_LEADERS, _FOLLOWERS, _AFTER = "#1f77b4", "#aec7e8", "#ff7f0e"


class Chart:
    """A matplotlib figure shown as a PNG: the same picture in JupyterLab, inside the Apply
    button's output, in the executed notebook and in its offline HTML."""

    def __init__(self, figure):
        self.figure = figure

    def png(self) -> bytes:
        buf = io.BytesIO()
        # No "Software" stamp: the same chart gives the same bytes.
        self.figure.savefig(buf, format="png", dpi=CHART_DPI, bbox_inches="tight", metadata={"Software": None})
        return buf.getvalue()

    def _repr_png_(self) -> bytes:
        return self.png()

    def save(self, path: str) -> str:
        with open(path, "wb") as fh:
            fh.write(self.png())
        return path


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _broker_labels(brokers: list) -> list[str]:
    return [f"{b.rack or '-'}/{b.id}{'' if b.alive else ' (dead)'}" for b in brokers]


def _panels(n_brokers: int, n_panels: int):
    """A figure and its axes sized for the brokers: columns of bars for a few dozen brokers,
    stacked; rows of bars (side by side) for more, so every broker keeps a readable label."""
    if n_brokers <= _WIDE:
        fig = _figure(min(max(6.5, 2.0 + 0.32 * n_brokers), 16.0), 3.4 * n_panels)
        return fig, list(fig.subplots(n_panels, 1, sharex=True, squeeze=False)[:, 0]), False
    fig = _figure(5.5 * n_panels + 1.5, min(max(6.0, 1.5 + 0.13 * n_brokers), 40.0))
    return fig, list(fig.subplots(1, n_panels, sharey=True, squeeze=False)[0, :]), True


def _label_brokers(ax, labels: list[str], sideways: bool) -> None:
    small = 6 if len(labels) > 80 else 7 if len(labels) > 20 else 9
    pos = range(len(labels))
    if sideways:
        ax.set_yticks(pos, labels, fontsize=small)
        ax.set_ylim(len(labels) - 0.5, -0.5)  # first broker at the top, as in the tables
        ax.tick_params(axis="x", labeltop=True, top=True)  # a tall chart: the scale at both ends
        ax.grid(axis="x", alpha=0.3)
    else:
        ax.set_xticks(pos, labels, rotation=90, fontsize=small)
        ax.set_xlim(-0.6, len(labels) - 0.4)
        ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def distribution_chart(cluster: Cluster, after: Cluster | None = None, title: str = "Replicas per broker"):
    """Leaders and followers per broker (labelled rack/broker, so racks sit together), and
    beside or below it the same after the plan."""
    brokers = by_rack(cluster)
    labels = _broker_labels(brokers)
    now, later = per_broker(cluster, after)
    first = "now" if later is not None or title == "Replicas per broker" else ""
    panels = [(first, now)] + ([("after the plan", later)] if later is not None else [])
    fig, axes, sideways = _panels(len(brokers), len(panels))
    for ax, (when, figs) in zip(axes, panels):
        lead = [figs.get(b.id, {}).get("leaders", 0) for b in brokers]
        follow = [figs.get(b.id, {}).get("followers", 0) for b in brokers]
        pos = list(range(len(brokers)))
        draw = ax.barh if sideways else ax.bar
        draw(pos, lead, 0.8, color=_LEADERS, label="leaders")
        draw(pos, follow, 0.8, lead, color=_FOLLOWERS, label="followers")
        _label_brokers(ax, labels, sideways)
        ax.set_title(f"{title}: {when}" if when else title, fontsize=11)
        (ax.set_xlabel if sideways else ax.set_ylabel)("replicas (count)")
    (axes[0].set_ylabel if sideways else axes[-1].set_xlabel)("rack/broker")
    axes[-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return Chart(fig)


def storage_chart(cluster: Cluster, after: Cluster | None = None):
    """Free storage per live broker (GB), now and after the plan, side by side."""
    _, later = per_broker(cluster, after)
    brokers = [b for b in by_rack(cluster) if b.alive and b.storage_free is not None]
    if not brokers:
        return "no broker reports its free storage"
    labels = _broker_labels(brokers)
    fig, (ax,), sideways = _panels(len(brokers), 1)
    series = [("now", [b.storage_free / 1e9 for b in brokers], "#7f7f7f")]
    if later is not None:
        series.append(("after the plan", [(later.get(b.id, {}).get("storage_free") or 0) / 1e9 for b in brokers],
                       _AFTER))
    width = 0.8 / len(series)
    for i, (when, values, color) in enumerate(series):
        pos = [k - 0.4 + width * (i + 0.5) for k in range(len(brokers))]
        (ax.barh if sideways else ax.bar)(pos, values, width, color=color, label=when)
    _label_brokers(ax, labels, sideways)
    ax.set_title("Free storage per broker (GB)", fontsize=11)
    (ax.set_xlabel if sideways else ax.set_ylabel)("free storage (GB)")
    (ax.set_ylabel if sideways else ax.set_xlabel)("rack/broker")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return Chart(fig)


def throttle_chart(result: ChangeResult):
    """The auto-throttle's rate per broker and role over the run, on the cluster's clock (hours
    since apply), each rate held until the next decision; brokers with the same history share
    a line; the fail-safe (minimum) rate is marked."""
    from matplotlib.ticker import FuncFormatter

    curves, start, end, own = throttle_series(result)
    if not curves:
        return "no auto-throttle decisions yet"
    span = max((end - start).total_seconds(), 60.0)
    groups: dict[tuple, list] = {}
    for (b, role), pts in sorted(curves.items()):
        xs, ys = [], []
        for when, mb in sorted(pts, key=lambda p: p[0]):
            xs.append((when - start).total_seconds() / 3600)
            ys.append(mb if mb is not None else float("nan"))  # cleared: no throttle, no line
        if ys and ys[-1] == ys[-1]:  # still in force at the end: hold it there
            xs.append(span / 3600)
            ys.append(ys[-1])
        # brokers whose rates differ by less than 1 MB/s at every step share one line
        groups.setdefault((role, tuple(xs), tuple(round(y) if y == y else -1 for y in ys)), []).append((b, ys))
    fig = _figure(10.0, 4.2)
    ax = fig.subplots()
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
    for i, ((role, xs, _), members) in enumerate(sorted(groups.items(), key=lambda g: (g[0][0], g[1][0][0]))):
        ax.step(xs, members[0][1], where="post", color=palette[i % len(palette)],
                linewidth=1.8 if role == "leader" else 3.0, linestyle="-" if role == "leader" else ":",
                label=f"{role}: {brokers_text([b for b, _ in members], 6)}")
    floor = Settings().minimum / 1e6
    ax.axhline(floor, color="#c62828", linestyle="--", linewidth=1)
    ax.annotate(f"fail-safe / minimum {floor:.0f} MB/s", (0, floor), xytext=(4, 3), textcoords="offset points",
                color="#c62828", fontsize=8)
    ax.set_xlim(0, span / 3600)
    ax.set_ylim(bottom=0)
    short = span < 2 * 3600  # minutes and seconds for a short run, hours and minutes otherwise
    ax.xaxis.set_major_formatter(FuncFormatter(lambda h, _: ms(h * 3600) if short else hm(h * 3600)))
    clock = ("the auto-throttle's wall clock: it had no samples" if own else
             "the simulated cluster's clock" if result.clock == "simulated" else "wall clock")
    ax.set_xlabel(f"time since {'the first decision' if own else 'apply'} ({'m:ss' if short else 'h:mm'}, {clock})")
    ax.set_ylabel("replication throttle (MB/s)")
    ax.set_title("Replication throttle per broker (auto-throttle decisions)", fontsize=11)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8,
              title="role: brokers", title_fontsize=8)
    return Chart(fig)
