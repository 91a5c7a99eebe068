"""Kafka's ZooKeeper layout: the connection to it, and a cluster laid out in it.

Only the znodes Kafka (ZooKeeper mode, up to 3.x) and kafka-kit keep are touched:
/brokers/ids/N, /brokers/topics/T, /brokers/topics/T/partitions/P/state,
/admin/reassign_partitions, /topicmappr/partitionmeta and /topicmappr/brokermetrics.
Reading a cluster from them is `kit.cluster.zk.read`'s.
"""
from __future__ import annotations

import contextlib
import gzip
import json
import logging
import os
import threading
import time
import warnings
from collections.abc import Callable

from kazoo.client import KazooClient, KazooState
from kazoo.protocol.states import KeeperState
from kazoo.exceptions import (AuthFailedError, ConnectionClosedError, ConnectionLoss, KazooException, NoAuthError,
                              NoNodeError, SessionExpiredError)
from kazoo.retry import KazooRetry
from kazoo.security import make_acl, make_digest_acl_credential

from kit.cluster.backend import parse_connect
from kit.cluster.zk.read import BROKER_METRICS, PARTITION_META, children_or_none, parse_znode_json
from kit.errors import BadInput, Unreachable, Unsafe
from kit.files import read_input
from kit.model import Cluster

AUTH_ENV = "KIT_ZK_AUTH"
AUTH_FILE_ENV = "KIT_ZK_AUTH_FILE"
# Kafka's own default when zookeeper.set.acl is on and nothing else is known: the creator may
# do anything, everyone may read (ZkData.defaultAcls for non-sensitive paths).
_CREATOR_ALL_WORLD_READ = [make_acl("auth", "", all=True), make_acl("world", "anyone", read=True)]


def read_auth_file(path: str) -> str:
    """SCHEME:CREDENTIALS from the first line of a file (kept out of `ps` and shell history);
    BadInput names the file, never its content."""
    raw = read_input(path, "--zk-auth-file", max_bytes=64 << 10)
    try:
        line = raw.decode().strip().splitlines()[0].strip() if raw.strip() else ""
    except UnicodeDecodeError:
        raise BadInput(f"--zk-auth-file {path}: not UTF-8 text") from None
    if ":" not in line:
        raise BadInput(f"--zk-auth-file {path}: expected one line SCHEME:CREDENTIALS, e.g. digest:user:password")
    mode = os.stat(path).st_mode & 0o777
    if mode & 0o077:
        raise BadInput(f"--zk-auth-file {path}: readable by others than its owner (mode {mode:04o}); "
                       f"chmod 600 {path}")
    return line


def resolve_auth(auth: str | None = None, auth_file: str | None = None) -> str | None:
    """The ZooKeeper credentials to use: --zk-auth-file, --zk-auth, then $KIT_ZK_AUTH_FILE,
    then $KIT_ZK_AUTH; None when none is given."""
    if auth_file:
        return read_auth_file(auth_file)
    if auth:
        return auth
    if os.environ.get(AUTH_FILE_ENV):
        return read_auth_file(os.environ[AUTH_FILE_ENV])
    return os.environ.get(AUTH_ENV) or None


def parse_auth(auth: str) -> list[tuple[str, str]]:
    """kazoo's auth_data for SCHEME:CREDENTIALS; BadInput (never quoting the credentials) when
    they cannot be right: digest's are USER:PASSWORD, both given."""
    scheme, _, cred = auth.partition(":")
    if not scheme or not cred:
        raise BadInput("ZooKeeper auth (--zk-auth-file, $KIT_ZK_AUTH): expected SCHEME:CREDENTIALS, "
                       "e.g. digest:user:password")
    user, colon, password = cred.partition(":")
    if scheme == "digest" and not (user and colon and password):
        raise BadInput("ZooKeeper auth (--zk-auth-file, $KIT_ZK_AUTH): digest credentials are USER:PASSWORD, "
                       "e.g. digest:user:password")
    return [(scheme, cred)]


def check_digest_password(acl: list, auth_data: list[tuple[str, str]]) -> None:
    """BadInput when an ACL names the digest user of `auth_data` with another password: the
    password is wrong. ZooKeeper itself accepts any digest and answers NoAuth later, for
    every path, which cannot tell a wrong password from a user without rights."""
    for scheme, cred in auth_data:
        if scheme != "digest":
            continue
        user, _, password = cred.partition(":")
        ours = make_digest_acl_credential(user, password)
        theirs = [a.id.id for a in acl if a.id.scheme == "digest" and a.id.id.split(":", 1)[0] == user]
        if theirs and ours not in theirs:
            raise BadInput(f"ZooKeeper auth: the password of digest user {user!r} is not the one the chroot's ACL "
                           "holds (a wrong password)")


def _inherit_acl(client: KazooClient) -> None:
    """Znodes kit creates get the ACL of the chroot they live in (where kit has been given
    credentials, the operator protects the chroot; a world-writable reassignment or config znode
    there would undo that). A root whose ACL kit may not read, or that does not exist yet, gets
    Kafka's own default: creator all, world read."""
    try:
        acl, _ = client.get_acls("/")
    except (NoNodeError, NoAuthError):
        acl = _CREATOR_ALL_WORLD_READ
    client.default_acl = list(acl)


# The session kit asks ZooKeeper for: Kafka's brokers' default (zookeeper.session.timeout.ms,
# 18 s since Kafka 2.5, KIP-537). kazoo reads the connection as lost after about two thirds of
# it without an answer: at 10 s a ZooKeeper stalled 7 s on a busy host cut a change short.
SESSION_TIMEOUT_S = 18.0


def connect(spec: str, timeout: float = 10.0, auth: str | None = None) -> KazooClient:
    """A started client for HOST:PORT[,HOST:PORT...][/chroot]; `Unreachable` (BadInput, one
    line) when no ZooKeeper answers within `timeout`. The session asked for is at least
    `SESSION_TIMEOUT_S`.

    `auth` is SCHEME:CREDENTIALS (e.g. digest:user:password), else `resolve_auth`'s environment
    variables; credentials are never printed. With credentials, the znodes kit creates inherit
    the chroot's ACL (`_inherit_acl`).
    """
    auth = resolve_auth(auth)
    auth_data = parse_auth(auth) if auth else None
    hosts, chroot = parse_connect(spec)
    logging.getLogger("kazoo.client").setLevel(logging.CRITICAL)
    # Reconnect attempts at most a second apart, as Kafka's ZooKeeper client retries: kazoo's
    # default backoff grows to an hour, so a client that lost ZooKeeper for minutes would come
    # back long after the server (its session expired meanwhile, a long-running wait given up).
    retry = KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0)
    client = KazooClient(hosts=hosts + chroot, timeout=max(timeout, SESSION_TIMEOUT_S), auth_data=auth_data,
                         connection_retry=retry)
    # ZooKeeper refuses an unknown scheme just after it made the session: kazoo says CONNECTED,
    # sends the credentials, then says LOST (AUTH_FAILED) and its connection thread ends (CLOSED).
    # When `start` looks after that, it reports a time-out and the state no longer says why; the
    # order of the states does. A connection dropped with the refusal is retried first
    # (CONNECTED, SUSPENDED, CONNECTED, ...), so it is a LOST right after a CONNECTED: a lost
    # connection that `start` gives up on says SUSPENDED first.
    seen: list = []
    client.add_listener(seen.append)
    try:
        with warnings.catch_warnings():
            # A chroot that does not exist yet is normal before write_cluster creates it.
            warnings.simplefilter("ignore", UserWarning)
            client.start(timeout=timeout)
    except Exception as e:
        refused = (isinstance(e, AuthFailedError) or client.client_state == KeeperState.AUTH_FAILED
                   or (KazooState.CONNECTED, KazooState.LOST) in zip(seen, seen[1:]))
        with contextlib.suppress(Exception):  # kazoo closes only a stopped client
            client.stop()
        client.close()
        if refused and auth_data:
            raise _refused_scheme(spec, auth_data) from None
        raise Unreachable(f"--zk {spec}: no ZooKeeper answers there") from None
    client.remove_listener(seen.append)
    if auth_data:
        try:
            _inherit_acl(client)  # the first request: a scheme ZooKeeper does not know fails here
            check_digest_password(client.default_acl, auth_data)
        except (AuthFailedError, BadInput) as e:
            close(client)
            raise (_refused_scheme(spec, auth_data) if isinstance(e, AuthFailedError) else e) from None
    return client


def _refused_scheme(spec: str, auth_data: list[tuple[str, str]]) -> BadInput:
    return BadInput(f"--zk {spec}: ZooKeeper refused authentication with scheme {auth_data[0][0]!r} "
                    "(for a user and password: digest:USER:PASSWORD)")


@contextlib.contextmanager
def session(spec: str, timeout: float = 10.0, auth: str | None = None):
    """`connect`, and the client closed whatever happens (with ... as client:); ZooKeeper's
    errors in the block become kit's (`translate`)."""
    client = connect(spec, timeout, auth)
    try:
        yield client
    except KazooException as e:
        raise translate(e) from None
    finally:
        close(client)


def close(client: KazooClient, patience: float = 10.0) -> None:
    """Stop and close a client, also when another thread (`Outage` giving up) is stopping it
    at the same moment: kazoo refuses to close a connection still winding down, so it is
    stopped again and retried for up to `patience` seconds."""
    deadline = time.monotonic() + patience
    while True:
        client.stop()
        try:
            client.close()
            return
        except Exception as e:  # noqa: BLE001  (kazoo raises a bare Exception for this one case)
            if "until it is stopped" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


# What a lost connection or session raises in a call (ConnectionClosedError: `Outage` gave up).
LOST = (ConnectionLoss, SessionExpiredError, ConnectionClosedError)


def translate(e: BaseException) -> BadInput | Unsafe | None:
    """kit's error for one of kazoo's (None for any other): no credentials is `BadInput`, a lost
    connection `Unreachable`, any other ZooKeeper error `Unsafe` (one line, never a traceback)."""
    if isinstance(e, NoAuthError):
        return BadInput("ZooKeeper refused access (no auth): give credentials with --zk-auth-file or $KIT_ZK_AUTH, "
                        "or, where given, they have no rights there")
    if isinstance(e, LOST):
        return Unreachable(f"ZooKeeper connection lost ({type(e).__name__}); nothing more was written")
    if isinstance(e, KazooException):
        return Unsafe(f"ZooKeeper error: {type(e).__name__} (nothing more was written)")
    return None


class Outage:
    """How long a long-running `client` has been without ZooKeeper, and the end of that wait.

    kazoo reconnects by itself, in a new session when the old one expired (`sessions_lost`
    counts those; their ephemeral znodes went with them), and a call made meanwhile waits for
    the connection. After `patience` seconds without one the client is stopped, so that every
    such call fails (ConnectionLoss), and `gave_up` is set: every wait has an end. `wake`, if
    given, is set on every change of the connection's state; `on_change`, if given, is called
    (in kazoo's connection thread) with what happened when the connection goes and with None
    when it is back: a call queued by kazoo meanwhile waits without a word until then.
    """

    def __init__(self, client: KazooClient, patience: float, wake: threading.Event | None = None,
                 on_change: Callable[[str | None], None] | None = None):
        self.client, self.patience, self.wake, self.on_change = client, patience, wake, on_change
        self.since: float | None = None  # when the connection went (monotonic); None while connected
        self.sessions_lost = 0
        self.gave_up = threading.Event()
        self._closed = threading.Event()
        client.add_listener(self._on_state)
        threading.Thread(target=self._watch, name="kit-zookeeper-outage", daemon=True).start()

    def _on_state(self, state) -> None:
        was_down = self.since is not None
        if state == KazooState.CONNECTED:
            self.since = None
        else:
            self.since = self.since or time.monotonic()
            self.sessions_lost += state == KazooState.LOST
        if self.wake is not None:
            self.wake.set()
        if self.on_change is not None and (was_down != self.down or state == KazooState.LOST):
            self.on_change(None if state == KazooState.CONNECTED else
                           "session lost" if state == KazooState.LOST else "connection lost")

    def _watch(self) -> None:
        while not self._closed.wait(min(1.0, self.patience / 4)):
            since = self.since
            if since is not None and time.monotonic() - since > self.patience:
                self.gave_up.set()
                self.client.stop()  # every call still waiting for the connection fails now
                return

    @property
    def down(self) -> bool:
        """Whether the client is without ZooKeeper now."""
        return self.since is not None

    def close(self) -> None:
        """Stop watching (before the client is stopped on purpose)."""
        self._closed.set()
        self.client.remove_listener(self._on_state)


def write_cluster(client: KazooClient, cluster: Cluster, assignments_only: bool = False) -> None:
    """Lay a cluster out in Kafka's znodes (topics, partition states, kafka-kit's metric znodes),
    as a ZooKeeper-mode Kafka would hold it. Live brokers' registrations go to the simulator's
    /kit/sim/brokers: /brokers/ids/N is ephemeral in Kafka, so only a live session can hold it
    (kit.sim.brokers does). Refuses a ZooKeeper that already holds a Kafka cluster (Unsafe), and a
    cluster whose metric znodes would not fit in a znode (BadInput: from ~95,000 partitions), both
    before anything is written.

    `assignments_only`: the topics' replica assignments and the registrations alone, what a
    planner reading Kafka's znodes needs (topicmappr's count placement): no per-partition
    znodes, no metric znodes, no simulator facts, so a simulated controller cannot run on it;
    200,000 partitions in seconds instead of minutes."""
    if client.exists("/brokers/topics") and children_or_none(client, "/brokers/topics"):
        raise Unsafe("this ZooKeeper already holds Kafka topics; use an empty one or another chroot")
    documents = [] if assignments_only else metric_znodes(cluster)
    for path, raw in documents:  # before the first write: a half-laid-out cluster helps no one
        if len(raw) > ZNODE_LIMIT:
            raise BadInput(f"{path} for {len(cluster.partitions)} partitions is {len(raw) / 1e6:.2f} MB "
                           f"(gzipped), over what a znode holds ({ZNODE_LIMIT + 1} bytes, ZooKeeper's "
                           f"jute.maxbuffer); simulate a cluster this size in KRaft mode (kit sim start --kraft)")
    client.ensure_path("/")
    tx_paths = ["/brokers/ids", "/brokers/topics", "/admin", "/config/topics", "/config/brokers",
                "/config/changes", "/topicmappr", "/kit/sim/brokers"]
    for path in tx_paths:
        client.ensure_path(path)
    ops = []
    for b in cluster.brokers.values():
        if b.alive and b.known:
            ops.append(client.create_async(f"/kit/sim/brokers/{b.id}", json.dumps(registration(b.rack)).encode()))
    _write_topics(client, cluster, ops, assignments_only)
    for path, raw in documents:
        client.create(path, raw, makepath=True)


def registration(rack: str | None, port: int = 9092) -> dict:
    """A simulated broker's registration (/brokers/ids/N's document) with its listener's port."""
    return {"version": 5, "host": "127.0.0.1", "port": port, "rack": rack,
            "endpoints": [f"PLAINTEXT://127.0.0.1:{port}"], "jmx_port": -1, "timestamp": "0"}


def initial_state(p, dead: set[int]) -> dict:
    """A partition's state document as a cluster laid out from a snapshot starts it: the ISR
    without the dead brokers, the snapshot's leader or the first of that ISR."""
    live_isr = [b for b in p.isr if b not in dead]
    leader = p.leader if p.leader is not None else (live_isr[0] if live_isr else -1)
    return {"controller_epoch": 1, "leader": leader, "version": 1, "leader_epoch": 0, "isr": live_isr}


def _write_topics(client: KazooClient, cluster: Cluster, ops: list, assignments_only: bool) -> None:
    """Create the topics (in the batch `ops` already started), their partitions, then each
    partition's state, one batch of asynchronous creates per level (parents first); with
    `assignments_only` the topics alone."""
    by_topic: dict[str, dict[str, list[int]]] = {}
    for p in cluster.partitions:
        by_topic.setdefault(p.topic, {})[str(p.partition)] = list(p.replicas)
    for t, parts in by_topic.items():
        ops.append(client.create_async(f"/brokers/topics/{t}",
                                       json.dumps({"version": 2, "partitions": parts}).encode()))
    for op in ops:
        op.get()
    if assignments_only:
        return
    ops = []
    for t in by_topic:
        client.ensure_path(f"/brokers/topics/{t}/partitions")
    for p in cluster.partitions:
        base = f"/brokers/topics/{p.topic}/partitions/{p.partition}"
        ops.append(client.create_async(base, b""))
    for op in ops:
        op.get()
    ops = []
    dead = {b.id for b in cluster.brokers.values() if not b.alive}
    for p in cluster.partitions:
        ops.append(client.create_async(f"/brokers/topics/{p.topic}/partitions/{p.partition}/state",
                                       json.dumps(initial_state(p, dead)).encode()))
    for op in ops:
        op.get()


def metric_documents(cluster: Cluster) -> tuple[dict, dict]:
    """kafka-kit's metric znodes' documents for `cluster`: /topicmappr/partitionmeta (each
    partition's size) and /topicmappr/brokermetrics (each live broker's free storage)."""
    sizes: dict[str, dict[str, dict]] = {}
    for p in cluster.partitions:
        sizes.setdefault(p.topic, {})[str(p.partition)] = {"Size": p.size}
    metrics = {str(b.id): {"StorageFree": b.storage_free} for b in cluster.brokers.values()
               if b.alive and b.storage_free is not None}
    return sizes, metrics


def metric_znodes(cluster: Cluster) -> list[tuple[str, bytes]]:
    """kafka-kit's metric znodes (partition sizes, brokers' free storage) and the simulator's
    facts (`SIM_FACTS`), each as (path, the bytes it holds)."""
    sizes, metrics = metric_documents(cluster)
    return [(PARTITION_META, dump_znode_json(sizes)), (BROKER_METRICS, dump_znode_json(metrics)),
            (SIM_FACTS, dump_znode_json(sim_facts(cluster)))]


def sim_facts(cluster: Cluster) -> dict:
    """What Kafka's znodes do not say but a simulated broker must know: each broker's NIC,
    instance type and disk (the bytes of other files on it), and each partition's traffic."""
    used: dict[int, int] = {}
    for p in cluster.partitions:
        for b in p.replicas:
            used[b] = used.get(b, 0) + p.size
    return {
        "brokers": {str(b.id): {"net_capacity": b.net_capacity, "instance_type": b.instance_type,
                                "storage_total": b.storage_total,
                                "other_bytes": (b.storage_total - b.storage_free - used.get(b.id, 0))
                                if b.storage_total is not None and b.storage_free is not None else None}
                    for b in cluster.brokers.values() if b.known},
        "traffic": {f"{p.topic}/{p.partition}": [p.bytes_in, p.bytes_out] for p in cluster.partitions},
    }


SIM_FACTS = "/kit/sim/facts"


def read_sim_facts(client: KazooClient) -> dict:
    """Broker capacities, disks and partition traffic that `kit sim seed` kept (empty if none)."""
    try:
        return parse_znode_json(client.get(SIM_FACTS)[0], SIM_FACTS)
    except NoNodeError:
        return {"brokers": {}, "traffic": {}}


SIM_PROGRESS = "/kit/sim/controller"


def read_sim_progress(client: KazooClient) -> dict | None:
    """What the simulated controller last recorded of its reassignment's progress (None if
    nothing, or nothing readable: a resume then starts from the znodes alone)."""
    try:
        doc = parse_znode_json(client.get(SIM_PROGRESS)[0], SIM_PROGRESS)
    except (NoNodeError, BadInput):
        return None
    return doc if isinstance(doc, dict) else None


def write_sim_progress(client: KazooClient, doc: dict) -> bool:
    """Record the simulated controller's progress; False (nothing written) when it would not
    fit in a znode: the last record stays, and it is an earlier, conservative one."""
    raw = dump_znode_json(doc)
    if len(raw) > 1000 * 1024:
        return False
    try:
        client.set(SIM_PROGRESS, raw)
    except NoNodeError:
        client.create(SIM_PROGRESS, raw, makepath=True)
    return True


def drop_sim_progress(client: KazooClient) -> None:
    """Forget the simulated controller's record (its reassignment is over)."""
    try:
        client.delete(SIM_PROGRESS)
    except NoNodeError:
        pass


# What a znode holds at most: ZooKeeper's jute.maxbuffer as shipped (0xfffff bytes).
ZNODE_LIMIT = 0xFFFFF


def dump_znode_json(doc) -> bytes:
    """JSON, gzipped as kafka-kit does once it grows large (a znode holds at most 1 MB, `ZNODE_LIMIT`)."""
    raw = json.dumps(doc, separators=(",", ":")).encode()
    return gzip.compress(raw, mtime=0) if len(raw) > 256 * 1024 else raw
