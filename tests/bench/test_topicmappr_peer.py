"""bench_plan.py's topicmappr column: the command each action gets, the cluster topicmappr reads
from a real ZooKeeper, and the benchmark without the binary."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kazoo.client import KazooClient

from kit.cluster.zk.read import BROKER_METRICS, PARTITION_META, parse_znode_json
from kit.formats import load_snapshot

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import topicmappr_peer  # noqa: E402


def _doc(path: Path) -> dict:
    return json.loads(path.read_text())


def _brokers(args: list[str]) -> list[int]:
    return [int(b) for b in args[args.index("--brokers") + 1].split(",")]


def test_each_action_names_the_brokers_kit_plans_for(snapshots):
    doc = _doc(snapshots["az-loss"])
    az = load_snapshot(str(snapshots["az-loss"]))
    live = sorted(b["id"] for b in doc["brokers"] if b.get("alive", True))
    assert len(live) < len(doc["brokers"])  # the scenario lost brokers
    args = topicmappr_peer.peer_args("az-loss", az, ["--rack", "rack-c"])
    assert args[0] == "rebuild" and _brokers(args) == live
    # one rack is gone: the sets may keep two distinct racks, not three
    assert args[args.index("--min-rack-ids") + 1] == "2"

    balanced = load_snapshot(str(snapshots["balanced"]))
    every = sorted(b["id"] for b in _doc(snapshots["balanced"])["brokers"])
    remove = topicmappr_peer.peer_args("remove", balanced, ["--remove", f"{every[-2]},{every[-1]}"])
    assert _brokers(remove) == every[:-2]
    # kit's evacuations balance leadership: topicmappr's same change optimises it too; with
    # kit's leadership kept, the plain rebuild (which reorders nothing either) is the peer.
    kept = topicmappr_peer.peer_args("remove-keep", balanced, ["--leadership", "keep", "--remove", f"{every[-1]}"])
    assert remove[-1] == "--optimize-leadership" and "--optimize-leadership" not in kept
    assert _brokers(kept) == every[:-1]
    assert kept[kept.index("--min-rack-ids"):] == remove[remove.index("--min-rack-ids"):-1]
    assert args[-1] == "--optimize-leadership"
    az_kept = topicmappr_peer.peer_args("az-loss-keep", az, ["--leadership", "keep", "--rack", "rack-c"])
    assert az_kept == args[:-1]
    assert "--sub-affinity" in topicmappr_peer.peer_args("replace", load_snapshot(str(snapshots["replace"])), [])
    for action in ("scale-out", "rebalance"):
        assert "--force-rebuild" in topicmappr_peer.peer_args(action, balanced, [])
    assert topicmappr_peer.peer_args("leaders", balanced, [])[-1] == "--optimize-leadership"
    assert topicmappr_peer.peer_args("rf", balanced, []) is None  # no counterpart: no row
    line = topicmappr_peer.command(Path("/bin/tm"), "127.0.0.1:2181", ["rebuild"], Path("/tmp/out"))
    assert line[:3] == ["/bin/tm", "--zk-addr", "127.0.0.1:2181"]
    assert line[line.index("--out-path") + 1] == "/tmp/out/"  # topicmappr joins path and name as they are


def test_topicmappr_reads_the_snapshots_cluster_from_zookeeper(snapshots, monkeypatch):
    snap = snapshots["az-loss"]
    doc = _doc(snap)
    with topicmappr_peer.cluster_in_zookeeper(Path("/bin/tm"), snap) as peer:
        connect = peer.connect
        assert peer.with_sizes and peer.binary == Path("/bin/tm")
        client = KazooClient(hosts=connect)
        client.start(timeout=30)
        try:
            live = {b["id"]: b.get("rack") for b in doc["brokers"] if b.get("alive", True)}
            ids = sorted(int(b) for b in client.get_children("/brokers/ids"))
            assert ids == sorted(live)
            reg = json.loads(client.get(f"/brokers/ids/{ids[0]}")[0])
            assert reg["rack"] == live[ids[0]]  # topicmappr's rack constraints come from here
            topics: dict[str, dict] = {}
            for p in doc["partitions"]:
                topics.setdefault(p["topic"], {})[str(p["partition"])] = p["replicas"]
            assert sorted(client.get_children("/brokers/topics")) == sorted(topics)
            for t, parts in topics.items():
                assert json.loads(client.get(f"/brokers/topics/{t}")[0])["partitions"] == parts
            # the assignments alone: no per-partition znodes for a controller
            assert client.exists(f"/brokers/topics/{next(iter(topics))}/partitions") is None
            sizes = parse_znode_json(client.get(PARTITION_META)[0], PARTITION_META)
            p = doc["partitions"][-1]
            assert sizes[p["topic"]][str(p["partition"])]["Size"] == p.get("size", 0)
            assert client.exists(BROKER_METRICS) is not None
        finally:
            client.stop()
            client.close()
    # a cluster whose sizes do not fit in a znode: laid out without them, and said so
    monkeypatch.setattr(topicmappr_peer, "ZNODE_LIMIT", 100)
    with topicmappr_peer.cluster_in_zookeeper(Path("/bin/tm"), snap) as peer:
        assert not peer.with_sizes
        client = KazooClient(hosts=peer.connect)
        client.start(timeout=30)
        try:
            assert client.exists(PARTITION_META) is None
        finally:
            client.stop()
            client.close()


def test_without_the_binary_the_table_says_so(shared_dir, tmp_path):
    cache = tmp_path / "cache"
    cmd = [sys.executable, str(ROOT / "bench" / "bench_plan.py"), "--shared", str(shared_dir), "--partitions", "120",
           "--brokers", "9", "--topics", "6", "--scenarios", "az-loss", "--cache", str(cache)]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    r = subprocess.run(cmd + ["--out", str(tmp_path / "table.md")], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    table = (tmp_path / "table.md").read_text()
    assert "none given and none on PATH" in table
    rows = [ln for ln in table.splitlines() if ln.startswith("| az-loss")]
    assert len(rows) == 2 and all("| kit |" in row for row in rows)  # az-loss and az-loss-keep

    # a named binary that is not there: one line, exit 2, nothing written
    other = tmp_path / "other"
    r = subprocess.run(cmd[:-1] + [str(other), "--topicmappr", str(tmp_path / "no-such-topicmappr")],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2
    assert "no executable file there" in r.stderr.strip().splitlines()[-1]
    assert not other.exists()
