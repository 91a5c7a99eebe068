"""The change's watch looks at the cluster through one session that follows it, not a session
per look (a ZooKeeper session and two whole reads of the cluster every half second), and opens
another after a look the cluster did not answer."""
from __future__ import annotations

from types import SimpleNamespace

from kit.errors import Unreachable
from kit.runbook import change as change_module

GB = 10 ** 9


class Cluster:
    """A cluster the watch looks at: `left` partitions to go, one fewer each answered look; the
    look numbered `silent` does not answer."""

    def __init__(self, left: int, silent: int | None = None):
        self.left, self.silent, self.looks = left, silent, 0
        self.sessions: list[Session] = []

    def backend(self):
        session = Session(self)
        self.sessions.append(session)
        return session


class Session:
    def __init__(self, cluster: Cluster):
        self.cluster, self.followed, self.closed, self.looks = cluster, False, False, 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def follow(self):
        self.followed = True

    def close(self):
        self.closed = True

    def status(self):
        assert not self.closed, "a look through a closed session"
        c = self.cluster
        c.looks += 1
        self.looks += 1
        if c.looks == c.silent:
            raise Unreachable("no answer within 10 s")
        c.left -= 1
        return {"bytes_left": c.left * GB, "reassigning_partitions": c.left}


def watch(cluster: Cluster, capsys):
    env = SimpleNamespace(backend=cluster.backend, simulated=False, bootstrap="", cap_map=None)
    change = SimpleNamespace(env=env, throttle="100000000", clock="wall", events="", samples="")
    shown = change_module._Progress(live=False, with_chart=False)  # outside a kernel: printed lines
    progress, done = change_module._monitor(change, None, change_module.time.monotonic(), 120.0, shown, None)
    return progress, done, capsys.readouterr().out


def test_every_look_goes_through_one_session_that_follows_the_cluster(capsys):
    cluster = Cluster(left=4)
    progress, done, out = watch(cluster, capsys)
    assert done is not None and [p["partitions_left"] for p in progress] == [3, 2, 1, 0]
    assert len(cluster.sessions) == 1
    only = cluster.sessions[0]
    assert only.followed and only.looks == 4 and only.closed  # closed when the watch ends
    assert out.count("GB left in") == 4


def test_a_look_the_cluster_does_not_answer_is_said_and_the_next_opens_a_new_session(capsys):
    cluster = Cluster(left=3, silent=2)
    progress, done, out = watch(cluster, capsys)
    assert done is not None and [p["partitions_left"] for p in progress] == [2, 1, 0]
    assert "the cluster did not answer (no answer within 10 s); looking again" in out
    first, second = cluster.sessions
    assert (first.looks, first.closed) == (2, True)
    assert second.followed and second.looks == 2 and second.closed
