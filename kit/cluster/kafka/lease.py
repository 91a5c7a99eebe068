"""`AdminLease`: the auto-throttle's lease as config markers on the cluster-wide broker default
(`kit.throttle.lease.Lease.marker`): Kafka keeps no compare-and-set, so the earliest live
marker holds.
"""
from __future__ import annotations

import time
from collections.abc import Callable

from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType
from kafka import errors as kerr
from kafka.errors import for_code

from kit.cluster.kafka.configs import LEASE_MARKER, AdminThrottling
from kit.cluster.kafka.connect import refused, translate
from kit.errors import Unsafe, translate_errors
from kit.throttle.lease import Lease

# How long a lease marker just written may take to show in a broker's answer (seconds): a broker
# describes the configs it has applied, which follow the controller's by a moment.
LEASE_SEEN_S = 30.0


@translate_errors(translate)
class AdminLease(AdminThrottling):
    """The lease (`kit.cluster.backend.Overrides`' `hold_lease`, `release_lease`, `leases`);
    `_held` is the marker this backend wrote last."""

    _held: Lease | None

    def _lease_markers(self) -> dict[str, Lease]:
        """The lease markers among the cluster-wide broker default's config names (DescribeConfigs
        of BROKER "", to any broker; `kit.throttle.lease.Lease.marker`)."""
        request = self.admin._describe_configs_request([ConfigResource(ConfigResourceType.BROKER, "")])  # noqa: SLF001
        out = {}
        for result in self._send_to_any(request).results:
            if result.error_code:
                error = for_code(result.error_code)
                if issubclass(error, kerr.AuthorizationError):
                    raise refused(error, f"{LEASE_MARKER} (DescribeConfigs)", "DESCRIBE_CONFIGS on the CLUSTER",
                                  "; nothing was changed")
                raise Unsafe(f"Kafka refused {LEASE_MARKER} (DescribeConfigs): {error.__name__} "
                             f"{' '.join(str(result.error_message or '').split())}; nothing was changed")
            for c in result.configs:
                lease = Lease.from_marker(c.name)
                if lease is not None:
                    out[c.name] = lease
        return out

    def _alter_markers(self, changes: dict[str, tuple]) -> None:
        """IncrementalAlterConfigs of lease markers on the cluster-wide broker default, in one
        request: a renewal's new marker and the old one's removal land together."""
        self._alter([ConfigResource(ConfigResourceType.BROKER, "", changes)])

    def hold_lease(self, lease: Lease, ttl: float, gone: Callable[[Lease], bool]) -> Lease | None:
        """Take or keep the lease as a config marker on the cluster-wide broker default: None
        while `lease` holds it, else the holder that precedes it (nothing written then).

        Kafka takes any config name on a BROKER resource and keeps no compare-and-set, so each
        asker writes a marker of its own and the earliest live one holds (`Lease.precedes`):
        after writing, the markers are read back (once a broker shows the new one) and a
        later asker takes its own away. The expiry moves on when half of `ttl` is gone, the
        old marker deleted in the same request; the markers of `gone` holders go with it.
        """
        markers = self._lease_markers()
        rivals = [m for m in markers.values() if not m.same_holder(lease) and not gone(m)]
        first = min(rivals, key=Lease.rank, default=None)
        if first is not None and first.precedes(lease):
            return first
        held = self._held if self._held is not None and self._held.same_holder(lease) else None
        if held is not None and held.marker() in markers and not held.due(ttl):
            return None
        new = lease.renewed(ttl)
        changes: dict[str, tuple] = {new.marker(): (AlterConfigOp.SET, "held")}
        changes.update({name: (AlterConfigOp.DELETE, None) for name, m in markers.items()
                        if name != new.marker() and (m.same_holder(lease) or gone(m))})
        self._alter_markers(changes)
        self._held = new
        deadline = time.monotonic() + LEASE_SEEN_S
        while new.marker() not in (markers := self._lease_markers()):
            if time.monotonic() > deadline:
                raise Unsafe(f"{LEASE_MARKER}: the marker written was not shown by the brokers within "
                             f"{LEASE_SEEN_S:.0f} s; the auto-throttle changed nothing else")
            self._closed.wait(0.2)
        rivals = [m for m in markers.values() if not m.same_holder(lease) and not gone(m)]
        first = min(rivals, key=Lease.rank, default=None)
        if first is not None and first.precedes(lease):
            self.release_lease(lease)  # asked at the same moment as an earlier one: it holds
            return first
        return None

    def release_lease(self, lease: Lease) -> None:
        """Delete every marker of `lease` (none: nothing sent)."""
        mine = [name for name, m in self._lease_markers().items() if m.same_holder(lease)]
        if mine:
            self._alter_markers({name: (AlterConfigOp.DELETE, None) for name in mine})
        self._held = None

    def leases(self) -> list[Lease]:
        """The lease markers on the cluster-wide broker default, earliest first."""
        return sorted(self._lease_markers().values(), key=Lease.rank)
