"""The auto-throttle's override rates, kept where kafka-kit's autothrottle keeps them.

`kit.cluster.backend.Overrides.throttle_overrides` holds them (in ZooKeeper `/autothrottle/override_rate` the
global override, `/autothrottle/override_rate/<broker>` a broker's), each
`{"rate": MB/s, "autoremove": bool}`: read, set and removed here, honoured by `kit.throttle.loop`.
"""
from __future__ import annotations

import json
import re
from typing import Protocol

from kit import validate
from kit.cluster.backend import Overrides, Reading
from kit.errors import BadInput


class OverriddenCluster(Reading, Overrides, Protocol):
    """What `set_override` needs of a cluster's backend: its brokers, and where overrides are kept."""


def parse_override(raw: bytes, where: str) -> dict | None:
    """One override znode's body as {"rate": bytes/s, "autoremove": bool}, or None when it holds none.

    An empty body, ``{}``, a null rate and rate 0 mean "no override" (kafka-kit removes one by
    writing rate 0). `BadInput` names `where` and says why any other body cannot be honoured: not
    JSON, not an object, a rate (MB/s) that is not a finite number from 1 B/s to Kafka's long, or
    an autoremove that is not a boolean.
    """
    try:
        doc = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    except ValueError:  # undecodable bytes or not JSON
        raise BadInput(f"{where}: not JSON") from None
    if not isinstance(doc, dict):
        got = {list: "an array", str: "a string", bool: "a boolean"}.get(type(doc), "a number")
        raise BadInput(f'{where}: expected {{"rate": MB/s, "autoremove": bool}}, got {got}')
    mb = doc.get("rate")
    if mb is None or (mb == 0 and not isinstance(mb, bool)):
        return None
    autoremove = doc.get("autoremove", False)
    if not isinstance(autoremove, bool):
        raise BadInput(f"{where}: autoremove must be true or false, got {json.dumps(autoremove)[:40]}")
    mb = validate.number(mb, f"{where}: rate (MB/s)")
    return {"rate": validate.rate(mb * 1e6, f"{where}: rate {mb:g} MB/s, in bytes/s"), "autoremove": autoremove}


def _override_broker(name: str, where: str, brokers) -> int:
    """The broker an override stored under `name` is for; BadInput unless `name` is a
    broker id (written plainly, an int32) of the cluster (`brokers`, when given)."""
    if not re.fullmatch(r"[0-9]{1,10}", name) or name != str(int(name)):
        raise BadInput(f"{where}: {name!r} is not a broker id")
    b = validate.broker_id(int(name), where)
    if brokers is not None and b not in brokers:
        raise BadInput(f"{where}: the cluster has no broker {b}")
    return b


def read_overrides(backend: Overrides, brokers=None) -> tuple[dict | None, dict[int, float], dict[str, str]]:
    """(global override {"rate": bytes/s, "autoremove": bool} or None, {broker: bytes/s},
    {where it is stored: why it was ignored}).

    A stored override that cannot be honoured (see `parse_override`; a name that is not a
    broker id, or a broker not among `brokers` when given) is left out and said in the third
    part, never raised: the automatic rate applies in its place.
    """
    bad: dict[str, str] = {}
    glob_override, out = None, {}
    for where, (name, raw) in backend.throttle_overrides().items():
        try:
            doc = parse_override(raw, where)
            if name is None:
                glob_override = doc
            elif doc is not None:  # a removed override (rate 0) is no one's business, whatever its name
                out[_override_broker(name, where, brokers)] = doc["rate"]
        except BadInput as e:
            bad[where] = str(e)
    return glob_override, out, bad


def set_override(backend: OverriddenCluster, rate: float, broker: int | None = None, autoremove: bool = False) -> None:
    """Store an override (bytes/s) in kafka-kit's layout (MB/s in the record).

    `BadInput` for a rate Kafka cannot hold, or a broker the cluster does not have (the loop
    would ignore either).
    """
    validate.rate(rate, "the override rate (bytes/s)")
    if broker is not None:
        validate.broker_id(broker, "--broker")
        cluster, _ = backend.read()
        if broker not in cluster.brokers:
            raise BadInput(f"--broker {broker}: the cluster has no broker {broker}")
    body = json.dumps({"rate": rate / 1e6, "autoremove": autoremove}).encode()
    backend.store_throttle_override(body, None if broker is None else str(broker))


def remove_override(backend: Overrides, broker: int | None = None) -> bool:
    """Remove the global (or one broker's) override; False when there was none."""
    raw = backend.remove_throttle_override(None if broker is None else str(broker))
    if raw is None or broker is not None:
        return raw is not None
    return bool(raw.strip()) and raw.strip() != b"{}"
