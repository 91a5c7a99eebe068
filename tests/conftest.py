"""Shared fixtures: the `shared/` folder beside the clone and small generated cluster snapshots."""
from __future__ import annotations

import contextlib
import itertools
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

# The harness kit ships (kit/testing.py); tests import these names from here or from kit.testing.
from kit.testing import (PROGRESS_LINE, SimulatedCluster, finish_reassignment, kit_command,  # noqa: F401
                         kraft_cluster, local_zookeeper, run_kit, seed, simulated_cluster, wait_for)

# Every JVM the tests start (each test's ZooKeeper, PySpark's driver for `kit metrics`) runs
# for seconds on a few kilobytes: compiled by the client compiler only, with the serial
# collector. Starting them took most of their CPU; this halves it (tests/metrics: 200 -> 121
# CPU s) and changes nothing they do. (Each JVM says "Picked up JDK_JAVA_OPTIONS" on its
# stderr; no test reads a JVM's stderr.) Set outside to try others.
os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

# CI (CI=true, as .ci/run is called) draws the same examples every run: a red build is then
# the code's fault, reproducible, never the luck of a new random draw. Elsewhere hypothesis
# explores afresh each run, and what it finds becomes a pinned test.
hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    hypothesis_settings.load_profile("ci")


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist, the tests marked slow (tens of seconds to minutes each) first in each
    worker's share, dealt to the workers in turn: `--dist worksteal` first splits the tests in
    order into one contiguous share per worker, and a worker that runs out takes the back half
    of another's queue. In collection order they sat in a few shares, late: the run ended with
    one worker still on a runbook while the others had stopped. Only the order changes."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    slow = [item for item in items if item.get_closest_marker("slow")]
    if workers < 2 or not slow:
        return
    rest = iter([item for item in items if not item.get_closest_marker("slow")])
    order, left = [], len(items)
    for k in range(workers):
        size = left // (workers - k)  # the share worksteal's first deal sends the k-th worker
        left -= size
        share = slow[k::workers]
        order += share + list(itertools.islice(rest, max(0, size - len(share))))
    items[:] = order + list(rest)


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
    from kit.errors import BadInput

    try:
        with local_zookeeper(str(tmp_path_factory.mktemp("zookeeper"))) as connect:
            yield connect
    except BadInput as e:
        pytest.fail(f"ZooKeeper is needed for these tests: {e}")


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


# `kit plan replace` of a snapshot, by snapshot: a plan is a pure function of its cluster
# (tests/plan/test_plan_properties.py: plans are deterministic), and the tests that take one
# here test what is done with it, not the planning (two child processes, ~5 s under load, per use).
_REPLACE_PLANS: dict[str, str] = {}


def plan_replace(snap, folder: Path) -> Path:
    """`kit plan replace` of `snap`'s dead broker by its new one (scripts/demo_replace_arg.py
    names the pair), written to folder/plan.json: its path. Planned once per snapshot per test
    process; each caller gets its own copy of the file."""
    plan = folder / "plan.json"
    key = str(Path(snap).resolve())
    if key not in _REPLACE_PLANS:
        replace = subprocess.run([sys.executable, str(Path(__file__).parents[1] / "scripts" / "demo_replace_arg.py"),
                                  str(snap)], capture_output=True, text=True, check=True).stdout.strip()
        r = run_kit("plan", "replace", "--snapshot", snap, "--replace", replace, "--out", plan)
        assert r.returncode == 0, r.stderr
        _REPLACE_PLANS[key] = plan.read_text()
    else:
        plan.write_text(_REPLACE_PLANS[key])
    return plan


def seed_and_apply_replace(root: str, snap, folder: Path, *apply_args) -> Path:
    """Seed `snap` into the ZooKeeper chroot `root`, plan the replacement of its dead broker and
    apply it (`apply_args`: e.g. a throttle) without copying anything yet: the plan's path."""
    assert run_kit("sim", "seed", "--zk", root, "--snapshot", snap).returncode == 0
    plan = plan_replace(snap, folder)
    assert run_kit("apply", plan, "--zk", root, *apply_args).returncode == 0
    return plan


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


@pytest.fixture(params=["zookeeper", "kraft"])
def sim_cluster(request, zookeeper, snapshots, tmp_path, monkeypatch):
    """sim_cluster(scenario="scale-out") -> a started `SimulatedCluster` (kit.testing) of the
    standard small cluster `scenario`, of each kind in turn (the test runs once per backend);
    stopped after.

    ZooKeeper mode: `kit sim seed` in a chroot of the session's ZooKeeper and `kit sim run` in
    the background; KRaft: `kit sim start --kraft`'s code (kit's own state in tmp_path). Both
    run the same simulated controller at `SIM_SPEED` (kit.testing.simulated_cluster).
    """
    kind = request.param
    monkeypatch.setenv("KIT_STATE_DIR", str(tmp_path / "kit-state"))
    count = itertools.count()
    with contextlib.ExitStack() as started:
        def start(scenario: str = "scale-out") -> SimulatedCluster:
            folder = tmp_path / f"cluster-{next(count)}"
            folder.mkdir()
            return started.enter_context(simulated_cluster(kind, snapshots[scenario], folder, SIM_SPEED,
                                                           f"{zookeeper}/kit-either-{next(_sim_roots)}"))
        yield start


def falling_rate_copy():
    """Issue 39's falling copy rate, as (cluster, running reassignment): broker 1 leads three
    partitions copying to broker 3, broker 2 one; every broker's NIC 100 MB/s; each partition
    12 GB. The tests set the throttles and the bytes copied."""
    from kit.formats import cluster_from_snapshot

    leaders = (1, 1, 1, 2)
    cluster = cluster_from_snapshot({"version": 1, "brokers": [{"id": b, "rack": "r", "net_capacity": 100e6}
                                                               for b in (1, 2, 3)],
                                     "partitions": [{"topic": "t", "partition": i, "replicas": [s, 3], "isr": [s],
                                                     "size": 12e9} for i, s in enumerate(leaders)]})
    running = {"partitions": [{"topic": "t", "partition": i, "replicas": [s, 3]} for i, s in enumerate(leaders)]}
    return cluster, running


def skewed_cluster(rng_seed: int, *, most_brokers: int, rack_choices: list, topics: tuple[int, int],
                   partitions: tuple[int, int], most_rf: int):
    """A small random cluster drawn from `rng_seed`: 3 to `most_brokers` - 1 brokers in racks of one
    of `rack_choices`, `topics` (low, high) topics of `partitions` (low, high) partitions each,
    RF 1 to `most_rf`, seven replicas in ten on the first half of the brokers (a skew to balance)."""
    from kit.model import Broker, Cluster, Partition

    rng = random.Random(rng_seed)
    ids = list(range(1, rng.randint(4, most_brokers)))
    racks = rng.choice(rack_choices)
    brokers = {b: Broker(id=b, rack=rng.choice(racks)) for b in ids}
    heavy = ids[:len(ids) // 2 + 1]
    parts = []
    for t in range(rng.randint(*topics)):
        for n in range(rng.randint(*partitions)):
            pool = heavy if rng.random() < 0.7 else ids
            reps = tuple(rng.sample(pool, rng.randint(1, min(most_rf, len(pool)))))
            parts.append(Partition(topic=f"t{t}", partition=n, replicas=reps, isr=reps, leader=reps[0]))
    return Cluster(brokers=brokers, partitions=tuple(parts))
