"""What the runbooks do, step by step: the notebooks in runbooks/ are a parameters cell and
calls into this module, each followed by a table or a chart.

A runbook opens an `Environment` (the cluster's ZooKeeper, a KRaft cluster's brokers through the
Admin API, or, by default, a simulated cluster set up for the situation: on a local ZooKeeper,
or with `cluster="kraft"` the simulated KRaft cluster of `kit sim start --kraft`), shows the situation, runs pre-checks
(`Checks`: a visible PASS/FAIL line each; a failure raises `CheckFailed` and stops the
runbook), shows the plan, waits at the gate (`apply`), applies with the auto-throttle,
monitors until done, verifies, and keeps a `Record` (JSON beside the executed notebook).
"""
from __future__ import annotations

import ast
import atexit
import contextlib
import dataclasses
import functools
import glob
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from html import escape

from kit.cluster.backend import ClusterBackend, open_backend, reached_through
from kit.cluster.kafka.connect import parse_bootstrap
from kit.cluster.zk import server as localzk
from kit.cluster.zk.layout import read_sim_facts, session, write_cluster
from kit.errors import BadInput, Unreachable, Unsafe
from kit.events import read_events
from kit.formats import dumps, load_snapshot, write_atomic
from kit.model import Cluster, Plan
from kit.plan.actions.replace import pair_dead_with_new
from kit.report import figures
from kit.report.review import PlanRefused, review_plan
from kit.report.waves import human_duration, moves_of, split_waves
from kit.runbook.catalog import RUNBOOKS
from kit.sim.brokers import start_holder, stop_holder
from kit.sim.kraft import cluster as kraft_sim
from kit.sim.physics import SAMPLE_EPOCH
from kit.throttle.decide import Settings
from kit.throttle.loop import reassignment_roles

# pandas, matplotlib, IPython/ipywidgets and nbformat/nbconvert are imported where they are
# used: they are heavy, and only the tables, charts, widgets and the HTML record need them.

# The simulated clusters are gen_cluster.py's; their brokers are instance type "standard", 125 MB/s.
SIMULATED_CAP_MAP = {"*": 125}
# The embedded simulated clusters a runbook may start (its `cluster` parameter).
SIMULATED_CLUSTERS = ("zookeeper", "kraft")


class CheckFailed(Exception):
    """A pre-check failed: the runbook stops here, and its record says why."""


# -- the record ------------------------------------------------------------------------------

class Record:
    """The machine-readable record of one run, rewritten (atomically) after every change so
    that a run cut short still leaves what it did. Parameters are stored as given: the
    runbooks take no credentials (ZooKeeper auth comes from KIT_ZK_AUTH, the Admin API's client
    settings from the file named by KIT_KAFKA_COMMAND_CONFIG).

    What a notebook shows of the record's state (the record itself, the gate's line, the
    unapplied line) is displayed through `watch`, and updated in place on every save: after
    Apply in a live notebook, the saved notebook, its HTML and the JSON tell the same story."""

    def __init__(self, path: str, runbook: str, parameters: dict):
        self.path = path or ""
        self.doc = {"runbook": runbook, "started": _now(), "finished": None, "outcome": "running",
                    "reason": None, "parameters": _public(parameters), "steps": [], "checks": [],
                    "command": command_line(runbook, parameters, self.path)}
        self._views: list[tuple] = []  # (display handle, render) kept in step with the record
        self.save()

    @contextlib.contextmanager
    def step(self, name: str):
        """Time one step; an exception is recorded against it, gives a run still running its
        outcome (`ended_by`: in a live notebook nothing else would close it) and goes on."""
        entry = {"step": name, "started": _now(), "seconds": None, "ok": None}
        self.doc["steps"].append(entry)
        self.save()  # a run cut short in this step says so
        t0 = time.monotonic()
        try:
            yield entry
            entry["ok"] = True
        except BaseException as e:
            entry["ok"] = False
            entry["error"] = f"{type(e).__name__}: {e}"
            self.ended_by(e, name)
            raise
        finally:
            entry["seconds"] = round(time.monotonic() - t0, 3)
            self.save()

    def ended_by(self, error: BaseException, step: str) -> None:
        """The outcome an exception leaving `step` gives the run, unless the runbook gave one
        already: a failed pre-check or a change refused as unsafe stops it, an interrupt
        (Jupyter's, Ctrl-C) interrupts it, anything else fails it. `kit run` keeps it."""
        if self.doc["outcome"] != "running":
            return
        if isinstance(error, (CheckFailed, Unsafe)):
            self.finish("stopped", str(error))
        elif isinstance(error, KeyboardInterrupt):
            self.finish("interrupted", f"interrupted during step {step!r}")
        else:
            self.finish("failed", f"{type(error).__name__}: {error}")

    def put(self, key: str, value) -> None:
        self.doc[key] = value
        self.save()

    def finish(self, outcome: str, reason: str | None = None) -> dict:
        self.doc.update(outcome=outcome, reason=reason, finished=_now())
        self.save()
        return self.doc

    def save(self) -> None:
        if self.path:
            write_atomic(self.path, dumps(self.doc))
        for handle, render in list(self._views):
            handle.update(_displayable(render(self.doc)))

    def watch(self, render) -> None:
        """Display `render(doc)` (plain text, or anything IPython displays) here, in the running
        cell's output, and update it in place whenever the record changes. Outside a kernel,
        print it once."""
        shown = render(self.doc)
        if not _in_kernel():
            print(shown)
            return
        from IPython.display import display

        self._views.append((display(_displayable(shown), display_id=True), render))

    def detach(self) -> None:
        """Stop updating what `watch` displayed (the kernel is ending)."""
        self._views.clear()

    def show(self) -> None:
        """The record as its JSON file has it, kept up to date (the runbooks' last cell)."""
        self.watch(record_view)


def record_view(doc: dict) -> str:
    """The record as the notebook shows it: its JSON, indented."""
    return json.dumps(doc, indent=1, ensure_ascii=False)


def _displayable(shown):
    """Text as plain text output (as `print` shows it, not a quoted string); anything else as is."""
    if isinstance(shown, str):
        from IPython.display import Pretty

        return Pretty(shown)
    return shown


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _public(parameters: dict) -> dict:
    secret = ("pass", "secret", "token", "auth", "key")
    return {k: ("***" if any(s in k.lower() for s in secret) else v) for k, v in sorted(parameters.items())
            if k != "record_path"}


def command_line(runbook: str, parameters: dict, record_path: str = "") -> str:
    """The `kit run` command that reproduces a run, with only the parameters that matter: not
    those at the runbook's declared default (`declared_defaults`), not the simulated cluster's
    (`SIMULATED_ONLY`) when the run was on a cluster of yours (zk or bootstrap), and not the
    working directory the run derived from its record (`default_workdir`): a rerun then gets
    its own, instead of overwriting this run's plan and rollback files."""
    defaults = declared_defaults(runbook)
    yours = bool(parameters.get("zk") or parameters.get("bootstrap"))
    args = ["kit", "run", runbook]
    for k, v in sorted(_public(parameters).items()):
        if (k in defaults and defaults[k] == v and type(defaults[k]) is type(v) or k in SIMULATED_ONLY and yours
                or k == "workdir" and v == default_workdir(runbook, record_path)):
            continue
        args += ["-p", k, v if isinstance(v, str) else json.dumps(v)]
    return " ".join(shlex.quote(a) for a in args)


# The runbooks' parameters that only the embedded simulated cluster reads.
SIMULATED_ONLY = ("cluster", "speed", "client_load")


def default_workdir(runbook: str, record_path: str = "") -> str:
    """Where a runbook keeps its files when its `workdir` parameter is empty, as the runbooks'
    first cell derives it: beside the record (<record>-files), else <runbook>-files."""
    return os.path.splitext(record_path)[0] + "-files" if record_path else f"{runbook}-files"


@functools.lru_cache(maxsize=None)
def declared_defaults(runbook: str) -> dict:
    """The default of each parameter the runbook's parameters cell declares (`name: type =
    value  # help`, the cell papermill fills in), read without running it; {} for a runbook
    kit does not ship (a copy of one saved elsewhere)."""
    try:
        with open(RUNBOOKS / f"{runbook}.ipynb", encoding="utf-8") as fh:
            cells = json.load(fh)["cells"]
        source = next("".join(c["source"]) for c in cells if "parameters" in c.get("metadata", {}).get("tags", []))
        tree = ast.parse(source)
    except (OSError, ValueError, KeyError, StopIteration, SyntaxError):
        return {}
    out = {}
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (node.targets[0] if isinstance(node, ast.Assign)
                                                                      and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and node.value is not None:
            with contextlib.suppress(ValueError, TypeError, SyntaxError):
                out[target.id] = ast.literal_eval(node.value)
    return out


# -- the environment -------------------------------------------------------------------------

@dataclass
class Environment:
    """Where the runbook works: a ZooKeeper connect string (`zk`) or a KRaft cluster's
    bootstrap list (`bootstrap`, through the Admin API) and, for the embedded default, the
    simulated cluster it started (stopped by `close`, or at exit): a local ZooKeeper with the
    simulated brokers (`zk_data`), or the simulated KRaft cluster (`kraft_state`, `kit sim start
    --kraft`'s state directory) whose simulated controller runs from the start."""

    zk: str
    simulated: bool
    workdir: str
    zk_data: str | None = None
    cap_map: dict = field(default_factory=dict)
    bootstrap: str = ""
    kraft_state: str | None = None
    sim_zk: str = ""  # the simulator's own ZooKeeper (its brokers' facts): `zk`, or the KRaft one's private one
    samples: str = ""  # where the simulated controller writes its metric samples

    def address(self) -> dict:
        """`open_backend`'s (and `kit.doctor.load.run`'s) address keyword: zk= or bootstrap=."""
        return {"bootstrap": self.bootstrap} if self.bootstrap else {"zk": self.zk}

    def cluster_flags(self) -> list[str]:
        """The address as `kit` command-line options (--zk or --bootstrap); credentials stay in
        the environment variables the children inherit."""
        return ["--bootstrap", self.bootstrap] if self.bootstrap else ["--zk", self.zk]

    @property
    def reached_through(self) -> str:
        """What the cluster is reached through, as its backend says it ("ZooKeeper", "Kafka (Admin API)")."""
        return reached_through(self.bootstrap)

    @property
    def controller_running(self) -> bool:
        """Whether the simulated controller already runs (the simulated KRaft cluster's does)."""
        return self.kraft_state is not None

    def read(self) -> tuple[Cluster, dict | None]:
        """The cluster as ZooKeeper (or the Admin API) has it now, and the reassignment in flight."""
        with _backend(self) as backend:
            cluster, running = backend.read()
        facts = {}
        if self.simulated:  # the simulated cluster knows its brokers' NICs (kit sim seed kept them)
            with _simulator(self) as c:
                facts = read_sim_facts(c)["brokers"]
        for b in list(cluster.brokers.values()):
            nic = (facts.get(str(b.id)) or {}).get("net_capacity")
            if b.net_capacity is None and nic:
                cluster.brokers[b.id] = dataclasses.replace(b, net_capacity=nic)
        default = self.cap_map.get("*")
        if default:  # ZooKeeper has no NIC figures: the capacity map's default feeds the estimates
            for b in list(cluster.brokers.values()):
                if b.net_capacity is None:
                    cluster.brokers[b.id] = dataclasses.replace(b, net_capacity=int(default * 1e6))
        return cluster, running

    def close(self) -> None:
        if self.zk_data:
            with contextlib.suppress(Exception), _simulator(self) as c:
                stop_holder(c)
            localzk.stop(self.zk_data)
            self.zk_data = None
        if self.kraft_state:
            kraft_sim.stop(self.kraft_state)
            self.kraft_state = None


def _backend(env: Environment) -> ClusterBackend:
    """The cluster the runbook works on. Credentials come from the environment, never from
    parameters: $KIT_ZK_AUTH for ZooKeeper, $KIT_KAFKA_COMMAND_CONFIG (Kafka's client
    properties file) for the Admin API, whose requests may take `ADMIN_TIMEOUT_S` (a broker
    answers a config or log dir request beside its clients; the runbook can wait)."""
    return open_backend(**env.address(), **({"timeout": ADMIN_TIMEOUT_S} if env.bootstrap else {}))


ADMIN_TIMEOUT_S = 30.0


def _simulator(env: Environment):
    """A session to the simulated cluster's ZooKeeper (the local one, or the simulated KRaft
    cluster's private one), for what only the simulator keeps there (its brokers' facts and
    registrations): with ... as client."""
    return session(env.sim_zk or env.zk)


# The file that marks a workdir's simulated cluster as kit's own (who started it, when): only
# what it marks is ever stopped and removed to make way for a new one.
SIMULATED_MARKER = "kit-simulated-cluster.json"
# A simulated cluster's own folders in its workdir (`open_environment`), and what a run on it
# leaves there (`_apply`, `_start_processes`, `write_plan`): a new simulated cluster starts its
# clock again, so these would be read as its own (events appended, samples, the report).
SIMULATED_STATE = ("zookeeper", "kraft")
SIMULATED_RUN_FILES = ("samples", "plan.json", "rollback.json", "events.jsonl", "throttle.log", "throttle.err",
                       "controller.json")
# The simulated clusters this process started, by workdir: replaced, they are closed first.
_STARTED: dict[str, Environment] = {}


def replace_simulated(workdir: str) -> str | None:
    """Make way for a new simulated cluster in `workdir`. One kit started there before (its
    marker says so: a run before this one, a kernel since restarted) is stopped if it still
    runs and its files are removed; returns the line that says so, None when there was none.
    Unsafe, nothing touched, when the workdir holds a cluster's folder kit did not mark, or
    one whose starter (another kernel, another `kit run`) is still running."""
    marker = os.path.join(workdir, SIMULATED_MARKER)
    where = os.path.abspath(workdir)
    if not os.path.exists(marker):
        foreign = [n for n in SIMULATED_STATE if os.path.exists(os.path.join(workdir, n))]
        if foreign:
            raise Unsafe(f"{where} holds {', '.join(foreign)}, which kit did not mark as its simulated "
                         f"cluster's ({SIMULATED_MARKER}); give the runbook another workdir, or remove them")
        return None
    try:
        with open(marker, encoding="utf-8") as fh:
            info = json.load(fh)
        info = info if isinstance(info, dict) else {}
    except (OSError, ValueError):
        info = {}
    owner = info.get("pid")
    if isinstance(owner, int) and owner != os.getpid() and _alive(owner):
        raise Unsafe(f"the simulated cluster in {where} belongs to a run still going (process {owner}, started "
                     f"{info.get('started') or '?'}); give this one another workdir")
    old = _STARTED.pop(where, None)
    if old is not None:
        old.close()
    stopped = stop_simulated(workdir)
    for name in SIMULATED_STATE + SIMULATED_RUN_FILES:
        path = os.path.join(workdir, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)
    os.unlink(marker)
    return (f"Replacing the simulated cluster kit started in {where} at {info.get('started') or '?'} "
            f"({'stopped it, ' if stopped else ''}removed its files) with a fresh one.")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_simulated(workdir: str) -> bool:
    """Stop an embedded simulated cluster a runbook left running in `workdir` (its kernel ended
    before `Environment.close`: a failed cell under papermill); True when one was running."""
    stopped = False
    state = os.path.join(workdir, "kraft")
    if os.path.isdir(state) and kraft_sim.running(state):
        stopped = kraft_sim.stop(state) or True
    data = os.path.join(workdir, "zookeeper")
    server = localzk.status(data)
    if server is not None:
        with contextlib.suppress(Exception), session(f"{server.connect}/kafka") as c:
            stop_holder(c)
        stopped = localzk.stop(data) or True
    return stopped


def simulated_address(workdir: str) -> dict | None:
    """`open_backend`'s address (zk= or bootstrap=) of the embedded simulated cluster running in
    `workdir` as `open_environment` lays it out, or None when none runs there: `kit run` reads
    an interrupted run's cluster through it before `stop_simulated`."""
    state = os.path.join(workdir, "kraft")
    if os.path.isdir(state) and kraft_sim.running(state):
        try:
            with open(os.path.join(state, "bootstrap"), encoding="utf-8") as fh:
                return {"bootstrap": fh.read().strip()}
        except OSError:  # still starting: it has no listeners yet
            return None
    server = localzk.status(os.path.join(workdir, "zookeeper"))
    return {"zk": f"{server.connect}/kafka"} if server is not None else None


def check_address(zk: str, bootstrap: str, cluster: str) -> None:
    """BadInput (one line) unless the runbook's cluster parameters make one cluster: `zk` or
    `bootstrap` (not both), else the simulated `cluster` ("zookeeper" or "kraft")."""
    if cluster not in SIMULATED_CLUSTERS:
        raise BadInput(f'parameter cluster: "zookeeper" or "kraft", got {cluster!r}')
    if zk and bootstrap:
        raise BadInput("parameters zk and bootstrap: give one, not both")
    if zk and cluster == "kraft":
        raise BadInput("parameter cluster kraft is the simulated KRaft cluster: a KRaft cluster of yours "
                       "takes bootstrap, not zk")
    if bootstrap:
        parse_bootstrap(bootstrap)  # HOST:PORT[,HOST:PORT...], else one line


def simulated_sample_every(speed: float) -> float:
    """Simulated seconds between the simulated controller's samples: twice per round of the
    auto-throttle (`loop_interval` on the simulated cluster), at least a minute."""
    wall = max(30.0 / speed, 0.5)
    return max(60.0, wall * speed / 2)


def open_environment(zk: str, situation: str, workdir: str, cap_map: dict | None = None, bootstrap: str = "",
                     cluster: str = "zookeeper", speed: float = 2000.0, client_load: float = 0.5) -> Environment:
    """Connect to `zk` or `bootstrap`; with neither, start a simulated cluster in the given
    situation (runbooks/clusters/<situation>.json): `cluster` "zookeeper", a local ZooKeeper
    with its brokers running (the simulated controller starts with the change); "kraft", the
    simulated KRaft cluster of `kit sim start --kraft` in workdir/kraft, its controller
    running from now on at `speed` with `client_load` (the runbook's own parameters, which
    the change would otherwise give the controller when it starts). A simulated cluster kit
    started in `workdir` before (a run before this one, a kernel since restarted) is replaced
    by a fresh one (`replace_simulated`), said in one line; the new one is marked as kit's."""
    check_address(zk, bootstrap, cluster)
    os.makedirs(workdir, exist_ok=True)
    if zk or bootstrap:
        env = Environment(zk, False, workdir, cap_map=dict(cap_map or {}), bootstrap=bootstrap)
        with _backend(env):
            pass  # reachable, or BadInput with one line
        return env
    snapshot = RUNBOOKS / "clusters" / f"{situation}.json"
    if not snapshot.exists():
        raise BadInput(f"no simulated cluster for {situation!r} in {snapshot.parent}")
    caps = dict(cap_map or SIMULATED_CAP_MAP)
    replaced = replace_simulated(workdir)
    if replaced:
        print(replaced)
    write_atomic(os.path.join(workdir, SIMULATED_MARKER),
                 dumps({"cluster": cluster, "situation": situation, "started": _now(), "pid": os.getpid()}))
    if cluster == "kraft":
        state = os.path.join(workdir, "kraft")
        line = kraft_sim.start(str(snapshot), state, speed, client_load, sample_every=simulated_sample_every(speed))
        env = Environment("", True, workdir, cap_map=caps, bootstrap=line, kraft_state=state,
                          sim_zk=kraft_sim.read_config(state)["zk"], samples=os.path.join(state, "samples"))
        atexit.register(env.close)
        _STARTED[os.path.abspath(workdir)] = env
        return env
    data = os.path.join(workdir, "zookeeper")
    server = localzk.start(localzk.free_port(), data)
    env = Environment(f"{server.connect}/kafka", True, workdir, data, caps)
    atexit.register(env.close)
    _STARTED[os.path.abspath(workdir)] = env
    with _simulator(env) as c:
        write_cluster(c, load_snapshot(str(snapshot)))
    start_holder(env.zk)
    return env


# -- the situation ---------------------------------------------------------------------------

def per_broker(cluster: Cluster, after: Cluster | None = None) -> tuple[dict, dict | None]:
    """kit's per-broker figures (`figures.broker_figures`: leaders, followers, replicas, free
    storage) now, and after a plan when given; the live brokers are the targets."""
    targets = cluster.live_ids or sorted(cluster.brokers)
    now = figures.broker_figures(cluster, None, targets)
    return now, (figures.broker_figures(cluster, after.assignment(), targets) if after is not None else None)


def _by_rack(cluster: Cluster) -> list:
    return sorted(cluster.brokers.values(), key=lambda b: (str(b.rack), b.id))


def broker_table(cluster: Cluster, after: Cluster | None = None):
    """One row per broker: rack, alive, replicas, leaders, free storage (and after a plan)."""
    import pandas as pd

    now, later = per_broker(cluster, after)
    rows = []
    for b in _by_rack(cluster):
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


# -- charts and tables for people ------------------------------------------------------------

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


def charts(dpi: int = CHART_DPI) -> None:
    """Set the records' chart resolution (dots per inch). Charts are drawn by matplotlib into
    PNGs, so a record's HTML shows every chart offline."""
    global CHART_DPI
    CHART_DPI = int(dpi)


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
    brokers = _by_rack(cluster)
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
    brokers = [b for b in _by_rack(cluster) if b.alive and b.storage_free is not None]
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


def brokers_text(ids, limit: int = 12) -> str:
    """Broker ids as people write them: '1001, 1002, 1004' ('…' and a count past `limit`)."""
    ids = list(ids or [])
    if len(ids) <= limit + 2:  # "… (9 brokers)" would hide fewer names than it costs
        return ", ".join(map(str, ids))
    return ", ".join(map(str, ids[:limit])) + f", … ({len(ids)} brokers)"


def hm(seconds: float | None) -> str:
    """Seconds as h:mm ('9:43'), '' when unknown."""
    if seconds is None:
        return ""
    m = int(round(seconds / 60))
    return f"{m // 60}:{m % 60:02d}"


# -- checks ----------------------------------------------------------------------------------

class Checks:
    """Pre-checks, each printed as a PASS/FAIL line and kept in the record."""

    def __init__(self, record: Record | None = None):
        self.record, self.failed = record, []

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        print(f"{'PASS' if ok else 'FAIL'}  {name}" + (f" — {detail}" if detail else ""))
        if self.record is not None:
            self.record.doc["checks"].append({"check": name, "ok": bool(ok), "detail": detail})
            self.record.save()
        if not ok:
            self.failed.append(f"{name}: {detail}" if detail else name)
        return ok

    def stop_if_failed(self) -> None:
        if self.failed:
            raise CheckFailed(f"pre-check failed: {self.failed[0]}")


def common_checks(env: Environment, checks: Checks) -> tuple[Cluster, dict | None]:
    """The cluster answers (ZooKeeper, or the Admin API) and no reassignment is running;
    returns the cluster."""
    cluster, running = env.read()
    # The address in full (every bootstrap broker; ZooKeeper's chroot too): what `kit dashboard`,
    # `kit throttle` or a rerun need to find the same cluster.
    if env.bootstrap:
        checks.check("the Admin API answers", True,
                     env.bootstrap + (" (simulated KRaft cluster)" if env.simulated else ""))
    else:
        checks.check("ZooKeeper answers", True, env.zk + (" (simulated cluster)" if env.simulated else ""))
    checks.check("no reassignment in progress", running is None,
                 "" if running is None else f"{len(running.get('partitions', []))} partition(s) moving now")
    return cluster, running


# -- the plan --------------------------------------------------------------------------------

def loop_interval(env: Environment | None, speed: float, interval: float = 30.0) -> tuple[float, float]:
    """The auto-throttle's interval as `apply_and_monitor` runs it: (wall seconds, cluster seconds).

    A round of the loop needs real time to read and write ZooKeeper: at most two a second,
    whatever the simulated interval; on the simulated cluster each wall second is `speed`
    cluster seconds, so at 20,000x the loop decides every 10,000 cluster seconds.
    """
    scale = speed if env is not None and env.simulated else 1.0
    wall = max(interval / scale, 0.5)
    return wall, wall * scale


def plan_summary(plan: Plan, throttle: str | float = "auto", env: Environment | None = None,
                 speed: float = 2000.0, client_load: float = 0.5) -> dict:
    """Print the topicmappr-style summary with the duration estimate; return the figures
    (`estimate_unknown` says why there is no estimate, when there is none).

    The estimate predicts the run `apply_and_monitor` makes with the same arguments: the same
    `throttle`, and on the simulated cluster (`env.simulated`) the same what-if `client_load`
    and the auto-throttle's interval in cluster seconds (`loop_interval`); on a real cluster the
    partitions' own traffic figures and a 30 s interval.
    """
    rate = None if throttle == "auto" else float(throttle)
    simulated = env is not None and env.simulated
    interval = loop_interval(env, speed)[1]
    try:  # what `kit plan` refuses, the runbook refuses
        # On the simulated cluster the loop's first round finds no samples yet (the controller
        # starts with the change): the plan runs at the minimum it was applied with for one interval.
        report = review_plan(plan, split_waves(moves_of(plan)), rate, client_load if simulated else None,
                             Settings(interval=interval), first_decision_s=interval if simulated else 0.0)
    except PlanRefused as e:
        print(f"FAIL  the plan passes its own checks — {e}")
        raise CheckFailed(str(e)) from None
    duration = report["duration"]
    # One Duration section, on the cluster's clock, for the run the runbook makes: the whole plan at once.
    text = figures.summary_text(plan, report, max_changes=20,
                                duration_options={"clock": "simulated" if simulated else "wall", "at_once": True})
    unknown = None
    if duration["brokers_without_rate"]:
        # ZooKeeper and the Admin API give no NIC capacity, nor an instance type to look one up by.
        hint = "the cap_map parameter's \"*\" entry (MB/s) gives every broker's"
        text += f"  {hint}\n"
        unknown = f"no NIC capacity known for broker(s) {brokers_text(duration['brokers_without_rate'], 6)}: {hint}"
    print(text)
    after, movement = report["after"], report["movement"]
    gaining, losing = set(), set()
    for i in plan.changed():
        before, later = set(plan.cluster.partitions[i].replicas), set(plan.after[i])
        gaining |= later - before
        losing |= before - later
    return {"partitions": len(plan.changed()), "replica_additions": movement["replica_additions"],
            "bytes_moved_gb": movement["bytes_moved_gb"], "duration_s": duration["estimate_s"],
            "estimate_s": duration["estimate_s"], "lower_bound_s": duration["lower_bound_s"],
            "estimate_assumptions": duration["assumptions"],
            "estimate_unknown": unknown,
            "brokers_in": sorted(gaining), "brokers_out": sorted(losing),
            "failover_excess_spread_max": after["failover_excess_spread_max"],
            "replica_count_spread": after["replica_count_spread"],
            "leader_count_spread": after["leader_count_spread"],
            "offline_partitions": report["offline_partitions"]}


def after_cluster(plan: Plan) -> Cluster:
    return plan.cluster.with_assignment(plan.after)


# -- the gate, the change, the monitor -------------------------------------------------------

def live_notebook() -> bool:
    """True in a kernel a Jupyter server started for a notebook (JupyterLab, Notebook): there
    someone may press Apply later. Under papermill (`kit run`) nobody will."""
    if not os.environ.get("JPY_SESSION_NAME"):
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return getattr(get_ipython(), "kernel", None) is not None


def rollback_path(env: Environment) -> str:
    """Where the change writes its rollback plan (before it changes anything)."""
    return os.path.abspath(os.path.join(env.workdir, "rollback.json"))


def preview_text(record: Record | None, env: Environment | None) -> str:
    """What Apply will do: partitions, bytes, the estimate, and the rollback file."""
    plan = (record.doc.get("plan") if record is not None else None) or {}
    parts = [f"{plan['partitions']:,} partition(s)"] if plan.get("partitions") is not None else []
    if plan.get("bytes_moved_gb") is not None:
        parts.append(f"{plan['bytes_moved_gb']:,.1f} GB to copy")
    if plan.get("estimate_s") is not None:
        parts.append(f"estimated {human_duration(plan['estimate_s'])}"
                     + (" of the simulated cluster's time" if env is not None and env.simulated else ""))
    line = "Apply will move " + ", ".join(parts) if parts else "Apply will carry out the plan"
    if env is not None:
        line += f"; the rollback plan is written first, to {rollback_path(env)}"
    return line


def gate(apply: bool, on_apply, record: Record | None = None, env: Environment | None = None) -> bool:
    """True when the runbook may change the cluster now (`apply=True`). Otherwise, in a live
    notebook, show what Apply will do and an Apply button that runs `on_apply()` when
    pressed (its progress, charts and headline show below the button); the line below the
    preview follows the record (waiting, applying, then the headline), so the saved notebook
    keeps the outcome. Under papermill nothing is applied and `finish_unapplied` records that
    the run only planned."""
    print(preview_text(record, env))
    if apply:
        print("apply=True: applying the plan")
        return True
    if not live_notebook():
        print("apply=False: nothing is changed. Re-run with -p apply true, or open the notebook in JupyterLab "
              "and press Apply.")
        return False
    import ipywidgets as widgets
    from IPython.display import HTML, display

    button = widgets.Button(description="Apply", button_style="danger", icon="play")
    out = widgets.Output()
    # In the cell's own output (not the button's widget), so its last state is saved with the notebook.
    if record is not None:
        record.watch(lambda doc: gate_view(doc, record.path))
    else:
        display(HTML(f"<b>Waiting for Apply</b>: {NOTHING_CHANGED}."))

    def clicked(_):
        button.disabled = True
        if record is not None:
            applied(record)
        with out:
            try:
                on_apply()
            except Exception as e:  # noqa: BLE001  (a button has no caller to raise to: the record and the headline say it)
                print(f"{type(e).__name__}: {e}")
                if record is not None and record.doc.get("outcome") == "running":
                    record.finish("failed", f"{type(e).__name__}: {e}")
            if record is not None:
                display(headline(record))
                keep_html_record(record)
    button.on_click(clicked)
    display(widgets.VBox([button, out]))
    return False


NOTHING_CHANGED = "nothing has changed yet"
WAITING = "waiting for the Apply button in a live notebook"
APPLY_BUTTON = "the Apply button in a live notebook"


def applied(record: Record) -> None:
    """Record that the Apply button was pressed: who pressed it and when, the parameters and
    the command as the run now is (apply true). Written before anything changes."""
    if not record.path:
        record.path = default_record_path(record.doc["runbook"])
    parameters = {**record.doc["parameters"], "apply": True}
    record.doc.update(parameters=parameters, command=command_line(record.doc["runbook"], parameters, record.path),
                      applied_by=APPLY_BUTTON, applied_by_user=_user(), applied_at=_now(),
                      reason=None if record.doc.get("reason") == WAITING else record.doc.get("reason"))
    record.save()


def _user() -> str:
    """Who is at the notebook: JupyterHub's user, else the kernel's OS user."""
    import getpass

    try:
        return os.environ.get("JUPYTERHUB_USER") or getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        return str(os.getuid())


def gate_view(doc: dict, path: str = ""):
    """The gate's line as the record stands (its JSON at `path`): waiting, applying, or the
    headline once the run ended."""
    from IPython.display import HTML

    if doc.get("outcome") != "running":
        return Headline(doc)
    if doc.get("applied_at"):
        return HTML(f"<b>Applying</b> since {escape(doc['applied_at'])} UTC; progress below. "
                    f"Record: {escape(path)}")
    return HTML(f"<b>Waiting for Apply</b>: {NOTHING_CHANGED}.")


def unapplied_view(doc: dict) -> str:
    """The line below the gate in a live notebook, as the record stands."""
    if doc.get("outcome") != "running":
        return outcome_text(doc)
    if doc.get("applied_at"):
        return f"Applied with the Apply button above at {doc['applied_at']} UTC; the change is running (progress above)."
    return f"Not applied yet: press Apply above to change the cluster; until then {NOTHING_CHANGED}."


def outcome_text(doc: dict) -> str:
    """'outcome: succeeded (every partition done, throttles cleared)': how a run ended, in one line."""
    reason = doc.get("reason")
    return f"outcome: {outcome_line(doc)}" + (f" ({reason})" if reason else "")


def live_record_path(runbook: str) -> str:
    """In a live notebook, the record's path (`default_record_path`): a run there keeps its
    record from the start, so one that stops before the gate says why. Elsewhere "" (the
    caller gives `record_path`, as `kit run` does, or keeps none)."""
    return default_record_path(runbook) if live_notebook() else ""


def default_record_path(runbook: str) -> str:
    """A live notebook's record: <UTC timestamp>-<runbook>.json beside the notebook (-2, -3, …
    after the stamp when a run in the same second has it: a record is never overwritten)."""
    where = os.path.dirname(os.environ.get("JPY_SESSION_NAME") or "") or os.getcwd()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path, n = os.path.join(where, f"{stamp}-{runbook}.json"), 1
    while os.path.exists(path):
        n += 1
        path = os.path.join(where, f"{stamp}-{n}-{runbook}.json")
    return path


def keep_html_record(record: Record, wait_s: float = 1800.0) -> None:
    """The live path's HTML record, written as `kit run` writes it once the notebook is next
    saved with the outcome in it (the kernel cannot read the open notebook before that):
    <record>.ipynb and <record>.html beside the JSON."""
    notebook = os.environ.get("JPY_SESSION_NAME") or ""
    if not record.path or not os.path.exists(notebook):
        return
    stem = os.path.splitext(record.path)[0]
    since = time.time()
    marker = f"data-started='{record.doc.get('started')}'"  # the headline of this run, as Headline writes it
    print(f"The HTML record ({stem}.html) is written when this notebook is next saved (Ctrl+S).")

    def watch():
        deadline = since + wait_s
        while time.time() < deadline:
            try:
                with open(notebook, encoding="utf-8") as fh:
                    saved = os.path.getmtime(notebook) > since and marker in fh.read()
            except OSError:
                saved = False
            if saved:
                doc = dict(record.doc, json=record.path)
                record_notebook(notebook, doc, stem + ".ipynb", stem + ".html")
                record.doc.update(html=stem + ".html", notebook=stem + ".ipynb")
                record.save()
                return
            time.sleep(1.0)
    threading.Thread(target=watch, name="kit-html-record", daemon=True).start()


@dataclass
class ChangeResult:
    done: bool
    wall_seconds: float
    simulated_seconds: float | None
    events_path: str
    samples_dir: str
    rollback_path: str
    cleared: bool
    progress: list = field(default_factory=list)
    started: str | None = None  # when the change started, on the cluster's clock
    clock: str = "wall"  # "simulated" on the simulated cluster
    actual_s: float | None = None  # apply to done, on the cluster's clock
    wall_span: tuple | None = None  # (apply, done or None) on the wall clock, as event stamps


class _Progress:
    """Where the change shows progress and the live throttle chart. A live notebook: widgets,
    which update inside the Apply button's output; papermill: display handles (the executed
    notebook keeps their last state); no IPython: printed lines."""

    def __init__(self, live: bool, with_chart: bool):
        self.live, self.text_handle, self.chart_handle = live, None, None
        try:
            from IPython.display import HTML, display
        except ImportError:
            return
        if live:
            import ipywidgets as widgets

            self.text_handle = widgets.HTML("<pre>starting…</pre>")
            self.chart_handle = widgets.Image(format="png") if with_chart else None
            display(widgets.VBox([w for w in (self.text_handle, self.chart_handle) if w is not None]))
        elif _in_kernel():
            self.text_handle = display(HTML(""), display_id=True)
            self.chart_handle = display(HTML(""), display_id=True) if with_chart else None

    def text(self, line: str) -> None:
        if self.text_handle is None:
            print(line)
        elif self.live:
            self.text_handle.value = f"<pre>{escape(line)}</pre>"
        else:
            from IPython.display import Pretty

            self.text_handle.update(Pretty(line))  # plain text, not a quoted string

    def chart(self, chart) -> None:
        if self.chart_handle is None:
            return
        if self.live:
            self.chart_handle.value = chart.png() if isinstance(chart, Chart) else b""
        else:
            self.chart_handle.update(chart)


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return getattr(get_ipython(), "kernel", None) is not None


@dataclass
class _Change:
    """A change just applied, as the steps of `apply_and_monitor` share it: the moves, the
    rate it was applied at, its files, and when it started on each clock."""
    env: Environment
    moves: list
    throttle: str | float
    static: float  # the rate the plan was applied at (the auto-throttle's minimum with "auto")
    urp_before: int
    applied_to: list  # brokers throttled at `static` until the loop decides
    events: str
    samples: str
    rollback: str
    err_path: str
    applied_wall: str
    started: str  # on the cluster's clock
    clock: str


def apply_and_monitor(env: Environment, plan: Plan | list[dict], throttle: str | float = "auto", speed: float = 2000.0,
                      client_load: float = 0.5, interval: float = 30.0, max_wait_s: float = 600.0,
                      record: Record | None = None, throttle_metrics: str = "") -> ChangeResult:
    """Apply the plan (rollback file first), run the auto-throttle (and, on the simulated
    cluster, the simulated controller) as `kit` processes, show progress until every partition
    is done, then verify: every throttle must be gone.

    With the auto-throttle, the plan is applied at the auto-throttle's minimum rate, which the
    loop then raises from measured traffic: should the loop fail, the copy goes on slowly and
    safely, never unthrottled. `throttle_metrics` is where the loop reads broker traffic on a
    real cluster: a samples directory, a `kit metrics` directory, or "znode" (kafka-kit's
    brokermetrics); on the simulated cluster, the simulator's samples.
    """
    change = _apply(env, plan, throttle)
    procs, loop = _start_processes(change, speed, client_load, loop_interval(env, speed, interval)[0],
                                   throttle_metrics, max_wait_s)
    t0 = time.monotonic()
    shown = _Progress(live_notebook(), throttle == "auto")
    try:
        progress, done_wall = _monitor(change, loop, t0, max_wait_s, shown, record)
    finally:
        _wait_for(procs)
    result, urp_after = _verify(change, progress, done_wall, t0, shown)
    if record is not None:
        _record_change(record, change, result, urp_after)
    return result


def _apply(env: Environment, plan: Plan | list[dict], throttle: str | float) -> _Change:
    """Apply the plan at the static rate (the auto-throttle's minimum with "auto"), rollback file first."""
    moves = plan.reassignment()["partitions"] if isinstance(plan, Plan) else list(plan)
    if not moves:
        raise BadInput("the plan changes nothing")
    rollback = rollback_path(env)
    static = Settings().minimum if throttle == "auto" else float(throttle)
    with _backend(env) as backend:
        cluster, _ = backend.read()
        urp_before = len(backend.status()["under_replicated"])
        backend.apply(moves, static, rollback)
        throttled = backend.status()["throttled_brokers"]
    # Held at `static` until the loop decides: the brokers that send or receive a copy, as the
    # loop counts them. The apply throttles every replica of a moving partition, as Kafka's tool
    # does, but a dead broker or a follower that stays copies nothing.
    sources, dests, _ = reassignment_roles(cluster, {"partitions": moves})
    applied_to = sorted(b for b in throttled if b in sources | dests)
    # The cluster's clock: the simulated controller counts from the moment it picks the plan up.
    applied_wall = _now()
    started = _stamp(SAMPLE_EPOCH) if env.simulated else applied_wall
    print(f"applied: {len(moves)} partition(s); rollback plan in {rollback}")
    return _Change(env, moves, throttle, static, urp_before, applied_to, os.path.join(env.workdir, "events.jsonl"),
                   env.samples or os.path.join(env.workdir, "samples"), rollback, os.path.join(env.workdir, "throttle.err"),
                   applied_wall, started, "simulated" if env.simulated else "wall")


def _start_processes(change: _Change, speed: float, client_load: float, wall_interval: float,
                     throttle_metrics: str, max_wait_s: float) -> tuple[list, subprocess.Popen | None]:
    """Start the simulated controller (the ZooKeeper simulated cluster: the KRaft one's runs
    already, started with the runbook's speed) and the auto-throttle loop ("auto") as `kit`
    processes; returns every process and the loop (or None)."""
    env = change.env
    kit = [sys.executable, "-m", "kit"]
    procs = []
    scale = speed if env.simulated else 1.0  # the simulated cluster's seconds per wall second
    if env.simulated and not env.controller_running:  # it samples twice per round of the loop
        procs.append(subprocess.Popen(kit + ["sim", "run", "--zk", env.zk, "--speed", str(speed), "--until-idle",
                                             "--client-load", str(client_load), "--samples", change.samples,
                                             "--sample-every", str(max(60.0, wall_interval * scale / 2)),
                                             "--report", os.path.join(env.workdir, "controller.json")],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    if change.throttle != "auto":
        return procs, None
    source = _metric_source(env, throttle_metrics, change.samples)
    cmd = kit + ["throttle", "run", *env.cluster_flags(), *source, "--interval", str(wall_interval),
                 "--events", change.events, "--log", os.path.join(env.workdir, "throttle.log"), "--until-idle",
                 "--max-seconds", str(max_wait_s)]
    if env.cap_map:
        cmd += ["--cap-map", json.dumps(env.cap_map)]
    if env.simulated:
        cmd += ["--clock", "samples"]  # the chart then spans the cluster's (simulated) hours
    with open(change.err_path, "w") as errors:  # the child keeps its own copy of the descriptor
        loop = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errors)
    procs.append(loop)
    return procs, loop


def _monitor(change: _Change, loop: subprocess.Popen | None, t0: float, max_wait_s: float, shown: _Progress,
             record: Record | None) -> tuple[list, str | None]:
    """Show progress (and the live throttle chart) until no partition is left or `max_wait_s`
    has passed; warn once if the loop stops. Returns the progress samples and the wall-clock
    stamp of the end (None when the wait ran out)."""
    env, auto = change.env, change.throttle == "auto"
    progress, total, warned, drawn = [], None, False, 0.0
    looks: list[tuple[float, int]] = []  # (seconds since apply on the cluster's clock, bytes left)
    estimate = ((record.doc.get("plan") or {}).get("estimate_s") if record is not None else None)
    while time.monotonic() - t0 < max_wait_s:
        st = _status(env)
        if st is None:  # the cluster did not answer this time: the copy goes on, look again
            time.sleep(MONITOR_EVERY_S)
            continue
        total = total or max(st["bytes_left"], 1)
        elapsed = time.monotonic() - t0
        progress.append({"wall_s": round(elapsed, 2), "bytes_left": st["bytes_left"],
                         "partitions_left": st["reassigning_partitions"]})
        looks.append((simulated_now(change.samples) if env.simulated else elapsed, st["bytes_left"]))
        shown.text(progress_line(st, total, looks, estimate, change.clock))
        if auto and elapsed - drawn >= 5.0 and os.path.exists(change.events):
            drawn = elapsed  # the live throttle chart, redrawn every few seconds
            shown.chart(throttle_chart(ChangeResult(False, elapsed, None, change.events, change.samples,
                                                    change.rollback, False, started=change.started,
                                                    clock=change.clock, wall_span=(change.applied_wall, None))))
        if not st["reassigning_partitions"]:
            return progress, _now()
        if loop is not None and loop.poll() not in (None, 0) and not warned:
            warned = True  # said once, loudly; the copy goes on at the rates in force
            with open(change.err_path) as fh:
                why = fh.read().strip().splitlines()[-1:] or ["?"]
            print(f"WARNING: the auto-throttle stopped (exit {loop.returncode}: {why[0]}); the copy goes on "
                  f"at the rates in force (at least {Settings().minimum / 1e6:.0f} MB/s)")
            if record is not None:
                record.put("throttle_failure", why[0])
        time.sleep(MONITOR_EVERY_S if env.bootstrap else 0.5)
    return progress, None


# Between two looks at the progress through the Admin API: each look is a request per broker
# (log dirs, configs), which a cluster's brokers answer beside their clients.
MONITOR_EVERY_S = 2.0


def _status(env: Environment) -> dict | None:
    """The cluster's `status`, or None (said on stdout) when it did not answer in time: one
    unanswered look does not end the watch, which `max_wait_s` bounds."""
    try:
        with _backend(env) as backend:
            return backend.status()
    except Unreachable as e:
        print(f"the cluster did not answer ({e}); looking again")
        return None


def _wait_for(procs: list) -> None:
    """Let the `kit` processes end on their own (they stop when idle); terminate a straggler."""
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.terminate()


def _verify(change: _Change, progress: list, done_wall: str | None, t0: float,
            shown: _Progress) -> tuple[ChangeResult, int]:
    """Verify the moves and that every throttle is gone, print the verdict and draw the whole
    run's throttle chart; returns the result and the under-replicated count after."""
    env = change.env
    with _backend(env) as backend:
        res = backend.verify(change.moves)
        st = backend.status()
    # Throttles are cleared only when neither a broker's rates nor a topic's replica list is left.
    throttled = [f"broker {b}" for b in st["throttled_brokers"]] + [f"topic {t}" for t in st.get("throttled_topics", [])]
    wall = round(time.monotonic() - t0, 2)
    finished = done_wall is not None and res["done"]
    if env.simulated:
        report = os.path.join(env.workdir, "controller.json")
        actual, copied = simulated_copy_seconds(change.samples, report)
        if finished and not copied and env.controller_running:
            # The KRaft one's controller keeps running: it writes no report, and its sample of
            # the copy's end may land just after the partitions were seen done.
            actual, copied = _copy_end(change.samples, 30.0)
        actual = actual if copied and finished else None
    else:
        actual = wall if finished else None
    result = ChangeResult(finished, wall, actual if env.simulated else None, change.events, change.samples,
                          change.rollback, not throttled, progress, started=change.started, clock=change.clock,
                          actual_s=actual, wall_span=(change.applied_wall, done_wall))
    if change.throttle == "auto":
        shown.chart(throttle_chart(result))  # the whole run, not the last live frame
    print(f"verify: {sum(r['done'] for r in res['partitions'])} of {len(res['partitions'])} partition(s) done; "
          f"throttles left: {', '.join(throttled[:8]) + (f' (+{len(throttled) - 8} more)' if len(throttled) > 8 else '') or 'none'}")
    return result, len(st["under_replicated"])


def _record_change(record: Record, change: _Change, result: ChangeResult, urp_after: int) -> None:
    """The change's timing (estimate, actual, time at the minimum and at the fail-safe rate),
    under-replicated partitions before and after, and the outcome, into the record."""
    actual = result.actual_s
    start = _parse_time(change.started)
    end = start + timedelta(seconds=actual) if actual is not None else None
    none = {"seconds": 0.0, "brokers": {}, "rate": change.static}
    auto = change.throttle == "auto"
    floor = floor_time(change.events, start, end, applied_to=change.applied_to, wall_span=result.wall_span) \
        if auto else none
    failsafe = floor_time(change.events, start, end, failsafe_only=True, applied_to=change.applied_to,
                          wall_span=result.wall_span) if auto else none
    plan_doc = record.doc.get("plan") or {}
    record.doc["timing"] = {"estimate_s": plan_doc.get("estimate_s"), "actual_s": actual, "clock": change.clock,
                            "failsafe_s": round(failsafe["seconds"], 1), "minimum_s": round(floor["seconds"], 1),
                            "started": change.started,
                            "failsafe": {"seconds": round(failsafe["seconds"], 1), "rate": failsafe["rate"],
                                         "brokers": {str(b): round(s, 1) for b, s in failsafe["brokers"].items()}}}
    record.doc["under_replicated"] = {"before": change.urp_before, "after": urp_after}
    record.put("change", {"done": result.done, "wall_seconds": result.wall_seconds,
                          "simulated_seconds": result.simulated_seconds, "throttles_cleared": result.cleared,
                          "rollback": change.rollback, "events": change.events})


def _metric_source(env: Environment, where: str, samples: str) -> list[str]:
    """The auto-throttle's metric source as `kit throttle run` options."""
    if where == "znode":
        return ["--metrics-znode"]
    if where and os.path.isdir(where) and (os.path.exists(os.path.join(where, "broker_load.parquet"))
                                          or os.path.exists(os.path.join(where, "broker_rates.json"))):
        return ["--metrics", where]
    return ["--samples", where or samples]


# The measured copy rate times the rest of a change only once it is steady (`steady_rate`):
# over the latest STEADY_WINDOW of the time since apply, seen at STEADY_LOOKS distinct moments
# or more, at least STEADY_SHARE of the bytes copied (a partition counts only once in sync,
# so early on few have), and the rates of the window's two halves within STEADY_SPREAD of
# the window's. Until then (the first auto-throttle decisions, the first partitions in sync)
# the ETA is the plan's estimate: at 0.9% a rate since apply said 58h for a run of 3h 23m.
STEADY_WINDOW = 1 / 3
STEADY_LOOKS = 6
STEADY_SHARE = 0.05
STEADY_SPREAD = 0.25
CLOCK_NAMES = {"simulated": "the simulated cluster's clock", "wall": "wall clock"}


def steady_rate(history: list[tuple[float, int]]) -> float | None:
    """The copy rate (bytes per second of the history's clock) over the latest third of the
    time since apply, when it is steady; else None. `history` is (seconds since apply, bytes
    left) for each look at the cluster, oldest first (the first look: everything left)."""
    if len(history) < 2 or history[-1][0] <= 0:
        return None
    now, left = history[-1]
    start = now * (1 - STEADY_WINDOW)
    if len({t for t, _ in history if t >= start}) < STEADY_LOOKS:
        return None
    (t0, first), (t1, middle) = _look_at(history, start), _look_at(history, (start + now) / 2)
    if not now > t1 > t0 or first - left < STEADY_SHARE * history[0][1]:
        return None
    early, late = (first - middle) / (t1 - t0), (middle - left) / (now - t1)
    rate = (first - left) / (now - t0)
    if early <= 0 or late <= 0 or abs(early - late) > STEADY_SPREAD * rate:
        return None
    return rate


def _look_at(history: list[tuple[float, int]], t: float) -> tuple[float, int]:
    """The latest look at or before clock `t` (the first look, if none was)."""
    look = history[0]
    for when, left in history:
        if when > t:
            break
        look = (when, left)
    return look


def progress_line(st: dict, total: int, history: list[tuple[float, int]], estimate_s: float | None = None,
                  clock: str = "wall") -> str:
    """'[####....] 42.0%  600.1 GB left in 87 partition(s), 1h 02m since apply, 61.2 MB/s, ETA
    3h 10m (measured rate; wall clock)'. `history` is every look so far, (seconds since apply
    on the cluster's `clock`, bytes left), the latest last. The ETA is the measured rate's once
    it is steady (`steady_rate`); until then what is left of the plan's `estimate_s`, said so."""
    left = st["bytes_left"]
    share = 1 - left / total if total else 1.0
    share = min(max(share, 0.0), 1.0)
    now = history[-1][0] if history else 0.0
    rate = steady_rate(history)
    on = CLOCK_NAMES.get(clock, clock)
    if rate:
        eta = f"{rate / 1e6:,.1f} MB/s, ETA {human_duration(left / rate)} (measured rate; {on})"
    elif estimate_s is not None and estimate_s > now:
        eta = f"ETA {human_duration(estimate_s - now)} (the plan's estimate; measured rate not steady yet; {on})"
    elif estimate_s is not None:
        eta = (f"ETA - (past the plan's estimate of {human_duration(estimate_s)}; measured rate not steady yet; "
               f"{on})")
    else:
        eta = f"ETA - (measured rate not steady yet; {on})"
    bar = "#" * int(share * 30) + "." * (30 - int(share * 30))
    return (f"[{bar}] {share:5.1%}  {left / 1e9:,.1f} GB left in {st['reassigning_partitions']} partition(s), "
            f"{human_duration(now)} since apply, {eta}")


def simulated_now(samples_dir: str) -> float:
    """The simulated controller's clock (seconds since it picked the plan up), from the name of
    its latest replica sample (<UTC stamp>.jsonl); 0 before the first."""
    try:
        names = [n for n in os.listdir(os.path.join(samples_dir, "replica")) if n.endswith(".jsonl")]
    except OSError:
        return 0.0
    if not names:
        return 0.0
    latest = datetime.strptime(max(names)[:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
    return (latest - SAMPLE_EPOCH).total_seconds()


def _throttle_series(result: ChangeResult) -> tuple:
    """Each broker role's rate in force (MB/s) over time, from the auto-throttle's events."""
    curves: dict[tuple[int, str], list] = {}
    events = [e for e in read_events(result.events_path) if e.get("source") == "throttle"]
    if not events:
        return {}, None, None, False
    for e in events:
        when = _parse_time(e["time"])
        for b in e.get("brokers") or []:
            if e["kind"] == "clear":  # every role of the broker drops to no throttle
                for key in [k for k in curves if k[0] == b]:
                    curves[key].append((when, None))
            elif e["kind"] in ("rate", "failsafe", "override") and e.get("new") is not None:
                for role in ([e["role"]] if e.get("role") else ["leader", "follower"]):
                    if (b, role) not in curves and e.get("old") is not None:  # the rate applied with the plan
                        curves[(b, role)] = [(None, e["old"] / 1e6)]
                    curves.setdefault((b, role), []).append((when, e["new"] / 1e6))
    start = _parse_time(result.started) if result.started else None
    end = start + timedelta(seconds=result.actual_s) if start is not None and result.actual_s is not None else None
    start, end, scale, own = event_window(events, start, end, result.wall_span)
    for pts in curves.values():
        if pts[0][0] is None:
            pts[0] = (start, pts[0][1])
    return curves, start, end, own


def throttle_chart(result: ChangeResult):
    """The auto-throttle's rate per broker and role over the run, on the cluster's clock (hours
    since apply), each rate held until the next decision; brokers with the same history share
    a line; the fail-safe (minimum) rate is marked."""
    from matplotlib.ticker import FuncFormatter

    curves, start, end, own = _throttle_series(result)
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
    ax.xaxis.set_major_formatter(FuncFormatter(lambda h, _: hm(h * 3600 * 60) if short else hm(h * 3600)))
    clock = ("the auto-throttle's wall clock: it had no samples" if own else
             "the simulated cluster's clock" if result.clock == "simulated" else "wall clock")
    ax.set_xlabel(f"time since {'the first decision' if own else 'apply'} ({'m:ss' if short else 'h:mm'}, {clock})")
    ax.set_ylabel("replication throttle (MB/s)")
    ax.set_title("Replication throttle per broker (auto-throttle decisions)", fontsize=11)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8,
              title="role: brokers", title_fontsize=8)
    return Chart(fig)


def events_table(result: ChangeResult, limit: int = 30):
    """The auto-throttle's decisions, newest first, for people: time since apply (h:mm) on the
    cluster's clock, rates in MB/s, brokers as plain lists; one row for the same decision on
    several brokers; a decision that kept the rate says so."""
    import pandas as pd

    rows: list[dict] = []
    since = "since apply (h:mm)"
    events = read_events(result.events_path)
    start = _parse_time(result.started) if result.started else None
    if events:
        end = start + timedelta(seconds=result.actual_s) if start is not None and result.actual_s is not None else None
        start, _, _, own = event_window(events, start, end, result.wall_span)
        if own:  # stamped by the loop's wall clock: say so rather than count from the cluster's apply
            since = "since apply (h:mm, wall clock)" if result.wall_span else "since the first decision (h:mm, wall clock)"
    for e in events:
        when = _parse_time(e["time"])
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


def finish(record: Record, env: Environment, outcome: str, reason: str | None = None, keep: bool = False) -> dict:
    """Close the record (and the embedded cluster, unless kept for an Apply button press); the
    record says what the cluster was reached through."""
    record.put("reached_through", env.reached_through)
    doc = record.finish(outcome, reason)
    if not keep:
        env.close()
    print(outcome_text(doc))
    return doc


def finish_unapplied(record: Record, env: Environment, reason: str = "apply=False: the plan was not applied") -> dict:
    """The gate said no. Under papermill the run ends here as "planned". In a live notebook the
    operator has not decided yet (the Apply button may still be pressed): the line shown here
    follows the record (waiting, applied, the outcome), and a kernel that ends before Apply is
    pressed closes the record as "planned" then."""
    if live_notebook():
        if record.doc.get("outcome") == "running" and not record.doc.get("applied_at"):
            record.put("reason", WAITING)
            atexit.register(_close_at_exit, record, env)
        record.watch(unapplied_view)
        return record.doc
    return _close_unapplied(record, env, reason)


def _close_at_exit(record: Record, env: Environment) -> None:
    record.detach()  # the kernel is ending: no notebook to update any more
    _close_unapplied(record, env, "the notebook's kernel ended before Apply was pressed; the plan was not applied")


def _close_unapplied(record: Record, env: Environment, reason: str) -> dict:
    """Close a record whose plan was not applied as "planned" (nothing done if it was applied
    or has ended since)."""
    if record.doc.get("outcome") != "running" or record.doc.get("applied_at"):
        return record.doc
    plan = record.doc.get("plan") or {}
    if plan:
        record.doc["timing"] = {"estimate_s": plan.get("estimate_s"), "actual_s": None,
                                "clock": "simulated" if env.simulated else "wall", "failsafe_s": 0.0}
    return finish(record, env, "planned", reason, keep=True)


def change_and_report(env: Environment, plan: Plan | list[dict], record: Record, throttle: str | float = "auto",
                      speed: float = 2000.0, client_load: float = 0.5, max_wait_s: float = 900.0,
                      throttle_metrics: str = "") -> ChangeResult:
    """The gate's "yes": apply, monitor, verify, show the throttle chart, the decisions and the
    cluster after, and close the record. Raises when the change did not finish cleanly (so
    `kit run` exits non-zero); the record says why either way."""
    from IPython.display import display

    with record.step("apply, monitor, verify"):
        result = apply_and_monitor(env, plan, throttle, speed, client_load, max_wait_s=max_wait_s, record=record,
                                   throttle_metrics=throttle_metrics)
    if throttle == "auto":
        display(events_table(result))
    cluster, _ = env.read()
    display(distribution_chart(cluster, title="Replicas per broker after the change"))
    if result.done and result.cleared:
        failure = record.doc.get("throttle_failure")
        floor = record.doc.get("timing", {}).get("failsafe_s")
        finish(record, env, "succeeded", "every partition done, throttles cleared" +
               (f" (the auto-throttle stopped early, so the copy ran at its minimum rate: {failure})" if failure else "")
               + ("; some brokers copied at the fail-safe rate for part of the run" if floor and not failure else ""))
        return result
    reason = ("the reassignment did not finish within max_wait_s; it goes on in the cluster"
              if not result.done else "throttles were left behind")
    finish(record, env, "failed", reason)
    raise RuntimeError(reason)


# -- the cluster's clock, the fail-safe, the headline ----------------------------------------

def _parse_time(stamp: str) -> datetime:
    return datetime.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def simulated_copy_seconds(samples_dir: str, report: str | None = None) -> tuple[float | None, bool]:
    """The simulated controller's own clock from the reassignment's start to its end:
    (seconds, finished). Its `--report` file says it exactly (`completion_s`); without one,
    its replica samples (`ts`, `reassigning`) do, to a sample's spacing: the controller writes
    a sample when it picks the reassignment up and one when nothing is left to copy."""
    if report and os.path.exists(report):
        with open(report, encoding="utf-8") as fh:
            done = json.load(fh).get("completion_s")
        if done is not None:
            return float(done), True

    files = sorted(glob.glob(os.path.join(samples_dir, "replica", "*.jsonl")))
    first = last = None
    for path in files:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        line = text.split("\n", 1)[0]
        if not line:
            continue
        ts = _parse_time(json.loads(line)["ts"])
        first = first or ts
        last = ts
        if '"reassigning":true' not in text:
            return (ts - first).total_seconds(), True
    return ((last - first).total_seconds() if first else None), False


def _copy_end(samples_dir: str, wait_s: float) -> tuple[float | None, bool]:
    """`simulated_copy_seconds` from the samples, waiting up to `wait_s` wall seconds for the
    sample that shows the copy ended."""
    deadline = time.monotonic() + wait_s
    while True:
        actual, copied = simulated_copy_seconds(samples_dir)
        if copied or time.monotonic() > deadline:
            return actual, copied
        time.sleep(0.2)


def event_window(events: list[dict], start: datetime | None, end: datetime | None,
                 wall_span: tuple | None = None) -> tuple:
    """The span the auto-throttle's events are read on: (start, end, scale, own_clock).

    Normally the change's span on the cluster's clock. When the events are on another clock
    (the loop found no samples on the simulated cluster and stamped them with the wall
    clock), the change's span on that clock (`wall_span`: apply and done, wall stamps; else
    the events' own first to last), with `scale` converting its seconds to the cluster's."""
    first, last = _parse_time(events[0]["time"]), _parse_time(events[-1]["time"])
    if start is None:
        return first, max(end or last, last), 1.0, False
    limit = (end or start) + timedelta(days=7)
    if start - timedelta(hours=1) <= first <= limit:
        return start, max(end or last, start), 1.0, False
    if wall_span and wall_span[0]:
        first = _parse_time(wall_span[0])
        last = _parse_time(wall_span[1]) if wall_span[1] else max(last, first)
    own = max((last - first).total_seconds(), 1.0)
    scale = (end - start).total_seconds() / own if end is not None else 1.0
    return first, last, scale, True


def floor_time(events_path: str, start: datetime | None, end: datetime | None,
               minimum: float | None = None, failsafe_only: bool = False, applied_to=(),
               wall_span: tuple | None = None) -> dict:
    """How long the auto-throttle held brokers at its minimum rate, from its events: a broker's
    role is held from a `failsafe` decision (or a rate at the minimum, or the plan's applied
    minimum before the first decision) until a higher rate, a `clear`, `done`, or `end`. With
    `failsafe_only`, only the fail-safe proper counts (metrics missing or stale).

    `applied_to` are the brokers the plan was applied to at the minimum that send or receive a
    copy (never a dead broker, nor a follower that stays: throttled with the plan, they copy
    nothing): one the loop never set a rate for (a copy that ended before the loop's first
    round, a loop slow to start that found the broker's partitions done and cleared it) copied
    at that rate, for want of metrics, until the loop cleared it or the copy ended. Returns
    {"seconds": time any broker was held, "brokers": {broker: seconds}, "rate": bytes/s}."""
    floor = Settings().minimum if minimum is None else minimum
    events = [e for e in read_events(events_path) if e.get("source") == "throttle"]
    if not events:
        if start is None or end is None or end <= start or not applied_to:
            return {"seconds": 0.0, "brokers": {}, "rate": floor}
        span = (end - start).total_seconds()
        return {"seconds": span, "brokers": {int(b): span for b in sorted(applied_to)}, "rate": floor}
    start, end, scale, _ = event_window(events, start, end, wall_span)
    held = _held_from_start(events, start, floor, failsafe_only, applied_to)
    spans: list[tuple[int, datetime, datetime]] = []

    def release(key, t):
        since = held.pop(key, None)
        if since is not None and t > since:
            spans.append((key[0], since, t))
    for e in events:
        t = min(max(_parse_time(e["time"]), start), end)
        roles = [e["role"]] if e.get("role") else ["leader", "follower"]
        brokers = e.get("brokers") or []
        if e["kind"] == "done":
            for key in list(held):
                release(key, t)
        elif e["kind"] == "clear":
            for key in [k for k in held if k[0] in brokers]:
                release(key, t)
        elif e["kind"] in ("failsafe", "rate", "override") and e.get("new") is not None:
            at_floor = _metrics_missing(e) or (float(e["new"]) <= floor * 1.0001 and not failsafe_only)
            for b in brokers:
                for role in roles:
                    if at_floor:
                        held.setdefault((b, role), t)
                    else:
                        release((b, role), t)
    for key in list(held):
        release(key, end)
    per: dict[int, float] = {}
    for b in sorted({s[0] for s in spans}):
        per[b] = _union([(s, e) for x, s, e in spans if x == b]) * scale
    return {"seconds": _union([(s, e) for _, s, e in spans]) * scale, "brokers": per, "rate": floor}


def _held_from_start(events: list[dict], start: datetime, floor: float, failsafe_only: bool,
                     applied_to) -> dict[tuple[int, str], datetime]:
    """For `floor_time`: the (broker, role)s held at the minimum from `start`, before the loop's
    first decision about them."""
    held: dict[tuple[int, str], datetime] = {}
    # Before its first decision a broker copies at the rate applied with the plan (the event's
    # `old`): the auto-throttle's minimum, until the loop has metrics. One the loop never set a
    # rate for (it cleared it, or the copy ended first) copied at that minimum until then.
    seen: set = set()
    for b in map(int, applied_to):
        first = next((e for e in events if b in (e.get("brokers") or [])), None)
        if first is None or first["kind"] not in ("failsafe", "rate", "override"):
            held[(b, "leader")] = start
    for e in events:
        for b in e.get("brokers") or []:
            for role in [e["role"]] if e.get("role") else ["leader", "follower"]:
                if (b, role) in seen:
                    continue
                seen.add((b, role))
                if e["kind"] in ("failsafe", "rate", "override") and e.get("old") is not None \
                        and float(e["old"]) <= floor * 1.0001 and (not failsafe_only or _metrics_missing(e)):
                    held[(b, role)] = start
    return held


def _metrics_missing(e: dict) -> bool:
    """A decision taken for want of metrics: the fail-safe, or the minimum until the first ones."""
    return e["kind"] == "failsafe" or "no metrics" in (e.get("reason") or "")


def _union(spans: list) -> float:
    total, reach = 0.0, None
    for s, e in sorted(spans):
        if reach is None or s > reach:
            total += (e - s).total_seconds()
            reach = e
        elif e > reach:
            total += (e - reach).total_seconds()
            reach = e
    return total


def outcome_line(record: dict) -> str:
    """The outcome with its caveat: 'succeeded (with 2h 47m at the 10 MB/s fail-safe on
    brokers 1001, 1002)'."""
    line = record.get("outcome") or "running"
    floor = (record.get("timing") or {}).get("failsafe") or {}
    if floor.get("seconds"):
        line += (f" (with {human_duration(floor['seconds'])} at the {floor['rate'] / 1e6:.0f} MB/s fail-safe "
                 f"on brokers {brokers_text(sorted(int(b) for b in floor['brokers']), 8)})")
    return line


def _headline_rows(record: dict) -> list[tuple[str, str]]:
    plan, change, timing = record.get("plan") or {}, record.get("change") or {}, record.get("timing") or {}
    rows = [("outcome", outcome_line(record)), ("why", record.get("reason") or "")]
    if plan:
        what = f"{plan.get('partitions', 0):,} partition(s)"
        if plan.get("replica_additions") is not None:
            what += f", {plan['replica_additions']:,} replica copies"
        if plan.get("bytes_moved_gb") is not None:
            what += f", {plan['bytes_moved_gb']:,.1f} GB to copy"
        if plan.get("brokers_in") or plan.get("brokers_out"):
            what += (f"; brokers losing replicas: {brokers_text(plan.get('brokers_out')) or 'none'}; "
                     f"gaining: {brokers_text(plan.get('brokers_in')) or 'none'}")
        rows.append(("what changed" if change else "what would change", what))
    if timing:
        clock = timing.get("clock")
        which = ("the simulated cluster's clock" if clock == "simulated" else "wall clock") if clock else ""
        actual = timing.get("actual_s")
        why = plan.get("estimate_unknown") if timing.get("estimate_s") is None else None
        rows.append((f"duration ({which})" if which else "duration",
                     f"estimated {human_duration(timing.get('estimate_s'))}{f' ({why})' if why else ''}, actual "
                     + (human_duration(actual) if actual is not None else
                        "not finished" if change else "not applied")))
        floor = timing.get("failsafe") or {}
        # A fixed throttle has no auto-throttle: no fail-safe, no minimum to speak of.
        auto = (record.get("parameters") or {}).get("throttle", "auto") == "auto"
        if change and (auto or timing.get("failsafe_s")):
            rows.append(("at the fail-safe (metrics missing)",
                         f"{human_duration(timing.get('failsafe_s') or 0)}"
                         + (f" ({floor['rate'] / 1e6:.0f} MB/s; brokers "
                            f"{brokers_text(sorted(int(b) for b in floor.get('brokers', {})))})"
                            if timing.get("failsafe_s") else "")))
        if change and timing.get("minimum_s") is not None and (auto or timing["minimum_s"]):
            rows.append(("at the minimum rate", f"{human_duration(timing['minimum_s'])} with some broker copying at "
                         f"the auto-throttle's {Settings().minimum / 1e6:.0f} MB/s minimum (the rate the plan is "
                         "applied with, until its first decision; the fail-safe; or a NIC its clients fill)"))
    urp = record.get("under_replicated") or {}
    if urp:
        after = urp.get("after")
        rows.append(("under-replicated partitions", f"{urp.get('before')} → {after if after is not None else '(not applied)'}"))
    if change.get("rollback"):
        rows.append(("rollback file", change["rollback"]))
    elif plan.get("file"):
        rows.append(("plan file", plan["file"]))
    rows.append(("started → finished (UTC, wall clock)", f"{record.get('started') or ''} → {record.get('finished') or '…'}"))
    if record.get("command"):
        rows.append(("reproduce", record["command"]))
    return [(k, v) for k, v in rows if v]


class Headline:
    """The record's headline, shown first: in `kit run`'s executed notebook and HTML, and at
    the end of a change started with the Apply button (`headline`)."""

    def __init__(self, record: dict):
        self.record = record

    def title(self) -> str:
        return f"{self.record.get('runbook', 'runbook')}: {outcome_line(self.record)}"

    def text(self) -> str:
        rows = _headline_rows(self.record)
        width = max(len(k) for k, _ in rows)
        return "\n".join([self.title()] + [f"  {k:<{width}}  {v}" for k, v in rows[1:]])

    def _repr_html_(self) -> str:
        rows = _headline_rows(self.record)
        ok = self.record.get("outcome") in ("succeeded", "planned") and not (self.record.get("timing") or {}).get("failsafe_s")
        color = "#2e7d32" if ok else "#c62828"
        body = "".join(f"<tr><th style='text-align:left;padding-right:1em;vertical-align:top;white-space:nowrap'>"
                       f"{escape(k)}</th>"
                       f"<td style='text-align:left'>{escape(str(v))}</td></tr>" for k, v in rows[1:])
        started = escape(str(self.record.get("started") or ""))  # marks this run's headline in a saved notebook
        return (f"<div class='kit-headline' data-started='{started}'><h2 style='color:{color};margin:0 0 .3em 0'>{escape(self.title())}</h2>"
                f"<table style='font-size:110%'>{body}</table></div>")

    def __repr__(self) -> str:
        return self.text()


def headline(record) -> Headline:
    """The headline of a record (its dict, a `Record`, or the path of its JSON file)."""
    if isinstance(record, Record):
        record = record.doc
    elif isinstance(record, (str, os.PathLike)):
        with open(record, encoding="utf-8") as fh:
            record = json.load(fh)
    return Headline(record)


HEADLINE_TAG = "kit-headline"
# nbconvert's JupyterLab page less what it fetches from a CDN (require.js, MathJax, mermaid, the
# widgets' renderer): a record opens complete with no network. The runbooks need none of them:
# their charts are PNGs, their tables HTML, and they write no formulas.
OFFLINE_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""


def record_notebook(notebook: str, record: dict, out_notebook: str, html: str, hide_input: bool = False) -> None:
    """Turn an executed runbook into its record: a headline cell at the top (its input hidden;
    its output rendered from the JSON record), the HTML's title `<runbook>: <outcome>`, then
    the notebook and one self-contained HTML page that loads nothing from the network (charts
    are embedded PNGs; `OFFLINE_TEMPLATE`). Both are written whole or not at all."""
    import nbformat
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import TagRemovePreprocessor

    nb = nbformat.read(notebook, as_version=4)
    nb.cells = [c for c in nb.cells if HEADLINE_TAG not in c.get("metadata", {}).get("tags", [])]
    head = headline(record)
    where = record.get("json") or ""
    cell = nbformat.v4.new_code_cell(
        f"# The record's headline, filled in from the JSON record when the run ended.\n"
        f"from kit.runbook.steps import headline\nheadline({where!r})" if where else "# The record's headline.")
    cell.metadata.update(tags=[HEADLINE_TAG], jupyter={"source_hidden": True})
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": head._repr_html_(),
                                                                  "text/plain": head.text()})]
    nb.cells.insert(0, cell)
    nb.metadata["title"] = head.title()
    exporter = HTMLExporter(exclude_input=hide_input, exclude_input_prompt=hide_input,
                            extra_loaders=[DictLoader({"kit-offline.html.j2": OFFLINE_TEMPLATE})],
                            template_file="kit-offline.html.j2")
    exporter.register_preprocessor(TagRemovePreprocessor(remove_input_tags={HEADLINE_TAG}, enabled=True), True)
    body, _ = exporter.from_notebook_node(nb)
    write_atomic(out_notebook, nbformat.writes(nb) + "\n")
    write_atomic(html, body)


def replacement_pairs(cluster: Cluster, replace: str, checks: Checks) -> list[tuple[int, int]]:
    """The OLD:NEW pairs (given, or each dead broker with an empty live broker), checked:
    OLD holds replicas, NEW is live and empty, and in OLD's rack when that is known."""
    try:
        if replace:
            pairs = []
            for item in replace.split(","):
                old, _, new = item.partition(":")
                pairs.append((int(old), int(new)))
        else:
            pairs = pair_dead_with_new(cluster)
    except (ValueError, BadInput) as e:
        checks.check("brokers to replace", False, str(e) if isinstance(e, BadInput) else f"{replace!r}: expected OLD:NEW")
        return []
    held = set(cluster.map_brokers())
    for old, new in pairs:
        b_new = cluster.brokers.get(new)
        checks.check(f"broker {old} holds replicas", old in held, "" if old in held else "nothing to move off it")
        checks.check(f"broker {new} is live", bool(b_new and b_new.alive),
                     "" if b_new and b_new.alive else "not registered (no live broker has that id)")
        checks.check(f"broker {new} is empty", new not in held, "" if new not in held else "it already holds replicas")
        r_old, r_new = cluster.rack_of(old), cluster.rack_of(new)
        if r_old is not None:
            checks.check(f"broker {new} is in broker {old}'s rack", r_old == r_new, f"{r_new} vs {r_old}")
    return pairs


def lost_rack(cluster: Cluster) -> str | None:
    """The rack whose brokers are all dead, if one is; else, when dead brokers of unknown rack
    exist (ZooKeeper keeps no rack for a dead broker), a label for them that `plan_az_loss`
    takes as "the dead brokers"."""
    racks: dict[str, list[bool]] = {}
    for b in cluster.brokers.values():
        if b.rack:
            racks.setdefault(b.rack, []).append(b.alive)
    gone = sorted(r for r, alive in racks.items() if not any(alive))
    if gone:
        return gone[0]
    if any(not b.alive and b.rack is None for b in cluster.brokers.values()):
        return "unregistered"
    return None


def cluster_after_moves(cluster: Cluster, moves: list[dict]) -> Cluster:
    """The cluster once a reassignment's moves are done."""
    new = {(m["topic"], m["partition"]): list(m["replicas"]) for m in moves}
    return cluster.with_assignment([new.get(p.key, list(p.replicas)) for p in cluster.partitions])


def write_moves(moves: list[dict], workdir: str) -> str:
    path = os.path.join(workdir, "plan.json")
    write_atomic(path, dumps({"version": 1, "partitions": moves}))
    return path


def write_plan(plan: Plan, workdir: str) -> str:
    path = os.path.join(workdir, "plan.json")
    write_atomic(path, dumps(plan.reassignment()))
    return path
