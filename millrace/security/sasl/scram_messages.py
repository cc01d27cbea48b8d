"""SCRAM message syntax (Java: ``ScramMessages``, ``ScramFormatter.username/saslName``).

Parsers and builders for the four SCRAM messages, the saslname escaping of user names and the
nonce grammar; the layouts are in ``scram``'s docstring.  Server-side parse failures are
``SaslException`` (the client gets the generic message); the client-side parse of server-first
fails with ``SaslAuthenticationException``.  Every parser takes one whole token (SASL tokens are
framed by SaslAuthenticate) and raises on anything the grammar does not allow -- though a nonce
cut short or extended is still a well-formed message, which only the nonce checks can refuse.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from millrace.security.errors import SaslAuthenticationException, SaslException


def b64encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def b64decode(text: str) -> bytes:
    """Standard alphabet, padding required; raises ValueError on anything else."""
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise ValueError("invalid base64") from exc


def escape_username(username: str) -> str:
    """User name -> saslname: ``=`` -> ``=3D``, ``,`` -> ``=2C``."""
    return username.replace("=", "=3D").replace(",", "=2C")


def unescape_username(saslname: str) -> str:
    """saslname -> user name.  Kafka's rule: ASCII 0x01-0x7F; ``=`` only as ``=2C`` or ``=3D``."""
    out: list[str] = []
    i = 0
    while i < len(saslname):
        ch = saslname[i]
        if ch == "=":
            code = saslname[i + 1 : i + 3]
            if code == "2C":
                out.append(",")
            elif code == "3D":
                out.append("=")
            else:
                raise ValueError("invalid '=' escape in SCRAM user name")
            i += 3
            continue
        if ch == "," or not "\x01" <= ch <= "\x7f":
            raise ValueError("invalid character in SCRAM user name")
        out.append(ch)
        i += 1
    if not out:
        raise ValueError("empty SCRAM user name")
    return "".join(out)


def is_valid_nonce(nonce: str) -> bool:
    """Printable ASCII (0x21-0x7E) except ``,``, at least one character."""
    return bool(nonce) and all("\x21" <= ch <= "\x7e" and ch != "," for ch in nonce)


def _is_extension(field: str) -> bool:
    key, sep, value = field.partition("=")
    return (
        bool(sep)
        and key.isascii()
        and key.isalnum()
        and bool(value)
        and all("\x01" <= ch <= "\x7f" for ch in value)
    )


def _decode_utf8(message: bytes, what: str) -> str:
    try:
        return bytes(message).decode("utf-8")
    except UnicodeDecodeError:
        raise SaslException(f"Invalid SCRAM {what}: not valid UTF-8") from None


@dataclass(frozen=True)
class ClientFirstMessage:
    gs2_header: str  # "n,," or "n,a=<authzid>,"
    authzid: str
    username: str
    nonce: str
    extensions: dict[str, str]
    bare: str  # everything after the gs2 header

    @classmethod
    def parse(cls, message: bytes) -> ClientFirstMessage:
        text = _decode_utf8(message, "client first message")

        def bad(what: str) -> SaslException:
            return SaslException(f"Invalid SCRAM client first message: {what}")

        flag, sep, rest = text.partition(",")
        if not sep:
            raise bad("no gs2 header")
        if flag != "n":
            raise bad("channel binding is not supported (gs2 flag must be 'n')")
        authz_field, sep, bare = rest.partition(",")
        if not sep:
            raise bad("no gs2 header")
        authzid = ""
        if authz_field:
            if not authz_field.startswith("a="):
                raise bad("invalid authzid field")
            try:
                authzid = unescape_username(authz_field[2:])
            except ValueError as exc:
                raise bad(str(exc)) from None
        fields = bare.split(",")
        if fields[0].startswith("m="):  # reserved for mandatory extensions; Kafka ignores it
            fields = fields[1:]
        if len(fields) < 2 or not fields[0].startswith("n=") or not fields[1].startswith("r="):
            raise bad("expected n=<user>,r=<nonce>")
        try:
            username = unescape_username(fields[0][2:])
        except ValueError as exc:
            raise bad(str(exc)) from None
        nonce = fields[1][2:]
        if not is_valid_nonce(nonce):
            raise bad("invalid nonce")
        extensions: dict[str, str] = {}
        for field in fields[2:]:
            if not _is_extension(field):
                raise bad("invalid extension")
            key, _, value = field.partition("=")
            extensions[key] = value
        return cls(f"n,{authz_field},", authzid, username, nonce, extensions, bare)


@dataclass(frozen=True)
class ServerFirstMessage:
    nonce: str
    salt: bytes
    iterations: int
    text: str  # exactly as sent: it is part of AuthMessage

    @classmethod
    def build(cls, nonce: str, salt: bytes, iterations: int) -> ServerFirstMessage:
        return cls(nonce, salt, iterations, f"r={nonce},s={b64encode(salt)},i={iterations}")

    @classmethod
    def parse(cls, message: bytes) -> ServerFirstMessage:
        def bad(what: str) -> SaslAuthenticationException:
            return SaslAuthenticationException(f"Invalid SCRAM server first message: {what}")

        try:
            text = bytes(message).decode("utf-8")
        except UnicodeDecodeError:
            raise bad("not valid UTF-8") from None
        fields = text.split(",")
        if fields and fields[0].startswith("m="):
            fields = fields[1:]
        if len(fields) < 3 or [f[:2] for f in fields[:3]] != ["r=", "s=", "i="]:
            raise bad("expected r=<nonce>,s=<salt>,i=<iterations>")
        nonce = fields[0][2:]
        if not is_valid_nonce(nonce):
            raise bad("invalid nonce")
        try:
            salt = b64decode(fields[1][2:])
        except ValueError:
            raise bad("salt is not valid base64") from None
        iterations_text = fields[2][2:]
        if not iterations_text.isascii() or not iterations_text.isdigit():
            raise bad("iterations is not a number")
        if not all(_is_extension(f) for f in fields[3:]):
            raise bad("invalid extension")
        return cls(nonce, salt, int(iterations_text), text)


@dataclass(frozen=True)
class ClientFinalMessage:
    channel_binding: bytes
    nonce: str
    extensions: dict[str, str]
    proof: bytes
    without_proof: str

    @classmethod
    def parse(cls, message: bytes) -> ClientFinalMessage:
        text = _decode_utf8(message, "client final message")

        def bad(what: str) -> SaslException:
            return SaslException(f"Invalid SCRAM client final message: {what}")

        without_proof, sep, proof_text = text.rpartition(",p=")
        if not sep:
            raise bad("no proof")
        fields = without_proof.split(",")
        if len(fields) < 2 or not fields[0].startswith("c=") or not fields[1].startswith("r="):
            raise bad("expected c=<channel binding>,r=<nonce>")
        try:
            channel_binding = b64decode(fields[0][2:])
            proof = b64decode(proof_text)
        except ValueError:
            raise bad("invalid base64") from None
        nonce = fields[1][2:]
        if not is_valid_nonce(nonce):
            raise bad("invalid nonce")
        extensions: dict[str, str] = {}
        for field in fields[2:]:
            if not _is_extension(field):
                raise bad("invalid extension")
            key, _, value = field.partition("=")
            extensions[key] = value
        return cls(channel_binding, nonce, extensions, proof, without_proof)
