"""What a runbook shows people, as text and tables: where the code runs (a kernel, a live
notebook), broker ids and durations as people write them, the situation's tables and the
auto-throttle's decisions. pandas and IPython are imported where they are used (heavy, and
only the notebooks need them).
"""
from __future__ import annotations

import os
import re

from kit.events import parse_time, read_events
from kit.model import Cluster
from kit.report import figures
from kit.runbook.processes import RUN_TAG
from kit.runbook.replay import ChangeResult, change_window
from kit.text import hm


def in_kernel() -> bool:
    """True in a Jupyter kernel (papermill's or a live notebook's): output can be displayed and
    updated in place there; elsewhere it is printed."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return getattr(get_ipython(), "kernel", None) is not None


def live_notebook() -> bool:
    """True in a kernel a Jupyter server started for a notebook (JupyterLab, Notebook): there
    someone may press Apply later. Under papermill (`kit run`) nobody will."""
    return bool(os.environ.get("JPY_SESSION_NAME")) and in_kernel()


def unwatched_run() -> bool:
    """True in a kernel `kit run` started (papermill, the run's tag in its environment, no
    Jupyter server): nobody sees its outputs as they change, only the notebook it saves."""
    return bool(os.environ.get(RUN_TAG)) and not live_notebook()


def displayable(shown):
    """Text as plain text output (as `print` shows it, not a quoted string); anything else as is."""
    if isinstance(shown, str):
        from IPython.display import Pretty

        return Pretty(shown)
    return shown


def brokers_text(ids, limit: int = 12) -> str:
    """Broker ids as people write them: '1001, 1002, 1004' ('…' and a count past `limit`)."""
    ids = list(ids or [])
    if len(ids) <= limit + 2:  # "… (9 brokers)" would hide fewer names than it costs
        return ", ".join(map(str, ids))
    return ", ".join(map(str, ids[:limit])) + f", … ({len(ids)} brokers)"


def per_broker(cluster: Cluster, after: Cluster | None = None) -> tuple[dict, dict | None]:
    """kit's per-broker figures (`figures.broker_figures`: leaders, followers, replicas, free
    storage) now, and after a plan when given; the live brokers are the targets."""
    targets = cluster.live_ids or sorted(cluster.brokers)
    now = figures.broker_figures(cluster, None, targets)
    return now, (figures.broker_figures(cluster, after.assignment(), targets) if after is not None else None)


def by_rack(cluster: Cluster) -> list:
    return sorted(cluster.brokers.values(), key=lambda b: (str(b.rack), b.id))


def broker_table(cluster: Cluster, after: Cluster | None = None):
    """One row per broker: rack, alive, replicas, leaders, free storage (and after a plan)."""
    import pandas as pd

    now, later = per_broker(cluster, after)
    rows = []
    for b in by_rack(cluster):
        f = now.get(b.id, {})
        row = {"broker": b.id, "rack": b.rack or "", "alive": "yes" if b.alive else "DEAD",
               "replicas": f.get("replicas", 0), "leaders": f.get("leaders", 0)}
        # A dead broker reports no storage: an empty cell, not NaN.
        row["free (GB)"] = f"{b.storage_free / 1e9:,.1f}" if b.storage_free is not None else ""
        if later is not None:
            row["replicas after"] = later.get(b.id, {}).get("replicas", 0)
            row["leaders after"] = later.get(b.id, {}).get("leaders", 0)
        rows.append(row)
    return pd.DataFrame(rows).set_index("broker")


def under_replicated_table(cluster: Cluster):
    """Under-replicated partitions: replicas, in-sync replicas, and which are missing and why."""
    import pandas as pd

    dead = {b.id for b in cluster.brokers.values() if not b.alive}
    rows = []
    for p in cluster.partitions:
        missing = [b for b in p.replicas if b not in p.isr]
        if missing:
            why = "replica on a dead broker" if all(b in dead for b in missing) else "follower lagging"
            rows.append({"partition": p.name, "replicas": brokers_text(p.replicas), "isr": brokers_text(p.isr),
                         "missing": brokers_text(missing), "reason": why})
    return pd.DataFrame(rows, columns=["partition", "replicas", "isr", "missing", "reason"])


def events_table(result: ChangeResult, limit: int = 30):
    """The auto-throttle's decisions, newest first, for people: time since apply (h:mm) on the
    cluster's clock, rates in MB/s, brokers as plain lists; one row for the same decision on
    several brokers; a decision that kept the rate says so."""
    import pandas as pd

    rows: list[dict] = []
    since = "since apply (h:mm)"
    events = read_events(result.events_path)
    start = None
    if events:
        start, _, _, own = change_window(events, result)
        if own:  # stamped by the loop's wall clock: say so rather than count from the cluster's apply
            since = "since apply (h:mm, wall clock)" if result.wall_span else "since the first decision (h:mm, wall clock)"
    for e in events:
        when = parse_time(e["time"])
        start = start or when
        old, new = e.get("old"), e.get("new")
        reason = e.get("reason") or ""
        for b in e.get("brokers") or []:
            reason = re.sub(rf"\bbroker {b}\b", "the broker", reason)
        # the same decision for several brokers (rates within 0.1 MB/s) is one row
        key = (e["time"], e["kind"], e.get("role") or "", None if old is None else round(old / 1e5),
               None if new is None else round(new / 1e5), reason)
        if rows and rows[-1]["key"] == key:
            rows[-1]["ids"] += list(e.get("brokers") or [])
            continue
        rows.append({"key": key, "ids": list(e.get("brokers") or []), "when": when, "e": e})
    out = []
    for r in reversed(rows[-limit:] if limit else rows):
        e, old, new = r["e"], r["e"].get("old"), r["e"].get("new")
        change = ""
        if new is not None:
            change = (f"{new / 1e6:,.1f} (unchanged)" if old is not None and abs(old - new) < 1e3
                      else f"{old / 1e6:,.1f} → {new / 1e6:,.1f}" if old is not None else f"{new / 1e6:,.1f}")
        out.append({since: hm((r["when"] - start).total_seconds()), "time (UTC)": e["time"],
                    "decision": e["kind"], "brokers": brokers_text(sorted(r["ids"])), "role": e.get("role") or "",
                    "throttle (MB/s)": change, "reason": r["key"][5]})
    cols = [since, "time (UTC)", "decision", "brokers", "role", "throttle (MB/s)", "reason"]
    # A Styler: every reason in full (a DataFrame's HTML cuts cells at 50 characters).
    return (pd.DataFrame(out, columns=cols).style.set_uuid("kit-events").hide(axis="index")
            .set_properties(**{"text-align": "left"})
            .set_properties(subset=[since, "time (UTC)", "throttle (MB/s)"], **{"white-space": "nowrap"})
            .set_caption(f"Auto-throttle decisions, newest first{f' (the last {limit})' if limit else ''}"))
