"""The progress tiles: the reassignment's share done and ETA, the cluster's state, the
auto-throttle's state. Plain dicts in, a Panel HTML pane out: no I/O, no threads.
"""
from __future__ import annotations

import html

import panel as pn

from kit.dashboard.style import OK, TROUBLE
from kit.text import human_duration, utc_label

__all__ = ["eta", "clock_speed", "progress_view", "loop_tile"]

def eta(progress: dict | None, history=(), window: float = 600.0) -> dict:
    """Share done and time left of the running reassignment, on the cluster's clock.

    Parameters
    ----------
    progress : dict or None
        The poller's progress: ``total`` and ``copied`` bytes of the running reassignment (every
        replica it adds, counted from when it was first seen), and ``rate``: the copy rate the
        throttles allow (bytes/s per second of the cluster's clock; see
        `kit.dashboard.ledger.copy_bound`), None when unknown.
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


def progress_view(status: dict | None, progress: dict | None = None, *, updated: str | None = None,
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
        `kit.dashboard.loop_health.throttle_health`'s dict; stale or stopped is a red tile.
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
