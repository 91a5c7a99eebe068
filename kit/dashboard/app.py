"""The dashboard page: widgets wired to the view functions, and the server that shows it.

`dashboard(...)` builds one session's page (a Panel layout; in a notebook it displays inline).
Widgets drive the distribution through `pn.bind`; the live parts (progress, throttle chart,
events, records) are refreshed from the shared poller by a periodic callback of the session's
own document, which streams one poll's new throttle rows into the session's charts
(`throttle_chart.LiveThrottleChart`) and patches the legends and tiles from the same poll;
a served page sends its next poll once the browser says it shows the last (`page_age`).
"""
from __future__ import annotations

import logging
import os
import re
import secrets
import socket
import time

import holoviews as hv
import pandas as pd
import panel as pn
import param
import tornado.routing
import tornado.web

from kit.cluster.backend import ClusterAddress
from kit.errors import BadInput
from kit.formats import load_plan, load_snapshot
from kit.dashboard import distribution, serverlog, tables, throttle_chart, tiles
from kit.dashboard.page_age import STALE_AFTER_S, PageAge
from kit.text import utc_label
from kit.dashboard.poller import shared_poller

NO_PLAN = "(no plan)"
# The distribution is re-drawn when the placement or the free storage moved, at most every
# REDRAW_EVERY wall seconds and never more than a quarter of the time: a re-draw of 150 brokers
# took 15 CPU s (measured, issue 39), holding the server's loop, and every tab's updates (the
# tiles, the charts) waited behind it: the page ran minutes late on a loaded machine.
REDRAW_EVERY = 30.0


def _plan_label(path: str) -> str:
    return os.path.basename(path)


def load_plans(paths, cluster) -> dict[str, list[dict]]:
    """Each plan file's moves, checked against the cluster (BadInput names the bad file)."""
    return {_plan_label(p): load_plan(p, cluster) for p in paths or []}


def dashboard(snapshot: str | None = None, cluster: ClusterAddress | None = None, plans=(),
              events: str | None = None, samples: str | None = None, records: str | None = None,
              interval: float = 2.0, records_url: str = "records/", metrics: str | None = None,
              cap_map: dict | None = None):
    """One session's dashboard page.

    Parameters
    ----------
    snapshot : str, optional
        Snapshot v1 file (the distribution; no live status).
    cluster : ClusterAddress, optional
        The live cluster (distribution, progress, throttles): its ZooKeeper or its brokers'
        Admin API; credentials never displayed.
    plans : sequence of str
        Plan files (Kafka reassignment JSON) for the plan picker.
    events, samples, records : str, optional
        Events log, broker samples folder, runbook records folder.
    interval : float
        Seconds between refreshes.
    records_url : str
        URL prefix the records folder is served under.
    metrics : str, optional
        `kit metrics --follow`'s folder: its ``broker_rates.json`` is measured traffic for the
        brokers the samples do not describe.
    cap_map : dict, optional
        NIC capacity (bytes/s) by instance type (``"*"``: any other), a bound on the copy rate.

    Returns
    -------
    Dashboard or panel.pane.Markdown
        The page (a `Viewer`), or a one-line pane saying why there is none.
    """
    hv.extension("bokeh", logo=False)
    poller = shared_poller(cluster, events, samples, records, interval, metrics, cap_map)
    base = load_snapshot(snapshot) if snapshot else None
    first = base if base is not None else poller.state.cluster
    if first is None:
        return pn.pane.Markdown(f"**No cluster:** {poller.state.error or 'nothing read yet'}")
    zk, bootstrap = (cluster.zk, cluster.bootstrap) if cluster is not None else (None, None)
    source = (f"ZooKeeper {zk.split('@')[-1]}" if zk else bootstrap_label(bootstrap) if bootstrap
              else f"snapshot {os.path.basename(snapshot or '')}")
    page = Dashboard(poller, base, first, load_plans(plans, first), source, records_url)
    page.refresh()
    pn.state.add_periodic_callback(page.tick, period=int(interval * 1000))
    if page.context is not None:
        TABS.page(pn.state.curdoc)
    return page


def bootstrap_label(bootstrap: str) -> str:
    """The header's name for a cluster reached through the Admin API: the first bootstrap
    address and how many more (a KRaft cluster's list can be as long as its brokers)."""
    hosts = [h.strip() for h in bootstrap.split(",") if h.strip()]
    more = f" (+{len(hosts) - 1} more)" if len(hosts) > 1 else ""
    return f"Kafka Admin API {hosts[0] if hosts else bootstrap}{more}"


class DistributionControls(pn.viewable.Viewer):
    """The distribution's controls (design.md: plan picker, before/after, sort, rack filter,
    broker search, topic regex), their state as params: widgets made from them show it, and
    what is bound to them follows it.

    Parameters
    ----------
    plans : sequence of str
        The plan picker's labels (the first is picked).
    racks : sequence of str
        The rack filter's choices.
    """

    plan = param.Selector(default=NO_PLAN, objects=[NO_PLAN])
    which = param.Selector(default="after", objects=["after", "before"])
    sort_by = param.Selector(default="broker id", objects=list(distribution.SORT_KEYS))
    racks = param.ListSelector(default=[], objects=[])
    search = param.String(default="")
    topics = param.String(default="")

    def __init__(self, plans, racks, **params):
        super().__init__(**params)
        self.param.plan.objects = [NO_PLAN, *plans]
        self.param.racks.objects = list(racks)
        if plans:
            self.plan = list(plans)[0]

    def __panel__(self):
        """One row of controls above the charts: the racks get the screen's full width."""
        return pn.Row(
            pn.widgets.Select.from_param(self.param.plan, name="Plan", width=220),
            pn.Column(pn.pane.Markdown("Show", margin=(0, 10)),
                      pn.widgets.RadioButtonGroup.from_param(self.param.which, name="Show", button_type="primary",
                                                             width=140)),
            pn.widgets.Select.from_param(self.param.sort_by, name="Sort brokers (within each rack) by", width=220),
            pn.widgets.MultiChoice.from_param(self.param.racks, name="Racks (empty: all)", width=220),
            pn.widgets.TextInput.from_param(self.param.search, name="Broker search",
                                            placeholder="1001, 1010-1020, 10…", width=220),
            pn.widgets.TextInput.from_param(self.param.topics, name="Topic regex", placeholder="e.g. ^payments\\.",
                                            width=220),
            sizing_mode="stretch_width")


class ThrottleCharts(pn.viewable.Viewer):
    """The live throttle charts, leaders out and followers in, with their legends: this
    session's `throttle_chart.LiveThrottleChart` per role, fed the shared poller's rows.

    Parameters
    ----------
    brokers : iterable of int
        The cluster's broker ids, which the broker search picks among.
    """

    search = param.String(default="", doc="The broker search (the distribution's), which filters the charts too.")

    def __init__(self, brokers, **params):
        super().__init__(**params)
        self.brokers = sorted(brokers)
        self.charts = {role: throttle_chart.LiveThrottleChart(role) for role in ("leader", "follower")}
        # Created once and patched (`object`): swapping whole panes every tick makes the browser
        # rebuild them, and a busy page then stops showing the updates.
        self.legends = {role: pn.pane.HTML("", sizing_mode="stretch_width") for role in ("leader", "follower")}
        self.when: str | None = None  # the time of the poll the charts end at

    def searched(self, search: str) -> set[int] | None:
        """The broker ids the search names, None without a search."""
        if not search:
            return None
        ids = distribution.select_brokers(pd.DataFrame({"broker": self.brokers, "label": [str(b) for b in self.brokers],
                                                        "rack": ""}), None, search)["broker"]
        return set(ids.tolist())

    @param.depends("search", watch=True)
    def _follow_search(self):
        ids = self.searched(self.search)
        for chart in self.charts.values():
            chart.search(ids)
        self.relabel()

    def add(self, rows: list, when: str | None = None) -> None:
        """New throttle rows (`throttle_chart.THROTTLE_COLUMNS`, oldest first) into the charts:
        streamed, each chart sends the new points only; `when`, the time of the poll they end at."""
        for chart in self.charts.values():
            chart.add(rows)
        if when is not None:
            self.when = when

    def newest_time(self):
        """The time of the newest poll the charts draw (numpy datetime64), None before any."""
        times = [c.newest_time for c in self.charts.values() if c.newest_time is not None]
        return max(times) if times else None

    def relabel(self) -> None:
        """The legends, from the rows the charts hold now."""
        for role, box in self.legends.items():
            text = self.charts[role].legend(self.when)
            if box.object != text:
                box.object = text

    def __panel__(self):
        # Each chart has a y range of its own: the sources' (their tx, ~60 MB/s) would otherwise
        # hide the destinations' measured rx (client traffic plus the copy, ~120 MB/s).
        return pn.Row(*(pn.Column(pn.pane.Bokeh(self.charts[role].figure, sizing_mode="stretch_width"),
                                  self.legends[role], sizing_mode="stretch_width")
                        for role in ("leader", "follower")), sizing_mode="stretch_width")


class LiveTiles(pn.viewable.Viewer):
    """The progress tiles, and the events and records tables, patched from the poller's state.

    Parameters
    ----------
    source, records_url : str
        Where the figures come from (no credentials); the URL prefix of the records folder.
    """

    def __init__(self, source: str, records_url: str, **params):
        super().__init__(**params)
        self.source, self.records_url = source, records_url
        # Created once and patched (`object`), as the legends are.
        self.progress = pn.pane.HTML("", sizing_mode="stretch_width")
        self.events = pn.pane.HTML("", sizing_mode="stretch_width", styles={"overflow-y": "auto", "max-height": "360px"})
        self.records = pn.pane.HTML("", sizing_mode="stretch_width", styles={"overflow-y": "auto", "max-height": "360px"})

    def show(self, st) -> None:
        """Patch the tiles and tables with the poller's state `st`."""
        shown = tiles.progress_view(st.status, tiles.eta(st.progress, st.history),
                                    updated=utc_label(st.updated) if st.updated else None, error=st.error,
                                    source=self.source, copy_basis=st.copy_basis, detail=st.progress,
                                    loop=st.throttle_loop, clock_source=st.clock_source, pace=st.pace,
                                    as_of=st.clock)
        for box, pane in ((self.progress, shown), (self.events, tables.events_view(list(st.events))),
                          (self.records, tables.records_view(list(st.records), self.records_url))):
            if box.object != pane.object:
                box.object = pane.object

    def event_tables(self) -> pn.Row:
        """The events and records side by side (the tiles go at the top of the page)."""
        return pn.Row(pn.Column(pn.pane.Markdown("### Events (newest first)", margin=(0, 10)), self.events,
                                sizing_mode="stretch_width"),
                      pn.Column(pn.pane.Markdown("### Runbook records", margin=(0, 10)), self.records,
                                sizing_mode="stretch_width"),
                      sizing_mode="stretch_width")

    def __panel__(self):
        return self.progress


class Dashboard(pn.viewable.Viewer):
    """One session's page, composed of its parts: the distribution's controls, the live throttle
    charts and the live tiles, which the periodic `refresh` patches from the shared poller in
    one go (a Panel `Viewer`: display it, or `pn.panel(page)`, to get the layout).

    Parameters
    ----------
    poller : kit.dashboard.poller.Poller
        The shared poller (live status; the cluster too when `base` is None).
    base : Cluster or None
        The snapshot's cluster, or None to follow the poller's.
    first : Cluster
        The cluster as the page is built: its racks and brokers for the filters.
    plan_moves : dict
        Plan label -> its moves, for the plan picker.
    source, records_url : str
        Where the figures come from (no credentials); the URL prefix of the records folder.
    """

    # Moved forward by `refresh` when the poller read a new cluster or new free storage; the
    # distribution is bound to them, so it re-renders then and only then.
    cluster_version = param.Integer(default=0)
    storage_version = param.Integer(default=0)

    def __init__(self, poller, base, first, plan_moves: dict[str, list[dict]], source: str, records_url: str):
        super().__init__()
        self.poller, self.base, self.first, self.plan_moves = poller, base, first, plan_moves
        self.source = source
        self.controls = DistributionControls(list(plan_moves),
                                             sorted({b.rack or distribution.NO_RACK for b in first.brokers.values()}))
        self.charts = ThrottleCharts(first.brokers)
        self.controls.param.watch(lambda e: setattr(self.charts, "search", e.new), "search")
        self.live = LiveTiles(source, records_url)
        self.frames: dict = {}
        self.last_view: dict = {}
        self.seen = {"rows": 0, "version": -1}
        # The Bokeh server session's context of this page (None in a notebook); its session is
        # set once the page is built, and counts the browser tabs connected to it.
        self.context = getattr(pn.state.curdoc, "session_context", None)
        # The age of the figures shown, counted in the browser; in a served page the next poll
        # waits for the browser's word that it showed the last (issue 39: a loaded browser
        # worked through minutes of queued polls).
        self.age = PageAge(stale=max(STALE_AFTER_S, 5 * float(poller.interval)))
        self.await_browser = self.context is not None
        self.redrawn: tuple[float, float] | None = None  # (wall s, seconds it took) of the last re-draw

    def connected(self) -> bool:
        """Whether a browser tab shows this page now (always, outside a server)."""
        if self.context is None:
            return True
        session = self.context.session
        return session is not None and not session.destroyed and session.connection_count > 0

    def tick(self):
        """The periodic refresh, for a page a tab shows: a closed tab's session lingers (Bokeh's
        client may reconnect to it), and patching its document would queue writes to its
        closed socket, which fail in the server's log."""
        if self.connected():
            self.refresh()

    def cluster(self):
        return self.base if self.base is not None else self.poller.state.cluster

    # -- the broker distribution

    def frame_for(self, plan, topics, version, storage_version):
        key = (plan, topics, version, storage_version)
        if key not in self.frames:
            # Free storage from the newest samples where they give it (else the metrics znode's).
            c = distribution.with_free_storage(self.cluster(), self.poller.state.storage)
            after = c.assignment_after(self.plan_moves.get(plan)) if plan != NO_PLAN else None
            self.frames.clear()  # one frame per session is enough; widgets change one thing at a time
            self.frames[key] = distribution.broker_frame(c, after, topics or None)
        return self.frames[key]

    def distribution(self, plan, which, sort_by, racks_sel, search, topics, version, storage_version):
        try:
            frame = self.frame_for(plan, topics, version, storage_version)
        except re.error as e:
            # A regex being typed is often invalid for a keystroke or two: the last view stays.
            last_view = self.last_view
            error = pn.pane.Alert(f"Topic regex /{topics}/ is not valid ({e}); showing the last valid view"
                                  + (f" (/{last_view['topics']}/)" if last_view.get("topics") else "") + ".",
                                  alert_type="danger", margin=(0, 10), css_classes=["kit-regex-error"])
            return pn.Column(error, last_view["view"], sizing_mode="stretch_width") if "view" in last_view \
                else error
        has_plan = plan != NO_PLAN
        n = len(frame)
        head = (f"### Broker distribution · {n} brokers · "
                f"{'plan ' + plan + ' (' + which + ')' if has_plan else 'current placement'}"
                + (f" · topics /{topics}/" if topics else ""))
        note = ("Bars: leaders (dark) + followers (light); free storage (red under 10%); degree. "
                + ("Black dash: the other side of the plan. " if has_plan else "")
                + "Hover a bar for the exact figures.")
        state = self.poller.state
        free = (f" Free storage from the broker samples of {utc_label(state.clock)} (their clock)."
                if state.storage and state.clock else "")
        if self.base is None and state.updated:
            free += (f" Placement as read by the poll of {utc_label(state.updated)} (wall clock); re-drawn when it "
                     f"changes, at most every {REDRAW_EVERY:.0f} s.")
        view = pn.Column(pn.pane.Markdown(head + "\n\n" + note + free, margin=(0, 10)),
                         distribution.distribution_view(frame, which if has_plan else "before", sort_by, racks_sel,
                                                 search, show_before=has_plan),
                         sizing_mode="stretch_width")
        self.last_view.update(view=view, topics=topics)
        return view

    def refresh(self):
        try:
            self._refresh()
        except Exception:  # noqa: BLE001  (one bad read must not stop the page's updates)
            logging.getLogger("kit.dashboard").exception("refresh failed")

    def _refresh(self):
        """One poll's State into the charts, legends and tiles together: the rows streamed into
        the charts are that State's (`rows_since` up to its ``rows``), never a later poll's the
        tiles have not read, and the page gets all of it as one change (`pn.io.hold`); then the
        distribution, re-drawn when due (`redraw_due`)."""
        poller, seen = self.poller, self.seen
        st = poller.state
        if st.version == seen["version"]:
            return
        now = time.time()
        if self.await_browser and self.age.waiting(now):
            return  # the browser has not shown the last poll yet: the newest goes once it has
        seen["version"] = st.version
        rows, seen["rows"] = poller.rows_since(seen["rows"], st.rows)
        with pn.io.hold():
            self.charts.add(rows, utc_label(st.updated) if st.updated else None)
            self.charts.relabel()
            self.live.show(st)
            self.age.send(st.updated, now)
        # After the live parts went out: a re-draw of the distribution takes seconds.
        moved = {}
        if self.base is None and st.cluster_version != self.cluster_version and st.cluster is not None:
            moved["cluster_version"] = st.cluster_version
        if st.storage_version != self.storage_version:
            moved["storage_version"] = st.storage_version
        if moved and self.redraw_due(now):
            began = time.monotonic()
            self.param.update(**moved)  # both at once: one re-draw, not one per version
            self.redrawn = (now, time.monotonic() - began)

    def redraw_due(self, now: float) -> bool:
        """Whether the distribution may be re-drawn at wall time `now` (see REDRAW_EVERY); a
        re-draw put off shows the newest placement and storage when it comes."""
        if self.redrawn is None:
            return True
        at, took = self.redrawn
        return now - at >= max(REDRAW_EVERY, 4 * took)

    # -- the page

    def __panel__(self):
        """The page's layout (Panel calls this to display the Viewer)."""
        c = self.controls
        dist = pn.bind(self.distribution, c.param.plan, c.param.which, c.param.sort_by, c.param.racks, c.param.search,
                       c.param.topics, self.param.cluster_version, self.param.storage_version)
        return pn.Column(
            pn.pane.Markdown(f"## kit · Kafka operations · {self.source}", margin=(0, 10)),
            self.live,
            self.age,
            pn.pane.Markdown("### Replication throttles (live; solid: measured, dashed: throttle, dot: current "
                             "throttle, label: broker id; only brokers sending or receiving in the running "
                             "reassignment)", margin=(0, 10)),
            self.charts,
            pn.pane.Markdown("Broker search also filters the throttle chart.", margin=(0, 10),
                             styles={"font-size": "11px", "color": "#666"}),
            c,
            dist,
            self.live.event_tables(),
            sizing_mode="stretch_width")


# --------------------------------------------------------------------------- server


# The server's browser tabs: one line when one closes (issue 39).
TABS = serverlog.Tabs()


def _records_handler(folder: str, auth: bool):
    """A static handler for the records folder that asks for the login when the page does."""
    class RecordsHandler(tornado.web.StaticFileHandler):
        def prepare(self):
            # Bokeh's basic-auth login sets this signed cookie; static routes do not check it themselves.
            if auth and not self.get_secure_cookie("user"):
                raise tornado.web.HTTPError(403)

    return (r"/records/(.*)", RecordsHandler, {"path": folder})


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def served_hosts(address: str, port: int) -> list[str] | None:
    """The `Host` headers (and websocket origins) the dashboard answers: on a loopback address,
    the loopback names with the port; None (any) where it listens on another address, whose
    names kit cannot know. A page on another site that a rebound DNS name points at loopback
    sends its own name, and is refused: it cannot read the page or the incident records."""
    if address not in LOOPBACK:
        return None
    return [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"]


class _HostNotServed(tornado.routing.Matcher):
    """Matches a request whose `Host` is none of the served ones."""

    def __init__(self, hosts: list[str]):
        self.hosts = {h.lower() for h in hosts}

    def match(self, request):
        return None if request.host.lower() in self.hosts else {}


class _ForeignHost(tornado.web.RequestHandler):
    def prepare(self):
        raise tornado.web.HTTPError(403, reason="Host not served")

    def log_exception(self, typ, value, tb):
        # A refused foreign Host is the check working: one access-log line, no traceback.
        pass


def serve(port: int = 5006, address: str = "127.0.0.1", basic_auth: tuple[str, str] | None = None,
          records: str | None = None, start: bool = True, reconnect_grace: float = 15.0, **page):
    """Serve the dashboard; one poller is shared by every session.

    Parameters
    ----------
    port, address : int, str
        Where to listen (loopback unless told otherwise); port 0 takes a free port (`Server.port`).
    basic_auth : (str, str), optional
        USER and PASSWORD for Panel's login page. Never printed, never sent to the page.
    records : str, optional
        The records folder (served under /records/ behind the same login).
    start : bool
        Run the server's loop (blocks until interrupted).
    reconnect_grace : float
        Seconds a page's session is kept once its tab's connection dropped (Bokeh's unused
        session lifetime): a reconnect within it finds the page; then the page ends and the
        server says "a tab closed".
    **page
        `dashboard`'s arguments.

    Returns
    -------
    bokeh.server.server.Server
    """
    try:
        with socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET) as s:
            s.bind((address, port))
            port = s.getsockname()[1]  # port 0: the free port the system chose, served from here on
    except OSError as e:
        raise BadInput(f"--address {address} --port {port}: cannot listen there ({e.strerror or e})") from None
    shared_poller(page.get("cluster"), page.get("events"), page.get("samples"), records, page.get("interval", 2.0),
                  page.get("metrics"), page.get("cap_map"))
    extra = [_records_handler(os.path.abspath(records), bool(basic_auth))] if records else []
    hosts = served_hosts(address, port)
    kwargs = {}
    if basic_auth:
        kwargs = {"basic_auth": {basic_auth[0]: basic_auth[1]}, "cookie_secret": secrets.token_hex(32)}
    server = pn.serve({"/": lambda: dashboard(records=records, **page)}, port=port, address=address,
                      # Bokeh's origin list takes no bracketed IPv6 address
                      websocket_origin=[h for h in hosts if not h.startswith("[")] if hosts else ["*"], show=False, start=False, title="kit dashboard",
                      verbose=False, extra_patterns=extra,
                      # A closed tab's session is dropped within a third more than the grace after it
                      # closed (Bokeh's default checks every 17 s): its client's reconnects, seconds
                      # apart, still find it.
                      unused_session_lifetime_milliseconds=round(reconnect_grace * 1000),
                      check_unused_sessions_milliseconds=max(100, min(5000, round(reconnect_grace * 1000 / 3))),
                      **kwargs)
    serverlog.quiet(server, TABS)
    if hosts:
        # Ahead of every route (the page, the websocket, /records/): Bokeh checks a websocket's
        # Origin but no request's Host. Bokeh's Server keeps its tornado Application in `_tornado`.
        server._tornado.default_router.rules.insert(0, tornado.routing.Rule(_HostNotServed(hosts), _ForeignHost))
    if start:
        server.start()
        server.io_loop.start()
    return server
