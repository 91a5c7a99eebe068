"""What kit keeps beside a cluster reached through the Admin API, where ZooKeeper mode keeps it
in znodes of its own: the auto-throttle's overrides in a JSON state file, kafka-kit's metrics
(partition sizes, brokers' free storage and network) in a metrics directory.

Defaults: ``$KIT_STATE_DIR/clusters/<cluster id>/`` (``~/.kit`` without the variable), holding
``state.json`` and ``metrics/``: keyed by Kafka's cluster id, so every bootstrap list of one
cluster (and every process on this host: `kit throttle set` and `kit throttle run`) finds the
same ones. The metrics directory has `kit metrics --out`'s file names, so either may be the other.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re

from kit.errors import BadInput
from kit.files import write_atomic
from kit.metrics import BROKER_METRICS, PARTITION_META

STATE_DIR_ENV = "KIT_STATE_DIR"


def default_home(cluster_id: str | None) -> str:
    """``$KIT_STATE_DIR/clusters/<cluster id>`` (``~/.kit`` by default)."""
    root = os.environ.get(STATE_DIR_ENV) or os.path.join(os.path.expanduser("~"), ".kit")
    safe = re.sub(r"[^\w.-]", "_", cluster_id or "unknown-cluster")
    return os.path.join(root, "clusters", safe)


class LocalStore:
    """The state file and the metrics directory of one cluster (created when first written).

    Parameters
    ----------
    state_file : str
        JSON: ``{"throttle_overrides": {"global": body, "brokers": {name: body}}}``, bodies as
        kafka-kit's override JSON text.
    metrics_dir : str
        `PARTITION_META` and `BROKER_METRICS` (kafka-kit's shapes).
    """

    def __init__(self, state_file: str, metrics_dir: str):
        self.state_file, self.metrics_dir = state_file, metrics_dir

    # ------------------------------------------------------------------ overrides

    @contextlib.contextmanager
    def _locked(self):
        """The state file's document, read under an exclusive lock (another kit process may be
        writing it), written back when the block changed it."""
        os.makedirs(os.path.dirname(os.path.abspath(self.state_file)), exist_ok=True)
        with open(self.state_file + ".lock", "a", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            doc = self._read()
            before = json.dumps(doc, sort_keys=True)
            yield doc
            if json.dumps(doc, sort_keys=True) != before:
                write_atomic(self.state_file, json.dumps(doc, indent=1, sort_keys=True) + "\n")

    def _read(self) -> dict:
        try:
            with open(self.state_file, encoding="utf-8") as f:
                doc = json.load(f)
        except FileNotFoundError:
            return {}
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            raise BadInput(f"state file {self.state_file}: not JSON (kit's overrides live there)") from None
        if not isinstance(doc, dict):
            raise BadInput(f"state file {self.state_file}: expected a JSON object")
        return doc

    def where(self, broker: str | None) -> str:
        """The name of an override record, for messages."""
        return f"{self.state_file}#override_rate" + ("" if broker is None else f"/{broker}")

    def overrides(self) -> dict[str, tuple[str | None, bytes]]:
        """`ClusterBackend.throttle_overrides`: the global one first, then each broker's by name."""
        stored = self._read().get("throttle_overrides") or {}
        if "global" not in stored:
            return {}
        out: dict[str, tuple[str | None, bytes]] = {self.where(None): (None, str(stored["global"]).encode())}
        for name, body in sorted((stored.get("brokers") or {}).items()):
            out[self.where(name)] = (name, str(body).encode())
        return out

    def store_override(self, body: bytes, broker: str | None = None) -> str:
        """Store the global override or a broker's (replacing any); returns its `where`."""
        text = body.decode(errors="replace")
        with self._locked() as doc:
            kept = doc.setdefault("throttle_overrides", {})
            kept.setdefault("global", "{}")  # as kafka-kit creates the parent znode
            if broker is None:
                kept["global"] = text
            else:
                kept.setdefault("brokers", {})[broker] = text
        return self.where(broker)

    def remove_override(self, broker: str | None = None) -> bytes | None:
        """Remove a broker's override, or empty the global one to ``{}``; the body it had."""
        with self._locked() as doc:
            kept = doc.get("throttle_overrides") or {}
            if broker is None:
                if "global" not in kept:
                    return None
                had, kept["global"] = kept["global"], "{}"
            else:
                if broker not in (kept.get("brokers") or {}):
                    return None
                had = kept["brokers"].pop(broker)
        return str(had).encode()

    # ------------------------------------------------------------------ metrics

    def write_metrics(self, partition_meta: dict, broker_metrics: dict) -> None:
        """Both metric files, replaced."""
        os.makedirs(self.metrics_dir, exist_ok=True)
        write_atomic(os.path.join(self.metrics_dir, PARTITION_META), json.dumps(partition_meta))
        write_atomic(os.path.join(self.metrics_dir, BROKER_METRICS), json.dumps(broker_metrics))

    def _metric(self, name: str) -> tuple[object, float] | None:
        path = os.path.join(self.metrics_dir, name)
        try:
            with open(path, encoding="utf-8") as f:
                return json.load(f), os.stat(path).st_mtime
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            return None

    def metrics(self) -> tuple[dict, dict]:
        """(partition_meta, broker_metrics) as stored, empty where missing or not JSON objects."""
        out = []
        for name in (PARTITION_META, BROKER_METRICS):
            got = self._metric(name)
            out.append(got[0] if got is not None and isinstance(got[0], dict) else {})
        return out[0], out[1]

    def broker_metrics(self) -> tuple[object, float] | None:
        """`ClusterBackend.broker_metrics`: the broker metrics and their file's modification time."""
        return self._metric(BROKER_METRICS)
