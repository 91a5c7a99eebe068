"""The progress tiles: the reassignment's share done and ETA, the cluster's state, the
auto-throttle's state. Plain dicts in, a Panel HTML pane out: no I/O, no threads.
"""
from __future__ import annotations

import html

import panel as pn

from kit.dashboard.style import OK, TROUBLE
from kit.text import human_duration, utc_label

__all__ = ["eta", "wall_eta", "ETA_WINDOW_S", "progress_view", "loop_tile"]

# Cluster seconds the ETA's copy rate is measured over (bytes copied over that much of the
# cluster's clock), and the least of it the measure needs before it is used: a minute or two of
# a copy paced by throttles set every few minutes says little.
ETA_WINDOW_S = 600.0
ETA_MIN_SPAN_S = 150.0


def eta(progress: dict | None, history=(), window: float = ETA_WINDOW_S, min_span: float = ETA_MIN_SPAN_S) -> dict:
    """Share done and time left of the running reassignment, on the cluster's clock.

    Parameters
    ----------
    progress : dict or None
        The poller's progress: ``total`` and ``copied`` bytes of the running reassignment (every
        replica it adds, counted from when it was first seen), ``rate``: the copy rate the
        throttles allow now (bytes/s per second of the cluster's clock; see
        `kit.dashboard.ledger.copy_bound`), None when unknown, and ``physics_s``: the seconds
        left by the duration estimate's physics at the throttles now
        (`kit.report.copies.time_left_now`), None or absent when the bytes left per copy are
        not known (``physics_why`` says why), ``physics_grouped`` how it follows the copies
        (`kit.report.estimate.in_groups`).
    history : sequence of tuple
        ``(cluster seconds, bytes copied, ...)`` observations of this reassignment, oldest first.
    window : float
        Cluster seconds of history the copy rate is measured over (bytes copied over that time).
    min_span : float
        Cluster seconds of history the measure needs; with less, the rate the throttles allow
        now stands in, as it does when it is the lower.

    Returns
    -------
    dict
        ``left`` (bytes to copy still), ``done_fraction`` (copied / to copy), ``seconds`` (ETA in
        cluster seconds; None when unknown, 0 when nothing is left), ``rate`` (bytes/s: left /
        seconds with the physics, else the one rate the ETA assumes), ``basis`` (``"physics"``:
        `physics_s`, per broker at the throttles now; without it, ``"bytes copied"``: measured
        over ``window`` cluster seconds, the span of history it used, or ``"copy rate within
        throttles"``: the rate allowed now, when there is no such measure or it is lower,
        ``window`` None; None while unknown), ``measured`` and ``measured_window`` (the bytes
        copied over the window, bytes/s, and its span: the physics' cross-check, None without
        it), ``fallback`` (why the physics was not used, "" when it was), ``grouped`` (with the
        physics: how it follows the copies, "" one by one).
        All None without progress.
    """
    if not progress:
        return {"rate": None, "seconds": None, "done_fraction": None, "left": None, "basis": None, "window": None,
                "measured": None, "measured_window": None, "fallback": ""}
    total, copied = float(progress["total"]), float(progress["copied"])
    left = max(0.0, total - copied)
    measured, span = None, None
    if history:
        t1 = history[-1][0]
        recent = [h for h in history if h[0] >= t1 - window]
        first, last = recent[0], recent[-1]
        if last[0] - first[0] >= min_span and last[1] > first[1]:
            measured, span = (last[1] - first[1]) / (last[0] - first[0]), last[0] - first[0]
    done = copied / total if total else None
    physics = progress.get("physics_s")
    if physics is not None:
        # The estimate's physics per broker: the copy rate falls as brokers finish and the last
        # copies of the busiest ones go on alone, which one rate for the whole copy cannot say.
        return {"rate": left / physics if physics else None, "seconds": 0.0 if left == 0 else physics, "left": left,
                "done_fraction": done, "basis": "physics", "window": None, "measured": measured,
                "measured_window": span, "fallback": "", "grouped": progress.get("physics_grouped") or ""}
    rate, basis = (measured, "bytes copied") if measured is not None else (None, None)
    allowed = float(progress["rate"]) if progress.get("rate") else None
    # Never above what the throttles allow now: when they come down (the fail-safe, a loop that
    # stopped), the bytes copied over the window would say so only minutes later.
    if allowed is not None and (rate is None or allowed < rate):
        rate, basis, span = allowed, "copy rate within throttles", None
    seconds = 0.0 if left == 0 else (left / rate if rate else None)
    return {"rate": rate, "seconds": seconds, "left": left, "done_fraction": done, "basis": basis, "window": span,
            "measured": None, "measured_window": None, "fallback": progress.get("physics_why") or ""}


def wall_eta(seconds: float | None, pace: dict | None, as_of: float | None = None) -> tuple[float | None, str]:
    """The wall-clock time left on a simulated cluster, and what it assumes.

    Parameters
    ----------
    seconds : float or None
        The ETA in simulated seconds (`eta`'s).
    pace : dict or None
        `kit.dashboard.readers.sim_pace`'s dict: the controller's ``speed`` and its clock's
        ``pace`` over ``window_s`` wall seconds (the simulator's own figures, not measured here),
        and its time ``now``.
    as_of : float, optional
        The cluster's time `seconds` is counted from (the newest sample's): the clock is already
        ``now - as_of`` simulated seconds further, which the wall time left does not wait for.

    Returns
    -------
    (float or None, str)
        Wall seconds (simulated seconds left / the clock's pace; / its ``--speed`` while the
        pace is not known yet, the least it can take then) and the words saying so; (None, "")
        without a simulated clock or an ETA.
    """
    if not pace or not seconds:
        return None, ""
    if as_of is not None and pace.get("now") is not None:
        seconds = max(0.0, seconds - max(0.0, pace["now"] - as_of))
    speed = pace.get("speed")
    named = f"--speed {speed:g}" if speed else "--speed unknown"
    if pace.get("pace"):
        return seconds / pace["pace"], (f"at ×{pace['pace']:.0f}, the simulated clock's pace over its last "
                                        f"{human_duration(pace.get('window_s') or 0)} of wall time ({named})")
    if speed:
        return seconds / speed, f"at least: at ×{speed:g} ({named}; the clock's own pace not known yet)"
    return None, ""


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
                  pace: dict | None = None, as_of: float | None = None) -> pn.pane.HTML:
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
    pace : dict, optional
        A simulated cluster's `kit.dashboard.readers.sim_pace` (its ``--speed`` and its clock's
        pace), for the wall-clock ETA beside the simulated one (`wall_eta`).
    as_of : float, optional
        The cluster's time (epoch seconds) the figures are of: the newest sample's.
    """
    progress, detail = progress or {}, detail or {}
    if status is None:
        tiles = [_tile("reassignment", "no live source", note="snapshot file: distribution only")]
    else:
        tiles = _status_tiles(status, progress, copy_basis, detail, clock_source, pace, as_of)
    if loop is not None:
        tiles.append(loop_tile(loop))
    foot = f"{html.escape(source)} · read {html.escape(updated or 'never')}"
    if error:
        foot += f' · <b style="color:{TROUBLE}">last read failed: {html.escape(error)}</b>'
    return pn.pane.HTML(f'<div style="display:flex;flex-wrap:wrap">{"".join(tiles)}</div>'
                        f'<div style="font-size:11px;color:#666">{foot}</div>', sizing_mode="stretch_width")


def _status_tiles(status: dict, progress: dict, copy_basis: str | None, detail: dict, clock_source: str,
                  pace: dict | None, as_of: float | None) -> list[str]:
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
        # What the ETA assumes, said on the tile: the rate, what it was measured over, on which clock.
        allowed = (f"{_bytes(detail['rate'])}/s " if detail.get("rate") else "") + (
            f"({copy_basis}" + (f"; {bounds}" if bounds else "") + ")" if copy_basis else "")
        if progress.get("basis") == "physics":
            n = detail.get("pending")
            pending = f"{n} cop{'y' if n == 1 else 'ies'}" if n is not None else "the copies"
            grouped = f", {progress['grouped']}" if progress.get("grouped") else ""
            eta_note = (f"at the throttles now, per broker, as the estimate models: {pending} from "
                        f"{'its' if n == 1 else 'their'} bytes left "
                        f"in the replica samples{grouped}, {_bytes(rate)}/s on average; {clock}")
            if progress.get("measured"):
                eta_note += (f"; bytes copied over the last {human_duration(progress['measured_window'])}: "
                             f"{_bytes(progress['measured'])}/s")
            if allowed.strip():
                eta_note += f"; allowed now {allowed}"
        elif progress.get("basis") == "bytes copied":
            eta_note = (f"at {_bytes(rate)}/s: bytes copied over the last {human_duration(progress['window'])} of "
                        f"the {clock}" + (f"; allowed now {allowed}" if allowed.strip() else ""))
        else:
            eta_note = f"at {_bytes(rate)}/s ({copy_basis or progress.get('basis')}" + (
                f"; {bounds}" if bounds else "") + f"): the rate the throttles allow now; {clock}"
        if progress.get("fallback"):
            eta_note += f" (not per broker: {progress['fallback']})"
        wall, why = wall_eta(progress.get("seconds"), pace if clock_source == "samples" else None, as_of)
        if wall is not None:
            eta_note += f"; ≈ {human_duration(wall)} wall {why}"
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
