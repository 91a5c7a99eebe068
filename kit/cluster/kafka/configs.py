"""`AdminThrottling`: the throttle configs (`kit.throttle.configs`' keys) of brokers and topics,
read with DescribeConfigs and changed with IncrementalAlterConfigs (never the whole config).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from collections.abc import Iterable, Mapping

from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

from kit.cluster.kafka import model
from kit.cluster.kafka.connect import LOST, authorization_error, refused, translate
from kit.cluster.kafka.requests import PARALLEL, AdminRequests
from kit.errors import BadInput, Unsafe, translate_errors

# How `_alter`'s messages name a write to the cluster-wide broker default (""): only the lease
# markers (kit.cluster.kafka.lease) are written there.
LEASE_MARKER = "the auto-throttle's lease marker on the cluster-wide broker default"


@translate_errors(translate)
class AdminThrottling(AdminRequests):
    """The throttles (`kit.cluster.backend.Throttling`)."""

    def throttles(self) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
        """DescribeConfigs of every topic (one request) and every live broker (each its own):
        the throttle keys set. A broker that does not answer is left out."""
        names = self.admin.list_topics()
        topics = {}
        if names:
            described = self.admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, t, list(model.TOPIC_KEYS)) for t in names])
            topics = model.throttle_keys(described, "topic")
        brokers = self._broker_throttles(str(b) for b in self._live(self.admin.describe_cluster()))
        return brokers, dict(sorted(topics.items()))

    def _broker_throttles(self, brokers: Iterable[str]) -> dict[str, dict[str, str]]:
        """The throttle keys of these brokers (DescribeConfigs, each to its broker)."""
        answers = self._per_broker(lambda b: self.admin.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, str(b), list(model.BROKER_KEYS))]), brokers)
        out: dict[str, dict[str, str]] = {}
        for described in answers.values():
            out.update(model.throttle_keys(described, "broker"))
        return dict(sorted(out.items(), key=lambda kv: int(kv[0])))

    def _alter(self, resources: list[ConfigResource], written: list | None = None) -> None:
        """IncrementalAlterConfigs (never the whole config: other keys kept); a refusal raised
        as one line naming the resource (and, refused for want of a right, the right). Each
        resource the cluster took, or every one when it did not answer, is added to `written` as
        (kind, name, keys, answered) first. The cluster-wide broker default ("") is sent to any broker
        (`_send_to_any`)."""
        if not resources:
            return
        keys = {(ConfigResourceType(r.resource_type).name.lower(), r.name): list(r.configs) for r in resources}
        try:
            if all(r.resource_type == ConfigResourceType.BROKER and r.name == "" for r in resources):
                response = self._send_to_any(self.admin._alter_configs_request(resources, incremental=True))  # noqa: SLF001
                results = self.admin._alter_configs_process_responses(response.responses)  # noqa: SLF001
            else:
                results = self.admin.alter_configs(resources, raise_on_unknown=False, incremental=True)
        except LOST:
            if written is not None:  # not answered: each write may yet be carried out, so it is recorded
                written.extend((kind, name, k, False) for (kind, name), k in keys.items())
            raise
        failed = []
        for kind, by_name in results.items():
            for name, result in by_name.items():
                if result == "OK":
                    if written is not None:
                        written.append((kind, name, keys.get((kind, name), []), True))
                else:
                    failed.append((kind, name, result))
        if failed:
            kind, name, result = failed[0]
            what = f"{f'the throttle config of {kind} {name}' if name else LEASE_MARKER} (IncrementalAlterConfigs)"
            denied = authorization_error(result)
            if denied is not None:
                raise refused(denied, what, "ALTER_CONFIGS on the CLUSTER" if kind == "broker"
                              else f"ALTER_CONFIGS on TOPIC {name}")
            raise Unsafe(f"Kafka refused {what}: {' '.join(str(result).split())}")

    def set_throttles(self, brokers: Mapping[int | str, Mapping[str, str]] | None = None,
                      topics: Mapping[str, Mapping[str, str]] | None = None, written: list | None = None) -> None:
        """IncrementalAlterConfigs SET of these keys, topics then brokers (each resource the
        cluster took added to `written` as (kind, name, keys, answered))."""
        self._alter([ConfigResource(ConfigResourceType.TOPIC, t, {k: (AlterConfigOp.SET, str(v)) for k, v in cfg.items()})
                     for t, cfg in (topics or {}).items() if cfg], written)
        self._alter_each_broker([ConfigResource(ConfigResourceType.BROKER, _broker_name(b),
                                                {k: (AlterConfigOp.SET, str(v)) for k, v in cfg.items()})
                                 for b, cfg in (brokers or {}).items() if cfg], written)

    def _alter_each_broker(self, resources: list[ConfigResource], written: list | None) -> None:
        """`_alter` of each broker's resource on its own (a broker's config goes to that broker),
        all at once: one broker that refuses or does not answer leaves the others' writes
        recorded in `written`, so that they can be taken back and said (one that did not answer
        is recorded too, by `_alter`); the first error is raised."""
        if not resources:
            return
        with ThreadPoolExecutor(max_workers=min(PARALLEL, len(resources)), thread_name_prefix="kit-admin") as pool:
            futures = [(r, pool.submit(self._alter, [r], written)) for r in resources]
        errors = []
        for r, future in futures:
            try:
                future.result()
            except Exception as e:  # noqa: BLE001  (the first one is raised below, the rest said by `written`)
                errors.append(e)
        if errors:
            raise errors[0]

    def _delete_keys(self, brokers: Iterable[str], topics: Iterable[str], have_brokers: dict, have_topics: dict
                     ) -> None:
        """IncrementalAlterConfigs DELETE of the throttle keys each of these carries."""
        self._alter([ConfigResource(ConfigResourceType.BROKER, b, {k: (AlterConfigOp.DELETE, None)
                                                                    for k in have_brokers[b]}) for b in brokers])
        self._alter([ConfigResource(ConfigResourceType.TOPIC, t, {k: (AlterConfigOp.DELETE, None)
                                                                   for k in have_topics[t]}) for t in topics])

    def clear_throttles(self, brokers: Iterable[int | str] = (), topics: Iterable[str] = ()
                        ) -> tuple[list[str], list[str]]:
        """Remove the throttle keys from these brokers and topics (DELETE, brokers then topics);
        returns the names that had some. Brokers not registered cannot be reached and are skipped."""
        names = [_broker_name(b) for b in brokers]
        topics = list(topics)
        if not names and not topics:
            return [], []
        have_brokers, have_topics = self._throttles_of(names, topics)
        self._delete_keys(list(have_brokers), list(have_topics), have_brokers, have_topics)
        return list(have_brokers), list(have_topics)

    def _throttles_of(self, brokers: list[str], topics: list[str]) -> tuple[dict, dict]:
        """The throttle keys of these brokers (the live ones) and topics (the existing ones)."""
        live = {str(b) for b in self._live(self.admin.describe_cluster())}
        found_b = self._broker_throttles(b for b in brokers if b in live)
        found_t = {}
        existing = set(self.admin.list_topics())
        topics = [t for t in topics if t in existing]
        if topics:
            found_t = model.throttle_keys(self.admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, t, list(model.TOPIC_KEYS)) for t in topics]), "topic")
        return ({b: found_b[b] for b in brokers if b in found_b}, {t: found_t[t] for t in topics if t in found_t})

    def clear_leftover_throttles(self) -> tuple[int, int]:
        """With no reassignment running, remove every throttle key; `Unsafe` while one runs."""
        running = model.reassignment_doc(self._to_controller(self.admin.list_partition_reassignments))
        self._refuse_if_running(running, "its throttles were left as they are")
        brokers, topics = self.throttles()
        self._delete_keys(list(brokers), list(topics), brokers, topics)
        return len(brokers), len(topics)


def _broker_name(b: int | str) -> str:
    """A broker's config resource name: its id (Kafka's cluster-wide default, "", is not a target here)."""
    name = str(b)
    if not name.isdigit():
        raise BadInput(f"broker {name!r}: the Admin API backend sets throttles on brokers by id")
    return name
