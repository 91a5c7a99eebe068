"""Where a runbook works (`Environment`): a cluster of yours (ZooKeeper, or a KRaft cluster's
brokers through the Admin API), or the simulated cluster it starts for its situation, marks
as kit's in its workdir, and stops or replaces; the auto-throttle's interval on it.
"""
from __future__ import annotations

import atexit
import contextlib
import dataclasses
import os
import shutil
from dataclasses import dataclass, field

from kit.cluster.backend import ClusterAddress, ClusterBackend, open_backend, parse_bootstrap
from kit.cluster.zk import server as localzk
from kit.errors import BadInput, Unsafe
from kit.events import utc_now
from kit.formats import dumps, load_snapshot
from kit.files import read_json_object, write_atomic
from kit.model import Cluster
from kit.nic import broker_capacity
from kit.pids import alive
from kit.runbook.catalog import RUNBOOKS
from kit.sim.kraft import state as kraft_files

# The simulated clusters (kit.sim.kraft.cluster, kit.sim.brokers) and ZooKeeper sessions
# (kit.cluster.zk.layout) are imported by the functions that start them or reach their
# ZooKeeper (a simulated KRaft cluster's state directory is read and ended through
# kit.sim.kraft.state, which loads no client): they load kafka-python and kazoo, which `import kit.runbook.steps` (`kit run`, before any kernel starts)
# does not need; the cluster itself is opened through the seam (`open_backend`), which loads
# only the backend it opens.

# The simulated clusters are gen_cluster.py's; their brokers are instance type "standard", 125 MB/s.
SIMULATED_CAP_MAP = {"*": 125}

# The embedded simulated clusters a runbook may start (its `cluster` parameter).
SIMULATED_CLUSTERS = ("zookeeper", "kraft")
ADMIN_TIMEOUT_S = 30.0


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
    samples: str = ""  # where the simulated controller writes its metric samples

    @property
    def address(self) -> ClusterAddress:
        """The cluster's address, for `open_backend` and `kit.doctor.load.run` (credentials from
        the environment variables, see `backend`)."""
        return ClusterAddress(bootstrap=self.bootstrap) if self.bootstrap else ClusterAddress(zk=self.zk)

    def backend(self) -> ClusterBackend:
        """The cluster the runbook works on. Credentials come from the environment, never from
        parameters: $KIT_ZK_AUTH for ZooKeeper, $KIT_KAFKA_COMMAND_CONFIG (Kafka's client
        properties file) for the Admin API, whose requests may take `ADMIN_TIMEOUT_S` (a broker
        answers a config or log dir request beside its clients; the runbook can wait)."""
        return open_backend(self.address, timeout=ADMIN_TIMEOUT_S if self.bootstrap else None)

    def cluster_flags(self) -> list[str]:
        """The address as `kit` command-line options (--zk or --bootstrap); credentials stay in
        the environment variables the children inherit."""
        return self.address.flags()

    @property
    def reached_through(self) -> str:
        """What the cluster is reached through, as its backend says it ("ZooKeeper", "Kafka (Admin API)")."""
        return self.address.reached_through

    @property
    def controller_running(self) -> bool:
        """Whether the simulated controller already runs (the simulated KRaft cluster's does)."""
        return self.kraft_state is not None

    def read(self) -> tuple[Cluster, dict | None]:
        """The cluster as ZooKeeper (or the Admin API) has it now, and the reassignment in flight."""
        with self.backend() as backend:
            cluster, running = backend.read()
        facts = {}
        if self.kraft_state:  # the simulated cluster knows its brokers' NICs (kit sim start kept them)
            facts = kraft_files.read_facts(self.kraft_state)["brokers"]
        elif self.simulated:  # (kit sim seed kept them)
            from kit.cluster.zk.layout import read_sim_facts  # lazy: see the top

            with _simulator(self) as c:
                facts = read_sim_facts(c)["brokers"]
        # ZooKeeper has no NIC figures: the estimates read each broker's as the auto-throttle
        # decides it (kit.nic.broker_capacity), from the capacity map (MB/s) and the simulated
        # cluster's facts; a broker with none stays without one (the estimates say so).
        caps = {k: v * 1e6 for k, v in self.cap_map.items()}
        for b in list(cluster.brokers.values()):
            with contextlib.suppress(BadInput):
                cluster.brokers[b.id] = dataclasses.replace(
                    b, net_capacity=broker_capacity(b, caps, facts.get(str(b.id))))
        return cluster, running

    def close(self) -> None:
        if self.zk_data:
            from kit.sim.brokers import stop_holder  # lazy: see the top

            with contextlib.suppress(Exception), _simulator(self) as c:
                stop_holder(c)
            localzk.stop(self.zk_data)
            self.zk_data = None
        if self.kraft_state:
            kraft_files.stop(self.kraft_state)
            self.kraft_state = None


def _simulator(env: Environment):
    """A session to the simulated cluster's local ZooKeeper, for what only the simulator keeps
    there (its brokers' facts and registrations): with ... as client."""
    from kit.cluster.zk.layout import session  # lazy: see the top

    return session(env.zk)


# The file that marks a workdir's simulated cluster as kit's own (who started it, when): only
# what it marks is ever stopped and removed to make way for a new one.
SIMULATED_MARKER = "kit-simulated-cluster.json"

# A simulated cluster's own folders in its workdir (`open_environment`), and what a run on it
# leaves there (`apply_plan`, `start_processes`, `write_plan`): a new simulated cluster starts its
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
    info = read_json_object(marker) or {}
    owner = info.get("pid")
    if isinstance(owner, int) and owner != os.getpid() and alive(owner):
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


def stop_simulated(workdir: str) -> bool:
    """Stop an embedded simulated cluster a runbook left running in `workdir` (its kernel ended
    before `Environment.close`: a failed cell under papermill); True when one was running."""
    from kit.cluster.zk.layout import session  # lazy: see the top
    from kit.sim.brokers import stop_holder

    stopped = False
    state = os.path.join(workdir, "kraft")
    if os.path.isdir(state) and kraft_files.running(state):
        stopped = kraft_files.stop(state) or True
    data = os.path.join(workdir, "zookeeper")
    server = localzk.status(data)
    if server is not None:
        with contextlib.suppress(Exception), session(f"{server.connect}/kafka") as c:
            stop_holder(c)
        stopped = localzk.stop(data) or True
    return stopped


def simulated_address(workdir: str) -> ClusterAddress | None:
    """The address of the embedded simulated cluster running in
    `workdir` as `open_environment` lays it out, or None when none runs there: `kit run` reads
    an interrupted run's cluster through it before `stop_simulated`."""
    state = os.path.join(workdir, "kraft")
    if os.path.isdir(state) and kraft_files.running(state):
        try:
            with open(os.path.join(state, "bootstrap"), encoding="utf-8") as fh:
                return ClusterAddress(bootstrap=fh.read().strip())
        except OSError:  # still starting: it has no listeners yet
            return None
    server = localzk.status(os.path.join(workdir, "zookeeper"))
    return ClusterAddress(zk=f"{server.connect}/kafka") if server is not None else None


def check_address(zk: str, bootstrap: str, cluster: str) -> None:
    """BadInput (one line) unless the runbook's cluster parameters make one cluster: `zk` or
    `bootstrap` (not both), else the simulated `cluster` ("zookeeper" or "kraft")."""
    if cluster not in SIMULATED_CLUSTERS:
        raise BadInput(f'parameter cluster: "zookeeper" or "kraft", got {cluster!r}')
    if zk and bootstrap:
        raise BadInput("parameters zk and bootstrap: give one, not both")  # the parameters' names, not the options'
    if zk and cluster == "kraft":
        raise BadInput("parameter cluster kraft is the simulated KRaft cluster: a KRaft cluster of yours "
                       "takes bootstrap, not zk")
    if bootstrap:
        parse_bootstrap(bootstrap)  # HOST:PORT[,HOST:PORT...], else one line


# The auto-throttle's interval on the simulated cluster, in simulated seconds, at any speed: the
# cluster's clock waits for each of its rounds (kit/sim/clock.py), and each round costs wall time
# (the loop and the controller each read the whole cluster from ZooKeeper, one after the other),
# so rounds every 5 simulated minutes keep a runbook's run to about a minute.
SIMULATED_INTERVAL_S = 300.0


def simulated_sample_every() -> float:
    """Simulated seconds between the simulated controller's samples: one per round of the
    auto-throttle, each landing on a round's simulated second."""
    return SIMULATED_INTERVAL_S


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
        with env.backend():
            pass  # reachable, or BadInput with one line
        return env
    from kit.cluster.zk.layout import write_cluster  # lazy: see the top
    from kit.sim.brokers import start_holder

    snapshot = RUNBOOKS / "clusters" / f"{situation}.json"
    if not snapshot.exists():
        raise BadInput(f"no simulated cluster for {situation!r} in {snapshot.parent}")
    caps = dict(cap_map or SIMULATED_CAP_MAP)
    replaced = replace_simulated(workdir)
    if replaced:
        print(replaced)
    write_atomic(os.path.join(workdir, SIMULATED_MARKER),
                 dumps({"cluster": cluster, "situation": situation, "started": utc_now(), "pid": os.getpid()}))
    if cluster == "kraft":
        from kit.sim.kraft import cluster as kraft_sim  # lazy: kafka-python, which a ZooKeeper run does not load

        state = os.path.join(workdir, "kraft")
        line = kraft_sim.start(str(snapshot), state, speed, client_load, sample_every=simulated_sample_every())
        env = Environment("", True, workdir, cap_map=caps, bootstrap=line, kraft_state=state,
                          samples=os.path.join(state, "samples"))
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


def loop_interval(env: Environment | None, interval: float = 30.0) -> float:
    """The auto-throttle's interval as `apply_and_monitor` runs it, in seconds of the cluster's
    clock: `interval` wall seconds on a cluster of yours; on the simulated one
    `SIMULATED_INTERVAL_S` simulated seconds, whatever the speed (the speed paces the wall clock
    only)."""
    return SIMULATED_INTERVAL_S if env is not None and env.simulated else interval


def rollback_path(env: Environment) -> str:
    """Where the change writes its rollback plan (before it changes anything)."""
    return os.path.abspath(os.path.join(env.workdir, "rollback.json"))
