"""topicmappr, Datadog's planner, on the same cluster as kit in the same benchmark run.

kit reads the snapshot file; topicmappr (kafka-kit v3) reads Kafka's znodes. So each scenario's
snapshot is laid out once in a real local ZooKeeper (`cluster_in_zookeeper`: the live brokers
registered, the topics' assignments in Kafka's layout, kafka-kit's /topicmappr/partitionmeta and
/topicmappr/brokermetrics where they fit in a znode), and each kit action is matched with the
topicmappr command an operator would run for the same change (`peer_args`): where kit's command
balances leadership, topicmappr's optimises it too (design.md's peer table, older, ran the
evacuations as plain rebuilds: kit's rows with `--leadership keep` get those). Its combined map
is Kafka's reassignment JSON, scored by evaluate_plan.py like kit's plan.

The binary: `--topicmappr PATH`, else $TOPICMAPPR, else `topicmappr` on PATH (`find_binary`).
Without one, bench_plan.py reports the ratio to the I/O floor alone (issue 38).
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator, NamedTuple

from kit.cluster.zk.layout import ZNODE_LIMIT, dump_znode_json, metric_documents
from kit.cluster.zk.read import BROKER_METRICS, PARTITION_META
from kit.formats import load_snapshot
from kit.model import Cluster
from kit.testing import local_zookeeper, seed

# The combined map's name under the run's output folder (topicmappr appends ".json").
COMBINED = "combined"


def find_binary(explicit: str | None) -> Path | None:
    """topicmappr's executable: `explicit`, else $TOPICMAPPR, else the one on PATH; None without.

    Raises
    ------
    ValueError
        `explicit` (or $TOPICMAPPR) names no executable file.
    """
    named = explicit or os.environ.get("TOPICMAPPR")
    if named:
        path = Path(named)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ValueError(f"--topicmappr {named}: no executable file there")
        return path.resolve()
    found = shutil.which("topicmappr")
    return Path(found) if found else None


def environment_shown(explicit: str | None) -> str:
    """What a benchmark's command line is preceded by, to find topicmappr again as `find_binary`
    did: ``TOPICMAPPR=PATH `` where the environment named it (`make bench TOPICMAPPR=PATH`), else
    nothing (given by --topicmappr, on the command line already, or found on PATH)."""
    named = os.environ.get("TOPICMAPPR")
    return f"TOPICMAPPR={named} " if named and not explicit else ""


class Peer(NamedTuple):
    """topicmappr ready for one scenario: its binary, the ZooKeeper holding the cluster, the
    cluster (kit's model of the snapshot), and whether kafka-kit's metric znodes are there."""

    binary: Path
    connect: str
    cluster: Cluster
    with_sizes: bool


def peer_args(action: str, cluster: Cluster, kit_extra: list[str]) -> list[str] | None:
    """topicmappr's subcommand and flags for kit's `action` on `cluster`, given the options kit's
    own command got (`kit_extra`); None where topicmappr has no counterpart.

    Every command names the target brokers explicitly: the live brokers (those the snapshot does
    not mark dead), less the ones kit's `--remove` evacuates.
    """
    # A row ending in -keep is kit's evacuation with `--leadership keep`: the same brokers.
    kept = action.endswith("-keep")
    action = action.removesuffix("-keep")
    live = sorted(cluster.live_ids)
    if action == "remove":
        gone = {int(x) for x in kit_extra[kit_extra.index("--remove") + 1].split(",")}
        live = [b for b in live if b not in gone]
    target = ["--topics", ".*", "--brokers", ",".join(map(str, live))]
    if action == "replace":
        # Each dead broker's slots to its substitute, nothing else moved: kit's replace.
        return ["rebuild", *target, "--sub-affinity"]
    if action in ("az-loss", "remove"):
        # With a rack gone the replica sets cannot keep one replica per rack: topicmappr refuses
        # each partition unless told how many distinct racks suffice (the racks left, at most RF).
        racks = {cluster.rack_of(b) for b in live}
        rf = min(len(p.replicas) for p in cluster.partitions)
        rebuild = ["rebuild", *target, "--min-rack-ids", str(min(len(racks), rf))]
        # kit's evacuations balance leadership (topicmappr's --optimize-leadership) unless told to
        # keep it: then the plain rebuild, which reorders no replica either.
        return rebuild if kept else [*rebuild, "--optimize-leadership"]
    if action in ("scale-out", "rebalance"):
        # topicmappr's count balance is a rebuild from scratch (design.md's peer table).
        return ["rebuild", *target, "--force-rebuild", "--optimize-leadership"]
    if action == "leaders":
        return ["rebuild", *target, "--optimize-leadership"]
    if action == "rebalance-storage":
        return ["rebalance", *target]
    return None


def shown(args: list[str]) -> str:
    """`peer_args`' command as a table's notes show it: the target brokers' long list named, not listed."""
    return "topicmappr " + " ".join("<target brokers>" if x == args[args.index("--brokers") + 1] else x for x in args)


def command(binary: Path, connect: str, args: list[str], out_dir: Path) -> list[str]:
    """The whole command line: ZooKeeper's address first (a root flag), the per-topic maps and
    the combined one into `out_dir`, warnings not fatal (they are printed, as kit prints its)."""
    host, _, chroot = connect.partition("/")
    zk = ["--zk-addr", host] + (["--zk-prefix", chroot] if chroot else [])
    return [str(binary), *zk, *args, "--out-path", f"{out_dir}/", "--out-file", COMBINED, "--ignore-warns"]


def combined_map(out_dir: Path) -> Path:
    """Where `command`'s run leaves its combined map (Kafka's reassignment JSON)."""
    return out_dir / f"{COMBINED}.json"


@contextlib.contextmanager
def cluster_in_zookeeper(binary: Path, snapshot: Path) -> Iterator[Peer]:
    """A local ZooKeeper holding what topicmappr reads of `snapshot`'s cluster: the brokers'
    registrations, the topics' assignments and, where they fit in a znode, kafka-kit's metric
    znodes (`kit.cluster.zk.layout.metric_documents`; its storage rebalance needs them). Yields
    the `Peer`; the server and its data go when the block ends."""
    cluster = load_snapshot(str(snapshot))
    with tempfile.TemporaryDirectory(prefix="kit-bench-zk-") as data, local_zookeeper(data) as connect:
        client = seed(connect, cluster, assignments_only=True)
        docs = [dump_znode_json(doc) for doc in metric_documents(cluster)]
        fits = all(len(doc) <= ZNODE_LIMIT for doc in docs)
        if fits:
            for path, doc in zip((PARTITION_META, BROKER_METRICS), docs):
                client.create(path, doc, makepath=True)
        yield Peer(binary, connect, cluster, fits)

