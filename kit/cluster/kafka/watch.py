"""The Admin API has no watches: `AdminWatching` polls ListPartitionReassignments for the
reassignment's changes, and `AdminWatch` the cluster (DescribeCluster) for a caller that
must know when it stops answering.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable

from kit.cluster.kafka.connect import translate
from kit.cluster.kafka.requests import AdminRequests
from kit.errors import Unreachable, translate_errors

# How often the reassignment and the connection are polled (seconds): the Admin API has no watches.
POLL_SECONDS = 1.0


@translate_errors(translate)
class AdminWatching(AdminRequests):
    """The watches (`kit.cluster.backend.Reading.watch_reassignment`,
    `kit.cluster.backend.Connection.watch_connection`)."""

    def watch_reassignment(self, callback: Callable[[], None]) -> None:
        """A thread polling ListPartitionReassignments every `POLL_SECONDS`: `callback` once now,
        then whenever the reassignment in flight changes (starts, progresses, ends), until `close`."""
        threading.Thread(target=self._poll_reassignment, args=(callback,), name="kit-admin-reassignment",
                         daemon=True).start()

    def _poll_reassignment(self, callback: Callable[[], None]) -> None:
        seen: object = object()  # nothing seen yet: the first poll calls back
        while not self._closed.is_set():
            try:
                now = self._to_controller(self.admin.list_partition_reassignments)
                state = sorted((tp.topic, tp.partition, tuple(r["replicas"]), tuple(r["adding_replicas"]),
                                tuple(r["removing_replicas"])) for tp, r in now.items())
            except Exception:  # noqa: BLE001  (cluster away, client closing: poll again, the caller's watch says it)
                state = seen
            if state != seen:
                seen = state
                callback()
            self._closed.wait(POLL_SECONDS)

    def watch_connection(self, patience: float, on_change: Callable[[str | None], None] | None = None
                         ) -> AdminWatch:
        """An `AdminWatch` probing the cluster every `POLL_SECONDS`."""
        return AdminWatch(self, patience, on_change)


class AdminWatch:
    """`kit.cluster.backend.ConnectionWatch` over an admin client: a thread asks the cluster
    (DescribeCluster) every `POLL_SECONDS`; `down` while it does not answer, `gave_up` after
    `patience` seconds of that. Calls made meanwhile fail on their own request timeout.
    `on_change` hears of the first unanswered probe (what failed) and of the first answer after
    it (None)."""

    def __init__(self, backend: AdminRequests, patience: float,
                 on_change: Callable[[str | None], None] | None = None):
        self.backend, self.patience, self.on_change = backend, patience, on_change
        self.since: float | None = None
        self.gave_up = threading.Event()
        self._closed = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="kit-admin-connection", daemon=True)
        self.thread.start()

    def _ended(self) -> bool:
        return self._closed.is_set() or self.backend._closed.is_set()

    def _watch(self) -> None:
        while not self._ended():
            try:
                self.backend.admin.describe_cluster()
                if self._ended():
                    return
                was_down, self.since = self.since is not None, None
                if was_down and self.on_change is not None:
                    self.on_change(None)
            except Exception as e:  # noqa: BLE001  (any failure to answer is the cluster away)
                if self._ended():
                    # A probe the closing client cut short says nothing of the cluster: the
                    # loop's events end with its own last word (CI: an `unreachable` after
                    # the lease's `alert`).
                    return
                first, self.since = self.since is None, self.since or time.monotonic()
                if first and self.on_change is not None:
                    self.on_change(f"DescribeCluster unanswered: {type(e).__name__}")
                if time.monotonic() - self.since > self.patience:
                    self.gave_up.set()
                    return
            self._closed.wait(POLL_SECONDS)

    @property
    def down(self) -> bool:
        """Whether the last probe went unanswered."""
        return self.since is not None

    def raise_if_down(self) -> None:
        """`kit.errors.Unreachable` while the cluster does not answer."""
        if self.down:
            raise Unreachable("Kafka cluster unreachable (no broker answers)")

    def close(self) -> None:
        """Stop probing."""
        self._closed.set()
