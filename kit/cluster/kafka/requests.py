"""`AdminRequests`: what every role of the Admin API backend sends its requests through: the
admin client, the controller found again when it stops answering, a request to each broker at
once, one request to any broker (`kit.cluster.kafka.backend.AdminBackend` composes the roles).
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable, Iterable

from kafka import KafkaAdminClient

from kit.cluster.kafka.connect import LOST
from kit.errors import Unreachable, Unsafe

PARALLEL = 8  # brokers asked at once (DescribeLogDirs, broker configs)


class AdminRequests:
    """The admin client (`admin`) to the cluster at `bootstrap` and the requests every role
    sends through it; `_closed` is set once the backend closes."""

    admin: KafkaAdminClient
    bootstrap: str
    _closed: threading.Event

    reached_through = "Kafka (Admin API)"
    connection_lost = (Unreachable,)

    def _to_controller(self, call, *args, **kwargs):
        """A call kafka-python sends to the controller it found once: when that broker stops
        answering, it is forgotten (found again through Metadata) and the call tried once more."""
        try:
            return call(*args, **kwargs)
        except (*LOST, RuntimeError) as e:
            if isinstance(e, RuntimeError) and "controller" not in str(e):
                raise
            # kafka-python keeps the controller's id and only looks again on NotController.
            self.admin._controller_id = None  # noqa: SLF001
            try:
                return call(*args, **kwargs)
            except RuntimeError:
                raise Unreachable("Kafka cluster: no controller answers") from None

    def _server_wait_ms(self) -> int:
        """How long the controller may wait before it answers a change (the request's own
        timeout field): within the client's request timeout, so that its answer, even "timed
        out", arrives before the client gives up on it."""
        return max(1, int(self.admin.config["request_timeout_ms"] * 0.8))

    def _live(self, described: dict) -> list[int]:
        return sorted(b["broker_id"] for b in described.get("brokers") or () if not b.get("is_fenced"))

    def _per_broker(self, call: Callable[[int | str], object], brokers: Iterable[int | str]) -> dict:
        """``{broker: call(broker)}``, the brokers asked at once (a request each: DescribeLogDirs
        and a broker's configs go to that broker); one that does not answer is left out."""
        brokers = list(brokers)
        if not brokers:
            return {}
        with ThreadPoolExecutor(max_workers=min(PARALLEL, len(brokers)), thread_name_prefix="kit-admin") as pool:
            futures = {b: pool.submit(call, b) for b in brokers}
        out = {}
        for b, future in futures.items():
            try:
                out[b] = future.result()
            except LOST:
                continue
        return out

    def _send_to_any(self, request):
        """One request to any broker, its answer. kafka-python's describe_configs and
        alter_configs address a BROKER resource to the broker its name numbers, which the
        cluster-wide default ("", answered by every broker) has not: the request they would
        build is sent here instead."""
        return self._send(request)

    def _send(self, request, broker: int | None = None):
        """One request to `broker` (None: any), its answer, through kafka-python's connections
        (it picks the version both sides know)."""
        manager = self.admin._manager  # noqa: SLF001  (kafka-python 3.x's connection manager)

        async def send():
            return await manager.send(request, node_id=broker)
        return manager.run(send)

    def _refuse_if_running(self, running: dict | None, what: str = "nothing was changed") -> None:
        if running is not None:
            raise Unsafe(f"a reassignment is already in progress (ListPartitionReassignments lists "
                         f"{len(running['partitions'])} partition(s)); {what}")
