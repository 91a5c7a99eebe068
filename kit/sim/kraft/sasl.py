"""SASL/PLAIN on the simulated KRaft cluster's listeners, as Kafka's SaslServerAuthenticator does it.

`kit sim start --kraft --sasl-plain FILE` (one line, `USER:PASSWORD`) makes every listener a
SASL_PLAINTEXT one: `write_users` keeps the credentials in DIR/sasl-plain (mode 600), the wire
server reads them (`read_users`) and runs a `Session` per connection until it authenticates.
Before that a connection may send ApiVersions and SaslHandshake (v0: raw SASL tokens follow;
v1: SaslAuthenticate requests); any other request closes it, as Kafka closes it ("Unexpected
Kafka request ... during SASL handshake"). A mechanism other than PLAIN gets
UNSUPPORTED_SASL_MECHANISM (33) naming PLAIN, and wrong credentials SASL_AUTHENTICATION_FAILED
(58) with PlainSaslServer's message; after either the connection closes.
"""
from __future__ import annotations

import os
import struct

from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.sasl import (SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
                                 SaslHandshakeResponse)

from kit.errors import BadInput
from kit.files import read_input
from kit.sim.kraft.context import (ILLEGAL_SASL_STATE, NONE, SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM,
                                   Context)
from kit.sim.kraft.versions import SASL_AUTHENTICATE, SASL_HANDSHAKE

FILE = "sasl-plain"
MECHANISM = "PLAIN"
# Kafka's connection.failed.authentication.delay.ms default: a refused login's connection closes
# this long after the refusal was sent (a client reads the refusal, not a bare disconnect).
CLOSE_DELAY_S = 0.1
# PlainSaslServer's words for a user it does not know or a password that does not match.
REFUSED = "Authentication failed: Invalid username or password"


def parse_users(text: str, where: str) -> dict[str, str]:
    """{user: password} from `USER:PASSWORD` lines; `BadInput` (naming `where`, never a value)
    for a line without both."""
    users = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        user, sep, password = line.strip().partition(":")
        if not sep or not user or not password:
            raise BadInput(f"{where}: each line must be USER:PASSWORD (SASL/PLAIN credentials)")
        users[user] = password
    if not users:
        raise BadInput(f"{where}: no USER:PASSWORD line")
    return users


def read_credentials_file(path: str) -> dict[str, str]:
    """The users of `kit sim start --sasl-plain FILE`."""
    raw = read_input(path, "--sasl-plain", max_bytes=1 << 16)
    try:
        return parse_users(raw.decode(), f"--sasl-plain {path}")
    except UnicodeDecodeError:
        raise BadInput(f"--sasl-plain {path}: not UTF-8 text") from None


def write_users(state_dir: str, users: dict[str, str]) -> None:
    """DIR/sasl-plain, readable by its owner only (it holds passwords)."""
    path = os.path.join(state_dir, FILE)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("".join(f"{u}:{p}\n" for u, p in sorted(users.items())))
    os.replace(tmp, path)


def read_users(state_dir: str) -> dict[str, str] | None:
    """The cluster's SASL/PLAIN users, None when its listeners are PLAINTEXT (no DIR/sasl-plain)."""
    try:
        with open(os.path.join(state_dir, FILE), encoding="utf-8") as f:
            return parse_users(f.read(), os.path.join(state_dir, FILE))
    except FileNotFoundError:
        return None


def check_plain(users: dict[str, str], token: bytes) -> bool:
    """Whether a SASL/PLAIN token (RFC 4616: authzid NUL user NUL password) names a user with
    that password (an authorization id, when given, must be the user, as Kafka requires)."""
    parts = token.split(b"\0")
    if len(parts) != 3:
        return False
    try:
        authzid, user, password = (p.decode() for p in parts)
    except UnicodeDecodeError:
        return False
    return (not authzid or authzid == user) and users.get(user) == password and bool(password)


class Session:
    """One connection's authentication. `answer` returns (response frame or None, close after
    it); `done` once the client authenticated, when the connection's requests go to the broker."""

    def __init__(self, users: dict[str, str]):
        self.users = users
        self.done = False
        self.mechanism_agreed = False
        self.raw_tokens = False  # after a v0 handshake the tokens come without a Kafka header

    def answer(self, ctx: Context, frame: bytes, serve) -> tuple[bytes | None, bool]:
        """The answer to one frame before authentication; `serve(ctx, frame)` answers
        ApiVersions as the broker does."""
        if self.raw_tokens:
            if not check_plain(self.users, frame):
                return None, True  # a v0 client has no error response to read: Kafka closes
            self.done = True
            return struct.pack(">i", 0), False  # an empty token: authenticated
        if len(frame) < 8:
            return None, True
        api_key, version, _ = struct.unpack_from(">hhi", frame, 0)
        if api_key == ApiVersionsRequest.API_KEY:
            return serve(ctx, frame), False
        if api_key == SASL_HANDSHAKE and not self.mechanism_agreed and 0 <= version <= 1:
            req = SaslHandshakeRequest.decode(frame, version=version, header=True)
            ok = req.mechanism == MECHANISM
            resp = SaslHandshakeResponse(version=version, error_code=NONE if ok else UNSUPPORTED_SASL_MECHANISM,
                                         mechanisms=[MECHANISM])
            self.mechanism_agreed, self.raw_tokens = ok, ok and version == 0
            return _framed(resp, req.header.correlation_id), not ok
        if api_key == SASL_AUTHENTICATE and self.mechanism_agreed and 0 <= version <= 2:
            req = SaslAuthenticateRequest.decode(frame, version=version, header=True)
            ok = check_plain(self.users, bytes(req.auth_bytes))
            resp = SaslAuthenticateResponse(version=version, error_code=NONE if ok else SASL_AUTHENTICATION_FAILED,
                                            error_message=None if ok else REFUSED, auth_bytes=b"",
                                            session_lifetime_ms=0)
            self.done = ok
            return _framed(resp, req.header.correlation_id), not ok
        return None, True  # "Unexpected Kafka request ... during SASL handshake": closed


def _framed(resp, correlation: int) -> bytes:
    resp.with_header(correlation_id=correlation)
    return bytes(resp.encode(header=True, framed=True))


def handshake_after_login(ctx: Context, req, version: int):
    """SaslHandshake on a connection that needs none (authenticated, or a PLAINTEXT listener):
    Kafka's KafkaApis answers ILLEGAL_SASL_STATE (34)."""
    return SaslHandshakeResponse(version=version, error_code=ILLEGAL_SASL_STATE, mechanisms=[])


def authenticate_after_login(ctx: Context, req, version: int):
    """SaslAuthenticate on a connection that needs none: ILLEGAL_SASL_STATE with KafkaApis' words."""
    return SaslAuthenticateResponse(version=version, error_code=ILLEGAL_SASL_STATE,
                                    error_message="SaslAuthenticate request received after successful authentication",
                                    auth_bytes=b"", session_lifetime_ms=0)
