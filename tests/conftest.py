"""Shared fixtures: the `shared/` folder beside the clone and small generated cluster snapshots."""
from __future__ import annotations

import contextlib
import itertools
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

# CI (CI=true, as .ci/run is called) draws the same examples every run: a red build is then
# the code's fault, reproducible, never the luck of a new random draw. Elsewhere hypothesis
# explores afresh each run, and what it finds becomes a pinned test.
hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    hypothesis_settings.load_profile("ci")

# shared/ sits beside the repository root (as in the Makefile); the SHARED variable points elsewhere.
SHARED = Path(os.environ.get("SHARED", Path(__file__).resolve().parents[2] / "shared"))

# The standard small clusters: 12 brokers in 3 racks, 600 RF-3 partitions over 20 topics.
SMALL = ("--brokers", "12", "--racks", "3", "--partitions", "600", "--seed", "1")
SNAPSHOTS = {
    "replace": SMALL + ("--scenario", "replace", "--dead", "1"),  # one dead broker, one new empty one in its rack
    "scale-out": SMALL + ("--scenario", "scale-out", "--add", "3"),  # three new empty brokers, one per rack
    "az-loss": SMALL + ("--scenario", "az-loss"),  # every broker of rack-c dead
    "balanced": SMALL + ("--scenario", "balanced"),
}


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The `shared` folder (design notes, gen_cluster.py, evaluate_plan.py); skips when it is missing."""
    if not (SHARED / "tools" / "gen_cluster.py").exists():
        pytest.skip(f"shared tools not found in {SHARED} (set SHARED)")
    return SHARED


@pytest.fixture(scope="session")
def make_snapshot(shared_dir, tmp_path_factory):
    """make_snapshot(*gen_cluster_args) -> Path of a generated snapshot, cached for the session."""
    gen = shared_dir / "tools" / "gen_cluster.py"
    root = tmp_path_factory.mktemp("snapshots")
    cache: dict[tuple[str, ...], Path] = {}

    def make(*args: str) -> Path:
        key = tuple(args)
        if key not in cache:
            out = root / f"cluster-{len(cache)}.json"
            subprocess.run([sys.executable, str(gen), *args, "--out", str(out)], check=True, timeout=120)
            cache[key] = out
        return cache[key]

    return make


@pytest.fixture(scope="session")
def snapshots(make_snapshot) -> dict[str, Path]:
    """The standard small clusters by scenario name: replace, scale-out, az-loss, balanced."""
    return {name: make_snapshot(*args) for name, args in SNAPSHOTS.items()}


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    """A real ZooKeeper server on a free loopback port for the whole session: its connect string."""
    from kit.cluster.zk import server as localzk
    from kit.errors import BadInput

    try:
        localzk.classpath()
    except BadInput as e:
        pytest.fail(f"ZooKeeper is needed for these tests: {e}")
    data = str(tmp_path_factory.mktemp("zookeeper"))
    server = localzk.start(localzk.free_port(), data)
    yield server.connect
    _stop_simulated_brokers(server.connect)
    for client in _BROKER_SESSIONS:
        client.stop()
        client.close()
    localzk.stop(data)


@contextlib.contextmanager
def restarting_zookeeper(snapshot, tmp_path):
    """A ZooKeeper of its own holding `snapshot` (brokers registered in a session that must
    survive), with its scale-out plan applied at 50 MB/s. Yields (root, plan, restart, client):
    `restart(while_down=None)` stops the server, waits (calling `while_down()` while it is
    down), starts it again on the same port and data, then lets the simulated controller copy
    everything."""
    from kit.cluster.zk import server as localzk
    from kit.sim.brokers import sync_registrations
    from kit.cluster.zk.layout import connect, write_cluster
    from kit.formats import load_snapshot

    port, data = localzk.free_port(), str(tmp_path / "zk")
    root = f"{localzk.start(port, data).connect}/kafka"
    brokers = connect(root)
    try:
        write_cluster(brokers, load_snapshot(str(snapshot)))
        sync_registrations(brokers)
        plan = tmp_path / "plan.json"
        assert run_kit("plan", "scale-out", "--snapshot", snapshot, "--out", plan).returncode == 0
        assert run_kit("apply", plan, "--zk", root, "--throttle", "50000000").returncode == 0

        def restart(while_down=None):
            time.sleep(1.5)
            localzk.stop(data)
            if while_down is not None:
                while_down()
            time.sleep(1.5)
            wait_for(f"port {port} free again", lambda: localzk.port_free(port))
            localzk.start(port, data)
            finish_reassignment(root)
        yield root, plan, restart, brokers
    finally:
        brokers.stop()
        brokers.close()
        localzk.stop(data)


@contextlib.contextmanager
def kraft_cluster(snapshot, state, **options):
    """A simulated KRaft cluster holding `snapshot`, started in the state directory `state` by
    the code behind `kit sim start --kraft` (`options`: speed, client_load, sample_every) and
    stopped afterwards: yields its bootstrap line."""
    from kit.sim.kraft import cluster as kraft

    line = kraft.start(str(snapshot), str(state), **options)
    try:
        yield line
    finally:
        kraft.stop(str(state))


def plan_replace(snap, folder: Path) -> Path:
    """`kit plan replace` of `snap`'s dead broker by its new one (scripts/demo_replace_arg.py
    names the pair), written to folder/plan.json: its path."""
    replace = subprocess.run([sys.executable, str(Path(__file__).parents[1] / "scripts" / "demo_replace_arg.py"),
                              str(snap)], capture_output=True, text=True, check=True).stdout.strip()
    plan = folder / "plan.json"
    assert run_kit("plan", "replace", "--snapshot", snap, "--replace", replace, "--out", plan).returncode == 0
    return plan


def seed_and_apply_replace(root: str, snap, folder: Path, *apply_args) -> Path:
    """Seed `snap` into the ZooKeeper chroot `root`, plan the replacement of its dead broker and
    apply it (`apply_args`: e.g. a throttle) without copying anything yet: the plan's path."""
    assert run_kit("sim", "seed", "--zk", root, "--snapshot", snap).returncode == 0
    plan = plan_replace(snap, folder)
    assert run_kit("apply", plan, "--zk", root, *apply_args).returncode == 0
    return plan


def finish_reassignment(root: str) -> None:
    """What Kafka's controller does, by kit's simulated controller: copy the reassignment in
    flight to its end, then drop it."""
    from kit.cluster.zk.layout import close, connect
    from kit.sim.controller import SimController

    client = connect(root)
    try:
        ctl = SimController(client, speed=1e6)
        for _ in range(1000):  # a bound on steps, never on time: each step copies 10^6 simulated seconds
            if not ctl.busy():
                break
            ctl.step(1.0)
        assert not ctl.busy(), "the simulated controller did not finish"
    finally:
        close(client)


def _stop_simulated_brokers(connect_string: str) -> None:
    """Stop every `kit sim seed` holder the tests started (one per chroot)."""
    from kit.sim.brokers import HOLDER, stop_holder
    from kit.cluster.zk.layout import connect

    root = connect(connect_string)
    try:
        chroots = [c for c in root.get_children("/") if root.exists(f"/{c}{HOLDER}")]
    finally:
        root.stop()
        root.close()
    for c in chroots:
        client = connect(f"{connect_string}/{c}")
        try:
            stop_holder(client)
        finally:
            client.stop()
            client.close()


def kit_command() -> list[str]:
    """The installed `kit` command line (the console script, else `python -m kit`)."""
    exe = Path(sys.executable).parent / "kit"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "kit"]


# A progress line on stderr (kit/progress.py): "kit plan · ... · elapsed 12s (wall clock)".
PROGRESS_LINE = re.compile(r"kit [a-z -]+ · .*\(wall clock\)")


def wait_for(what: str, ready, limit: float = 300.0, every: float = 0.2):
    """Poll `ready()` until it returns something true (returned): the event itself, however loaded
    the machine, failing with `what` after `limit` seconds (minutes, not seconds)."""
    deadline = time.monotonic() + limit
    while True:
        got = ready()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what}: not within {limit:.0f} s"
        time.sleep(every)


def run_kit(*args, env=None, timeout=120, cwd=None) -> subprocess.CompletedProcess:
    """The installed `kit` command, run for real in a child process. Progress lines, which
    a slow machine prints and a fast one does not, are taken out of `stderr` into
    `progress`: what a test asserts of stderr is the same on both."""
    r = subprocess.run(kit_command() + [str(a) for a in args], capture_output=True, text=True, env=env,
                       timeout=timeout, cwd=cwd)
    lines = r.stderr.splitlines(keepends=True)
    r.progress = [x.rstrip("\n") for x in lines if PROGRESS_LINE.fullmatch(x.rstrip("\n"))]
    r.stderr = "".join(x for x in lines if not PROGRESS_LINE.fullmatch(x.rstrip("\n")))
    return r


# Sessions holding seeded brokers' ephemeral registrations, as running brokers would; closed
# when the session's ZooKeeper stops.
_BROKER_SESSIONS: list = []


def seed(connect_string: str, cluster) -> None:
    """Lay a cluster out in Kafka's znodes under `connect_string` (HOST:PORT/chroot), its live
    brokers registered (ephemeral) by a client kept open for the rest of the test session."""
    from kit.sim.brokers import sync_registrations
    from kit.cluster.zk.layout import connect, write_cluster

    client = connect(connect_string)
    _BROKER_SESSIONS.append(client)
    write_cluster(client, cluster)
    sync_registrations(client)


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for the whole test session (2 cores, 2 shuffle partitions, no UI),
    made quiet the way `kit metrics` makes it; the in-process `kit metrics` calls reuse it."""
    pytest.importorskip("pyspark")
    from kit.metrics.edge import spark_session

    session = spark_session("local[2]", shuffle_partitions=2)
    yield session
    session.stop()


# The simulated clusters of both kinds, for the behaviour suites written once for both backends.
# Simulated seconds per wall second: a copy of the standard clusters at the brokers' NICs takes
# a few of the simulated controller's steps (each advances at most 0.5 wall seconds' worth).
SIM_SPEED = 10000
# Bytes/s: a reassignment throttled so that it runs until the test lets it go (at SIM_SPEED the
# smallest partition of the standard clusters, 745 MB, would take two hours of wall time).
CRAWL = 10
_sim_roots = itertools.count()


@dataclass
class SimulatedCluster:
    """A started simulated cluster, ZooKeeper mode or KRaft, its simulated controller running.

    `flag` reaches it from the command line (``--zk ROOT`` or ``--bootstrap HOST:PORT,...``),
    `where` names it to `kit sim kill/revive` (``--zk ROOT`` or ``--state DIR``), `backend()`
    reads it back through kit's one seam (`kit.cluster.backend.open_backend`); `seeded` is the
    snapshot's cluster it was started from.
    """

    kind: str
    flag: tuple[str, str]
    where: tuple[str, str]
    seeded: object

    def backend(self):
        """A `ClusterBackend` on the cluster (closed by a ``with`` block)."""
        from kit.cluster.backend import open_backend

        return open_backend(**{self.flag[0][2:]: self.flag[1]})

    def let_go(self) -> None:
        """Lift every broker's replication throttle (to 1 TB/s): the simulated controller then
        finishes the copies in flight within seconds (verify clears the throttles after)."""
        from kit.throttle.configs import FOLLOWER_RATE, LEADER_RATE

        with self.backend() as b:
            cluster, _ = b.read()
            b.set_throttles(brokers={i: {LEADER_RATE: str(10**12), FOLLOWER_RATE: str(10**12)}
                                     for i in cluster.live_ids})


@pytest.fixture(params=["zookeeper", "kraft"])
def sim_cluster(request, zookeeper, snapshots, tmp_path, monkeypatch):
    """sim_cluster(scenario="scale-out") -> a started `SimulatedCluster` of the standard small
    cluster `scenario`, of each kind in turn (the test runs once per backend); stopped after.

    ZooKeeper mode: `kit sim seed` in a chroot of the session's ZooKeeper and `kit sim run` in
    the background; KRaft: `kit sim start --kraft`'s code (kit's own state in tmp_path). Both
    run the same simulated controller at `SIM_SPEED`.
    """
    from kit.formats import load_snapshot
    from kit.sim.kraft import cluster as kraft

    kind, stop = request.param, []
    monkeypatch.setenv("KIT_STATE_DIR", str(tmp_path / "kit-state"))

    def start(scenario: str = "scale-out") -> SimulatedCluster:
        snap = snapshots[scenario]
        if kind == "kraft":
            state = tmp_path / f"kraft-{len(stop)}"
            # Samples every simulated hour, not kit sim run's minute: none of these tests reads
            # them, and the controller writes each due one (600 partitions' replicas) in its step.
            line = kraft.start(str(snap), str(state), speed=SIM_SPEED, sample_every=3600.0)
            stop.append(lambda: kraft.stop(str(state)))
            return SimulatedCluster(kind, ("--bootstrap", line), ("--state", str(state)), load_snapshot(str(snap)))
        root = f"{zookeeper}/kit-either-{next(_sim_roots)}"
        r = run_kit("sim", "seed", "--zk", root, "--snapshot", snap)
        assert r.returncode == 0, r.stderr
        log = open(tmp_path / f"controller-{len(stop)}.log", "wb")
        controller = subprocess.Popen(kit_command() + ["sim", "run", "--zk", root, "--speed", str(SIM_SPEED)],
                                      stdout=log, stderr=subprocess.STDOUT)
        log.close()

        def end():
            controller.terminate()
            try:
                controller.wait(timeout=30)
            except subprocess.TimeoutExpired:
                controller.kill()
                controller.wait(timeout=30)
        stop.append(end)
        return SimulatedCluster(kind, ("--zk", root), ("--zk", root), load_snapshot(str(snap)))

    yield start
    for end in reversed(stop):
        end()
