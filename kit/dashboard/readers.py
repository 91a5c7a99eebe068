"""The dashboard's file readers: runbook records, the events log's tail, the broker and replica samples.

Each reads what another process writes (`kit run`'s records, `kit throttle run`'s events,
`kit sim run --samples`' files) and copes with a file being written, renamed or rotated
meanwhile; `kit.dashboard.poller` calls them from its thread.
"""
from __future__ import annotations

import glob
import json
import os
from collections import deque

from kit import clock_file
from kit.events import epoch
from kit.throttle.sources import JsonLinesFiles

EVENTS_KEPT = 500


def read_records(folder: str | None) -> list[dict]:
    """Runbook records (``<stem>.json`` beside ``<stem>.ipynb``/``.html``), newest first.

    Parameters
    ----------
    folder : str or None
        The records folder (`kit run`'s ``records/``).

    Returns
    -------
    list of dict
        Each record's JSON fields, plus ``html`` (a file name in the folder, or None when the
        HTML is not there) and ``stem``. A record whose JSON is missing, partial or not an object
        still lists (outcome unknown) when its notebook or HTML is there; order is by the stem,
        which starts with the UTC start time.
    """
    if not folder or not os.path.isdir(folder):
        return []
    stems = {os.path.splitext(os.path.basename(p))[0]
             for ext in ("json", "html", "ipynb") for p in glob.glob(os.path.join(folder, f"*.{ext}"))}
    out = []
    for stem in sorted(stems, reverse=True):
        doc: dict = {}
        try:
            with open(os.path.join(folder, stem + ".json"), encoding="utf-8") as fh:
                loaded = json.load(fh)
            doc = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            pass  # still being written, or never written: list what is there
        page = doc.get("html")
        name = os.path.basename(page) if isinstance(page, str) and page else stem + ".html"
        doc = {**doc, "stem": stem, "html": name if os.path.isfile(os.path.join(folder, name)) else None}
        if "runbook" not in doc:
            doc["runbook"] = stem.split("-", 1)[1] if "-" in stem else stem
        out.append(doc)
    return out


class EventTail:
    """The events log read incrementally: each `read` parses only the bytes added since the last.

    Parameters
    ----------
    path : str
        The events log (JSON lines, appended by `kit throttle run` / `kit doctor`).
    keep : int
        Newest events kept.

    Notes
    -----
    The byte offset read so far is remembered. A file that shrank (truncated), was replaced
    (another inode: rotated) or whose first bytes changed (rewritten in place) is read again
    from its start. A last line without its newline yet is kept back until it is complete.
    """

    HEAD = 256  # bytes compared to notice a file rewritten in place

    def __init__(self, path: str, keep: int = EVENTS_KEPT):
        self.path = path
        self.events: deque = deque(maxlen=keep)
        self.offset = 0
        self._ident: tuple | None = None
        self._head = b""
        self._partial = b""

    def _reset(self) -> None:
        self.events.clear()
        self.offset, self._head, self._partial = 0, b"", b""

    def read(self) -> tuple:
        """The newest events, newest first, after reading what was appended."""
        try:
            st = os.stat(self.path)
            with open(self.path, "rb") as fh:
                ident = (st.st_dev, st.st_ino)
                head = fh.read(min(self.HEAD, max(self.offset, 1)))
                if ident != self._ident or st.st_size < self.offset or head[:len(self._head)] != self._head:
                    self._reset()
                self._ident = ident
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            self._reset()
            self._ident = None
            return ()
        if data:
            if self.offset < self.HEAD:
                self._head = (self._head + data)[:self.HEAD]
            self.offset += len(data)
            lines = (self._partial + data).split(b"\n")
            self._partial = lines.pop()
            if self._partial and _event(self._partial) is not None:
                lines.append(self._partial)  # complete JSON, its newline not written (yet)
                self._partial = b""
            self.events.extend(e for e in map(_event, lines) if e is not None)
        return tuple(self.events)[::-1]


def _event(line: bytes) -> dict | None:
    try:
        e = json.loads(line)
    except ValueError:
        return None  # empty, or not an event
    return e if isinstance(e, dict) and "time" in e and "kind" in e else None


def samples_clock(folder: str | None, files: JsonLinesFiles | None = None) -> tuple[float | None, dict[int, dict]]:
    """The cluster's clock and each broker's newest sample, from `kit sim run --samples`' files.

    Parameters
    ----------
    folder : str or None
        The samples folder (its ``broker/*.jsonl``, issue 6's schema).
    files : JsonLinesFiles, optional
        The parsed files kept from an earlier call (the poller's): an unchanged file is not read again.

    Returns
    -------
    (float or None, dict)
        The newest sample's ``ts`` as epoch seconds (simulated time for the simulator: the
        cluster's own clock; None without samples), and ``{broker: its newest sample row}``.
    """
    if not folder:
        return None, {}
    sub = os.path.join(folder, "broker")
    # Files are named by their time: the newest few hold every broker's newest row.
    files = files if files is not None else JsonLinesFiles()
    paths = sorted(glob.glob(os.path.join(sub if os.path.isdir(sub) else folder, "*.jsonl")))[-4:]
    files.keep_only(paths)
    newest: dict[int, tuple[float, dict]] = {}
    for f in paths:
        try:
            rows = files.rows(f)
        except OSError:
            continue  # renamed away between glob and open
        for r in rows:
            try:
                ts, b = epoch(r["ts"]), int(r["broker"])
            except (ValueError, KeyError, TypeError):
                continue  # not a broker sample
            if b not in newest or ts >= newest[b][0]:
                newest[b] = (ts, r)
    if not newest:
        return None, {}
    return max(t for t, _ in newest.values()), {b: r for b, (_, r) in newest.items()}


def sim_pace(folder: str | None) -> dict | None:
    """How fast a simulated cluster's clock goes, as its controller publishes it
    (`kit.clock_file`: the dashboard does not import the simulator).

    Returns
    -------
    dict or None
        ``speed`` (the controller's ``--speed``), ``pace`` (simulated seconds per wall second
        over the clock's last ``window_s`` wall seconds, the waits for the auto-throttle's rounds
        included; None until it has gone on for some), ``window_s``, and ``now``: the clock's
        time in epoch seconds as the samples stamp theirs (the newest sample can be up to a
        sample's interval behind it), None when not published; None without a published
        clock (a cluster of yours, or an older simulator).
    """
    if not folder:
        return None
    doc = clock_file.read_now(folder)
    if doc is None or not isinstance(doc.get("sim_seconds"), (int, float)):
        return None

    def number(key):
        v = doc.get(key)
        return float(v) if isinstance(v, (int, float)) and v > 0 else None
    try:
        now = epoch(doc["time"])
    except (KeyError, TypeError, ValueError):
        now = None  # an older simulator's clock: no time as the samples stamp it
    return {"speed": number("speed"), "pace": number("pace"), "window_s": number("pace_window_s"), "now": now}
