"""`AdminReading`: the cluster as kit's model (`kit.cluster.kafka.model`) from DescribeCluster,
Metadata, ListPartitionReassignments and DescribeLogDirs, sizes falling back on the metrics
directory, brokers' NICs on the simulated cluster's facts file.
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import json

from kafka.protocol.admin import DescribeLogDirsRequest
from kafka.protocol.metadata import MetadataRequest

from kit.cluster.kafka import model
from kit.cluster.kafka.connect import translate
from kit.cluster.kafka.local import LocalStore
from kit.cluster.kafka.requests import AdminRequests
from kit.errors import BadInput, translate_errors
from kit.model import Cluster


@contextlib.contextmanager
def collections_paused():
    """No garbage collection within: a read of a large cluster makes millions of objects (the
    decoded answers, kit's model), none in a reference cycle, and each of the full collections
    they would set off walks all of them (at 200,000 partitions a third of the read's CPU,
    measured). Collections resume after, as they were (another thread's read may overlap)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@translate_errors(translate)
class AdminReading(AdminRequests):
    """Reading the cluster (`kit.cluster.backend.Reading`, but `status`, which needs the
    throttles too: `kit.cluster.kafka.backend.AdminBackend`, and `watch_reassignment`:
    `kit.cluster.kafka.watch`)."""

    facts_file: str | None  # the simulated cluster's facts file given (--sim-facts)
    _facts: dict | None  # its content, checked to be this cluster's (`_read_facts`)
    store: LocalStore  # the metrics directory beside the cluster (`kit.cluster.kafka.local`)

    def _log_dirs(self, brokers: list[int]) -> list[tuple[int, list]]:
        """DescribeLogDirs of each broker for all its partitions (a null topic list, as Kafka's
        own Admin client asks: kafka-python's `describe_log_dirs` would name every partition of
        the cluster in each request, or read Metadata again to do so): (broker, its log dirs as
        decoded), for `model.replica_sizes`; a broker that does not answer is left out (its
        replicas' sizes then come from another, or the metrics directory)."""
        answers = self._per_broker(lambda b: self._send(DescribeLogDirsRequest(topics=None), b).results, brokers)
        return [(b, answers[b]) for b in brokers if b in answers]

    def read(self) -> tuple[Cluster, dict | None]:
        """DescribeCluster, Metadata, ListPartitionReassignments and DescribeLogDirs as kit's
        model (`kit.cluster.kafka.model`), sizes falling back on the metrics directory."""
        return self._read(sizes=True)

    def follow(self, current: bool = False) -> None:
        """Nothing: every `read` asks the cluster (the Admin API has no watch to follow it by)."""

    def _read(self, sizes: bool) -> tuple[Cluster, dict | None]:
        """`read`; without `sizes` no DescribeLogDirs (a request per broker): what checks a plan
        or follows its progress needs only the replicas, ISR and leaders."""
        # The reassignment first, the replicas after: the Admin API reads nothing at once, and a
        # partition read as moving that has just finished only waits a round, while one read as
        # not moving with the replicas it had while moving would be taken for never started.
        running = model.reassignment_doc(self._to_controller(self.admin.list_partition_reassignments))
        described = self.admin.describe_cluster()
        with collections_paused():
            topics = self._every_topic()
            sizes, disks = model.replica_sizes(self._log_dirs(self._live(described))) if sizes else ({}, {})
            partition_meta, broker_metrics = self.store.metrics()
            cluster = model.build_cluster(described, topics, sizes, disks, partition_meta, broker_metrics)
        return (self._with_facts(cluster) if self._facts else cluster), running

    def _every_topic(self) -> list:
        """Metadata of every topic: its response's topics as kafka-python decodes them. What
        `describe_topics()` sends, read without its `to_dict()` of every partition (at 200,000
        partitions the most of a read's time) and without the authorized operations kit does
        not read."""
        return self._send(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                          include_cluster_authorized_operations=False,
                                          include_topic_authorized_operations=False)).topics

    def reassigning(self) -> bool:
        """Whether ListPartitionReassignments lists any partition."""
        return bool(self._to_controller(self.admin.list_partition_reassignments))

    def sim_facts(self) -> dict | None:
        """The simulated cluster's facts file given (`kit sim start --kraft`'s DIR/facts.json),
        None without one."""
        return self._facts

    def _read_facts(self, cluster_id: str | None) -> dict | None:
        """The facts file, checked to be the simulated cluster's that `bootstrap` reaches (a
        file of another cluster, or of none, is BadInput: it would lend its brokers' facts to
        brokers it does not describe)."""
        if not self.facts_file:
            return None
        where = f"--sim-facts {self.facts_file}"
        try:
            with open(self.facts_file, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
            raise BadInput(f"{where}: cannot be read ({type(e).__name__})") from None
        if not isinstance(doc, dict) or not doc.get("simulated") or not isinstance(doc.get("brokers"), dict):
            raise BadInput(f"{where}: not a simulated cluster's facts (kit sim start --kraft writes DIR/facts.json)")
        if doc.get("cluster_id") != cluster_id:
            raise BadInput(f"{where}: the facts of cluster {doc.get('cluster_id')}, but --bootstrap {self.bootstrap} "
                           f"reaches cluster {cluster_id}")
        return doc

    def _with_facts(self, cluster: Cluster) -> Cluster:
        """Each broker's NIC capacity and instance type from the simulated cluster's facts, where
        Kafka says none (it never does: the Admin API has no such fact)."""
        for bid, b in list(cluster.brokers.items()):
            fact = (self._facts or {})["brokers"].get(str(bid)) or {}
            filled = {k: fact[k] for k in ("net_capacity", "instance_type")
                      if getattr(b, k) is None and fact.get(k) is not None}
            if filled:
                cluster.brokers[bid] = dataclasses.replace(b, **filled)
        return cluster
