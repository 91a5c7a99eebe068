"""The harness kit ships (kit/testing.py) does what its users rely on: a real ZooKeeper that
answers, seeded brokers registered as running ones would be, and nothing left running after."""
from __future__ import annotations

from kit.cluster.zk import server as localzk
from kit.cluster.zk.layout import connect
from kit.formats import load_snapshot
from kit.testing import local_zookeeper, run_kit, seed, wait_for


def test_a_local_zookeeper_answers_holds_a_seeded_cluster_and_leaves_nothing_running(tmp_path, snapshots):
    data = str(tmp_path / "zk")
    cluster = load_snapshot(str(snapshots["replace"]))
    with local_zookeeper(data) as where:
        port = int(where.rsplit(":", 1)[1])
        assert localzk.answers(port)
        seed(f"{where}/harness", cluster)
        client = connect(f"{where}/harness")
        try:
            registered = sorted(map(int, client.get_children("/brokers/ids")))
        finally:
            client.stop()
            client.close()
        assert registered == sorted(cluster.live_ids)
        # `kit sim seed`'s own holder in another chroot is stopped on exit too.
        assert run_kit("sim", "seed", "--zk", f"{where}/held", "--snapshot", snapshots["replace"]).returncode == 0
    assert localzk.status(data) is None
    wait_for("the server's port free", lambda: localzk.port_free(port), limit=60)


def test_wait_for_returns_what_the_event_gave_and_names_it_when_it_never_comes():
    seen = iter([None, 0, "there"])
    assert wait_for("the third look", lambda: next(seen), every=0.01) == "there"
    try:
        wait_for("an event that never comes", lambda: None, limit=0.05, every=0.01)
    except AssertionError as e:
        assert "an event that never comes: not within 0 s" in str(e)
    else:
        raise AssertionError("wait_for did not give up")
