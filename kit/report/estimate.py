"""The duration estimate: what `kit simulate` (and the runbook's run) will take, predicted fast.

A fluid model of kit/sim/physics.py's physics, run the way kit runs a plan: every copy starts at once;
client traffic per broker is kit/traffic.py's model (a new replica carries its partition's
traffic once it joins the ISR; a finished partition drops its removed replicas and is led by
its first replica); the brokers' caps come from kit's auto-throttle (kit/throttle/decide.py,
the same decisions: every interval, from the peak of the last interval, rate =
max(share x (capacity - client traffic), minimum), tx for sources and rx for destinations,
changes under the threshold skipped) or from a fixed throttle; copies share the caps max-min
fairly. Flows between the same two brokers always get the same rate, so the model runs over
(source, destination) pairs, and, past `max_events` copies, lets several copies finish within
one step (the rates are recomputed once per step, not once per copy): the freed share of a copy
that ends inside a step is used from the step's end (tests/test_estimate.py checks the grouped
figure stays within 10% of the exact one). Pure: no I/O.
"""
from __future__ import annotations

import math

import numpy as np

from kit.throttle.decide import FOLLOWER, LEADER, AutoThrottle, NetSample, Settings, capacities
from kit.errors import BadInput
from kit.model import Cluster
from kit.sim.physics import bytes_per_broker, copy_arrays, flow_arrays, lower_bound, pair_rates
from kit.traffic import ClientTraffic, broker_traffic, traffic_array

MAX_EVENTS = 1500  # rate recomputations for copies finishing; past this, copies finish in groups
MAX_DECISIONS = 5000  # auto-throttle rounds modelled; past this, the rounds are modelled further apart
# Past this many copies the fluid model costs minutes (measured: 200,000 copies on 150 brokers,
# 14 min): the estimate is then the analytic figure of `analytic_estimate`, and says so.
MAX_COPIES = 20_000


def analytic_estimate(flows, rate_out: dict[int, float], rate_in: dict[int, float]) -> float:
    """Seconds for the busiest broker's copies at its starting rate (no tails, no traffic
    changes): max over brokers and directions of bytes / rate.

    `flows` is a list of Flow, or the ``(source, dest, size)`` arrays of `copy_arrays`.
    """
    out_b, in_b = bytes_per_broker(*flow_arrays(flows))
    return max([n / rate_out[b] for b, n in out_b.items()] + [n / rate_in[b] for b, n in in_b.items()] + [0.0])


def predict(cluster: Cluster, moves: list[dict], throttle: float | str | None = "auto",
            client_load: float | None = None, settings: Settings | None = None, cap_map: dict | None = None,
            max_events: int = MAX_EVENTS, first_decision_s: float = 0.0) -> dict:
    """Predicted completion of a reassignment run all at once, in simulated seconds.

    Parameters
    ----------
    cluster, moves
        The cluster and the reassignment (Kafka's JSON partitions list, or a dict partition
        index -> replica list).
    throttle
        "auto" (kit's auto-throttle with `settings`), a rate in bytes/s for every broker, or
        None (no throttle: copies take the whole NIC).
    client_load
        None: the snapshot's traffic figures; a share F: kit/traffic.py's what-if.
    first_decision_s
        With the auto-throttle: when its first decision comes. Until then the plan runs at the
        minimum rate it was applied with (the runbooks apply at the minimum; on the simulated
        cluster the loop's first round finds no samples yet, so its first decision is one
        interval in).

    Returns
    -------
    dict
        ``estimate_s`` (None when a broker's capacity is unknown), ``lower_bound_s``,
        ``assumptions`` (short strings), ``steps`` (rate recomputations), ``unknown`` (brokers
        without a capacity).
    """
    settings = settings or Settings()
    try:
        figures = traffic_array(cluster, client_load)
    except BadInput as e:  # a what-if load needs the brokers' capacities: unknown, and said
        return {"estimate_s": None, "lower_bound_s": None, "steps": 0, "assumptions": [str(e)],
                "unknown": sorted(b.id for b in cluster.brokers.values() if b.alive and b.net_capacity is None)}
    brokers = {b.id: b for b in cluster.brokers.values() if b.alive}
    live = set(brokers)
    targets, source, dest, size, part = copy_arrays(cluster, moves, live)
    copies = (source, dest, size)
    assumptions = [f"all {len(moves)} partition(s) moved at once"]
    if client_load is None:
        assumptions.append("client traffic: the snapshot's bytes_in/bytes_out, flat")
    else:
        assumptions.append(f"client traffic: what-if {client_load:.0%} of capacity on average, flat")
    try:
        cap = capacities(brokers, cap_map)
    except BadInput:
        cap = {b: float(br.net_capacity) for b, br in brokers.items() if br.net_capacity is not None}
    involved = set(np.unique(np.concatenate([source, dest])).tolist())
    unknown = sorted(b for b in involved if b not in cap)
    if throttle == "auto":
        assumptions.append(f"auto-throttle every {settings.interval:g} s: {settings.share:.0%} of the capacity "
                           f"clients leave free, at least {settings.minimum / 1e6:.0f} MB/s")
    elif throttle is None:
        assumptions.append("no throttle: copies may take the whole NIC")
    else:
        assumptions.append(f"fixed throttle {float(throttle) / 1e6:.0f} MB/s per broker and direction")
        unknown = []  # a fixed throttle is a rate for every broker
    result = {"estimate_s": None, "lower_bound_s": None, "assumptions": assumptions, "steps": 0,
              "unknown": unknown}
    if unknown:
        return result
    bound = lower_bound(cluster, targets, copies, figures, cap) if all(b in cap for b in involved) else None
    result["lower_bound_s"] = bound
    if not len(source):
        result["estimate_s"] = 0.0
        return result
    if len(source) > MAX_COPIES:
        rx, tx = broker_traffic(cluster, figures, live)
        if throttle == "auto":
            r_out = {b: max(settings.share * (c - tx.get(b, 0.0)), settings.minimum) for b, c in cap.items()}
            r_in = {b: max(settings.share * (c - rx.get(b, 0.0)), settings.minimum) for b, c in cap.items()}
        elif throttle is None:
            r_out, r_in = dict(cap), dict(cap)
        else:
            r_out = r_in = {b: float(throttle) for b in live}
        t = analytic_estimate(copies, r_out, r_in)
        assumptions.append(f"{len(source)} copies: more than the fluid model's {MAX_COPIES}; analytic figure (the "
                           "busiest broker at its starting rate, no tails), at least the lower bound; expect longer")
        result["estimate_s"] = max(t, bound or 0.0)
        return result
    ids = sorted(live)
    pos = {b: k for k, b in enumerate(ids)}
    nb = len(ids)
    nic = np.array([cap.get(b, math.inf) for b in ids])
    src = np.searchsorted(ids, source)
    dst = np.searchsorted(ids, dest)
    part = part.tolist()
    pair_key, f_pair = np.unique(src * nb + dst, return_inverse=True)
    p_src, p_dst = pair_key // nb, pair_key % nb
    clients = ClientTraffic(cluster, figures.tolist(), live)
    waiting = {i: 0 for i in targets}
    for i in part:
        waiting[i] += 1
    for i in sorted(i for i, n in waiting.items() if n == 0):
        clients.finish(i, targets[i])
    c_rx = np.array([clients.rx[b] for b in ids])
    c_tx = np.array([clients.tx[b] for b in ids])

    auto = None
    interval = settings.interval
    if throttle == "auto":
        auto = AutoThrottle(settings, cap)
        if bound and bound / interval > MAX_DECISIONS:
            interval = bound / MAX_DECISIONS
            assumptions.append(f"modelled with a decision every {interval:.0f} s (a long run: at most "
                               f"{MAX_DECISIONS} rounds computed)")
        out_cap, in_cap = nic.copy(), nic.copy()
        if first_decision_s > 0:
            # Applied at the minimum on every broker taking part, until the first decision.
            out_cap[np.unique(src)] = settings.minimum
            in_cap[np.unique(dst)] = settings.minimum
            auto.applied = {ids[k]: {LEADER: settings.minimum} for k in np.unique(src)}
            for k in np.unique(dst):
                auto.applied.setdefault(ids[k], {})[FOLLOWER] = settings.minimum
            assumptions.append(f"applied at the {settings.minimum / 1e6:.0f} MB/s minimum until the auto-throttle's "
                               f"first decision at {first_decision_s:g} s")
    elif throttle is None:
        out_cap, in_cap = nic.copy(), nic.copy()
    else:
        out_cap = np.full(nb, float(throttle))
        in_cap = out_cap.copy()
    group = max(1, math.ceil(len(source) / max_events))
    if group > 1:
        assumptions.append(f"{len(source)} copies modelled finishing in groups of up to {group}")
    moved = float(size.sum())
    tol = 1e-6 * max(1.0, moved)
    done = np.zeros(len(source), dtype=bool)
    progress = np.zeros(len(pair_key))
    peak = np.zeros((4, nb))  # rx, tx, replication rx, replication tx at the window's peak
    peaked = False
    t, next_decision, t_event, steps = 0.0, first_decision_s if auto is not None else 0.0, 0.0, 0
    rate = send = recv = None
    dirty = True

    def decide(now: float) -> bool:
        nonlocal peaked
        und = ~done
        sources = {ids[k] for k in np.unique(src[und])}
        dests = {ids[k] for k in np.unique(dst[und])}
        metrics = {}
        for k, b in enumerate(ids):
            if peaked:
                metrics[b] = NetSample(now, peak[0, k], peak[1, k], peak[2, k], peak[3, k])
            else:
                metrics[b] = NetSample(now, c_rx[k], c_tx[k], 0.0, 0.0)
        d = auto.decide(now, "", sources, dests, metrics)
        changed = False
        for b, rates in d.rates.items():
            k = pos[b]
            if LEADER in rates:
                out_cap[k], changed = rates[LEADER], True
            if FOLLOWER in rates:
                in_cap[k], changed = rates[FOLLOWER], True
        for b in d.clear:
            k = pos[b]
            out_cap[k], in_cap[k], changed = nic[k], nic[k], True
        peak[:] = 0.0
        peaked = False
        return changed

    while not done.all():
        if auto is not None and t >= next_decision - 1e-9:
            dirty = decide(t) or dirty
            next_decision = t + interval
        if dirty:
            und = ~done
            weight = np.bincount(f_pair[und], minlength=len(pair_key)).astype(float)
            rate = pair_rates(p_src, p_dst, weight, out_cap, in_cap)
            r = rate[f_pair[und]]
            if not (r > 0).any():
                raise BadInput("no replication can make progress (a throttle or capacity of 0)")
            with np.errstate(divide="ignore"):
                left = np.where(r > 0, (size[und] - progress[f_pair[und]]) / r, np.inf)
            k = min(group, len(left)) - 1
            t_event = t + float(np.partition(left, k)[k])
            send = np.bincount(p_src, weights=rate * weight, minlength=nb)
            recv = np.bincount(p_dst, weights=rate * weight, minlength=nb)
            dirty = False
            steps += 1
        dt = t_event - t
        if auto is not None:
            dt = min(dt, max(next_decision - t, 1e-9))
        # The auto-throttle's window peak, as the simulator's metrics show it.
        rx_all, tx_all = c_rx + recv, c_tx + send
        m = (rx_all >= peak[0]) | (not peaked)
        peak[0, m], peak[2, m] = rx_all[m], recv[m]
        m = (tx_all >= peak[1]) | (not peaked)
        peak[1, m], peak[3, m] = tx_all[m], send[m]
        peaked = True
        progress += rate * dt
        t += dt
        newly = ~done & (size - progress[f_pair] <= tol)
        if newly.any():
            done |= newly
            for j in np.flatnonzero(newly):
                i = part[j]
                clients.join(i, ids[dst[j]])
                waiting[i] -= 1
                if not waiting[i]:
                    clients.finish(i, targets[i])
            c_rx = np.array([clients.rx[b] for b in ids])
            c_tx = np.array([clients.tx[b] for b in ids])
            dirty = True
    estimate = t
    if bound is not None and estimate < bound:
        # Only a rate floor above the free capacity (the minimum rate on a broker its clients
        # nearly fill) gets here: such copies displace clients; the figure stays at the bound.
        assumptions.append("raised to the physical bound (minimum rates above some brokers' free capacity)")
        estimate = bound
    result.update(estimate_s=estimate, steps=steps)
    return result


__all__ = ["predict", "analytic_estimate", "MAX_EVENTS", "MAX_DECISIONS", "MAX_COPIES"]
