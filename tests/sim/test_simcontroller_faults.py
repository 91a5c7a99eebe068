"""The simulated controller's faults (issue 20): restarted mid-reassignment, it resumes the
copy with the bytes still to copy; ZooKeeper restarting (its session lost or not), it and its
brokers ride it out as Kafka's do."""
from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import threading
import time

import pytest
from kazoo.exceptions import ConnectionLoss

from conftest import kit_command, wait_for
from conftest import run_kit as kit
from kit.cluster.zk import server as localzk
from kit.cluster.zk.changes import REASSIGN, apply_plan
from kit.formats import cluster_from_snapshot, load_snapshot
from kit.sim.brokers import HOLDER, sync_registrations
from kit.sim.controller import SimController
from kit.cluster.zk.layout import connect, drop_sim_progress, read_sim_progress, session, write_cluster
from kit.cluster.zk.read import read_cluster

_chroots = itertools.count()
RATE = 50e6  # bytes/s: the throttle applied, the most any broker receives replication at


# -- in process: a small cluster whose copy times are known exactly -------------------------

SMALL = {"version": 1, "brokers": [{"id": b, "net_capacity": 100e6} for b in (1, 2)],
         "partitions": [{"topic": "t", "partition": 0, "replicas": [1], "size": 10**10},
                        {"topic": "t", "partition": 1, "replicas": [1], "size": 2 * 10**9}]}
MOVES = [{"topic": "t", "partition": p, "replicas": [1, 2]} for p in (0, 1)]
# Both copies leave broker 1 for broker 2 at 50 MB/s shared: t-1 (2 GB) is in sync at 80 s,
# t-0 then has 8 GB left, alone: done at 240 s.
DONE_AT = 240.0


def small_copy(root: str):
    """SMALL laid out under `root`, its brokers registered in the session of the client
    returned (started), MOVES applied at RATE."""
    client = connect(root)
    write_cluster(client, cluster_from_snapshot(SMALL))
    sync_registrations(client)
    apply_plan(client, MOVES, throttle=RATE)
    return client


@pytest.fixture
def small(zookeeper):
    with contextlib.closing(small_copy(f"{zookeeper}/kit-simfault-{next(_chroots)}")) as client:
        try:
            yield client
        finally:
            client.stop()


def finish(ctl: SimController, wall: float = 100.0) -> None:
    for _ in range(100):
        if not ctl.busy():
            return
        ctl.step(wall)
    raise AssertionError("the simulated controller did not finish in 100 steps")


def assert_moved(client) -> None:
    cluster, running = read_cluster(client)
    assert running is None and not client.exists(REASSIGN)
    for p in cluster.partitions:
        assert list(p.replicas) == [1, 2] and sorted(p.isr) == [1, 2] and p.leader == 1, p
    for t in ("t",):
        doc = json.loads(client.get(f"/brokers/topics/{t}")[0])
        assert "adding_replicas" not in doc and "removing_replicas" not in doc


def test_uninterrupted_the_small_copy_takes_its_known_time(small):
    ctl = SimController(small, record_every=0)
    finish(ctl)
    assert ctl.completion_s() == pytest.approx(DONE_AT) and ctl.resumed is None
    assert_moved(small)
    assert read_sim_progress(small) is None  # the record goes with the reassignment


@pytest.mark.parametrize("recorded", [True, False], ids=["from-its-record", "without-a-record"])
def test_a_restarted_controller_copies_what_is_left_not_nothing(small, recorded):
    """Killed at 100 s (t-1 in sync, t-0 7 GB short), a new controller picks the reassignment
    up as Kafka's controller does on failover. Once it finished in 0 s: the replica list it
    read was already the union. Now t-0's new replica, out of the ISR, copies what the record
    says is left (7 GB: 140 s, the clock going on from 100 s), or without a record all 10 GB
    again (200 s, counted from its own pickup)."""
    first = SimController(small, record_every=0)
    first.step(100.0)
    assert first.sim_seconds == pytest.approx(100.0)
    if not recorded:
        drop_sim_progress(small)
    again = SimController(small, record_every=0)
    finish(again)
    assert_moved(small)
    if recorded:
        assert again.resumed == {"at_s": pytest.approx(100.0), "bytes_left": pytest.approx(7e9, abs=2),
                                 "progress": "recorded"}
        assert again.completion_s() == pytest.approx(DONE_AT)  # the same as uninterrupted
    else:
        assert again.resumed == {"at_s": 0.0, "bytes_left": 10**10, "progress": "from zero"}
        assert again.completion_s() == pytest.approx(10**10 / RATE)


def calls_of_set(client) -> int:
    """How many writes (`client.set_async` of a znode that exists: `client.set` sends its
    write through it, and the controller sends several at once with it) an uninterrupted run
    of the small copy makes."""
    real, count = client.set_async, [0]

    def counting(path, *args, **kwargs):
        count[0] += bool(client.exists(path))
        return real(path, *args, **kwargs)
    client.set_async = counting
    try:
        finish(SimController(client, record_every=0))
    finally:
        client.set_async = real
    return count[0]


def test_every_write_cut_short_by_zookeeper_is_recovered_from_the_znodes(zookeeper, small):
    """ZooKeeper drops the connection at any one of the controller's writes, before the write
    lands or after it landed (its answer lost): the controller forgets what it held (`run`
    does so) and reads the reassignment again. It always ends as uninterrupted, in the same
    simulated time: no partition left half-settled, no copy started again."""
    writes = calls_of_set(small)
    assert writes >= 7  # marks, ISR joins, partitions settled and led, records
    for landed in (False, True):
        for k in range(1, writes + 1):
            client = small_copy(f"{zookeeper}/kit-simfault-{next(_chroots)}")
            real, count = client.set_async, [0]

            def cut(path, *args, **kwargs):
                count[0] += bool(client.exists(path))  # a set of nothing writes nothing (NoNodeError)
                if count[0] == k:
                    count[0] += 1
                    if landed:
                        real(path, *args, **kwargs)
                    raise ConnectionLoss()
                return real(path, *args, **kwargs)
            try:
                client.set_async = cut
                ctl, lost = SimController(client, record_every=0), 0
                for _ in range(100):
                    try:
                        if not ctl.busy():
                            break
                        ctl.step(100.0)
                    except ConnectionLoss:
                        lost += 1
                        ctl.forget()
                client.set_async = real
                assert lost == 1, (k, landed)
                assert ctl.completion_s() == pytest.approx(DONE_AT), (k, landed)
                assert ctl.resumed is None, (k, landed)  # its own reassignment, read again
                assert_moved(client)
            finally:
                client.stop()
                client.close()


# -- `kit sim run` for real: killed mid-copy, and through ZooKeeper restarts ----------------

def replace_plan(root: str, snap, tmp_path) -> tuple[object, list[dict]]:
    """The replace plan of the snapshot (its dead broker onto the new one) from ZooKeeper."""
    cluster = load_snapshot(str(snap))
    dead = next(b.id for b in cluster.brokers.values() if not b.alive and b.id in cluster.map_brokers())
    new = next(b for b in cluster.live_ids if b not in cluster.map_brokers())
    plan = tmp_path / "plan.json"
    r = kit("plan", "replace", "--zk", root, "--replace", f"{dead}:{new}", "--out", plan)
    assert r.returncode == 0, r.stderr
    return plan, json.loads(plan.read_text())["partitions"]


def copy_bytes(snap, moves: list[dict]) -> int:
    """Bytes the plan copies: each new replica, its partition's size."""
    sizes = {p.key: (p.size, set(p.replicas)) for p in load_snapshot(str(snap)).partitions}
    return sum(sizes[(m["topic"], m["partition"])][0] * sum(b not in sizes[(m["topic"], m["partition"])][1]
                                                            for b in m["replicas"]) for m in moves)


def recorded_left(client) -> int | None:
    """Bytes left to copy by the simulated controller's record (None without a record)."""
    doc = read_sim_progress(client)
    if doc is None:
        return None
    return sum(n for parts in doc["left"].values() for dests in parts.values() for n in dests.values())


def owners_of(client) -> set[int]:
    """The sessions holding the brokers' registrations."""
    return {client.exists(f"/brokers/ids/{b}").ephemeralOwner for b in client.get_children("/brokers/ids")}


def sim_run(root: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([*kit_command(), "sim", "run", "--zk", root, *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.slow
def test_kit_sim_run_killed_mid_copy_resumes_with_the_bytes_still_to_copy(zookeeper, snapshots, tmp_path):
    """SIGKILL part way through a replace: the next `kit sim run` resumes every unfinished
    copy from the recorded bytes left and takes the simulated time they need; its report
    counts the whole copy on the cluster's clock (once: 0 simulated seconds)."""
    root = f"{zookeeper}/kit-simfault-{next(_chroots)}"
    snap = snapshots["replace"]
    assert kit("sim", "seed", "--zk", root, "--snapshot", snap).returncode == 0
    plan, moves = replace_plan(root, snap, tmp_path)
    total = copy_bytes(snap, moves)
    assert kit("apply", plan, "--zk", root, "--throttle", str(int(RATE))).returncode == 0
    client = connect(root)
    try:
        # At speed 400 the whole copy takes at least total / RATE / 400 wall seconds (98 s):
        # the controller's clock never runs faster. It is killed once 2% is copied (2 s at
        # that pace; at speed 100 the test waited 8 s for it).
        first = sim_run(root, "--speed", "400", "--max-seconds", "900")
        try:
            wait_for("2% copied", lambda: first.poll() is not None or (recorded_left(client) or total) < 0.98 * total)
            assert first.poll() is None, f"kit sim run exited {first.returncode} before 2% was copied"
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=120)
        finally:
            if first.poll() is None:
                first.kill()
        assert client.exists(REASSIGN)
        # What is left by the znodes Kafka keeps (new replicas out of the ISR) and by the record.
        cluster, _ = read_cluster(client)
        record = read_sim_progress(client)["left"]
        unfinished, left = 0, 0
        for p in cluster.partitions:
            doc = json.loads(client.get(f"/brokers/topics/{p.topic}")[0])
            for b in (doc.get("adding_replicas") or {}).get(str(p.partition), []):
                if b not in p.isr:
                    unfinished += p.size
                    left += record[p.topic][str(p.partition)][str(b)]
        assert 0 < left < unfinished
    finally:
        client.stop()
    report = tmp_path / "controller.json"
    r = kit("sim", "run", "--zk", root, "--speed", "100000", "--until-idle", "--max-seconds", "600",
            "--report", report, timeout=900)
    assert r.returncode == 0, r.stderr
    got = json.loads(report.read_text())
    resumed = got["resumed"]
    assert resumed["progress"] == "recorded" and resumed["bytes_left"] == pytest.approx(left, abs=len(moves) * 3)
    assert resumed["at_s"] > 0 and "resumed a reassignment under way" in r.stdout
    # Every byte still to copy goes to the one new broker, at no more than RATE. The report
    # rounds its seconds to the millisecond: two rounded figures may each lose up to 0.0005 s.
    assert got["completion_s"] - resumed["at_s"] >= resumed["bytes_left"] / RATE - 0.001 > 60
    assert got["completion_s"] >= total / RATE - 0.0005  # both runs' copying, one clock
    r = kit("verify", plan, "--zk", root)
    assert r.returncode == 0 and f"{len(moves)} of {len(moves)} partition(s) done" in r.stdout, r.stdout
    with session(root) as client:
        after, _ = read_cluster(client)
        assert read_sim_progress(client) is None
    want = {(m["topic"], m["partition"]): m["replicas"] for m in moves}
    for p in after.partitions:
        if p.key in want:
            assert list(p.replicas) == want[p.key] and set(p.isr) == set(p.replicas)


@contextlib.contextmanager
def own_zookeeper(tmp_path, max_session_timeout=None):
    """A ZooKeeper of its own (it is restarted): yields (root, restart(between)), `between`
    called while the server is down; the simulated brokers are stopped at the end.
    `max_session_timeout`: the server's cap on every session (`kit.cluster.zk.server.start`)."""
    port, data = localzk.free_port(), str(tmp_path / "zk")
    localzk.start(port, data, max_session_timeout=max_session_timeout)
    root = f"127.0.0.1:{port}/kafka"

    def restart(between=None):
        localzk.stop(data)
        if between:
            between()
        # The stopped server's port is free once its process is gone and its sockets closed.
        wait_for(f"port {port} free again", lambda: localzk.port_free(port))
        localzk.start(port, data, max_session_timeout=max_session_timeout)
    try:
        yield root, restart
    finally:
        try:
            if localzk.status(data) is not None:
                kit("sim", "stop", "--zk", root)
        finally:
            localzk.stop(data)


@pytest.mark.slow
@pytest.mark.parametrize("expire", [False, True], ids=["session-kept", "session-expired"])
def test_kit_sim_run_and_its_brokers_ride_out_a_zookeeper_restart(snapshots, tmp_path, expire):
    """ZooKeeper restarts while `kit sim run` copies. Restarted at once, every session lives
    on (the server keeps them). session-expired: the simulator's processes are held still
    (SIGSTOP) until the restarted server has expired their sessions, as an outage longer
    than the session timeout leaves a client: every broker's ephemeral registration is gone.
    Either way the controller keeps running, the brokers are registered (again, in new
    sessions), and the reassignment completes. Once the controller exited 3 and stayed down."""
    snap = snapshots["replace"]
    stopped: list[int] = []
    # session-expired: every session is capped at 8 s (not the 18 s kit asks for), which the
    # restarted server waits out before it expires them; the same expiry, sooner.
    with own_zookeeper(tmp_path, max_session_timeout=8.0 if expire else None) as (root, restart):
        assert kit("sim", "seed", "--zk", root, "--snapshot", snap).returncode == 0
        plan, moves = replace_plan(root, snap, tmp_path)
        total = copy_bytes(snap, moves)
        live = sorted(load_snapshot(str(snap)).live_ids)
        assert kit("apply", plan, "--zk", root, "--throttle", str(int(2 * RATE))).returncode == 0
        report = tmp_path / "controller.json"
        # At speed 3000 the copy takes at least total / (2 RATE) / 3000 wall seconds (6.5 s); the
        # simulated figures are the same at any speed (the cluster's clock is virtual).
        sim = subprocess.Popen([*kit_command(), "sim", "run", "--zk", root, "--speed", "3000", "--until-idle",
                                "--max-seconds", "900", "--report", str(report)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        err: list[str] = []
        reader = threading.Thread(target=lambda: err.extend(sim.stderr), daemon=True)
        reader.start()
        try:
            with session(root) as client:
                wait_for("1% copied", lambda: sim.poll() is not None or (recorded_left(client) or total) < 0.99 * total)
                assert sim.poll() is None, "".join(err)
                assert client.exists(REASSIGN)  # under way when ZooKeeper goes
                holder = json.loads(client.get(HOLDER)[0])["pid"]
                owners = owners_of(client)

            def while_down():
                if expire:
                    for pid in (holder, sim.pid):
                        os.kill(pid, signal.SIGSTOP)
                        stopped.append(pid)
                else:
                    # Down for a few seconds, well inside the session timeout. The controller may not
                    # say so while down: a call it made just before is queued by kazoo until the
                    # server is back (or until its patience ends), so only the outcome is asserted.
                    time.sleep(3)
            restart(while_down)
            with session(root) as client:
                if expire:
                    # The restarted server expires the sessions nobody came back to.
                    wait_for("the brokers' sessions expired", lambda: not client.get_children("/brokers/ids"))
                    while stopped:
                        os.kill(stopped.pop(), signal.SIGCONT)
                wait_for("every live broker registered",
                         lambda: sorted(map(int, client.get_children("/brokers/ids"))) == live)
                assert json.loads(client.get(HOLDER)[0])["pid"] == holder  # the same holder, back
                if expire:
                    assert not owners_of(client) & owners  # registered again, in a new session
            sim.wait(timeout=900)
        finally:
            while stopped:
                os.kill(stopped.pop(), signal.SIGCONT)
            if sim.poll() is None:
                sim.kill()
                sim.wait()
        reader.join(timeout=60)
        err_text = "".join(err)
        assert sim.returncode == 0, err_text
        lost, back = "ZooKeeper connection lost" in err_text, "ZooKeeper is back" in err_text
        # An expired session always fails the next call; with the session kept, a call queued at
        # the drop may simply wait for the server, and then nothing is lost to say.
        assert (lost and back) if expire else lost == back, err_text
        assert json.loads(report.read_text())["completion_s"] >= total / (2 * RATE) - 0.0005  # rounded to the ms
        r = kit("verify", plan, "--zk", root)
        assert r.returncode == 0 and f"{len(moves)} of {len(moves)} partition(s) done" in r.stdout, r.stdout


def gone(pid: int) -> bool:
    """Whether process `pid` has exited (a zombie nobody reaped counts as exited)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_without_zookeeper_for_good_the_simulator_gives_up_after_its_patience(tmp_path):
    """Every wait has an end: ZooKeeper stopped for good, `kit sim run` exits 2 with one line
    after --zk-patience seconds, and the simulated brokers' holder exits too."""
    snap = tmp_path / "small.json"
    snap.write_text(json.dumps(SMALL))
    with own_zookeeper(tmp_path) as (root, _):
        assert kit("sim", "seed", "--zk", root, "--snapshot", snap, "--zk-patience", "3").returncode == 0
        with session(root) as client:
            holder = json.loads(client.get(HOLDER)[0])["pid"]
            apply_plan(client, MOVES, throttle=RATE)  # 240 simulated seconds of copying, at speed 1
        sim = subprocess.Popen([*kit_command(), "sim", "run", "--zk", root, "--zk-patience", "3"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            with session(root) as client:  # its first step records its progress: it runs
                wait_for("kit sim run copying", lambda: sim.poll() is not None or read_sim_progress(client))
            assert sim.poll() is None, sim.communicate()
            localzk.stop(str(tmp_path / "zk"))
            out, err = sim.communicate(timeout=300)
        finally:
            if sim.poll() is None:
                sim.kill()
                sim.wait()
        lines = err.strip().splitlines()
        assert sim.returncode == 2, err
        assert "ZooKeeper connection lost" in lines[0] and "up to 3 s" in lines[0]
        assert lines[-1] == ("kit: ZooKeeper unreachable for 3 s; the simulated controller stopped (kit sim run "
                             "resumes the reassignment from where it was)"), err
        wait_for("the brokers' holder gave up", lambda: gone(holder))
