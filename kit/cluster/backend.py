"""The seam between kit and a Kafka cluster: what kit does to one, whatever reaches it.

`ClusterBackend` lists those operations, drawn from what kit's callers do today (`kit apply`,
`verify`, `rollback`, `elect`, `status`, the doctor, the runbooks, the dashboard and the
auto-throttle), as one protocol per role: `Connection`, `Reading`, `Reassigning`,
`Throttling`, `Overrides` (an auto-throttle's records beside the cluster) and `Metrics`. A
caller handed a backend names the roles it uses (tests/test_seam_roles.py). `open_backend` is
the one place where a backend is chosen: the ZooKeeper backend
(`kit.cluster.zk.backend.ZkBackend`, --zk) or the Admin API's
(`kit.cluster.kafka.backend.AdminBackend`, --bootstrap). Each turns its library's errors into
kit's (`kit.errors`), so callers catch only those.

Plans travel as Kafka's reassignment entries (`moves`: ``{"topic", "partition",
"replicas"}`` dicts) and throttles as Kafka's own config keys (`kit.throttle.configs`), so a
backend only translates, never decides.
"""
from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from kit.errors import BadInput
from kit.model import Cluster
from kit.throttle.lease import Lease

# How long to wait for ZooKeeper to answer when connecting (seconds), as Kafka's
# zookeeper.connection.timeout.ms; --zk-connect-timeout (`ClusterAddress.zk_connect_timeout`) sets it.
DEFAULT_TIMEOUT = 10.0


def read_auth_file(path: str) -> str:
    """`open_backend`'s `auth` from the first line of a file (kept out of `ps` and shell history).

    Raises
    ------
    BadInput
        The file cannot be read or holds no SCHEME:CREDENTIALS; the message names the file,
        never its content.
    """
    from kit.cluster.zk import layout  # lazy: see backend_class

    return layout.read_auth_file(path)


@runtime_checkable
class Connection(Protocol):
    """The connection itself: closing it, what it is reached through, its health for a
    long-running caller."""

    def __enter__(self) -> Connection: ...

    def __exit__(self, exc_type, exc, tb) -> None: ...

    def close(self) -> None:
        """Let go of the connection (idempotent)."""

    reached_through: str
    """What the cluster is reached through, for messages ("ZooKeeper", "Kafka (Admin API)")."""

    connection_lost: tuple[type[BaseException], ...]
    """The errors any call raises while the cluster cannot be reached (the connection or the
    session lost): a long-running caller retries on them, the state it set left in force."""

    def watch_connection(self, patience: float, on_change: Callable[[str | None], None] | None = None
                         ) -> ConnectionWatch:
        """Start watching the connection for a long-running caller: after `patience` seconds
        without the cluster, calls still waiting for it fail (`connection_lost`) and the watch
        says it gave up. `on_change`, if given, is called from the watch's own thread when the
        connection goes (with what was seen, e.g. "connection lost") and when it is back (None):
        a call already waiting for the cluster says nothing until then. Closed by the caller
        before it closes the backend."""


@runtime_checkable
class Reading(Protocol):
    """Reading the cluster: its brokers and partitions, the reassignment in flight (and a watch
    on it), its state; nothing here changes the cluster."""

    def read(self) -> tuple[Cluster, dict | None]:
        """The cluster now, and the reassignment in flight.

        Returns
        -------
        (Cluster, dict or None)
            The reassignment is Kafka's JSON (``{"version": 1, "partitions": [...]}``), None when
            none runs.
        """

    def follow(self, current: bool = False) -> None:
        """From now on `read` may answer from what it read before where the cluster did not
        change since (a long-running reader's rounds: the auto-throttle loop, the dashboard's
        poller). Only for a caller that changes no replica list itself. `current`: every read
        still returns each change made before it was called (a reader that another process
        tells when it wrote: the loop on a simulated cluster's clock). Nothing by default:
        every `read` asks the cluster."""

    def reassigning(self) -> bool:
        """Whether a reassignment runs now (cheaper than `read`)."""

    def watch_reassignment(self, callback: Callable[[], None]) -> None:
        """Call `callback` (from another thread) once now, then whenever a reassignment starts,
        changes or ends, until `close`."""

    def status(self) -> dict:
        """Brokers, under-replicated partitions, the reassignment in flight and the throttles set;
        the dict of `kit.cluster.zk.changes.status`."""

    def sim_facts(self) -> dict | None:
        """The simulated cluster's own facts, None on a real cluster.

        Returns
        -------
        dict or None
            What `kit sim seed` kept beside the cluster: ``{"brokers": {id: {"net_capacity",
            ...}}, "traffic": {...}}`` (brokers' capacities and disks, partitions' traffic).
        """


@runtime_checkable
class Reassigning(Protocol):
    """Reassignments: start one (with its throttles and rollback file), follow it to its end,
    take it back, and the preferred-leader election after it."""

    def progress(self, moves: list[dict]) -> str | None:
        """How far a plan already got: "running", "in place" or None (see `kit apply` run again)."""

    def apply(self, moves: list[dict], throttle: float | None = None, rollback_out: str | None = None) -> dict:
        """Pre-flight, the rollback file, then the throttles and the reassignment, all or nothing.

        Parameters
        ----------
        moves : list of dict
            The plan's reassignment entries.
        throttle : float, optional
            Replication throttle, bytes/s per broker taking part.
        rollback_out : str, optional
            Where the current assignment of the plan's partitions is written first.

        Returns
        -------
        dict
            ``partitions``, ``throttled_topics``, ``throttled_brokers``, ``cleared_topics``,
            ``cleared_brokers`` (throttles left without a reassignment, removed).
        """

    def rollback(self, moves: list[dict], throttle: float | None = None) -> dict:
        """Start the reassignment back to a rollback file's assignment (`apply`'s checks). While a
        reassignment runs: through ZooKeeper `Unsafe` unless a destination is dead (then it is
        cancelled first); through the Admin API the file's partitions are cancelled first
        (AlterPartitionReassignments with no target), `Unsafe` while others move."""

    def verify(self, moves: list[dict] | None = None) -> dict:
        """Progress of the plan (default: the reassignment in flight), clearing the throttles no
        longer needed; the dict of `kit.cluster.zk.changes.verify`."""

    def verify_until_done(self, moves: list[dict] | None, interval: float = 5.0,
                          on_progress: Callable[[dict], None] | None = None,
                          on_retry: Callable[[str], None] | None = None, stall: float | None = None) -> dict:
        """`verify` every `interval` seconds until done, riding out lost connections; `Stuck` when
        nothing moves for `stall` seconds or never can. Returns the last `verify`."""

    def elect(self, moves: list[dict] | None = None) -> int:
        """Preferred-leader election where the first replica does not lead (the plan's partitions,
        default all); returns how many were asked for."""


@runtime_checkable
class Throttling(Protocol):
    """Kafka's replication throttle keys on brokers and topics, whoever set them."""

    def throttles(self) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
        """The throttle keys in force, whoever set them.

        Returns
        -------
        (dict, dict)
            ``{broker: {key: value}}`` (the rate keys) and ``{topic: {key: value}}`` (the
            replica lists), only entities carrying one; brokers by name ("1001", "<default>").
        """

    def set_throttles(self, brokers: Mapping[int | str, Mapping[str, str]] | None = None,
                      topics: Mapping[str, Mapping[str, str]] | None = None) -> None:
        """Merge throttle keys into brokers' and topics' configs (other keys kept)."""

    def clear_throttles(self, brokers: Iterable[int | str] = (), topics: Iterable[str] = ()
                        ) -> tuple[list[str], list[str]]:
        """Remove the throttle keys from these brokers and topics; returns the names that had some."""

    def clear_leftover_throttles(self) -> tuple[int, int]:
        """With no reassignment running, remove every throttle key; returns (brokers, topics)
        cleared. `Unsafe` while one runs."""


@runtime_checkable
class Overrides(Protocol):
    """What an auto-throttle keeps beside the cluster: kafka-kit's override rates and the
    one lease that lets a single loop act on a cluster."""

    def throttle_overrides(self) -> dict[str, tuple[str | None, bytes]]:
        """The override rates stored for an auto-throttle, unparsed, where kafka-kit's keeps them.

        Returns
        -------
        dict
            ``{where: (broker, body)}``, the global override first, then each broker's by name:
            `where` names the record (for messages), `broker` the name it is kept under (None:
            the global one, for every broker taking part), `body` its bytes (kafka-kit's
            ``{"rate": MB/s, "autoremove": bool}``, maybe empty). Empty when none is stored.
        """

    def store_throttle_override(self, body: bytes, broker: str | None = None) -> str:
        """Store an override's body, the global one or a broker's (replacing any); returns its `where`."""

    def remove_throttle_override(self, broker: str | None = None) -> bytes | None:
        """Remove a broker's override, or empty the global one to ``{}`` (kafka-kit's way, the
        brokers' kept); returns the body it had, None when none was stored."""

    def hold_lease(self, lease: Lease, ttl: float, gone: Callable[[Lease], bool]) -> Lease | None:
        """Take, or keep, the cluster's one auto-throttle lease for `lease` (`kit.throttle.lease`).

        Parameters
        ----------
        lease : Lease
            The asker (no expiry: the backend sets one where its store needs it).
        ttl : float
            Seconds an unrenewed lease lasts where the store does not end it with its holder.
        gone : callable
            Whether a holder's lease may be taken over (`kit.throttle.lease.holder_gone`).

        Returns
        -------
        Lease or None
            None when `lease` holds it now; else the holder, nothing changed.
        """

    def release_lease(self, lease: Lease) -> None:
        """Give the lease up if `lease` holds it (another's is left alone)."""

    def leases(self) -> list[Lease]:
        """The leases stored now, earliest first: the holder, and any asker of this moment or
        lapsed holder not yet cleared (none: no auto-throttle holds the cluster)."""


@runtime_checkable
class Metrics(Protocol):
    """Measured sizes and broker metrics where kafka-kit's tools keep them."""

    def write_metrics(self, partition_meta: dict, broker_metrics: dict) -> str:
        """Publish measured partition sizes and brokers' free storage where `read` (and
        kafka-kit's tools) find them, replacing what was there; returns where (for messages).

        Parameters
        ----------
        partition_meta : dict
            ``{topic: {partition: {"Size": bytes}}}``, kafka-kit's partition metadata.
        broker_metrics : dict
            ``{broker: {"StorageFree": bytes, ...}}``, kafka-kit's broker metrics.
        """

    def broker_metrics(self) -> tuple[object, float] | None:
        """kafka-kit's broker metrics (``{broker: {"StorageFree", "NetRX", "NetTX", ...}}``, as
        stored, gunzipped), and when they were written (epoch seconds); None when none are
        stored or they are not JSON."""


@runtime_checkable
class ClusterBackend(Connection, Reading, Reassigning, Throttling, Overrides, Metrics, Protocol):
    """A connection to one Kafka cluster, and everything kit does through it: each role's
    protocol above, which a caller names instead (one, or its own protocol composed of the few
    it uses, as `kit.throttle.loop.ThrottledCluster`).

    Closed by `close`, or at the end of a ``with`` block. Errors follow kit's exit codes
    (`kit.errors`): `BadInput` for a plan or address that cannot be right, `Unsafe` when a
    change is refused and nothing was changed, `Stuck` when a wait can never end.
    """

    def __enter__(self) -> ClusterBackend: ...


ROLES = (Connection, Reading, Reassigning, Throttling, Overrides, Metrics)
"""`ClusterBackend`'s protocols, one per role."""


def backend_class(bootstrap: str | None) -> type[ClusterBackend]:
    """The backend for a cluster given by `bootstrap` (else by ZooKeeper), its module imported
    now: each brings its client library (kafka-python, kazoo), so a caller loads only the one it
    opens, and importing this module loads neither."""
    if bootstrap:
        from kit.cluster.kafka.backend import AdminBackend
        return AdminBackend
    from kit.cluster.zk.backend import ZkBackend
    return ZkBackend


def _host_port(h: str) -> bool:
    """Whether `h` is HOST:PORT with a port in 1..65535."""
    return bool(re.fullmatch(r"[\w.\-\[\]:]+:\d+", h)) and 1 <= int(h.rsplit(":", 1)[1]) <= 65535


def parse_bootstrap(spec: str) -> list[str]:
    """HOST:PORT[,HOST:PORT...] as a list; `BadInput` (one line) unless every entry has a port 1..65535."""
    hosts = [h.strip() for h in (spec or "").split(",") if h.strip()]
    if not hosts or not all(map(_host_port, hosts)):
        raise BadInput(f"--bootstrap {spec!r}: expected HOST:PORT[,HOST:PORT...] with ports in 1..65535")
    return hosts


_CONNECT = re.compile(r"^(?P<hosts>[^/]+?)(?P<chroot>/.*)?$")


def parse_connect(spec: str, name: str = "--zk") -> tuple[str, str]:
    """A ZooKeeper connect string HOST:PORT[,HOST:PORT...][/chroot] as (hosts, chroot: "" or
    "/..."); BadInput (one line, naming the option or parameter `name`) for anything else."""
    m = _CONNECT.match(spec or "")
    if not m or not all(map(_host_port, m.group("hosts").split(","))):
        raise BadInput(f"{name} {spec!r}: expected HOST:PORT[/chroot] with a port in 1..65535")
    return m.group("hosts"), m.group("chroot") or ""


@dataclass(frozen=True)
class ClusterAddress:
    """Where a cluster is and what reaches it: the one value commands, the doctor, the
    dashboard's poller and the runbooks pass to `open_backend`.

    Built from kit's options (`kit.cli.options.cluster_address`) or a runbook's parameters; the
    rules of which options go together are checked here, once, when it is made (`BadInput`, one
    line, before anything is read or written). An address with neither `zk` nor `bootstrap` is
    no cluster (`live` false): a snapshot file's commands carry one, and `open_backend` refuses it.

    Parameters
    ----------
    zk : str, optional
        HOST:PORT[,HOST:PORT...][/chroot] of a ZooKeeper-mode cluster.
    bootstrap : str, optional
        Kafka's bootstrap servers HOST:PORT[,HOST:PORT...], for the Admin API (KRaft clusters).
    auth : str, optional
        ZooKeeper credentials (SCHEME:CREDENTIALS, else `kit.cluster.zk.layout.resolve_auth`'s
        environment variables); never printed (left out of the repr).
    command_config : str, optional
        Admin API: Kafka's client properties file (SASL, TLS), else
        `kit.cluster.kafka.connect`'s environment variables.
    state_file, metrics_dir : str, optional
        Admin API: where the auto-throttle's overrides and kafka-kit's metrics are kept
        (default ``$KIT_STATE_DIR/clusters/<cluster id>/state.json`` and ``.../metrics``,
        ``~/.kit`` without the variable; see `kit.cluster.kafka.local`).
    sim_facts : str, optional
        Admin API: the simulated KRaft cluster's facts file (`kit sim start --kraft` writes
        DIR/facts.json; `ClusterBackend.sim_facts`), never a real cluster's.
    zk_connect_timeout : float, optional
        ZooKeeper: seconds to wait for it to answer when connecting (--zk-connect-timeout, as
        Kafka's zookeeper.connection.timeout.ms); it wins over a caller's own `open_backend`
        timeout. Default `DEFAULT_TIMEOUT`.
    """

    zk: str | None = None
    bootstrap: str | None = None
    auth: str | None = field(default=None, repr=False)
    command_config: str | None = None
    state_file: str | None = None
    metrics_dir: str | None = None
    sim_facts: str | None = None
    zk_connect_timeout: float | None = None

    def __post_init__(self):
        if self.zk and self.bootstrap:
            raise BadInput("--zk and --bootstrap: give one, not both")
        if self.command_config and not self.bootstrap:
            raise BadInput("--command-config goes with --bootstrap (ZooKeeper takes --zk-auth-file)")
        if self.auth and self.bootstrap:
            raise BadInput("--zk-auth / --zk-auth-file go with --zk (the Admin API takes --command-config)")
        if self.sim_facts and not self.bootstrap:
            raise BadInput("--sim-facts goes with --bootstrap (the ZooKeeper simulated cluster keeps its facts itself)")
        if self.zk_connect_timeout is not None and self.bootstrap:
            raise BadInput("--zk-connect-timeout goes with --zk (the Admin API's request.timeout.ms is "
                           "in --command-config)")
        if self.zk_connect_timeout is not None and not self.zk_connect_timeout > 0:
            raise BadInput(f"--zk-connect-timeout {self.zk_connect_timeout}: expected seconds above 0")
        if (self.state_file or self.metrics_dir) and not self.bootstrap:
            raise BadInput("a state file and metrics directory beside the cluster are the Admin API's "
                           "(ZooKeeper keeps them in its znodes)")

    @property
    def live(self) -> bool:
        """Whether it names a cluster (else: no cluster, a snapshot file's commands)."""
        return bool(self.zk or self.bootstrap)

    @property
    def reached_through(self) -> str:
        """`reached_through` for this address, without opening it."""
        return reached_through(self.bootstrap)

    def flags(self) -> list[str]:
        """The address as `kit` options (``--zk X`` or ``--bootstrap X``), for the commands kit
        suggests next or starts; credentials stay where they were (files, environment)."""
        return ["--bootstrap", self.bootstrap] if self.bootstrap else ["--zk", self.zk] if self.zk else []


def open_backend(address: ClusterAddress, timeout: float | None = None) -> ClusterBackend:
    """The backend for a cluster address: the one place where a backend is chosen.

    Parameters
    ----------
    address : ClusterAddress
        The cluster (``open_backend(ClusterAddress(zk=...))`` in a notebook).
    timeout : float, optional
        Seconds to wait for the cluster to answer: ZooKeeper's connection (the address's
        `zk_connect_timeout` wins; default `DEFAULT_TIMEOUT`), or each Admin API request (default
        `kit.cluster.kafka.connect.REQUEST_SECONDS`; request.timeout.ms in the client
        properties file wins).

    Raises
    ------
    BadInput
        No cluster named, options that do not go together, or nothing answering there (within 30 s).
    """
    a = address
    if a.bootstrap:
        return backend_class(a.bootstrap)(a.bootstrap, timeout, a.command_config, a.state_file, a.metrics_dir,
                                          a.sim_facts)
    if not a.zk:
        raise BadInput("no cluster given: --zk HOST:PORT[/chroot] or --bootstrap HOST:PORT")
    # The operator's --zk-connect-timeout wins over a caller's own wait (the dashboard's poller's).
    wait = a.zk_connect_timeout or (DEFAULT_TIMEOUT if timeout is None else timeout)
    return backend_class(None)(a.zk, wait, a.auth)


def reached_through(bootstrap: str | None) -> str:
    """What a cluster given by `bootstrap` (else by ZooKeeper) is reached through, in its
    backend's own words (`ClusterBackend.reached_through`), without opening it."""
    return backend_class(bootstrap).reached_through


@runtime_checkable
class ConnectionWatch(Protocol):
    """How long a long-running caller has been without the cluster (`ClusterBackend.watch_connection`)."""

    gave_up: threading.Event
    """Set once the watch stopped waiting for the cluster (after its patience)."""

    @property
    def down(self) -> bool:
        """Whether the cluster cannot be reached now."""

    def raise_if_down(self) -> None:
        """Raise one of the backend's `connection_lost` errors now if the cluster cannot be reached
        (a call would only wait for it)."""

    def close(self) -> None:
        """Stop watching (before the backend is closed on purpose)."""
