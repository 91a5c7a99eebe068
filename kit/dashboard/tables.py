"""The events log and the runbook records as HTML tables. Plain lists in, Panel panes out."""
from __future__ import annotations

import html

import pandas as pd
import panel as pn

from kit.dashboard.style import OK, TROUBLE

__all__ = ["events_frame", "events_view", "records_view"]

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
        As `kit.dashboard.readers.read_records` returns them (``runbook, started, finished,
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
