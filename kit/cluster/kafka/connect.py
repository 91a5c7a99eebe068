"""Reaching a Kafka cluster's Admin API: the bootstrap list, the client's settings (security
and timeouts: Kafka's `--command-config` properties, or environment variables) and what
kafka-python's errors mean in kit's terms (`translate`, `refused`).

Security settings are credentials: they go into the client and nowhere else (no message,
log line, event or record names a value; messages name the file or the key at most).
"""
from __future__ import annotations

import functools
import logging
import os
import re
import socket
import threading
import time

from kafka import KafkaAdminClient
from kafka import errors as kerr
from kafka.net.compat import KafkaNetClient
from kafka.net.manager import KafkaConnectionManager
from kafka.net.selector import NetworkSelector

from kit.cluster.backend import parse_bootstrap
from kit.errors import BadInput, Unreachable, Unsafe
from kit.files import read_input

COMMAND_CONFIG_ENV = "KIT_KAFKA_COMMAND_CONFIG"
USERNAME_ENV = "KIT_KAFKA_SASL_USERNAME"
PASSWORD_ENV = "KIT_KAFKA_SASL_PASSWORD"

# The bootstrap must answer within this many seconds (a dead address is BadInput in < 30 s),
# unless default.api.timeout.ms says otherwise.
BOOTSTRAP_SECONDS = 20.0
# Seconds one request may take unless request.timeout.ms says otherwise: Kafka's own client
# default, generous for a broker answering beside its clients on a loaded machine.
REQUEST_SECONDS = 30.0
# Kafka's socket.connection.setup.timeout.ms default: how long a new connection (TCP and the
# ApiVersions exchange) may take. kit never lets it exceed the request timeout: a request
# queued behind a connection still being set up would otherwise expire unseen
# (KafkaTimeoutError, no broker named) before the connection's own timeout names the broker.
CONNECT_SETUP_SECONDS = 10.0

# Kafka's client properties kit honours, and kafka-python's keyword for each.
_PLAIN_KEYS = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.kerberos.service.name": "sasl_kerberos_service_name",
    "ssl.key.password": "ssl_password",
    # librdkafka's names for PEM files, which kafka-python takes as they are.
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.crl.location": "ssl_crlfile",
}
# Kafka's client timeouts (milliseconds), honoured: request.timeout.ms bounds each request,
# default.api.timeout.ms how long kit waits for the bootstrap brokers to answer at all.
TIMEOUT_KEYS = {"request.timeout.ms": "request_timeout_ms", "default.api.timeout.ms": "default_api_timeout_ms"}
# Read but without effect here (they tune the Java client, or name its defaults).
_IGNORED = {"retries", "retry.backoff.ms", "client.id",
            "ssl.protocol", "ssl.enabled.protocols", "ssl.keystore.type", "ssl.truststore.type",
            "sasl.login.callback.handler.class", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm"}
_JAAS = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file (key=value or key: value, # and ! comments, \\ continuations)."""
    raw = read_input(path, "--command-config", max_bytes=1 << 20)
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise BadInput(f"--command-config {path}: not UTF-8 text") from None
    props, pending = {}, ""
    for line in text.splitlines():
        line = pending + line.strip()
        pending = ""
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        if not line or line[0] in "#!":
            continue
        m = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if m is None:
            props[line] = ""
        else:
            props[m.group(1)] = m.group(2)
    return props


def _jaas_credentials(jaas: str, where: str) -> dict[str, str]:
    """username and password from a sasl.jaas.config value (PLAIN and SCRAM login modules)."""
    found = {k: v.replace('\\"', '"') for k, v in _JAAS.findall(jaas)}
    if not {"username", "password"} <= set(found):
        raise BadInput(f"{where}: sasl.jaas.config needs username=\"...\" and password=\"...\" "
                       "(PLAIN or SCRAM login module)")
    return {"sasl_plain_username": found["username"], "sasl_plain_password": found["password"]}


def client_settings(props: dict[str, str], where: str) -> dict:
    """kafka-python keyword arguments for Kafka's client properties; `BadInput` names a key kit
    cannot honour (never a value)."""
    out: dict = {}
    for key, value in props.items():
        if key in _PLAIN_KEYS:
            out[_PLAIN_KEYS[key]] = value
        elif key == "sasl.jaas.config":
            out.update(_jaas_credentials(value, where))
        elif key == "ssl.endpoint.identification.algorithm":
            out["ssl_check_hostname"] = bool(value.strip())  # empty: no host name check, as Kafka's
        elif key in ("ssl.truststore.location", "ssl.keystore.location"):
            kind = props.get(key.replace("location", "type"), "JKS").upper()
            if kind != "PEM":
                raise BadInput(f"{where}: {key} must be a PEM file (ssl.{key.split('.')[1]}.type=PEM); "
                               "Python cannot read JKS or PKCS12 stores")
            out["ssl_cafile" if "truststore" in key else "ssl_certfile"] = value
        elif key in ("ssl.truststore.password", "ssl.keystore.password"):
            continue  # a PEM file has none
        elif key in TIMEOUT_KEYS:
            if not re.fullmatch(r"\s*[0-9]{1,9}\s*", value) or int(value) <= 0:
                raise BadInput(f"{where}: {key} must be a positive whole number of milliseconds")
            out[TIMEOUT_KEYS[key]] = int(value)
        elif key not in _IGNORED:
            raise BadInput(f"{where}: {key} is not a client setting kit can use")
    if "ssl_certfile" in out and "ssl_keyfile" not in out:
        out["ssl_keyfile"] = out["ssl_certfile"]  # Kafka's PEM keystore holds the key with the certificate
    protocol = out.get("security_protocol", "PLAINTEXT").upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise BadInput(f"{where}: security.protocol must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
    out["security_protocol"] = protocol
    return out


def resolve_security(command_config: str | None = None) -> dict:
    """The client's settings (security, and the timeouts of `TIMEOUT_KEYS`): --command-config
    FILE, else $KIT_KAFKA_COMMAND_CONFIG;
    $KIT_KAFKA_SASL_USERNAME and $KIT_KAFKA_SASL_PASSWORD fill in SASL credentials the file lacks."""
    path = command_config or os.environ.get(COMMAND_CONFIG_ENV) or None
    settings = client_settings(read_properties(path), f"--command-config {path}") if path else {}
    if os.environ.get(USERNAME_ENV) and "sasl_plain_username" not in settings:
        settings["sasl_plain_username"] = os.environ[USERNAME_ENV]
        settings["sasl_plain_password"] = os.environ.get(PASSWORD_ENV, "")
        settings.setdefault("sasl_mechanism", "PLAIN")
        if settings.get("security_protocol", "PLAINTEXT") == "PLAINTEXT":
            settings["security_protocol"] = "SASL_PLAINTEXT"
    return settings


def check_resolvable(spec: str, hosts: list[str]) -> None:
    """`BadInput` naming the hosts when no bootstrap host resolves (DNS), as Kafka's own client
    refuses "No resolvable bootstrap urls": a typo is said at once, not as a timeout later."""
    failed = []
    for host_port in hosts:
        host, port = host_port.rsplit(":", 1)
        try:
            socket.getaddrinfo(host.strip("[]"), int(port), socket.AF_UNSPEC, socket.SOCK_STREAM)
            return
        except (socket.gaierror, UnicodeError) as e:
            failed.append(f"{host} ({getattr(e, 'strerror', None) or type(e).__name__})")
    raise BadInput(f"--bootstrap {spec}: no such host: {', '.join(failed)} does not resolve (DNS); "
                   "check the host names")


# Kafka's refusals of the client's login (SASL): the credentials are wrong, or the mechanism.
AUTH_FAILURES = (kerr.SaslAuthenticationFailedError, kerr.UnsupportedSaslMechanismError, kerr.IllegalSaslStateError)


class _Connections(KafkaConnectionManager):
    """kafka-python's connection manager, with a refused login final for that broker.

    kafka-python 3.0.12 keeps an authentication failure to raise on the next connection only
    when the login raises, which it never does (it closes the connection with the error), so
    its bootstrap logs in again and again until its deadline and then says KafkaTimeoutError.
    Here the failure of a connection's login is kept and raised by the next `get_connection`
    to that broker: the bootstrap ends with the refusal itself, after one attempt.
    """

    def __init__(self, net, **configs):
        super().__init__(net, **configs)
        self.refusals: dict = {}

    def get_connection(self, node_id, *args, **kwargs):
        conn = super().get_connection(node_id, *args, **kwargs)
        conn.init_future.add_errback(self._remember, node_id)
        return conn

    def _remember(self, node_id, error) -> None:
        if isinstance(error, AUTH_FAILURES):
            self.refusals[node_id] = error

    def maybe_raise_auth_failure(self, node_id):
        super().maybe_raise_auth_failure(node_id)
        if node_id in self.refusals:
            raise self.refusals[node_id]


def _net_client(**configs) -> KafkaNetClient:
    """kafka-python's network client over `_Connections` (the admin client's `kafka_client`)."""
    net = NetworkSelector(**configs)
    return KafkaNetClient(net=net, manager=_Connections(net, **configs), **configs)


def credentials_refused(settings: dict | None, error: BaseException) -> BadInput:
    """Kafka's refusal of the client's login, naming the mechanism and user of `settings` (the
    client's; never the password) when known, and the broker's words."""
    settings = settings or {}
    mechanism = settings.get("sasl_mechanism") or ("PLAIN" if settings else "login")
    user = settings.get("sasl_plain_username")
    who = f"SASL {mechanism} user {user!r}" if user else f"SASL {mechanism}"
    where = f" ({COMMAND_CONFIG_ENV} or --command-config)"
    if isinstance(error, kerr.UnsupportedSaslMechanismError):
        return BadInput(f"Kafka refused the credentials ({who}): the brokers do not offer that mechanism; "
                        f"set sasl.mechanism to one they offer{where}")
    return BadInput(f"Kafka refused the credentials ({who}): {_detail(error)}; check the credentials (user and "
                    f"password in {COMMAND_CONFIG_ENV} or --command-config)")


def new_client(spec: str, timeout: float | None, settings: dict) -> KafkaAdminClient:
    """A connected admin client for the bootstrap list `spec`; `BadInput` (one line) when no
    bootstrap host resolves (at once), when Kafka refuses the credentials (after one login) or
    when no broker there answers (within ~`BOOTSTRAP_SECONDS` or default.api.timeout.ms).

    Each request may take request.timeout.ms (in `settings`, from --command-config), else
    `timeout` seconds, else `REQUEST_SECONDS`.
    """
    hosts = parse_bootstrap(spec)
    check_resolvable(spec, hosts)
    settings = dict(settings)
    request_ms = settings.pop("request_timeout_ms", None) or int((timeout or REQUEST_SECONDS) * 1000)
    wait_ms = settings.pop("default_api_timeout_ms", None) or int(BOOTSTRAP_SECONDS * 1000)
    setup_ms = min(request_ms, int(CONNECT_SETUP_SECONDS * 1000))
    watch_timeouts()
    started = time.monotonic()
    try:
        return KafkaAdminClient(bootstrap_servers=hosts, client_id="kit", request_timeout_ms=request_ms,
                                kafka_client=functools.partial(  # the admin client's own keywords lack it
                                    _net_client, socket_connection_setup_timeout_ms=setup_ms,
                                    socket_connection_setup_timeout_max_ms=max(setup_ms, min(request_ms, 30_000))),
                                bootstrap_timeout_ms=wait_ms, reconnect_backoff_max_ms=1000,
                                retry_backoff_ms=100, **settings)
    except AUTH_FAILURES as e:
        raise credentials_refused(settings, e) from None
    except Exception as e:  # noqa: BLE001  (whatever the library raises, one line)
        mapped = translate(e)
        if isinstance(mapped, Unreachable) or mapped is None:
            late = last_timeout(since=started)
            why = type(e).__name__ if late is None else f"the last request timed out: {late}"
            raise Unreachable(f"--bootstrap {spec}: no Kafka broker answers there ({why})") from None
        raise mapped from None


class _TimeoutWitness(logging.Handler):
    """Which broker a request timed out on. kafka-python names it only in its log (the error
    it raises says "Request timed out after N ms"), so this handler, alone on that logger
    (kit keeps kafka-python's logging quiet), keeps the last such record's broker, address and
    timeout."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.last: tuple[float, str] | None = None
        self.guard = threading.Lock()  # not `lock`: logging.Handler holds its own while it emits

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        if "timed out" not in str(record.msg) or len(args) < 2:
            return
        conn, ms = args[0], args[1]
        node = getattr(conn, "node_id", None)
        try:
            where = conn.transport.host_port().split("<-")[0]  # "HOST:PORT<-LOCAL_PORT"
        except Exception:  # noqa: BLE001  (the socket already gone: the broker's id says enough)
            where = None
        who = f"broker {node}" if node is not None else "a broker"
        text = f"{who}{f' ({where})' if where and where != 'none' else ''} did not answer within " \
               f"{round(float(ms) / 1000, 1):g} s"
        with self.guard:
            self.last = (time.monotonic(), text)


_WITNESS = _TimeoutWitness()


def watch_timeouts() -> None:
    """Install the witness of kafka-python's request timeouts (once; kafka-python's other log
    records stay silenced: kit says what failed, in one line)."""
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    conn_log = logging.getLogger("kafka.net.connection")
    if _WITNESS not in conn_log.handlers:
        conn_log.addHandler(_WITNESS)
        conn_log.setLevel(logging.WARNING)
        conn_log.propagate = False


def last_timeout(since: float | None = None) -> str | None:
    """"broker ID (HOST:PORT) did not answer within N s" for the last request that timed out
    (after `since`, monotonic seconds; within the last two minutes without it), None if none."""
    with _WITNESS.guard:
        last = _WITNESS.last
    floor = since if since is not None else time.monotonic() - 120.0
    return last[1] if last is not None and last[0] >= floor else None


TIMEOUT_HINT = "request.timeout.ms in the --command-config file raises it"


# Errors that mean the cluster (or the broker a call needed) cannot be reached now.
LOST = (kerr.KafkaConnectionError, kerr.KafkaTimeoutError, kerr.NodeNotReadyError, kerr.RequestTimedOutError,
        kerr.NetworkExceptionError, kerr.BrokerNotAvailableError, kerr.MetadataEmptyBrokerList,
        kerr.NotControllerError, kerr.Cancelled, ConnectionError, TimeoutError)


def translate(e: BaseException) -> BadInput | Unsafe | None:
    """kit's error for one of kafka-python's (None for any other), in one line.

    Unreachable (exit 2, a long-running caller retries) for a cluster or broker that does not
    answer (a timeout names the broker, `last_timeout`); BadInput (exit 2) for an
    authentication or authorization failure (`refused`: the credentials are the input to fix,
    as ZooKeeper's NoAuth is), an unknown topic or partition, an invalid replica assignment, no
    reassignment in progress, bad settings; Unsafe (exit 3) for a reassignment already in
    progress and any other refusal.
    """
    name = type(e).__name__
    if isinstance(e, (kerr.RequestTimedOutError, kerr.KafkaTimeoutError, TimeoutError)):
        late = last_timeout()
        if late is not None:
            return Unreachable(f"Kafka {late} ({TIMEOUT_HINT}); nothing more was sent")
        return Unreachable(f"Kafka cluster unreachable: a request timed out ({name}; {TIMEOUT_HINT}); nothing more "
                           "was sent")
    if isinstance(e, LOST):
        return Unreachable(f"Kafka cluster unreachable ({name}); nothing more was written")
    if isinstance(e, kerr.AuthorizationError):
        return refused(type(e), "the request", None, "; nothing more was changed")
    if isinstance(e, AUTH_FAILURES):
        return credentials_refused(None, e)
    if isinstance(e, (kerr.UnknownTopicOrPartitionError, kerr.UnknownTopicIdError)):
        return BadInput(f"Kafka: unknown topic or partition ({name})")
    if isinstance(e, kerr.InvalidReplicationAssignmentError):
        return BadInput(f"Kafka refused the replica assignment ({name}): {_detail(e)}")
    if isinstance(e, kerr.NoReassignmentInProgressError):
        return BadInput("Kafka: no reassignment is in progress for that partition")
    if isinstance(e, kerr.ReassignmentInProgressError):
        return Unsafe("Kafka: a reassignment is already in progress; nothing was changed")
    if isinstance(e, (kerr.KafkaConfigurationError, kerr.IncompatibleBrokerVersion, kerr.UnrecognizedBrokerVersion)):
        return BadInput(f"Kafka client: {name} (the brokers may be too old for the Admin API kit uses: 2.4+)")
    if isinstance(e, kerr.KafkaError):
        return Unsafe(f"Kafka error: {name}: {_detail(e)}")
    return None


# What each authorization error says the principal lacks, when the caller does not know better.
_RIGHT_OF = {kerr.ClusterAuthorizationFailedError: "a right on the CLUSTER",
             kerr.TopicAuthorizationFailedError: "a right on the topic"}


def refused(error: type, what: str, right: str | None, left: str = "") -> BadInput:
    """Kafka's refusal of `what` for want of `right` (e.g. "ALTER on the CLUSTER"), as one line
    ending with `left` (what the refusal left changed, e.g. "; nothing was changed"): exit 2,
    as a ZooKeeper chroot refused for want of credentials is."""
    right = right or _RIGHT_OF.get(error, "a right this needs")
    code = getattr(error, "errno", None)
    return BadInput(f"Kafka refused {what}: the principal lacks {right} ({error.__name__}, error {code}); "
                  f"grant it (Kafka ACLs) or use a principal that has it (--command-config){left}")


def authorization_error(result: str) -> type | None:
    """The authorization error class in one of kafka-python's alter_configs result strings
    ("[Error 31] ClusterAuthorizationFailedError: ..."), None for any other result."""
    m = re.match(r"\[Error (\d+)\]", str(result))
    error = kerr.for_code(int(m.group(1))) if m else None
    return error if error is not None and issubclass(error, kerr.AuthorizationError) else None


def _detail(e: BaseException) -> str:
    """The broker's own message, on one line and short (it never holds credentials)."""
    text = " ".join(str(a) for a in getattr(e, "args", ()) if a)
    return " ".join(text.split())[:200] or "no detail"
