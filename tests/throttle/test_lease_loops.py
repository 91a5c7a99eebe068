"""One auto-throttle per cluster: `kit throttle run` holds the cluster's lease, on both backends.

ZooKeeper mode against a real ZooKeeper (the lease an ephemeral znode), KRaft against the
simulated KRaft cluster (the lease a config marker on the cluster-wide broker default). Another
host's markers are put on the KRaft cluster through the wire, by an IncrementalAlterConfigs
request built with kafka-python's protocol classes, as another host's loop would put them.
"""
from __future__ import annotations

import itertools
import json
import re
import signal
import socket
import struct
import subprocess
import sys
import time

import pytest
from kafka.protocol.admin import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

from conftest import kit_command, kraft_cluster, wait_for
from conftest import run_kit as kit
from kit.cluster.backend import ClusterAddress, open_backend
from kit.cluster.zk.backend import LEASE
from kit.cluster.zk.layout import close, connect
from kit.events import read_events
from kit.throttle.configs import LEADER_RATE
from kit.throttle.lease import Lease

_chroots = itertools.count()


class Idle:
    """A cluster with nothing moving: `where` its kit options, `store` the ZooKeeper behind it
    (ZooKeeper mode; None for the simulated KRaft cluster, reached through the wire only)."""

    def __init__(self, kind: str, where: list[str], store: str | None):
        self.kind, self.where, self.store = kind, where, store

    def backend(self):
        return open_backend(ClusterAddress(**{self.where[0][2:]: self.where[1]}))

    def leases(self) -> list[Lease]:
        with self.backend() as b:
            return b.leases()

    def loop(self, tmp_path, *extra) -> list[str]:
        """`kit throttle run` over it (no metrics: the fail-safe minimum rate; nothing runs)."""
        return ["throttle", "run", *self.where, "--samples", str(tmp_path / "none"), "--interval", "0.5",
                "--cap-map", '{"*": 125}', *extra]

    def start(self, tmp_path, name: str) -> subprocess.Popen:
        """A loop as its own process, once it holds the lease and took the cluster's throttles over
        (a leftover put first: its `clear` event says so; its events in tmp_path/NAME.jsonl)."""
        with self.backend() as b:
            b.set_throttles(brokers={min(b.read()[0].live_ids): {LEADER_RATE: "40000000"}})
        events = tmp_path / f"{name}.jsonl"
        p = subprocess.Popen([*kit_command(), *self.loop(tmp_path, "--events", str(events))],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(f"loop {name} taking over", lambda: p.poll() is not None or events.exists() and any(
            e["kind"] == "clear" for e in read_events(str(events))))
        assert p.poll() is None, p.communicate()
        return p


@pytest.fixture(scope="module", params=["zookeeper", "kraft"])
def idle(request, zookeeper, snapshots, tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KIT_STATE_DIR", str(tmp_path_factory.mktemp("kit-state")))  # the Admin API's state file
        if request.param == "zookeeper":
            root = f"{zookeeper}/kit-lease-{next(_chroots)}"
            assert kit("sim", "seed", "--zk", root, "--snapshot", snapshots["balanced"]).returncode == 0
            yield Idle("zookeeper", ["--zk", root], root)
            return
        state = tmp_path_factory.mktemp("kraft")
        with kraft_cluster(snapshots["balanced"], state) as bootstrap:
            yield Idle("kraft", ["--bootstrap", bootstrap], None)


def elsewhere(since: str = "2026-01-01T00:00:00Z", expires: str | None = None) -> Lease:
    """A holder on another host: its pid means nothing here."""
    return Lease("host-elsewhere", 4242, since, "feedfacecafe", "0badc0de", expires)


def stamp(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def alter_default(idle: Idle, sets: dict[str, str], deletes: list[str]) -> None:
    """IncrementalAlterConfigs (v1) on the KRaft cluster's "" broker resource (the cluster-wide
    default) through its first listener: SET `sets`, DELETE `deletes`."""
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    configs = [R.AlterableConfig(name=k, config_operation=0, value=v) for k, v in sets.items()] + \
        [R.AlterableConfig(name=k, config_operation=1, value=None) for k in deletes]
    req = IncrementalAlterConfigsRequest(version=1, validate_only=False,
                                         resources=[R(resource_type=4, resource_name="", configs=configs)])
    req.with_header(correlation_id=7, client_id="kit-test")
    host, port = idle.where[1].split(",")[0].split(":")
    with socket.create_connection((host, int(port)), timeout=120) as s:
        s.sendall(bytes(req.encode(version=1, header=True, framed=True)))
        stream = s.makefile("rb")
        size = struct.unpack(">i", stream.read(4))[0]
        resp = IncrementalAlterConfigsResponse.decode(stream.read(size), version=1, header=True)
    assert [r.error_code for r in resp.responses] == [0], resp


def put_marker(idle: Idle, lease: Lease, replacing: Lease | None = None) -> None:
    """The marker another host's loop keeps on the KRaft cluster."""
    alter_default(idle, {lease.marker(): "held"}, [replacing.marker()] if replacing else [])


def test_a_second_loop_refuses_naming_the_first_and_changes_nothing_then_a_successor_takes_over(idle, tmp_path):
    a = idle.start(tmp_path, "a")
    try:
        [holder] = idle.leases()
        assert (holder.pid, holder.host) == (a.pid, Lease.mine().host)
        # A throttle set after A took over (another tool's): A leaves it, a second loop's
        # start-up would clear it.
        with idle.backend() as b:
            broker = min(b.read()[0].live_ids)
            b.set_throttles(brokers={broker: {LEADER_RATE: "50000000"}})
        r = kit(*idle.loop(tmp_path, "--max-seconds", "1"), timeout=300)
        assert r.returncode == 3, r.stderr
        # Its last word (before it, a loaded machine may have had it say the cluster was slow to answer).
        line = r.stderr.splitlines()[-1]
        # The marker's expiry moves on while A runs; the znode has none.
        expiry = r", or wait until its lease expires \(\S+Z\)" if idle.kind == "kraft" else ""
        said = (f"kit: another auto-throttle holds this cluster: host {holder.host}, pid {a.pid}, since {holder.since} "
                f"(kit throttle run); stop it first (on {holder.host}: kill -TERM {a.pid})")
        assert re.fullmatch(re.escape(said) + expiry + "; nothing was changed", line), line
        with idle.backend() as b:
            assert b.throttles()[0] == {str(broker): {LEADER_RATE: "50000000"}}
            assert [x.same_holder(holder) for x in b.leases()] == [True]
        assert a.poll() is None  # the first goes on
    finally:
        a.kill()  # no release: its znode's session or its marker's expiry is left behind
        a.wait(timeout=120)
    assert [x.pid for x in idle.leases()] == [a.pid]
    # Its process is gone and was on this host: taken over at once, not after the session
    # timeout or the marker's expiry.
    r = kit(*idle.loop(tmp_path, "--max-seconds", "1"), timeout=300)
    assert r.returncode == 0, r.stderr
    with idle.backend() as b:
        assert b.throttles()[0] == {}  # its start-up took the leftover over
        assert b.leases() == []  # and it gave the lease up when it ended


def test_a_holder_elsewhere_is_waited_for_until_its_lease_ends(idle, tmp_path):
    if idle.kind == "zookeeper":
        # Another host's loop: an ephemeral znode in a session of its own (4 s), SIGKILLed.
        holder = subprocess.Popen([sys.executable, "-c", (
            "import sys, time\n"
            "from kazoo.client import KazooClient\n"
            f"c = KazooClient(hosts={idle.store!r}, timeout=4); c.start(timeout=60)\n"
            f"c.create({LEASE!r}, {elsewhere().to_json()!r}, ephemeral=True, makepath=True)\n"
            "print('held', flush=True); time.sleep(600)\n")], stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().strip() == "held"
            r = kit(*idle.loop(tmp_path, "--max-seconds", "1"), timeout=300)
            assert r.returncode == 3 and "host host-elsewhere, pid 4242, since 2026-01-01T00:00:00Z" in r.stderr, \
                r.stderr
        finally:
            holder.kill()
            holder.wait(timeout=120)
        wait_for("the killed holder's session to expire", lambda: not idle.leases(), limit=300)
    else:
        lasting = elsewhere(expires=stamp(time.time() + 3600))
        put_marker(idle, lasting)
        r = kit(*idle.loop(tmp_path, "--max-seconds", "1"), timeout=300)
        assert r.returncode == 3, r.stderr
        assert (f"host host-elsewhere, pid 4242, since 2026-01-01T00:00:00Z (kit throttle run); stop it first "
                f"(on host-elsewhere: kill -TERM 4242), or wait until its lease expires ({lasting.expires})"
                in r.stderr), r.stderr
        put_marker(idle, elsewhere(expires=stamp(time.time() - 1)), replacing=lasting)  # it stopped renewing
    r = kit(*idle.loop(tmp_path, "--max-seconds", "1"), timeout=300)
    assert r.returncode == 0, r.stderr
    assert idle.leases() == []  # an expired marker goes with the successor's first write


def test_a_loop_whose_lease_was_taken_over_stops_and_says_so(idle, tmp_path):
    a = idle.start(tmp_path, "a")
    try:
        if idle.kind == "zookeeper":
            # Its session lost (its znode gone with it), another took the lease meanwhile.
            other = connect(idle.store)
            client = connect(idle.store)
            try:
                client.delete(LEASE)
                other.create(LEASE, elsewhere().to_json(), ephemeral=True)
                out, err = a.communicate(timeout=300)
            finally:
                close(client)
                close(other)
        else:
            # Its marker lapsed on the cluster's side of things; an earlier holder's stands.
            put_marker(idle, elsewhere(expires=stamp(time.time() + 3600)))
            out, err = a.communicate(timeout=300)
    finally:
        if a.poll() is None:
            a.kill()
            a.wait(timeout=120)
    assert a.returncode == 3, err
    assert err.splitlines()[-1] == ("kit: this auto-throttle's lease lapsed and another took this cluster over: "
                                    "host host-elsewhere, pid 4242, since 2026-01-01T00:00:00Z; stopping, the rates "
                                    "in force left to it")
    assert [e["kind"] for e in read_events(str(tmp_path / "a.jsonl"))][-1] == "alert"
    if idle.kind == "kraft":
        [other] = idle.leases()
        assert other.host == "host-elsewhere"  # its own marker taken away
        alter_default(idle, {}, [other.marker()])
    assert idle.leases() == []


def test_sigterm_ends_the_loop_and_its_lease(idle, tmp_path):
    a = idle.start(tmp_path, "a")
    a.send_signal(signal.SIGTERM)
    out, err = a.communicate(timeout=300)
    assert a.returncode == 0, err
    assert idle.leases() == []


def test_the_lease_znode_inherits_a_protected_chroots_acl_and_holds_no_credential(zookeeper, snapshots, tmp_path):
    """A loop run with ZooKeeper credentials: its lease znode has the chroot's ACL (only kit's
    credentials may take it away), names host, pid and start and nothing of the credentials,
    and is gone when the loop ends."""
    from kazoo.security import make_acl, make_digest_acl

    from kit.cluster.zk.layout import session, write_cluster
    from kit.formats import load_snapshot
    from kit.sim.brokers import sync_registrations

    secret = "s3cret-do-not-print"
    name = f"/kit-lease-protected-{next(_chroots)}"
    admin = connect(zookeeper, auth=f"digest:kit:{secret}")
    admin.create(name, acl=[make_digest_acl("kit", secret, all=True), make_acl("world", "anyone", read=True)])
    root = zookeeper + name
    holder = connect(root, auth=f"digest:kit:{secret}")  # the brokers' ephemeral registrations
    write_cluster(holder, load_snapshot(str(snapshots["balanced"])))
    sync_registrations(holder)
    auth_file = tmp_path / "zk-auth"
    auth_file.write_text(f"digest:kit:{secret}\n")
    auth_file.chmod(0o600)
    loop = subprocess.Popen([*kit_command(), "throttle", "run", "--zk", root, "--zk-auth-file", str(auth_file),
                             "--samples", str(tmp_path / "none"), "--interval", "0.5", "--cap-map", '{"*": 125}'],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with session(root) as client:
            wait_for("the loop's lease", lambda: client.exists(LEASE) or loop.poll() is not None)
            raw = client.get(LEASE)[0]
        assert loop.poll() is None, loop.communicate()
        with session(root, auth=f"digest:kit:{secret}") as client:  # ZooKeeper shows a digest only to its owner
            assert client.get_acls(LEASE)[0] == client.get_acls("/")[0]
        doc = json.loads(raw)
        assert set(doc) == {"host", "pid", "since", "place", "token"} and doc["pid"] == loop.pid
        assert secret not in raw.decode() and "kit:" not in raw.decode()
    finally:
        loop.send_signal(signal.SIGTERM)
        out, err = loop.communicate(timeout=300)
        close(holder)
        close(admin)
    assert loop.returncode == 0, err
    assert secret not in out + err
    with session(root) as client:
        assert not client.exists(LEASE)
