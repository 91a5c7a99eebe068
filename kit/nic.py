"""A broker's network capacity (its NIC, bytes/s each way): the one rule every reader of it follows.

The auto-throttle, the dashboard's copy bound, the runbooks' estimates, the duration estimate and
the simulated controller all ask `broker_capacity`, so that one broker has one figure wherever
kit shows or uses it. Pure: no I/O.
"""
from __future__ import annotations

from dataclasses import replace

from kit.errors import BadInput
from kit.model import Broker


def broker_capacity(broker, cap_map: dict[str, float] | None = None, fact: dict | None = None,
                    default: float | None = None) -> float:
    """A broker's network capacity in bytes/s, from the first of its sources that has one.

    1. The capacity map's entry for the broker's instance type (the operator's word).
    2. The broker's own ``net_capacity``; a simulated cluster's broker has it in its seeded
       facts (`fact`), which count where the broker itself says none.
    3. The capacity map's ``"*"`` entry (any other broker).
    4. `default`, for a caller that states one (the simulator's physical NIC).

    Parameters
    ----------
    broker : kit.model.Broker
        The broker (its ``id``, ``instance_type``, ``net_capacity``).
    cap_map : dict, optional
        Instance type -> bytes/s, ``"*"`` for any other broker (`kit.throttle.sources.load_cap_map`).
    fact : dict, optional
        The simulated cluster's facts about this broker (``net_capacity``, ``instance_type``:
        `kit.cluster.zk.layout.sim_facts`), None on a real cluster.
    default : float, optional
        The figure where no source has one; None: BadInput instead.

    Returns
    -------
    float
        Bytes/s.

    Raises
    ------
    BadInput
        No source has a figure (naming the broker and the way out, ``--cap-map``), or the
        figure found is not positive.
    """
    cap_map, fact = cap_map or {}, fact or {}
    kind = broker.instance_type if broker.instance_type is not None else fact.get("instance_type")
    own = broker.net_capacity if broker.net_capacity is not None else fact.get("net_capacity")
    for cap in (cap_map.get(kind) if kind is not None else None, own, cap_map.get("*"), default):
        if cap is not None:
            if cap <= 0:
                raise BadInput(f"broker {broker.id}: capacity must be positive, got {cap}")
            return float(cap)
    what = f"instance type {kind!r}" if kind else "no instance type"
    raise BadInput(f"broker {broker.id} has {what} and no net_capacity: give its capacity with --cap-map")


def nic_by_broker(brokers: dict, cap_map: dict[str, float] | None = None, facts: dict | None = None,
                  instance_types: dict | None = None) -> dict[int, float]:
    """Each broker's NIC (bytes/s) by `broker_capacity`, as the auto-throttle has it: `brokers`
    (id -> Broker), the simulated cluster's `facts` (``{"1001": {...}}``), and the instance type
    the samples give (`instance_types`, id -> type) where a broker says none; a broker named by
    the facts or the samples alone counts too. A broker with no figure is left out."""
    facts, instance_types = facts or {}, instance_types or {}
    out = {}
    for b in sorted(set(brokers) | set(instance_types) | {int(f) for f in facts if str(f).isdigit()}):
        broker = brokers.get(b) or Broker(b)
        if broker.instance_type is None and instance_types.get(b) is not None:
            broker = replace(broker, instance_type=instance_types[b])
        try:
            out[b] = broker_capacity(broker, cap_map, facts.get(str(b)))
        except BadInput:
            continue
    return out
