"""The API version ranges the simulated KRaft cluster advertises, per named Kafka release.

One table (`RANGES`): for each release, the versions its brokers advertise in ApiVersions for the
APIs the simulator serves, as read from Kafka's message schemas at that release
(clients/src/main/resources/common/message/*Request.json, "validVersions"; ApiKeys lists the
same). Where kafka-python 3.x's generated classes lack a version the release has, the range
starts where the classes do (said beside the release): every request and response stays
encoded by those classes.
"""
from __future__ import annotations

from kit.errors import BadInput

API_VERSIONS, METADATA, DESCRIBE_CLUSTER, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 18, 3, 60, 32, 44
ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS, ELECT_LEADERS, DESCRIBE_LOG_DIRS = 45, 46, 43, 35
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36

DEFAULT = "4.0"

# release -> api key -> (lowest, highest) version advertised.
RANGES: dict[str, dict[int, tuple[int, int]]] = {
    # Kafka 3.7.0. DescribeConfigs and DescribeLogDirs are 0-4 there; v0 of both was removed in
    # 4.0 (KIP-896) and kafka-python 3.x has no class for it, so they start at 1.
    "3.7": {API_VERSIONS: (0, 3), METADATA: (0, 12), DESCRIBE_CLUSTER: (0, 1), DESCRIBE_CONFIGS: (1, 4),
            INCREMENTAL_ALTER_CONFIGS: (0, 1), ALTER_REASSIGNMENTS: (0, 0), LIST_REASSIGNMENTS: (0, 0),
            ELECT_LEADERS: (0, 2), DESCRIBE_LOG_DIRS: (1, 4), SASL_HANDSHAKE: (0, 1), SASL_AUTHENTICATE: (0, 2)},
    # Kafka 4.0.0: ApiVersions to v4 (added by KAFKA-17011, after 3.7), Metadata v13 (a top-level
    # error, KIP-1102), DescribeCluster v2 (fenced brokers on request, KIP-1073), DescribeConfigs
    # and DescribeLogDirs from v1 (KIP-896). AlterPartitionReassignments v1 (KIP-860) is 4.1's.
    "4.0": {API_VERSIONS: (0, 4), METADATA: (0, 13), DESCRIBE_CLUSTER: (0, 2), DESCRIBE_CONFIGS: (1, 4),
            INCREMENTAL_ALTER_CONFIGS: (0, 1), ALTER_REASSIGNMENTS: (0, 0), LIST_REASSIGNMENTS: (0, 0),
            ELECT_LEADERS: (0, 2), DESCRIBE_LOG_DIRS: (1, 4), SASL_HANDSHAKE: (0, 1), SASL_AUTHENTICATE: (0, 2)},
}


def release(text: str | None) -> str:
    """The release named by `text` ("3.7", "4.0"; None: `DEFAULT`); BadInput for any other."""
    if text is None:
        return DEFAULT
    name = str(text).strip()
    if name not in RANGES:
        raise BadInput(f"{text!r} is not a Kafka release the simulated cluster answers as "
                       f"({' or '.join(sorted(RANGES))})")
    return name


def ranges(name: str | None) -> dict[int, tuple[int, int]]:
    """The version ranges of release `name` (None: `DEFAULT`)."""
    return RANGES[release(name)]
