"""Kafka's ``ssl.*`` configuration turned into ``ssl.SSLContext`` objects.

Java counterpart: ``org.apache.kafka.common.security.ssl.DefaultSslEngineFactory`` (with
``SslConfigs`` / ``BrokerSecurityConfigs`` for the names).  ``SslFactory.server_context`` is what a
broker's SSL / SASL_SSL listener uses; ``SslFactory.client_context`` is the broker's own outgoing
(inter-broker, controller) side.  ``client_ssl_context`` takes librdkafka's key names
(``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location`` ...) for millrace clients.
The callers pass a *resolved* mapping: listener prefixes (``listener.name.<l>.ssl.*``) are already
applied; ``None`` or a missing key means unset.

Theory of operation.  Every store is first read and checked with ``cryptography`` so that a mistake
is reported as a ``ConfigError`` naming the config key and the file (``ssl.SSLError`` strings name
neither).  Then:

* Trust anchors go to ``load_verify_locations(cadata=...)`` from memory.
* The key and chain must reach OpenSSL through a *file*: CPython 3.11 has no in-memory
  ``load_cert_chain`` (python/cpython#118557).  They are written to a ``mkstemp`` file (mode
  0600), with the key re-encrypted under a one-time random passphrase, loaded, and unlinked at once.
  So the same path serves PEM files, inline PEM (``ssl.keystore.key`` +
  ``ssl.keystore.certificate.chain``) and PKCS#12, and no decrypted key touches the disk.

Kafka semantics kept: ``ssl.keystore.password`` must not be set for PEM stores (only
``ssl.key.password``, for an encrypted key), and a PEM truststore takes no password;
``ssl.client.auth`` none/requested/required = CERT_NONE/OPTIONAL/REQUIRED; hostname verification
(``ssl.endpoint.identification.algorithm=https``) applies only to client-mode contexts;
``ssl.protocol=TLSv1.2`` keeps a *client* from offering TLS 1.3 (a Java ``SSLContext`` created for
TLSv1.2 does that), while a server still follows ``ssl.enabled.protocols``.

Differences from Kafka, on purpose:

* ``ssl.keystore.type`` / ``ssl.truststore.type`` default to PEM, or PKCS12 when the location ends
  in ``.p12``/``.pfx``, instead of JKS.  JKS (and JCEKS) cannot be read from Python: they are
  rejected with the ``keytool -importkeystore`` command that converts them.
* PEM keys may also be PKCS#1 / SEC1 (``BEGIN RSA PRIVATE KEY`` ...); Kafka takes PKCS#8 only.
  ``ssl.key.password`` set for an unencrypted key is ignored (Kafka fails).
* PKCS#12 stores use one password (``ssl.keystore.password``) for the whole file;
  ``ssl.key.password`` is not consulted for them.
* A truststore is required for ``ssl.client.auth=requested|required`` (Java would fall back to the
  JVM's cacerts, which never makes sense for client certificates).  A client context without a
  truststore trusts the system's default CAs, like Java's cacerts.
* ``ssl.cipher.suites`` accepts Java/IANA names (mapped to OpenSSL's) and OpenSSL names.  Python
  cannot restrict the TLS 1.3 suites (no ``SSL_CTX_set_ciphersuites`` binding): listing TLS 1.3
  suites enables TLS 1.3 with all of OpenSSL's TLS 1.3 suites; listing none disables TLS 1.3, and
  listing only TLS 1.3 suites disables TLS 1.2 — which is what the list means in Java.
* Java-only keys (``ssl.keymanager.algorithm``, ``ssl.provider``, ...) are not read.

Secrets (passwords, inline keys) never appear in messages or logs: they print as ``[hidden]``,
like Java's ``Password``.  Inline PEM values may come from a properties file whose ``\\``
continuations joined the lines with spaces: block bodies are re-wrapped before parsing.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import ssl
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes as _PrivateKey
from cryptography.hazmat.primitives.serialization import pkcs12

from millrace.common.errors import ConfigError

log = logging.getLogger(__name__)

SSL_KEYSTORE_TYPE = "ssl.keystore.type"
SSL_KEYSTORE_LOCATION = "ssl.keystore.location"
SSL_KEYSTORE_PASSWORD = "ssl.keystore.password"
SSL_KEY_PASSWORD = "ssl.key.password"
SSL_KEYSTORE_KEY = "ssl.keystore.key"
SSL_KEYSTORE_CERTIFICATE_CHAIN = "ssl.keystore.certificate.chain"
SSL_TRUSTSTORE_TYPE = "ssl.truststore.type"
SSL_TRUSTSTORE_LOCATION = "ssl.truststore.location"
SSL_TRUSTSTORE_PASSWORD = "ssl.truststore.password"
SSL_TRUSTSTORE_CERTIFICATES = "ssl.truststore.certificates"
SSL_CLIENT_AUTH = "ssl.client.auth"
SSL_ENABLED_PROTOCOLS = "ssl.enabled.protocols"
SSL_PROTOCOL = "ssl.protocol"
SSL_CIPHER_SUITES = "ssl.cipher.suites"
SSL_ENDPOINT_IDENTIFICATION_ALGORITHM = "ssl.endpoint.identification.algorithm"

# Every key SslFactory reads (not ssl.principal.mapping.rules: that is the authenticator's).
SSL_CONFIG_KEYS: tuple[str, ...] = (
    SSL_KEYSTORE_TYPE, SSL_KEYSTORE_LOCATION, SSL_KEYSTORE_PASSWORD, SSL_KEY_PASSWORD,
    SSL_KEYSTORE_KEY, SSL_KEYSTORE_CERTIFICATE_CHAIN,
    SSL_TRUSTSTORE_TYPE, SSL_TRUSTSTORE_LOCATION, SSL_TRUSTSTORE_PASSWORD,
    SSL_TRUSTSTORE_CERTIFICATES,
    SSL_CLIENT_AUTH, SSL_ENABLED_PROTOCOLS, SSL_PROTOCOL, SSL_CIPHER_SUITES,
    SSL_ENDPOINT_IDENTIFICATION_ALGORITHM,
)
# Keys whose values are Java ``Password``s: never echoed.
_SECRET_KEYS = frozenset({SSL_KEYSTORE_PASSWORD, SSL_KEY_PASSWORD, SSL_KEYSTORE_KEY,
                          SSL_KEYSTORE_CERTIFICATE_CHAIN, SSL_TRUSTSTORE_PASSWORD,
                          SSL_TRUSTSTORE_CERTIFICATES, "ssl.ca.pem"})
HIDDEN = "[hidden]"

_CLIENT_AUTH_MODES = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                      "required": ssl.CERT_REQUIRED}
_PROTOCOLS = {"tlsv1.2": ssl.TLSVersion.TLSv1_2, "tlsv1.3": ssl.TLSVersion.TLSv1_3}
_INSECURE_PROTOCOLS = frozenset({"tlsv1", "tlsv1.1", "sslv3", "sslv2", "sslv2hello", "ssl"})
_ALL_PROTOCOLS = frozenset(_PROTOCOLS.values())

# TLS 1.3 suites (same names in Java, IANA and OpenSSL); the first three are OpenSSL's defaults.
_TLS13_SUITES = frozenset({"TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                           "TLS_AES_128_GCM_SHA256", "TLS_AES_128_CCM_SHA256",
                           "TLS_AES_128_CCM_8_SHA256"})
_TLS13_DEFAULT_SUITES = frozenset({"TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                                   "TLS_AES_128_GCM_SHA256"})
_SIGNALLING_SUITES = frozenset({"TLS_EMPTY_RENEGOTIATION_INFO_SCSV", "TLS_FALLBACK_SCSV"})


def _java_to_openssl_table() -> dict[str, str]:
    """Java (= IANA) TLS 1.2 suite names -> OpenSSL names, for the suites OpenSSL 3 offers.

    OpenSSL spells ``TLS_<kx>_WITH_<cipher>_<mac>`` as ``<kx>-<cipher>-<mac>``, drops the key
    exchange for plain RSA, the ``_CBC`` mode, and the MAC of ChaCha20/CCM; checked against
    ``openssl ciphers -stdname`` in the unit tests.
    """
    table: dict[str, str] = {}
    for kx, ossl_kx in (("ECDHE_ECDSA", "ECDHE-ECDSA-"), ("ECDHE_RSA", "ECDHE-RSA-"),
                        ("DHE_RSA", "DHE-RSA-"), ("RSA", "")):
        for bits in ("128", "256"):
            mac = "SHA256" if bits == "128" else "SHA384"
            table[f"TLS_{kx}_WITH_AES_{bits}_GCM_{mac}"] = f"{ossl_kx}AES{bits}-GCM-{mac}"
            table[f"TLS_{kx}_WITH_AES_{bits}_CBC_SHA"] = f"{ossl_kx}AES{bits}-SHA"
            cbc_mac = mac if kx.startswith("ECDHE") else "SHA256"
            table[f"TLS_{kx}_WITH_AES_{bits}_CBC_{cbc_mac}"] = f"{ossl_kx}AES{bits}-{cbc_mac}"
        if kx != "RSA":
            table[f"TLS_{kx}_WITH_CHACHA20_POLY1305_SHA256"] = f"{ossl_kx}CHACHA20-POLY1305"
    for bits in ("128", "256"):
        table[f"TLS_ECDHE_ECDSA_WITH_AES_{bits}_CCM"] = f"ECDHE-ECDSA-AES{bits}-CCM"
        table[f"TLS_DHE_RSA_WITH_AES_{bits}_CCM"] = f"DHE-RSA-AES{bits}-CCM"
        table[f"TLS_RSA_WITH_AES_{bits}_CCM"] = f"AES{bits}-CCM"
    return table


JAVA_TO_OPENSSL_CIPHERS: Mapping[str, str] = _java_to_openssl_table()


def resolve_ssl_config(get: Callable[[str], str | None]) -> dict[str, str | None]:
    """``{key: get(key)}`` per ``SSL_CONFIG_KEYS`` key; ``get`` applies listener prefixes."""
    return {key: get(key) for key in SSL_CONFIG_KEYS}


# ---------------------------------------------------------------------------------------------
# errors and config access


def _invalid(key: str, value: str | None, why: str) -> ConfigError:
    shown = "null" if value is None else HIDDEN if key in _SECRET_KEYS else value
    return ConfigError(f"Invalid value {shown} for configuration {key}: {why}")


def _get(cfg: Mapping[str, str | None], key: str) -> str | None:
    """A set value, stripped; unset and blank are both None."""
    value = cfg.get(key)
    if value is None:
        return None
    value = str(value).strip()
    return value or None


def _list(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def _read(key: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise _invalid(key, path, f"cannot read {path}: {e.strerror or e}") from None


@dataclass(frozen=True)
class _Source:
    """Where some PEM/PKCS#12 bytes came from, for error messages: a config key and its value."""

    key: str
    value: str   # a path, or HIDDEN for inline values

    def error(self, why: str) -> ConfigError:
        return ConfigError(f"Invalid value {self.value} for configuration {self.key}: {why}")


# ---------------------------------------------------------------------------------------------
# PEM parsing

_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)
_JKS_MAGIC = b"\xfe\xed\xfe\xed"
_JCEKS_MAGIC = b"\xce\xce\xce\xce"


def _pem_blocks(text: str) -> list[tuple[str, bytes]]:
    """(label, canonical PEM bytes) for each block; tolerant of joined or ``\\n``-escaped lines."""
    blocks = []
    for m in _PEM_BLOCK.finditer(text):
        label, body = m.group(1), m.group(2)
        if ":" in body:   # RFC 1421 headers (legacy encrypted keys): keep the line structure
            lines = [line.strip() for line in body.strip().splitlines()]
            inner = "\n".join(lines)
        else:
            b64 = re.sub(r"\s", "", body.replace("\\n", "").replace("\\r", ""))
            inner = "\n".join(b64[i:i + 64] for i in range(0, len(b64), 64))
        blocks.append((label, f"-----BEGIN {label}-----\n{inner}\n-----END {label}-----\n"
                       .encode("ascii", "replace")))
    return blocks


def _pem_certificates(blocks: list[tuple[str, bytes]], src: _Source) -> list[x509.Certificate]:
    certs = []
    for label, pem in blocks:
        if label in ("CERTIFICATE", "TRUSTED CERTIFICATE", "X509 CERTIFICATE"):
            try:
                certs.append(x509.load_pem_x509_certificate(pem))
            except ValueError as e:
                raise src.error(f"malformed certificate ({e})") from None
    return certs


def _pem_private_key(blocks: list[tuple[str, bytes]], src: _Source,
                     password: str | None, password_key: str) -> _PrivateKey:
    keys = [(label, pem) for label, pem in blocks if label.endswith("PRIVATE KEY")]
    if not keys:
        raise src.error("no private key (-----BEGIN PRIVATE KEY-----) found")
    if len(keys) > 1:
        raise src.error(f"{len(keys)} private keys found; a keystore holds exactly one")
    label, pem = keys[0]
    encrypted = label == "ENCRYPTED PRIVATE KEY" or b"ENCRYPTED" in pem.split(b"\n", 2)[1]
    if encrypted and password is None:
        raise _invalid(password_key, None,
                       f"the private key in {src.key} ({src.value}) is encrypted; "
                       f"set {password_key}")
    try:
        key = serialization.load_pem_private_key(
            pem, password=password.encode("utf-8") if encrypted and password is not None
            else None)
    except ValueError:
        if encrypted:
            raise _invalid(password_key, password,
                           f"cannot decrypt the private key in {src.key} ({src.value}): "
                           "wrong password") from None
        raise src.error("malformed private key") from None
    except (TypeError, UnsupportedAlgorithm) as e:
        raise src.error(f"unusable private key ({e})") from None
    return key


@dataclass(frozen=True)
class _KeyMaterial:
    key: _PrivateKey
    chain: list[x509.Certificate]   # leaf first


def _check_pair(key: _PrivateKey, chain: list[x509.Certificate], src: _Source) -> _KeyMaterial:
    if not chain:
        raise src.error("no certificate (-----BEGIN CERTIFICATE-----) found")
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(*spki) != chain[0].public_key().public_bytes(*spki):
        raise src.error("the private key does not match the first certificate "
                        "(the chain must start with the key's own certificate)")
    return _KeyMaterial(key, chain)


def _install(ctx: ssl.SSLContext, material: _KeyMaterial, src: _Source) -> None:
    """load_cert_chain through a 0600 temp file holding the key under a one-time passphrase."""
    one_time = secrets.token_urlsafe(24)
    data = material.key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(one_time.encode("ascii")))
    data += b"".join(c.public_bytes(serialization.Encoding.PEM) for c in material.chain)
    fd, path = tempfile.mkstemp(prefix="millrace-ssl-", suffix=".pem")   # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        ctx.load_cert_chain(path, password=one_time)
    except ssl.SSLError as e:
        raise src.error(f"OpenSSL rejected the key or certificate ({e.reason or e})") from None
    finally:
        os.unlink(path)


# ---------------------------------------------------------------------------------------------
# store types


def _store_type(cfg: Mapping[str, str | None], type_key: str, location: str | None,
                location_key: str, data: bytes | None) -> str:
    given = _get(cfg, type_key)
    if given is not None:
        kind = given.upper()
        if kind not in ("PEM", "PKCS12", "JKS", "JCEKS"):
            raise _invalid(type_key, given, "must be PEM or PKCS12 (JKS must be converted)")
    elif location is not None and location.lower().endswith((".p12", ".pfx")):
        kind = "PKCS12"
    elif location is not None and location.lower().endswith((".jks", ".jceks")):
        kind = "JKS"
    else:
        kind = "PEM"
    if data is not None and data[:4] in (_JKS_MAGIC, _JCEKS_MAGIC):
        kind = "JKS"
    if kind in ("JKS", "JCEKS"):
        where = location or "store.jks"
        stem = re.sub(r"\.(jks|jceks)$", "", where, flags=re.I)
        raise _invalid(type_key, given or kind,
                       f"{location_key} {where} is a Java KeyStore, which millrace cannot read; "
                       f"convert it with `keytool -importkeystore -srckeystore {where} "
                       f"-destkeystore {stem}.p12 -deststoretype PKCS12` and set "
                       f"{type_key}=PKCS12 (or use PEM)")
    if kind == "PEM" and data is not None and b"-----BEGIN" not in data and data[:1] == b"\x30":
        raise _invalid(location_key, location,
                       f"the file is binary (DER/PKCS#12), not PEM; set {type_key}=PKCS12")
    return kind


def _pkcs12(data: bytes, src: _Source, password: str | None, password_key: str,
            ) -> tuple[_PrivateKey | None, list[x509.Certificate]]:
    try:
        key, cert, extra = pkcs12.load_key_and_certificates(
            data, password.encode("utf-8") if password is not None else None)
    except ValueError:
        why = (f"wrong {password_key}, or not a PKCS#12 file" if password is not None else
               f"not readable without a password (set {password_key}), or not a PKCS#12 file")
        raise src.error(why) from None
    return key, ([cert] if cert is not None else []) + list(extra)


def _load_keystore(cfg: Mapping[str, str | None]) -> tuple[_KeyMaterial, _Source] | None:
    location = _get(cfg, SSL_KEYSTORE_LOCATION)
    inline_key = _get(cfg, SSL_KEYSTORE_KEY)
    inline_chain = _get(cfg, SSL_KEYSTORE_CERTIFICATE_CHAIN)
    store_password = _get(cfg, SSL_KEYSTORE_PASSWORD)
    key_password = _get(cfg, SSL_KEY_PASSWORD)
    if inline_key is not None or inline_chain is not None:
        if location is not None:
            raise _invalid(SSL_KEYSTORE_KEY, inline_key,
                           f"cannot be combined with {SSL_KEYSTORE_LOCATION}")
        if inline_key is None or inline_chain is None:
            missing = SSL_KEYSTORE_KEY if inline_key is None else SSL_KEYSTORE_CERTIFICATE_CHAIN
            raise _invalid(missing, None, f"{SSL_KEYSTORE_KEY} and "
                           f"{SSL_KEYSTORE_CERTIFICATE_CHAIN} must be set together")
        kind = _get(cfg, SSL_KEYSTORE_TYPE)
        if kind is not None and kind.upper() != "PEM":
            raise _invalid(SSL_KEYSTORE_TYPE, kind,
                           f"{SSL_KEYSTORE_KEY} requires {SSL_KEYSTORE_TYPE}=PEM")
        if store_password is not None:
            raise _invalid(SSL_KEYSTORE_PASSWORD, store_password,
                           f"must not be set for PEM keys; use {SSL_KEY_PASSWORD}")
        key_src = _Source(SSL_KEYSTORE_KEY, HIDDEN)
        chain_src = _Source(SSL_KEYSTORE_CERTIFICATE_CHAIN, HIDDEN)
        key = _pem_private_key(_pem_blocks(inline_key), key_src, key_password, SSL_KEY_PASSWORD)
        chain = _pem_certificates(_pem_blocks(inline_chain), chain_src)
        return _check_pair(key, chain, chain_src), key_src
    if location is None:
        return None
    data = _read(SSL_KEYSTORE_LOCATION, location)
    src = _Source(SSL_KEYSTORE_LOCATION, location)
    kind = _store_type(cfg, SSL_KEYSTORE_TYPE, location, SSL_KEYSTORE_LOCATION, data)
    if kind == "PKCS12":
        key12, chain = _pkcs12(data, src, store_password, SSL_KEYSTORE_PASSWORD)
        if key12 is None:
            raise src.error("the PKCS#12 keystore holds no private key")
        return _check_pair(key12, chain, src), src
    if store_password is not None:
        raise _invalid(SSL_KEYSTORE_PASSWORD, store_password,
                       f"must not be set for a PEM keystore; use {SSL_KEY_PASSWORD}")
    blocks = _pem_blocks(data.decode("latin-1"))
    key = _pem_private_key(blocks, src, key_password, SSL_KEY_PASSWORD)
    return _check_pair(key, _pem_certificates(blocks, src), src), src


def _load_truststore(cfg: Mapping[str, str | None]) -> str | None:
    """The trusted certificates as one PEM string (for ``cadata``), or None if not configured."""
    location = _get(cfg, SSL_TRUSTSTORE_LOCATION)
    inline = _get(cfg, SSL_TRUSTSTORE_CERTIFICATES)
    password = _get(cfg, SSL_TRUSTSTORE_PASSWORD)
    if inline is not None:
        if location is not None:
            raise _invalid(SSL_TRUSTSTORE_CERTIFICATES, inline,
                           f"cannot be combined with {SSL_TRUSTSTORE_LOCATION}")
        kind = _get(cfg, SSL_TRUSTSTORE_TYPE)
        if kind is not None and kind.upper() != "PEM":
            raise _invalid(SSL_TRUSTSTORE_TYPE, kind,
                           f"{SSL_TRUSTSTORE_CERTIFICATES} requires {SSL_TRUSTSTORE_TYPE}=PEM")
        src = _Source(SSL_TRUSTSTORE_CERTIFICATES, HIDDEN)
        certs = _pem_certificates(_pem_blocks(inline), src)
    elif location is not None:
        data = _read(SSL_TRUSTSTORE_LOCATION, location)
        src = _Source(SSL_TRUSTSTORE_LOCATION, location)
        kind = _store_type(cfg, SSL_TRUSTSTORE_TYPE, location, SSL_TRUSTSTORE_LOCATION, data)
        if kind == "PKCS12":
            certs = _pkcs12(data, src, password, SSL_TRUSTSTORE_PASSWORD)[1]
        else:
            certs = _pem_certificates(_pem_blocks(data.decode("latin-1")), src)
    else:
        return None
    if password is not None and (inline is not None or kind == "PEM"):
        raise _invalid(SSL_TRUSTSTORE_PASSWORD, password, "must not be set for a PEM truststore")
    if not certs:
        raise src.error("no certificate found")
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode("ascii") for c in certs)


# ---------------------------------------------------------------------------------------------
# protocols and cipher suites


def _enabled_protocols(cfg: Mapping[str, str | None], client_mode: bool) -> set[ssl.TLSVersion]:
    raw = _get(cfg, SSL_ENABLED_PROTOCOLS)
    versions: set[ssl.TLSVersion] = set()
    for name in _list(raw) or ["TLSv1.2", "TLSv1.3"]:
        lowered = name.lower()
        if lowered in _INSECURE_PROTOCOLS:
            raise _invalid(SSL_ENABLED_PROTOCOLS, raw,
                           f"{name} is insecure and not supported; use TLSv1.2 and/or TLSv1.3")
        if lowered not in _PROTOCOLS:
            raise _invalid(SSL_ENABLED_PROTOCOLS, raw,
                           f"unknown protocol {name}; use TLSv1.2 and/or TLSv1.3")
        versions.add(_PROTOCOLS[lowered])
    protocol = _get(cfg, SSL_PROTOCOL)
    if protocol is not None:
        lowered = protocol.lower()
        if lowered in _INSECURE_PROTOCOLS or lowered not in (*_PROTOCOLS, "tls"):
            raise _invalid(SSL_PROTOCOL, protocol, "must be TLSv1.3, TLSv1.2 or TLS")
        if client_mode and lowered == "tlsv1.2":
            versions.discard(ssl.TLSVersion.TLSv1_3)
            if not versions:
                raise _invalid(SSL_PROTOCOL, protocol,
                               f"excludes every protocol in {SSL_ENABLED_PROTOCOLS} ({raw})")
    return versions


def _cipher_suites(cfg: Mapping[str, str | None]) -> tuple[str | None, set[ssl.TLSVersion]]:
    """The OpenSSL cipher string for TLS <= 1.2 (None = defaults) and the versions it allows."""
    raw = _get(cfg, SSL_CIPHER_SUITES)
    names = [n for n in _list(raw) if n not in _SIGNALLING_SUITES]
    if not names:
        return None, set(_ALL_PROTOCOLS)
    tls12: list[str] = []
    tls13: list[str] = []
    for name in names:
        if name in _TLS13_SUITES:
            tls13.append(name)
        elif name in JAVA_TO_OPENSSL_CIPHERS:
            tls12.append(JAVA_TO_OPENSSL_CIPHERS[name])
        elif name.startswith(("TLS_", "SSL_")):
            raise _invalid(SSL_CIPHER_SUITES, raw,
                           f"{name} has no OpenSSL equivalent here; give a supported Java name "
                           "(e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256) or an OpenSSL name")
        else:
            tls12.append(name)   # an OpenSSL name or expression, checked by set_ciphers
    if tls13 and not set(tls13) >= _TLS13_DEFAULT_SUITES:
        log.warning("%s lists only some TLS 1.3 cipher suites (%s); Python cannot restrict TLS "
                    "1.3 suites, so all of OpenSSL's stay enabled", SSL_CIPHER_SUITES,
                    ", ".join(tls13))
    allowed: set[ssl.TLSVersion] = set()
    if tls12:
        allowed.add(ssl.TLSVersion.TLSv1_2)
    if tls13:
        allowed.add(ssl.TLSVersion.TLSv1_3)
    return (":".join(tls12) if tls12 else None), allowed


def _apply_protocols_and_ciphers(ctx: ssl.SSLContext, cfg: Mapping[str, str | None],
                                 client_mode: bool) -> None:
    versions = _enabled_protocols(cfg, client_mode)
    cipher_string, cipher_versions = _cipher_suites(cfg)
    usable = versions & cipher_versions
    if not usable:
        raise _invalid(SSL_CIPHER_SUITES, _get(cfg, SSL_CIPHER_SUITES),
                       f"no listed suite works with {SSL_ENABLED_PROTOCOLS} "
                       f"({_get(cfg, SSL_ENABLED_PROTOCOLS) or 'TLSv1.2,TLSv1.3'})")
    ctx.minimum_version = min(usable)
    ctx.maximum_version = max(usable)
    if cipher_string is not None:
        try:
            ctx.set_ciphers(cipher_string)
        except ssl.SSLError:
            raise _invalid(SSL_CIPHER_SUITES, _get(cfg, SSL_CIPHER_SUITES),
                           f"OpenSSL supports none of {cipher_string}") from None


def _check_hostname(key: str, value: str | None, *, none_word: bool) -> bool:
    if value is None:
        return True
    lowered = value.strip().lower()
    if lowered == "https":
        return True
    if lowered == "" or (none_word and lowered == "none"):
        return False
    raise _invalid(key, value, "must be https or empty" + (" or none" if none_word else ""))


# ---------------------------------------------------------------------------------------------
# public API


class SslFactory:
    """Builds contexts from Kafka's ``ssl.*`` keys (see the module docstring)."""

    @staticmethod
    def server_context(cfg: Mapping[str, str | None]) -> ssl.SSLContext:
        """A listener's context: keystore required, ``ssl.client.auth`` decides mTLS."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        keystore = _load_keystore(cfg)
        if keystore is None:
            raise _invalid(SSL_KEYSTORE_LOCATION, None,
                           f"a TLS listener needs a keystore: set {SSL_KEYSTORE_LOCATION}, or "
                           f"{SSL_KEYSTORE_KEY} and {SSL_KEYSTORE_CERTIFICATE_CHAIN}")
        _install(ctx, *keystore)
        raw_auth = _get(cfg, SSL_CLIENT_AUTH)
        mode = _CLIENT_AUTH_MODES.get((raw_auth or "none").lower())
        if mode is None:
            raise _invalid(SSL_CLIENT_AUTH, raw_auth, "must be none, requested or required")
        trusted = _load_truststore(cfg)
        if trusted is not None:
            ctx.load_verify_locations(cadata=trusted)
        elif mode != ssl.CERT_NONE:
            raise _invalid(SSL_CLIENT_AUTH, raw_auth,
                           f"verifying client certificates needs a truststore: set "
                           f"{SSL_TRUSTSTORE_LOCATION} or {SSL_TRUSTSTORE_CERTIFICATES}")
        ctx.verify_mode = mode
        _apply_protocols_and_ciphers(ctx, cfg, client_mode=False)
        return ctx

    @staticmethod
    def client_context(cfg: Mapping[str, str | None]) -> ssl.SSLContext:
        """The broker's outgoing side: truststore (system CAs if unset), optional keystore."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)   # CERT_REQUIRED, check_hostname
        ctx.check_hostname = _check_hostname(
            SSL_ENDPOINT_IDENTIFICATION_ALGORITHM, cfg.get(SSL_ENDPOINT_IDENTIFICATION_ALGORITHM),
            none_word=False)
        keystore = _load_keystore(cfg)
        if keystore is not None:
            _install(ctx, *keystore)
        trusted = _load_truststore(cfg)
        if trusted is not None:
            ctx.load_verify_locations(cadata=trusted)
        else:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
        _apply_protocols_and_ciphers(ctx, cfg, client_mode=True)
        return ctx


def client_ssl_context(*, ca_location: str | None, certificate_location: str | None,
                       key_location: str | None, key_password: str | None,
                       endpoint_identification: str = "https",
                       ca_pem: str | None = None) -> ssl.SSLContext:
    """A client context from librdkafka's keys (``ssl.ca.location`` ... ``ssl.key.password``).

    ``ca_location`` may be a PEM file, a directory of hashed certificates, or ``probe`` (system
    CAs); with neither it nor ``ca_pem`` the system CAs are trusted.  The certificate file may
    carry the key too, in which case ``key_location`` may be omitted.
    ``endpoint_identification`` is ``https`` (default) or ``none``/empty.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = _check_hostname(SSL_ENDPOINT_IDENTIFICATION_ALGORITHM,
                                         endpoint_identification, none_word=True)
    trusted = ""
    if ca_location is not None and ca_location.strip().lower() == "probe":
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    elif ca_location is not None and os.path.isdir(ca_location):
        ctx.load_verify_locations(capath=ca_location)
    elif ca_location is not None:
        src = _Source("ssl.ca.location", ca_location)
        certs = _pem_certificates(_pem_blocks(_read(src.key, ca_location).decode("latin-1")), src)
        if not certs:
            raise src.error("no certificate found")
        trusted += "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)
    if ca_pem is not None:
        src = _Source("ssl.ca.pem", HIDDEN)
        certs = _pem_certificates(_pem_blocks(ca_pem), src)
        if not certs:
            raise src.error("no certificate found")
        trusted += "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)
    if trusted:
        ctx.load_verify_locations(cadata=trusted)
    elif ca_location is None:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if certificate_location is None and key_location is not None:
        raise _invalid("ssl.certificate.location", None,
                       "must be set together with ssl.key.location")
    if certificate_location is not None:
        cert_src = _Source("ssl.certificate.location", certificate_location)
        cert_blocks = _pem_blocks(_read(cert_src.key, certificate_location).decode("latin-1"))
        if key_location is not None:
            key_src = _Source("ssl.key.location", key_location)
            key_blocks = _pem_blocks(_read(key_src.key, key_location).decode("latin-1"))
        else:
            key_src, key_blocks = cert_src, cert_blocks
        key = _pem_private_key(key_blocks, key_src, key_password, "ssl.key.password")
        material = _check_pair(key, _pem_certificates(cert_blocks, cert_src), cert_src)
        _install(ctx, material, cert_src)
    return ctx


def peer_principal_dn(ssl_object: ssl.SSLObject | ssl.SSLSocket) -> str | None:
    """The RFC 2253 subject DN of the peer's *validated* certificate, or None without one.

    Same RDN order as Java's ``X500Principal.getName()`` (``CN=alice,OU=Unit,O=Org``), which is what
    ``ssl.principal.mapping.rules`` match.  A context that does not verify (CERT_NONE) yields None:
    an unverified certificate names nobody.
    """
    if ssl_object.context.verify_mode == ssl.CERT_NONE:
        return None
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return None
    return x509.load_der_x509_certificate(der).subject.rfc4514_string()
