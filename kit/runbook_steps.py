"""What the runbooks do, step by step: the notebooks in runbooks/ are a parameters cell and
calls into this module, each followed by a table or a chart.

A runbook opens an `Environment` (the cluster's ZooKeeper, or, by default, a local ZooKeeper
with a simulated cluster set up for the situation), shows the situation, runs pre-checks
(`Checks`: a visible PASS/FAIL line each; a failure raises `CheckFailed` and stops the
runbook), shows the plan, waits at the gate (`apply`), applies with the auto-throttle,
monitors until done, verifies, and keeps a `Record` (JSON beside the executed notebook).
"""
from __future__ import annotations

import atexit
import contextlib
import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import BadInput
from .events import read_events
from .formats import dumps, load_snapshot, write_atomic
from .model import Cluster, Plan

RUNBOOKS = Path(__file__).resolve().parent.parent / "runbooks"
# The simulated clusters are gen_cluster.py's; their brokers are instance type "standard", 125 MB/s.
SIMULATED_CAP_MAP = {"*": 125}


class CheckFailed(Exception):
    """A pre-check failed: the runbook stops here, and its record says why."""


# -- the record ------------------------------------------------------------------------------

class Record:
    """The machine-readable record of one run, rewritten (atomically) after every change so
    that a run cut short still leaves what it did. Parameters are stored as given: the
    runbooks take no credentials (ZooKeeper auth comes from KIT_ZK_AUTH)."""

    def __init__(self, path: str, runbook: str, parameters: dict):
        self.path = path or ""
        self.doc = {"runbook": runbook, "started": _now(), "finished": None, "outcome": "running",
                    "reason": None, "parameters": _public(parameters), "steps": [], "checks": [],
                    "command": command_line(runbook, parameters)}
        self.save()

    @contextlib.contextmanager
    def step(self, name: str):
        """Time one step; an exception is recorded against it and goes on."""
        entry = {"step": name, "started": _now(), "seconds": None, "ok": None}
        self.doc["steps"].append(entry)
        t0 = time.monotonic()
        try:
            yield entry
            entry["ok"] = True
        except BaseException as e:
            entry["ok"] = False
            entry["error"] = f"{type(e).__name__}: {e}"
            raise
        finally:
            entry["seconds"] = round(time.monotonic() - t0, 3)
            self.save()

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


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _public(parameters: dict) -> dict:
    secret = ("pass", "secret", "token", "auth", "key")
    return {k: ("***" if any(s in k.lower() for s in secret) else v) for k, v in sorted(parameters.items())
            if k != "record_path"}


def command_line(runbook: str, parameters: dict) -> str:
    """The `kit run` command that reproduces a run."""
    args = ["kit", "run", runbook]
    for k, v in sorted(_public(parameters).items()):
        args += ["-p", k, v if isinstance(v, str) else json.dumps(v)]
    return " ".join(shlex.quote(a) for a in args)


# -- the environment -------------------------------------------------------------------------

@dataclass
class Environment:
    """Where the runbook works: a ZooKeeper connect string and, for the embedded default, the
    local ZooKeeper and simulated brokers it started (stopped by `close`, or at exit)."""

    zk: str
    simulated: bool
    workdir: str
    zk_data: str | None = None
    cap_map: dict = field(default_factory=dict)

    def read(self) -> tuple[Cluster, dict | None]:
        """The cluster as ZooKeeper has it now, and the reassignment in flight."""
        from .zookeeper import read_cluster

        with _client(self) as c:
            cluster, running = read_cluster(c)
        default = self.cap_map.get("*")
        if default:  # ZooKeeper has no NIC figures: the capacity map's default feeds the estimates
            import dataclasses

            for b in list(cluster.brokers.values()):
                if b.net_capacity is None:
                    cluster.brokers[b.id] = dataclasses.replace(b, net_capacity=int(default * 1e6))
        return cluster, running

    def close(self) -> None:
        if self.zk_data:
            from . import localzk
            from .simbrokers import stop_holder

            with contextlib.suppress(Exception), _client(self) as c:
                stop_holder(c)
            localzk.stop(self.zk_data)
            self.zk_data = None


def _client(env: Environment):
    from .zookeeper import session

    return session(env.zk)


def open_environment(zk: str, situation: str, workdir: str, cap_map: dict | None = None) -> Environment:
    """Connect to `zk`, or (empty `zk`) start a local ZooKeeper holding a simulated cluster in
    the given situation (runbooks/clusters/<situation>.json) with its brokers running."""
    from . import localzk
    from .simbrokers import start_holder
    from .zookeeper import write_cluster

    os.makedirs(workdir, exist_ok=True)
    if zk:
        env = Environment(zk, False, workdir, cap_map=dict(cap_map or {}))
        with _client(env):
            pass  # reachable, or BadInput with one line
        return env
    snapshot = RUNBOOKS / "clusters" / f"{situation}.json"
    if not snapshot.exists():
        raise BadInput(f"no simulated cluster for {situation!r} in {snapshot.parent}")
    data = os.path.join(workdir, "zookeeper")
    server = localzk.start(localzk.free_port(), data)
    env = Environment(f"{server.connect}/kafka", True, workdir, data, dict(cap_map or SIMULATED_CAP_MAP))
    atexit.register(env.close)
    with _client(env) as c:
        write_cluster(c, load_snapshot(str(snapshot)))
    start_holder(env.zk)
    return env


# -- the situation ---------------------------------------------------------------------------

def per_broker(cluster: Cluster, after: Cluster | None = None) -> tuple[dict, dict | None]:
    """kit's per-broker figures (`figures.broker_figures`: leaders, followers, replicas, free
    storage) now, and after a plan when given; the live brokers are the targets."""
    from .figures import broker_figures

    targets = cluster.live_ids or sorted(cluster.brokers)
    now = broker_figures(cluster, None, targets)
    return now, (broker_figures(cluster, after.assignment(), targets) if after is not None else None)


def _by_rack(cluster: Cluster) -> list:
    return sorted(cluster.brokers.values(), key=lambda b: (str(b.rack), b.id))


def broker_table(cluster: Cluster, after: Cluster | None = None):
    """One row per broker: rack, alive, replicas, leaders, free storage (and after a plan)."""
    import pandas as pd

    now, later = per_broker(cluster, after)
    rows = []
    for b in _by_rack(cluster):
        f = now.get(b.id, {})
        row = {"broker": b.id, "rack": b.rack, "alive": b.alive, "replicas": f.get("replicas", 0),
               "leaders": f.get("leaders", 0)}
        if b.storage_free is not None:
            row["free GB"] = round(b.storage_free / 1e9, 1)
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
            rows.append({"partition": p.name, "replicas": list(p.replicas), "isr": list(p.isr),
                         "missing": missing, "reason": why})
    return pd.DataFrame(rows, columns=["partition", "replicas", "isr", "missing", "reason"])


def charts() -> None:
    """HoloViews drawn by matplotlib: a record's HTML then shows every chart offline."""
    import holoviews as hv

    hv.extension("matplotlib", logo=False)
    hv.output(fig="png", dpi=80)


def distribution_chart(cluster: Cluster, after: Cluster | None = None, title: str = "Replicas per broker"):
    """Leaders and followers per broker (labelled rack/broker, so racks sit together), and
    below it the same after the plan."""
    import holoviews as hv

    brokers = _by_rack(cluster)
    labels = {b.id: f"{b.rack or '-'}/{b.id}{'' if b.alive else ' dead'}" for b in brokers}
    now, later = per_broker(cluster, after)

    def bars(figs, label):
        rows = []
        for b in brokers:
            f = figs.get(b.id, {})
            rows += [(labels[b.id], "leaders", f.get("leaders", 0)), (labels[b.id], "followers", f.get("followers", 0))]
        return hv.Bars(rows, ["broker", "role"], "replicas").opts(
            stacked=True, xrotation=90, title=f"{title}: {label}", show_legend=True, legend_position="right",
            fig_inches=(max(7, len(brokers) * 0.35), 3.2), color=hv.Cycle(["#1f77b4", "#aec7e8"]))

    chart = bars(now, "now")
    return chart if later is None else (chart + bars(later, "after the plan")).cols(1)


def storage_chart(cluster: Cluster, after: Cluster | None = None):
    """Free storage per broker (GB), now and after the plan."""
    import holoviews as hv

    _, later = per_broker(cluster, after)
    rows = []
    for b in _by_rack(cluster):
        if not b.alive or b.storage_free is None:
            continue
        rows.append((str(b.id), "now", b.storage_free / 1e9))
        if later is not None and later.get(b.id, {}).get("storage_free") is not None:
            rows.append((str(b.id), "after", later[b.id]["storage_free"] / 1e9))
    return hv.Bars(rows, ["broker", "when"], "free GB").opts(
        title="Free storage per broker", xrotation=90, fig_inches=(max(6, len(rows) * 0.3), 3.0))


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
    """ZooKeeper answers and no reassignment is running; returns the cluster."""
    cluster, running = env.read()
    checks.check("ZooKeeper answers", True, env.zk.split("/")[0] + (" (simulated cluster)" if env.simulated else ""))
    checks.check("no reassignment in progress", running is None,
                 "" if running is None else f"{len(running.get('partitions', []))} partition(s) moving now")
    return cluster, running


# -- the plan --------------------------------------------------------------------------------

def plan_summary(plan: Plan, throttle: str | float = "auto", client_load: float | None = None,
                 interval: float = 30.0) -> dict:
    """Print the topicmappr-style summary with the duration estimate; return the figures.

    The estimate predicts the run `apply_and_monitor` makes: pass the same `throttle`, the same
    what-if `client_load` (None: the cluster's own traffic figures) and the auto-throttle's
    `interval` in cluster seconds (on the simulated cluster: its wall interval x speed).
    """
    from .autothrottle import Settings
    from .figures import plan_report, summary_text
    from .waves import duration_lines, duration_report, moves_of, split_waves

    report = plan_report(plan)
    rate = None if throttle == "auto" else float(throttle)
    duration = duration_report(plan, split_waves(moves_of(plan)), rate, client_load, Settings(interval=interval))
    print(summary_text(plan, report, max_changes=20))
    print("\n".join(duration_lines(duration, max_waves=5)))
    after, movement = report["after"], report["movement"]
    return {"partitions": len(plan.changed()), "replica_additions": movement["replica_additions"],
            "bytes_moved_gb": movement["bytes_moved_gb"], "duration_s": duration["estimate_s"],
            "estimate_s": duration["estimate_s"], "lower_bound_s": duration["lower_bound_s"],
            "estimate_assumptions": duration["assumptions"],
            "failover_excess_spread_max": after["failover_excess_spread_max"],
            "replica_count_spread": after["replica_count_spread"],
            "leader_count_spread": after["leader_count_spread"]}


def after_cluster(plan: Plan) -> Cluster:
    return plan.cluster.with_assignment(plan.after)


# -- the gate, the change, the monitor -------------------------------------------------------

def gate(apply: bool, on_apply) -> bool:
    """True when the runbook may change the cluster now (`apply=True`). Otherwise, in a live
    notebook, show an Apply button that runs `on_apply()` when pressed; under papermill
    nothing is applied and the record says the run only planned."""
    if apply:
        print("apply=True: applying the plan")
        return True
    print("apply=False: nothing is changed. Re-run with -p apply true, or press Apply below.")
    try:
        import ipywidgets as widgets
        from IPython.display import display
    except ImportError:
        return False
    button = widgets.Button(description="Apply", button_style="danger", icon="play")
    out = widgets.Output()

    def clicked(_):
        button.disabled = True
        with out:
            on_apply()
    button.on_click(clicked)
    display(widgets.VBox([button, out]))
    return False


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
    from . import execute
    from .autothrottle import Settings

    moves = plan.reassignment()["partitions"] if isinstance(plan, Plan) else list(plan)
    if not moves:
        raise BadInput("the plan changes nothing")
    events = os.path.join(env.workdir, "events.jsonl")
    samples = os.path.join(env.workdir, "samples")
    rollback = os.path.join(env.workdir, "rollback.json")
    err_path = os.path.join(env.workdir, "throttle.err")
    static = Settings().minimum if throttle == "auto" else float(throttle)
    with _client(env) as c:
        execute.apply_plan(c, moves, static, rollback)
    print(f"applied: {len(moves)} partition(s); rollback plan in {rollback}")
    kit = [sys.executable, "-m", "kit"]
    procs = []
    scale = speed if env.simulated else 1.0  # the simulated cluster's seconds per wall second
    # A round of the loop needs real time to read and write ZooKeeper: at most two a second,
    # whatever the simulated interval; the simulator samples twice per round.
    wall_interval = max(interval / scale, 0.5)
    if env.simulated:
        procs.append(subprocess.Popen(kit + ["sim", "run", "--zk", env.zk, "--speed", str(speed), "--until-idle",
                                             "--client-load", str(client_load), "--samples", samples,
                                             "--sample-every", str(max(60.0, wall_interval * scale / 2)),
                                             "--report", os.path.join(env.workdir, "controller.json")],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    if throttle == "auto":
        source = _metric_source(env, throttle_metrics, samples)
        cmd = kit + ["throttle", "run", "--zk", env.zk, *source, "--interval", str(wall_interval),
                     "--events", events, "--log", os.path.join(env.workdir, "throttle.log"), "--until-idle",
                     "--max-seconds", str(max_wait_s)]
        if env.cap_map:
            cmd += ["--cap-map", json.dumps(env.cap_map)]
        if env.simulated:
            cmd += ["--clock", "samples"]  # the chart then spans the cluster's (simulated) hours
        with open(err_path, "w") as errors:  # the child keeps its own copy of the descriptor
            loop = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errors)
        procs.append(loop)
    else:
        loop = None
    warned = False
    t0 = time.monotonic()
    progress, total, done = [], None, False
    handle = _display_handle()
    chart = _display_handle() if throttle == "auto" else None
    drawn = 0.0
    try:
        while time.monotonic() - t0 < max_wait_s:
            with _client(env) as c:
                st = execute.status(c)
            total = total or max(st["bytes_left"], 1)
            elapsed = time.monotonic() - t0
            progress.append({"wall_s": round(elapsed, 2), "bytes_left": st["bytes_left"],
                             "partitions_left": st["reassigning_partitions"]})
            _show_progress(handle, st, total, elapsed, scale)
            if chart is not None and elapsed - drawn >= 5.0 and os.path.exists(events):
                drawn = elapsed  # the live throttle chart, redrawn every few seconds
                chart.update(throttle_chart(ChangeResult(False, elapsed, None, events, samples, rollback, False)))
            if not st["reassigning_partitions"]:
                done = True
                break
            if loop is not None and loop.poll() not in (None, 0) and not warned:
                warned = True  # said once, loudly; the copy goes on at the rates in force
                with open(err_path) as fh:
                    why = fh.read().strip().splitlines()[-1:] or ["?"]
                print(f"WARNING: the auto-throttle stopped (exit {loop.returncode}: {why[0]}); the copy goes on "
                      f"at the rates in force (at least {Settings().minimum / 1e6:.0f} MB/s)")
                if record is not None:
                    record.put("throttle_failure", why[0])
            time.sleep(0.5)
    finally:
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.terminate()
    with _client(env) as c:
        res = execute.verify(c, moves)
        throttled = execute.status(c)["throttled_brokers"]
    result = ChangeResult(done and res["done"], round(time.monotonic() - t0, 2),
                          round((time.monotonic() - t0) * speed, 0) if env.simulated else None,
                          events, samples, rollback, not throttled, progress)
    print(f"verify: {sum(r['done'] for r in res['partitions'])} of {len(res['partitions'])} partition(s) done; "
          f"throttles left: {', '.join(map(str, throttled)) or 'none'}")
    if record is not None:
        record.put("change", {"done": result.done, "wall_seconds": result.wall_seconds,
                              "simulated_seconds": result.simulated_seconds, "throttles_cleared": result.cleared,
                              "rollback": rollback, "events": events})
    return result


def _metric_source(env: Environment, where: str, samples: str) -> list[str]:
    """The auto-throttle's metric source as `kit throttle run` options."""
    if where == "znode":
        return ["--metrics-znode"]
    if where and os.path.isdir(where) and (os.path.exists(os.path.join(where, "broker_load.parquet"))
                                          or os.path.exists(os.path.join(where, "broker_rates.json"))):
        return ["--metrics", where]
    return ["--samples", where or samples]


def _display_handle():
    try:
        from IPython.display import HTML, display

        return display(HTML(""), display_id=True)  # filled in by update(); nothing shows until then
    except Exception:  # noqa: BLE001  (not in a notebook)
        return None


def _show_progress(handle, st: dict, total: int, elapsed: float, scale: float) -> None:
    left = st["bytes_left"]
    share = 1 - left / total if total else 1.0
    rate = (total - left) / elapsed if elapsed > 0 and total > left else 0.0
    eta = left / rate * scale if rate else None
    from .waves import human_duration

    bar = "#" * int(share * 30) + "." * (30 - int(share * 30))
    line = (f"[{bar}] {share:5.1%}  {left / 1e9:,.1f} GB left in {st['reassigning_partitions']} partition(s)"
            f"  ETA {human_duration(eta) if eta else '-'}" + (" (simulated)" if scale != 1.0 else ""))
    if handle is not None:
        from IPython.display import Pretty

        handle.update(Pretty(line))  # plain text, not a quoted string
    else:
        print(line)


def throttle_chart(result: ChangeResult):
    """The auto-throttle's rates per broker and role over the run (from its events)."""
    import holoviews as hv

    curves: dict[str, list] = {}
    for e in read_events(result.events_path):
        if e.get("source") != "throttle" or not e.get("brokers"):
            continue
        when = _when(e["time"])
        for b in e["brokers"]:
            if e["kind"] == "clear":  # every role of the broker drops to no throttle
                for key in [k for k in curves if k.split()[0] == str(b)]:
                    curves[key].append((when, 0.0))
            elif e["kind"] in ("rate", "failsafe", "override") and e.get("new") is not None:
                for role in ([e["role"]] if e.get("role") else ["leader", "follower"]):
                    curves.setdefault(f"{b} {role}", []).append((when, e["new"] / 1e6))
    if not curves:
        return hv.Text(0, 0, "no auto-throttle decisions were made")
    overlay = hv.Overlay([hv.Curve(sorted(pts, key=lambda x: x[0]), "time", "MB/s", label=k).opts(interpolation="steps-post")
                          for k, pts in sorted(curves.items())])
    return overlay.opts(title="Replication throttle per broker (auto-throttle decisions)", fig_inches=(9, 3.5),
                        legend_position="right", xrotation=30)


def _when(stamp: str):
    from datetime import datetime

    return datetime.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")


def events_table(result: ChangeResult, limit: int = 30):
    """The auto-throttle's decisions, newest first."""
    import pandas as pd

    rows = read_events(result.events_path, newest_first=True)[:limit]
    cols = ["time", "kind", "brokers", "role", "old", "new", "reason"]
    return pd.DataFrame([{k: r.get(k) for k in cols} for r in rows], columns=cols)


def finish(record: Record, env: Environment, outcome: str, reason: str | None = None, keep: bool = False) -> dict:
    """Close the record (and the embedded cluster, unless kept for an Apply button press)."""
    doc = record.finish(outcome, reason)
    if not keep:
        env.close()
    print(f"outcome: {outcome}" + (f" ({reason})" if reason else ""))
    return doc


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
        display(throttle_chart(result))
        display(events_table(result))
    cluster, _ = env.read()
    display(distribution_chart(cluster, title="Replicas per broker after the change"))
    if result.done and result.cleared:
        failure = record.doc.get("throttle_failure")
        finish(record, env, "succeeded", "every partition done, throttles cleared" +
               (f" (the auto-throttle stopped early, so the copy ran at its minimum rate: {failure})" if failure else ""))
        return result
    reason = ("the reassignment did not finish within max_wait_s; it goes on in the cluster"
              if not result.done else "throttles were left behind")
    finish(record, env, "failed", reason)
    raise RuntimeError(reason)


def replacement_pairs(cluster: Cluster, replace: str, checks: Checks) -> list[tuple[int, int]]:
    """The OLD:NEW pairs (given, or each dead broker with an empty live broker), checked:
    OLD holds replicas, NEW is live and empty, and in OLD's rack when that is known."""
    from .plan.replace import pair_dead_with_new

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
                     "" if b_new and b_new.alive else "not registered in ZooKeeper")
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
