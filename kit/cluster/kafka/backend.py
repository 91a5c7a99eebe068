"""`AdminBackend`: `kit.cluster.backend.ClusterBackend` for a cluster reached through Kafka's
Admin API (kafka-python 3.x's KafkaAdminClient), as Kafka's own `kafka-reassign-partitions`
(ReassignPartitionsCommand, 3.x/4.x) drives one.

It composes one class per role, each in its module: `kit.cluster.kafka.reading` (the cluster
as kit's model), `.reassignment` (apply, verify, cancel, roll back, elect), `.configs` (the
throttle configs), `.lease` (the auto-throttle's lease markers) and `.watch` (the pollers), all
sending through `.requests`; what kit keeps beside the cluster (the overrides, the metrics) is
`kit.cluster.kafka.local`'s, here. What the answers mean in kit's model is
`kit.cluster.kafka.model`, what every backend decides alike `kit.cluster.reassign`.
kafka-python's errors reach callers as kit's (`kit.cluster.kafka.connect.translate`): a
cluster that does not answer as `Unreachable`.
"""
from __future__ import annotations

import os
import threading

from kit.cluster.kafka.connect import new_client, resolve_security, translate
from kit.cluster.kafka.lease import AdminLease
from kit.cluster.kafka.local import LocalStore, default_home
from kit.cluster.kafka.reassignment import AdminReassigning
from kit.cluster.kafka.watch import AdminWatching
from kit.cluster.reassign import status_doc
from kit.errors import BadInput, Unsafe, translate_errors
from kit.throttle.lease import Lease


@translate_errors(translate)
class AdminBackend(AdminReassigning, AdminLease, AdminWatching):
    """One admin client to a Kafka cluster.

    Parameters
    ----------
    bootstrap : str
        HOST:PORT[,HOST:PORT...]; `BadInput` (one line, within 30 s) when no broker answers.
    timeout : float, optional
        Seconds each request may take (default `kit.cluster.kafka.connect.REQUEST_SECONDS`);
        request.timeout.ms in the properties file wins over both.
    command_config : str, optional
        Kafka's client properties file (`kit.cluster.kafka.connect.resolve_security`).
    state_file, metrics_dir : str, optional
        Where the auto-throttle's overrides and the metrics are kept (`kit.cluster.kafka.local`;
        default under ``$KIT_STATE_DIR/clusters/<cluster id>/``).
    sim_facts : str, optional
        The simulated KRaft cluster's facts file (`kit sim start --kraft` writes DIR/facts.json),
        read by `sim_facts` and filling in what Kafka does not say of its brokers (NIC capacity,
        instance type); BadInput when it is another cluster's. None on a real cluster.
    """

    def __init__(self, bootstrap: str, timeout: float | None = None, command_config: str | None = None,
                 state_file: str | None = None, metrics_dir: str | None = None, sim_facts: str | None = None):
        self.bootstrap, self.facts_file = bootstrap, sim_facts
        self.admin = new_client(bootstrap, timeout, resolve_security(command_config))
        self._closed = threading.Event()
        try:
            cluster_id = self.admin.describe_cluster().get("cluster_id")
            self._facts = self._read_facts(cluster_id)
        except Exception as e:  # noqa: BLE001  (the constructor is not wrapped by translate_errors)
            self.admin.close()
            raise (e if isinstance(e, (BadInput, Unsafe)) else translate(e) or e) from None
        home = default_home(cluster_id)
        self._held: Lease | None = None  # the lease marker this backend wrote last (`hold_lease`)
        self.store = LocalStore(state_file or os.path.join(home, "state.json"),
                                metrics_dir or os.path.join(home, "metrics"))

    def __enter__(self) -> AdminBackend:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()

    def close(self) -> None:
        """Stop the pollers and close the client, once."""
        if not self._closed.is_set():
            self._closed.set()
            self.admin.close()

    def status(self) -> dict:
        """`kit.cluster.reassign.status_doc` of the cluster and the throttle keys in force."""
        cluster, running = self.read()
        brokers, topics = self.throttles()
        return status_doc(cluster, running, list(brokers), list(topics))

    def write_metrics(self, partition_meta: dict, broker_metrics: dict) -> str:
        """The metrics directory's two files (`kit.cluster.kafka.local.LocalStore.write_metrics`)."""
        self.store.write_metrics(partition_meta, broker_metrics)
        return f"the partition sizes and broker metrics in {self.store.metrics_dir}"

    def throttle_overrides(self) -> dict[str, tuple[str | None, bytes]]:
        """The overrides in the state file (`kit.cluster.kafka.local`)."""
        return self.store.overrides()

    def store_throttle_override(self, body: bytes, broker: str | None = None) -> str:
        """Store an override in the state file; returns its `where`."""
        return self.store.store_override(body, broker)

    def remove_throttle_override(self, broker: str | None = None) -> bytes | None:
        """Remove a broker's override, or empty the global one; the body it had."""
        return self.store.remove_override(broker)

    def broker_metrics(self) -> tuple[object, float] | None:
        """The metrics directory's broker metrics, and when they were written."""
        return self.store.broker_metrics()
