"""`kit status` counts the offline partitions (no live in-sync replica: no leader) on both
backends: a ZooKeeper-mode cluster in Kafka's znodes and a simulated KRaft cluster through the
Admin API, both summed up by `kit.cluster.reassign.status_doc`."""
from __future__ import annotations

import itertools
import json

import pytest

from conftest import kraft_cluster, run_kit, seed
from kit.cli.change import offline_line
from kit.cluster.backend import ClusterAddress, open_backend
from kit.formats import load_snapshot

# Three brokers dead at once and RF-2 topics: every replica of some partitions is on a dead broker.
OFFLINE_CLUSTER = ("--brokers", "12", "--racks", "3", "--partitions", "200", "--topics", "10", "--rf2-share", "0.5",
                   "--scenario", "replace", "--dead", "3", "--seed", "3")
_chroots = itertools.count()


def offline_names(path) -> list[str]:
    """The snapshot's partitions with no replica both live and in the ISR, worked out here."""
    doc = json.loads(path.read_text())
    live = {b["id"] for b in doc["brokers"] if b.get("alive", True)}
    return sorted(f"{p['topic']}-{p['partition']}" for p in doc["partitions"]
                  if not any(b in live and b in p.get("isr", p["replicas"]) for b in p["replicas"]))


@pytest.mark.parametrize("kind", ["zookeeper", "kraft"])
def test_status_says_how_many_partitions_are_offline(kind, make_snapshot, zookeeper, tmp_path, monkeypatch):
    path = make_snapshot(*OFFLINE_CLUSTER)
    expected = offline_names(path)
    assert len(expected) >= 5  # the cluster the test is about
    monkeypatch.setenv("KIT_STATE_DIR", str(tmp_path / "kit-state"))
    if kind == "zookeeper":
        root = f"{zookeeper}/kit-offline-{next(_chroots)}"
        seed(root, load_snapshot(str(path)))
        flag = ("--zk", root)
        status, r = _status(flag)
    else:
        with kraft_cluster(path, tmp_path / "kraft", wait=300.0) as line:
            flag = ("--bootstrap", line)
            status, r = _status(flag)
    assert sorted(status["offline"]) == expected
    assert set(expected) <= set(status["under_replicated"])  # every one here has a replica out of the ISR
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    line = next(x for x in lines if x.startswith("offline partitions: "))
    assert line.startswith(f"offline partitions: {len(expected)} ({', '.join(status['offline'][:5])} and "
                           f"{len(expected) - 5} more): no live in-sync replica")
    assert lines.index(line) == lines.index(f"under-replicated partitions: {len(status['under_replicated'])}") + 1


def _status(flag: tuple[str, str]):
    """The backend's status dict and `kit status`'s run, on the cluster `flag` names."""
    with open_backend(ClusterAddress(**{flag[0][2:]: flag[1]})) as backend:
        status = backend.status()
    return status, run_kit("status", *flag, timeout=300)


def test_the_status_line_says_none_or_names_the_first_few():
    assert offline_line([]) == "offline partitions: 0"
    assert offline_line(["a-0", "a-1"]).startswith("offline partitions: 2 (a-0, a-1): no live in-sync replica")
    assert offline_line([f"t-{i}" for i in range(7)], named=3).startswith("offline partitions: 7 (t-0, t-1, t-2 and "
                                                                          "4 more)")
