"""ZooKeeper credentials and ACLs: kit's znodes inherit a protected chroot's ACL, and
credentials come from a file or the environment, never printed (kit/cluster/zk/layout.py)."""
from __future__ import annotations

import contextlib
import itertools
import os

import pytest
from kazoo.security import make_acl, make_digest_acl

from conftest import run_kit as kit
from kit.formats import load_snapshot
from kit.sim.brokers import sync_registrations
from kit.cluster.zk.layout import connect, session, write_cluster

_chroots = itertools.count()
SECRET = "s3cret-do-not-print"


@contextlib.contextmanager
def _protected_chroot(zookeeper, snapshot):
    """A chroot only `kit` (digest kit:SECRET) may change and everyone may read, holding the
    cluster of `snapshot`: (connect string, the chroot's ACL)."""
    name = f"/kit-protected-{next(_chroots)}"
    acl = [make_digest_acl("kit", SECRET, all=True), make_acl("world", "anyone", read=True)]
    admin = connect(zookeeper, auth=f"digest:kit:{SECRET}")
    admin.create(name, acl=acl)
    root = zookeeper + name
    holder = connect(root, auth=f"digest:kit:{SECRET}")  # holds the brokers' ephemeral registrations
    try:
        write_cluster(holder, load_snapshot(str(snapshot)))
        sync_registrations(holder)
        yield root, admin.get_acls(name)[0]
    finally:
        holder.stop()
        holder.close()
        admin.stop()
        admin.close()


def _auth_file(folder):
    auth_file = folder / "zk-auth"
    auth_file.write_text(f"digest:kit:{SECRET}\n")
    auth_file.chmod(0o600)
    return auth_file


@pytest.fixture
def protected(zookeeper, snapshots, tmp_path):
    """A protected chroot of its own holding the scale-out cluster, for a test that changes it
    or asserts that nothing did: (connect string, auth file, the chroot's ACL)."""
    with _protected_chroot(zookeeper, snapshots["scale-out"]) as (root, acl):
        yield root, _auth_file(tmp_path), acl


@pytest.fixture(scope="module")
def _shared_chroot(zookeeper, snapshots):
    with _protected_chroot(zookeeper, snapshots["scale-out"]) as chroot:
        yield chroot


@pytest.fixture
def refusing(_shared_chroot, tmp_path):
    """As `protected`, for the tests whose every command is refused before it changes anything:
    one chroot for the module (writing and registering the cluster took ~2 s a test), an auth
    file of the test's own."""
    root, acl = _shared_chroot
    return root, _auth_file(tmp_path), acl


def _acl_of(root: str, path: str):
    with session(root, auth=f"digest:kit:{SECRET}") as client:  # ZooKeeper shows a digest only to its owner
        return client.get_acls(path)[0]


def test_znodes_kit_creates_inherit_the_chroots_acl(protected, tmp_path):
    root, auth_file, chroot_acl = protected
    plan = tmp_path / "plan.json"
    r = kit("plan", "scale-out", "--zk", root, "--zk-auth-file", auth_file, "--out", plan)
    assert r.returncode == 0, r.stderr
    r = kit("apply", plan, "--zk", root, "--zk-auth-file", auth_file, "--throttle", "50000000")
    assert r.returncode == 0, r.stderr
    assert SECRET not in r.stdout + r.stderr
    with session(root) as client:
        brokers = client.get_children("/config/brokers")
        changes = client.get_children("/config/changes")
    assert brokers and changes
    created = ["/admin/reassign_partitions", *(f"/config/brokers/{b}" for b in brokers),
               *(f"/config/changes/{c}" for c in changes)]
    for path in created:
        acl = _acl_of(root, path)
        assert acl == chroot_acl, (path, acl)
        assert not any(a.id.scheme == "world" and a.perms != 1 for a in acl), path  # world may only read


def test_without_credentials_a_protected_chroot_is_refused_in_one_line_and_left_unchanged(protected, tmp_path):
    root, auth_file, _ = protected
    plan = tmp_path / "plan.json"
    assert kit("plan", "scale-out", "--zk", root, "--zk-auth-file", auth_file, "--out", plan).returncode == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("KIT_ZK_AUTH")}
    r = kit("apply", plan, "--zk", root, "--throttle", "50000000", env=env)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "refused access" in r.stderr
    with session(root) as client:
        assert not client.exists("/admin/reassign_partitions")
        assert client.get_children("/config/brokers") == []


def test_credentials_from_the_environment_file_variable(protected, tmp_path):
    root, auth_file, chroot_acl = protected
    plan = tmp_path / "plan.json"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("KIT_ZK_AUTH")},
           "KIT_ZK_AUTH_FILE": str(auth_file)}
    assert kit("plan", "scale-out", "--zk", root, "--out", plan, env=env).returncode == 0
    r = kit("apply", plan, "--zk", root, "--throttle", "50000000", env=env)
    assert r.returncode == 0, r.stderr
    assert _acl_of(root, "/admin/reassign_partitions") == chroot_acl


@pytest.mark.parametrize("content", [b"", b"no-colon-here\n", b"\xff\xfe\x00binary"])
def test_a_bad_auth_file_is_refused_without_printing_it(refusing, tmp_path, content):
    root, _, _ = refusing
    bad = tmp_path / "bad-auth"
    bad.write_bytes(content + SECRET.encode())
    bad.chmod(0o600)
    before = sorted(os.listdir(tmp_path))
    r = kit("status", "--zk", root, "--zk-auth-file", bad)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "--zk-auth-file" in r.stderr and "Traceback" not in r.stderr
    assert SECRET not in r.stdout + r.stderr
    assert sorted(os.listdir(tmp_path)) == before


def test_a_missing_auth_file_is_refused(refusing, tmp_path):
    root, _, _ = refusing
    r = kit("status", "--zk", root, "--zk-auth-file", tmp_path / "nope")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no such file" in r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("auth, said", [
    (f"digest:kit:wrong-{SECRET}", "the password of digest user 'kit' is not the one the chroot's ACL holds"),
    ("digest:alice", "digest credentials are USER:PASSWORD"),
    ("bogus:x", "ZooKeeper refused authentication with scheme 'bogus'"),
])
def test_wrong_credentials_are_named_in_one_line_without_a_traceback(refusing, tmp_path, auth, said):
    # Each said "refused access (no auth)", and an unknown scheme printed kazoo's 36-line traceback.
    root, _, _ = refusing
    auth_file = tmp_path / "zk-auth"
    auth_file.write_text(auth + "\n")
    auth_file.chmod(0o600)
    r = kit("status", "--zk", root, "--zk-auth-file", auth_file, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and said in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert SECRET not in r.stdout + r.stderr


def test_a_refused_scheme_is_named_even_when_kazoo_looks_after_its_connection_ended(refusing, monkeypatch):
    # CI of 66606c5, loaded: "no ZooKeeper answers there" for scheme 'bogus'. kazoo says CONNECTED,
    # then ZooKeeper refuses the credentials and kazoo's connection thread ends (state CLOSED);
    # a `start` that looks only then saw a time-out and no AUTH_FAILED. Here it always looks then.
    from kazoo.client import KazooClient, KazooState
    from kazoo.protocol.states import KeeperState

    from kit.errors import BadInput, Unreachable
    from kit.testing import wait_for

    states: list = []  # what kazoo tells its listeners
    add_listener = KazooClient.add_listener
    monkeypatch.setattr(KazooClient, "add_listener", lambda self, f: (add_listener(self, f),
                                                                       add_listener(self, states.append)))

    def late_start(self, timeout=15):
        self.start_async()
        # CLOSED is also a new client's state: first the session given up (LOST), then CLOSED.
        wait_for("kazoo to give the session up", lambda: KazooState.LOST in states, 60)
        wait_for("kazoo's connection thread to end", lambda: self.client_state == KeeperState.CLOSED, 60)
        if not self.connected:  # kazoo's own ending of a start that finds no connection
            self.stop()
            self.close()
            raise self.handler.timeout_exception("Connection time-out")
    monkeypatch.setattr(KazooClient, "start", late_start)
    root, _, _ = refusing
    with pytest.raises(BadInput) as e:
        connect(root, auth="bogus:x")
    assert not isinstance(e.value, Unreachable), (str(e.value), states)
    assert "ZooKeeper refused authentication with scheme 'bogus'" in str(e.value)


def test_an_auth_file_others_can_read_is_refused(refusing, tmp_path):
    root, auth_file, _ = refusing
    auth_file.chmod(0o644)
    r = kit("status", "--zk", root, "--zk-auth-file", auth_file)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "chmod 600" in r.stderr and "0644" in r.stderr
    assert SECRET not in r.stdout + r.stderr


def test_a_refusal_landing_before_the_start_looks_is_still_named_as_a_refusal(monkeypatch):
    """ZooKeeper refuses an unknown scheme just after the session is made. When the refusal
    lands before kazoo's `start` checks the connection (a loaded machine), kazoo raises its
    time-out, and kit said "no ZooKeeper answers there" (seen in CI); its state says
    AUTH_FAILED, and that is what kit names. The client is kazoo's own, its start replaced."""
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError
    from kazoo.protocol.states import KeeperState

    from kit.cluster.zk import layout
    from kit.errors import BadInput

    def start_refused(self, timeout=15):
        self._state = KeeperState.AUTH_FAILED  # what kazoo's connection sets on the refusal
        raise KazooTimeoutError("Connection time-out")
    monkeypatch.setattr(KazooClient, "start", start_refused)
    try:
        layout.connect("127.0.0.1:1/kafka", timeout=1.0, auth="bogus:x")
    except BadInput as e:
        assert "refused authentication with scheme 'bogus'" in str(e), e
        assert "bogus:x" not in str(e)
    else:
        raise AssertionError("connect did not refuse")
