"""`kit dashboard`: the command-line face of `kit.dashboard` (parse, check, serve).

Everything that can be wrong with the input is checked before the server starts, so a bad
flag is one line on stderr and exit 2, never a half-started server or a traceback.
"""
# General flow:
# 1) add_parser declares `kit dashboard`.
# 2) The port, the interval, the login, the plans, the events log and the folders are
#    checked, and the cap map read (kit.throttle.sources.load_cap_map).
# 3) kit.dashboard.app is imported (Panel, HoloViews: the dashboard extra); missing, it is
#    one line and exit 2.
# 4) The cluster is read (through kit.cluster.backend, or a snapshot) and the plans loaded
#    against it, so a bad plan fails here rather than in the first browser tab.
# 5) kit.dashboard.app.serve builds the server; it serves until Ctrl-C.
from __future__ import annotations

import os
import sys

from kit.cli.lazy import lazy_module
from kit.cli.options import cluster_address, cluster_options, command, rate, whole
from kit.errors import BadInput

backends = lazy_module("kit.cluster.backend")  # imported when used: see kit.cli.lazy
throttle_sources = lazy_module("kit.throttle.sources")
formats = lazy_module("kit.formats")

EXAMPLE = ("KIT_DASHBOARD_AUTH=oncall:s3cret kit dashboard --zk 127.0.0.1:2181/kafka --plan plan.json "
           "--events build/events.jsonl --samples build/samples --metrics build/metrics --records records")
AUTH_ENV = "KIT_DASHBOARD_AUTH"


def add_parser(sub) -> None:
    """Register `kit dashboard` on the `kit` command's subparsers."""
    p = command(sub, "dashboard", "serve the Panel dashboard (distribution, live throttles, progress, events)",
                 "Serve one page for an incident: brokers grouped by rack (leaders, followers, free storage, "
                 "degree; before/after a plan), the replication throttles against measured traffic while a "
                 "reassignment runs, its progress and ETA, the auto-throttle's and doctor's decisions, and the "
                 "runbook records. Listens on 127.0.0.1 unless --address says otherwise; one poller reads the "
                 "sources for every open tab. Needs the dashboard extra: pip install 'kit[dashboard]'.",
                 EXAMPLE)
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--snapshot", metavar="FILE", help="Snapshot v1 JSON (distribution only)")
    cluster_options(p, source)
    p.add_argument("--plan", action="append", default=[], metavar="PLAN.json",
                   help="a plan for the before/after picker (repeat for several)")
    p.add_argument("--events", metavar="FILE", help="events log (JSON lines) of kit throttle run / kit doctor")
    p.add_argument("--samples", metavar="DIR", help="broker samples (kit sim run --samples DIR; DIR/broker/*.jsonl)")
    p.add_argument("--metrics", metavar="DIR",
                   help="kit metrics --follow's --out folder: DIR/broker_rates.json is measured rx/tx for the "
                        "brokers --samples does not describe")
    p.add_argument("--records", metavar="DIR", help="runbook records folder (served under /records/)")
    p.add_argument("--cap-map", metavar="JSON|FILE",
                   help="NIC capacity in MB/s by instance type, as kit throttle run's (e.g. '{\"*\": 125}'): "
                        "bounds the copy rate behind the ETA")
    p.add_argument("--port", type=whole(0), default=5006,
                   help="port (default 5006; 0: a free port the system picks, printed on start)")
    p.add_argument("--address", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--basic-auth", metavar="USER:PASSWORD",
                   help=f"ask for a login (default: ${AUTH_ENV}; prefer the variable: arguments show in ps)")
    p.add_argument("--interval", type=rate, default=2.0, metavar="S", help="seconds between refreshes (default 2)")
    p.add_argument("--reconnect-grace", type=rate, default=15.0, metavar="S",
                   help="seconds a tab's page is kept once its connection drops, for the browser to reconnect "
                        "(default 15, Bokeh's); the server says \"a tab closed\" when it ends")
    p.set_defaults(run=run)


def _auth(text: str | None) -> tuple[str, str] | None:
    text = text or os.environ.get(AUTH_ENV) or None
    if text is None:
        return None
    user, _, password = text.partition(":")
    if not user or not password:
        raise BadInput(f"--basic-auth / {AUTH_ENV}: expected USER:PASSWORD")
    return user, password


def _folder(flag: str, path: str | None) -> None:
    """A folder that may not exist yet (written later), but whose parent must."""
    if path and (os.path.exists(path) and not os.path.isdir(path)
                 or not os.path.isdir(os.path.dirname(os.path.abspath(path)))):
        raise BadInput(f"{flag} {path}: not a directory")


def run(a) -> int:
    """Check the arguments, then serve until interrupted; returns the exit code."""
    if a.port > 65535:
        raise BadInput(f"--port {a.port}: expected 1..65535")
    if a.interval <= 0:
        raise BadInput("--interval: expected a positive number of seconds")
    auth = _auth(a.basic_auth)
    for flag, path in (("--plan", p) for p in a.plan):
        if not os.path.isfile(path):
            raise BadInput(f"{flag} {path}: no such file")
    if a.events and (os.path.isdir(a.events) or not os.path.isdir(os.path.dirname(os.path.abspath(a.events)))):
        raise BadInput(f"--events {a.events}: not a file path")
    _folder("--samples", a.samples)
    _folder("--records", a.records)
    _folder("--metrics", a.metrics)
    cap_map = throttle_sources.load_cap_map(a.cap_map)
    try:  # lazy: Panel and HoloViews are the optional dashboard extra, and slow to import
        from kit.dashboard import app
    except ImportError as e:
        raise BadInput(f"the dashboard needs its extra: pip install 'kit[dashboard]' ({e.name} is missing)") from None
    live = cluster_address(a)
    if live.live:
        with backends.open_backend(live) as backend:  # the same wait as every command (DEFAULT_TIMEOUT)
            cluster, _ = backend.read()
    else:
        cluster = formats.load_snapshot(a.snapshot)
    if not cluster.brokers:
        raise BadInput("the cluster has no brokers")
    app.load_plans(a.plan, cluster)  # a bad plan fails now, not in the first browser tab
    server = app.serve(port=a.port, address=a.address, basic_auth=auth, records=a.records, start=False,
                       snapshot=a.snapshot, cluster=live if live.live else None, plans=a.plan, events=a.events,
                       samples=a.samples, interval=a.interval, metrics=a.metrics, cap_map=cap_map,
                       reconnect_grace=a.reconnect_grace)
    shown = "localhost" if a.address in ("127.0.0.1", "::1") else a.address
    print(f"kit dashboard: http://{shown}:{server.port}/ ({'login required' if auth else 'no login'}; Ctrl-C stops)",
          flush=True)
    try:
        server.start()
        server.io_loop.start()
    except KeyboardInterrupt:
        pass
    finally:
        sys.stdout.flush()
    return 0
