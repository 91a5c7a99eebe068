"""The replication rates a run starts at, and the figures read from them: which brokers' NIC
capacity is known, each broker's starting rate out and in, the busiest broker's copying time at
those rates, and the run's expected length the duration estimate spreads its budget over. Pure:
no I/O."""
from __future__ import annotations

import contextlib

import numpy as np

from kit.errors import BadInput
from kit.model import Cluster
from kit.nic import broker_capacity
from kit.physics import bytes_per_broker, flow_arrays
from kit.throttle.decide import Settings
from kit.traffic import broker_traffic


def known_capacities(brokers: dict, cap_map: dict | None = None) -> dict[int, float]:
    """Each live broker's NIC (bytes/s) as the auto-throttle decides it (`kit.nic.broker_capacity`),
    leaving out the brokers with none (the estimate names them)."""
    out = {}
    for b in brokers.values():
        if b.alive:
            with contextlib.suppress(BadInput):
                out[b.id] = broker_capacity(b, cap_map)
    return out


def analytic_estimate(flows, rate_out: dict[int, float], rate_in: dict[int, float]) -> float:
    """Seconds for the busiest broker's copies at its starting rate (no tails, no traffic
    changes): max over brokers and directions of bytes / rate.

    `flows` is a list of Flow, or the ``(source, dest, size)`` arrays of `copy_arrays`.
    """
    out_b, in_b = bytes_per_broker(*flow_arrays(flows))
    return max([n / rate_out[b] for b, n in out_b.items()] + [n / rate_in[b] for b, n in in_b.items()] + [0.0])


def expected_length(cluster: Cluster, figures: np.ndarray, live: set[int], cap: dict[int, float], copies,
                     bound: float | None, settings: Settings) -> tuple[float, str]:
    """The run's expected length under the auto-throttle, which its rounds' budget is spread
    over, and what it is: the busiest broker's copying time at its starting rate, or the best
    case when longer (0.5-1.3x the figure on the small bench clusters; the best case alone was
    down to 0.17x)."""
    busiest = analytic_estimate(copies, *starting_rates(cluster, figures, live, cap, "auto", settings))
    if bound is not None and bound > busiest:
        return bound, "best case"
    return busiest, "busiest broker's copying time at its starting rate"


def starting_rates(cluster: Cluster, figures: np.ndarray, live: set[int], cap: dict[int, float],
                    throttle: float | str | None, settings: Settings) -> tuple[dict[int, float], dict[int, float]]:
    """Each broker's replication rate out and in at the start: the auto-throttle's first
    decision from the clients' traffic, the NIC, or the fixed throttle."""
    rx, tx = broker_traffic(cluster, figures, live)
    if throttle == "auto":
        r_out = {b: max(settings.share * (c - tx.get(b, 0.0)), settings.minimum) for b, c in cap.items()}
        r_in = {b: max(settings.share * (c - rx.get(b, 0.0)), settings.minimum) for b, c in cap.items()}
    elif throttle is None:
        r_out, r_in = dict(cap), dict(cap)
    else:
        r_out = r_in = {b: float(throttle) for b in live}
    return r_out, r_in


__all__ = ["known_capacities", "starting_rates", "analytic_estimate", "expected_length"]
