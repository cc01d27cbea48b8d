"""SslFactory: Kafka's ssl.* keys -> SSLContexts, proved by real TLS handshakes over MemoryBIOs.

No sockets: each handshake runs a client and a server ``SSLObject`` in this thread, moving the
bytes between their BIOs by hand, then exchanges one record each way (under TLS 1.3 the server's
verdict on a client certificate reaches the client only after its own handshake finished).
"""

from __future__ import annotations

import os
import shutil
import ssl
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from millrace.common.config import parse_properties
from millrace.common.errors import ConfigError
from millrace.security.certs import (
    CertificateAuthority,
    pkcs12_bytes,
    pkcs12_truststore_bytes,
    write_pem,
)
from millrace.security.ssl_factory import (
    JAVA_TO_OPENSSL_CIPHERS,
    SSL_CONFIG_KEYS,
    SslFactory,
    client_ssl_context,
    peer_principal_dn,
    resolve_ssl_config,
)

Cfg = dict[str, str | None]


class Pki:
    """A CA, a broker cert (SANs localhost, 127.0.0.1) and a client cert, written to files."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ca = CertificateAuthority.generate("test CA")
        self.broker = self.ca.issue("broker1", hosts=["localhost", "127.0.0.1"],
                                    organizational_unit="Brokers", organization="Org")
        self.alice = self.ca.issue("alice", organizational_unit="Unit", organization="Org")
        self.ca_file = self.write("ca.pem", self.ca.cert_pem)
        self.broker_pem = self.write("broker.pem", self.broker.key_and_chain_pem, private=True)
        self.alice_pem = self.write("alice.pem", self.alice.key_and_chain_pem, private=True)

    def write(self, name: str, data: bytes, private: bool = False) -> str:
        path = self.root / name
        write_pem(path, data, private=private)
        return str(path)

    def server_cfg(self, **extra: str | None) -> Cfg:
        cfg: Cfg = {"ssl.keystore.location": self.broker_pem,
                    "ssl.truststore.location": self.ca_file}
        cfg.update({k.replace("_", "."): v for k, v in extra.items()})
        return cfg

    def client_cfg(self, keystore: str | None = None, **extra: str | None) -> Cfg:
        cfg: Cfg = {"ssl.truststore.location": self.ca_file, "ssl.keystore.location": keystore}
        cfg.update({k.replace("_", "."): v for k, v in extra.items()})
        return cfg


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


def handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext,
              server_hostname: str | None = "localhost") -> tuple[ssl.SSLObject, ssl.SSLObject]:
    """Run a TLS handshake and one record each way; returns (client, server) SSLObjects."""
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client = client_ctx.wrap_bio(c_in, c_out, server_side=False, server_hostname=server_hostname)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(20):
        for name, side in (("client", client), ("server", server)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            break
    assert all(done.values()), done
    client.write(b"ping")
    s_in.write(c_out.read())
    assert server.read(4) == b"ping"
    server.write(b"pong")
    c_in.write(s_out.read())
    assert client.read(4) == b"pong"
    return client, server


# --- handshakes -------------------------------------------------------------------------------


def test_pem_keystore_and_truststore_handshake(pki: Pki) -> None:
    server_ctx = SslFactory.server_context(pki.server_cfg())
    client_ctx = SslFactory.client_context(pki.client_cfg())
    assert server_ctx.verify_mode == ssl.CERT_NONE
    assert client_ctx.verify_mode == ssl.CERT_REQUIRED and client_ctx.check_hostname
    client, server = handshake(server_ctx, client_ctx)
    assert client.version() == "TLSv1.3"
    assert peer_principal_dn(server) is None          # ssl.client.auth=none: no client cert
    assert peer_principal_dn(client) == "CN=broker1,OU=Brokers,O=Org"


def test_certificates_pass_openssl_strict_verification(pki: Pki) -> None:
    client_ctx = SslFactory.client_context(pki.client_cfg())
    client_ctx.verify_flags |= ssl.VERIFY_X509_STRICT   # Python 3.13's default
    handshake(SslFactory.server_context(pki.server_cfg()), client_ctx)


def test_mtls_required_rejects_a_client_without_certificate(pki: Pki) -> None:
    server_ctx = SslFactory.server_context(pki.server_cfg(ssl_client_auth="required"))
    assert server_ctx.verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(ssl.SSLError, match=r"(?i)peer did not return a certificate"):
        handshake(server_ctx, SslFactory.client_context(pki.client_cfg()))


def test_mtls_required_accepts_a_client_cert_and_gives_the_rfc2253_dn(pki: Pki) -> None:
    server_ctx = SslFactory.server_context(pki.server_cfg(ssl_client_auth="required"))
    client_ctx = SslFactory.client_context(pki.client_cfg(keystore=pki.alice_pem))
    _, server = handshake(server_ctx, client_ctx)
    assert peer_principal_dn(server) == "CN=alice,OU=Unit,O=Org"


def test_mtls_rejects_a_client_cert_from_another_ca(pki: Pki, tmp_path: Path) -> None:
    other = CertificateAuthority.generate("other CA").issue("mallory")
    path = tmp_path / "mallory.pem"
    write_pem(path, other.key_and_chain_pem, private=True)
    server_ctx = SslFactory.server_context(pki.server_cfg(ssl_client_auth="required"))
    with pytest.raises(ssl.SSLError):
        handshake(server_ctx, SslFactory.client_context(pki.client_cfg(keystore=str(path))))


def test_mtls_requested_makes_the_certificate_optional(pki: Pki) -> None:
    server_ctx = SslFactory.server_context(pki.server_cfg(ssl_client_auth="requested"))
    assert server_ctx.verify_mode == ssl.CERT_OPTIONAL
    _, server = handshake(server_ctx, SslFactory.client_context(pki.client_cfg()))
    assert peer_principal_dn(server) is None
    _, server = handshake(server_ctx,
                          SslFactory.client_context(pki.client_cfg(keystore=pki.alice_pem)))
    assert peer_principal_dn(server) == "CN=alice,OU=Unit,O=Org"


@pytest.mark.parametrize("mode", ["requested", "required"])
def test_client_auth_needs_a_truststore(pki: Pki, mode: str) -> None:
    cfg = pki.server_cfg(ssl_client_auth=mode)
    del cfg["ssl.truststore.location"]
    with pytest.raises(ConfigError, match=r"ssl\.client\.auth.*truststore"):
        SslFactory.server_context(cfg)


def test_bad_client_auth_value(pki: Pki) -> None:
    with pytest.raises(ConfigError, match=r"Invalid value always for configuration ssl\.client"):
        SslFactory.server_context(pki.server_cfg(ssl_client_auth="always"))


def test_server_needs_a_keystore() -> None:
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location"):
        SslFactory.server_context({})


# --- hostname verification ---------------------------------------------------------------------


def test_hostname_verification_is_on_by_default(pki: Pki) -> None:
    server_ctx = SslFactory.server_context(pki.server_cfg())
    client_ctx = SslFactory.client_context(pki.client_cfg())
    with pytest.raises(ssl.SSLCertVerificationError, match=r"(?i)hostname mismatch"):
        handshake(server_ctx, client_ctx, server_hostname="broker2.example")
    handshake(server_ctx, client_ctx, server_hostname="localhost")
    handshake(server_ctx, client_ctx, server_hostname="127.0.0.1")   # IP SAN


def test_hostname_verification_passes_with_the_san(pki: Pki, tmp_path: Path) -> None:
    leaf = pki.ca.issue("broker2", hosts=["broker2.example"])
    path = tmp_path / "broker2.pem"
    write_pem(path, leaf.key_and_chain_pem, private=True)
    server_ctx = SslFactory.server_context(pki.server_cfg(ssl_keystore_location=str(path)))
    handshake(server_ctx, SslFactory.client_context(pki.client_cfg()),
              server_hostname="broker2.example")


def test_empty_endpoint_identification_disables_hostname_checks(pki: Pki) -> None:
    client_ctx = SslFactory.client_context(
        pki.client_cfg(ssl_endpoint_identification_algorithm=""))
    assert not client_ctx.check_hostname and client_ctx.verify_mode == ssl.CERT_REQUIRED
    handshake(SslFactory.server_context(pki.server_cfg()), client_ctx,
              server_hostname="broker2.example")


def test_bad_endpoint_identification_algorithm(pki: Pki) -> None:
    with pytest.raises(ConfigError, match=r"ssl\.endpoint\.identification\.algorithm"):
        SslFactory.client_context(pki.client_cfg(ssl_endpoint_identification_algorithm="ldaps"))


def test_trust_is_still_checked_without_hostname_verification(pki: Pki, tmp_path: Path) -> None:
    other_ca = tmp_path / "other-ca.pem"
    write_pem(other_ca, CertificateAuthority.generate("other").cert_pem)
    client_ctx = SslFactory.client_context(
        {"ssl.truststore.location": str(other_ca), "ssl.endpoint.identification.algorithm": ""})
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(SslFactory.server_context(pki.server_cfg()), client_ctx)


# --- keystore and truststore forms -------------------------------------------------------------


@pytest.mark.parametrize("explicit_type", [None, "PKCS12"])
def test_pkcs12_keystore_round_trip(pki: Pki, explicit_type: str | None) -> None:
    keystore = pki.write("broker.p12", pkcs12_bytes(pki.broker, pki.ca, "changeit"), True)
    alice = pki.write("alice.p12", pkcs12_bytes(pki.alice, pki.ca, "alice-pw"), True)
    server_ctx = SslFactory.server_context(pki.server_cfg(
        ssl_keystore_location=keystore, ssl_keystore_type=explicit_type,
        ssl_keystore_password="changeit", ssl_client_auth="required"))
    client_ctx = SslFactory.client_context(pki.client_cfg(
        keystore=alice, ssl_keystore_type=explicit_type, ssl_keystore_password="alice-pw"))
    _, server = handshake(server_ctx, client_ctx)
    assert peer_principal_dn(server) == "CN=alice,OU=Unit,O=Org"


def test_pkcs12_keystore_wrong_password(pki: Pki) -> None:
    keystore = pki.write("broker-pw.p12", pkcs12_bytes(pki.broker, pki.ca, "changeit"), True)
    with pytest.raises(ConfigError) as e:
        SslFactory.server_context(pki.server_cfg(ssl_keystore_location=keystore,
                                                 ssl_keystore_password="nope"))
    assert "ssl.keystore.location" in str(e.value) and keystore in str(e.value)
    assert "ssl.keystore.password" in str(e.value) and "nope" not in str(e.value)


def test_pkcs12_truststore(pki: Pki) -> None:
    trust = pki.write("trust.p12", pkcs12_truststore_bytes(pki.ca, "changeit"))
    client_ctx = SslFactory.client_context({"ssl.truststore.location": trust,
                                            "ssl.truststore.type": "PKCS12",
                                            "ssl.truststore.password": "changeit"})
    handshake(SslFactory.server_context(pki.server_cfg()), client_ctx)


@dataclass
class LoadSpy:
    tempdir: Path
    seen: list[tuple[int, bytes]]   # (file mode, contents) of each file load_cert_chain read


@pytest.fixture
def load_spy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LoadSpy:
    """Route tempfile into a directory of our own and record what load_cert_chain saw."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    seen: list[tuple[int, bytes]] = []
    original = ssl.SSLContext.load_cert_chain

    def spy(self: ssl.SSLContext, certfile: Any, *args: Any, **kwargs: Any) -> None:
        with open(certfile, "rb") as f:
            seen.append((stat.S_IMODE(os.stat(certfile).st_mode), f.read()))
        original(self, certfile, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_cert_chain", spy)
    return LoadSpy(tmp, seen)


def test_inline_pem_keystore_and_truststore(pki: Pki, load_spy: LoadSpy) -> None:
    server_ctx = SslFactory.server_context({
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": pki.broker.key_pem.decode(),
        "ssl.keystore.certificate.chain": pki.broker.chain_pem.decode(),
        "ssl.truststore.certificates": pki.ca.cert_pem.decode(),
        "ssl.client.auth": "required"})
    client_ctx = SslFactory.client_context(pki.client_cfg(keystore=pki.alice_pem))
    _, server = handshake(server_ctx, client_ctx)
    assert peer_principal_dn(server) == "CN=alice,OU=Unit,O=Org"
    # the key went through a 0600 file, encrypted, that is gone now
    assert load_spy.seen and all(mode == 0o600 for mode, _ in load_spy.seen)
    assert all(b"BEGIN ENCRYPTED PRIVATE KEY" in data and b"BEGIN PRIVATE KEY" not in data
               for _, data in load_spy.seen)
    assert list(load_spy.tempdir.iterdir()) == []


def test_inline_pem_from_a_properties_file_with_continuation_lines(pki: Pki) -> None:
    def continued(pem: bytes) -> str:
        return " \\\n    ".join(pem.decode().strip().splitlines())

    props = parse_properties(
        f"ssl.keystore.key={continued(pki.broker.key_pem)}\n"
        f"ssl.keystore.certificate.chain={continued(pki.broker.chain_pem)}\n"
        f"ssl.truststore.certificates={continued(pki.ca.cert_pem)}\n")
    assert "\n" not in props["ssl.keystore.key"]
    server_ctx = SslFactory.server_context(dict(props))
    handshake(server_ctx, SslFactory.client_context({
        "ssl.truststore.certificates": props["ssl.truststore.certificates"]}))


def test_inline_key_and_chain_must_come_together(pki: Pki) -> None:
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.certificate\.chain.*together"):
        SslFactory.server_context({"ssl.keystore.key": pki.broker.key_pem.decode()})
    with pytest.raises(ConfigError, match=r"cannot be combined with ssl\.keystore\.location"):
        SslFactory.server_context(pki.server_cfg(
            ssl_keystore_key=pki.broker.key_pem.decode(),
            ssl_keystore_certificate_chain=pki.broker.chain_pem.decode()))


def test_encrypted_key_with_ssl_key_password(pki: Pki) -> None:
    keystore = pki.write("broker-enc.pem",
                         pki.broker.encrypted_key_pem("key-secret") + pki.broker.chain_pem, True)
    server_ctx = SslFactory.server_context(pki.server_cfg(ssl_keystore_location=keystore,
                                                          ssl_key_password="key-secret"))
    handshake(server_ctx, SslFactory.client_context(pki.client_cfg()))


def test_encrypted_key_without_or_with_a_wrong_password(pki: Pki) -> None:
    keystore = pki.write("broker-enc2.pem",
                         pki.broker.encrypted_key_pem("key-secret") + pki.broker.chain_pem, True)
    with pytest.raises(ConfigError, match=r"encrypted; set ssl\.key\.password") as e:
        SslFactory.server_context(pki.server_cfg(ssl_keystore_location=keystore))
    assert keystore in str(e.value)
    with pytest.raises(ConfigError, match=r"ssl\.key\.password") as e:
        SslFactory.server_context(pki.server_cfg(ssl_keystore_location=keystore,
                                                 ssl_key_password="guess-1"))
    assert "wrong password" in str(e.value) and keystore in str(e.value)
    assert "guess-1" not in str(e.value)


def test_inline_encrypted_key(pki: Pki) -> None:
    server_ctx = SslFactory.server_context({
        "ssl.keystore.key": pki.broker.encrypted_key_pem("pw").decode(),
        "ssl.keystore.certificate.chain": pki.broker.chain_pem.decode(),
        "ssl.key.password": "pw"})
    handshake(server_ctx, SslFactory.client_context(pki.client_cfg()))


def test_keystore_password_is_rejected_for_pem(pki: Pki) -> None:
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.password.*PEM.*ssl\.key\.password"):
        SslFactory.server_context(pki.server_cfg(ssl_keystore_password="changeit"))


def test_truststore_password_is_rejected_for_pem(pki: Pki) -> None:
    with pytest.raises(ConfigError, match=r"ssl\.truststore\.password"):
        SslFactory.client_context(pki.client_cfg(ssl_truststore_password="changeit"))


def test_jks_is_rejected_with_the_keytool_conversion(pki: Pki) -> None:
    jks = pki.write("broker.jks", b"\xfe\xed\xfe\xed" + b"\x00" * 32)
    for cfg in (pki.server_cfg(ssl_keystore_location=jks, ssl_keystore_type="JKS"),
                pki.server_cfg(ssl_keystore_location=jks),                # by extension
                pki.server_cfg(ssl_keystore_location=jks, ssl_keystore_type="PEM")):  # by magic
        with pytest.raises(ConfigError, match=r"ssl\.keystore\.type") as e:
            SslFactory.server_context(cfg)
        assert "keytool -importkeystore" in str(e.value) and jks in str(e.value)
        assert "-deststoretype PKCS12" in str(e.value)
    with pytest.raises(ConfigError, match=r"ssl\.truststore\.type.*keytool"):
        SslFactory.client_context({"ssl.truststore.location": jks})


def test_unknown_store_type(pki: Pki) -> None:
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.type"):
        SslFactory.server_context(pki.server_cfg(ssl_keystore_type="BCFKS"))


def test_binary_file_as_pem_suggests_pkcs12(pki: Pki) -> None:
    p12 = pki.write("broker.bin", pkcs12_bytes(pki.broker, pki.ca, "changeit"), True)
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.type=PKCS12"):
        SslFactory.server_context(pki.server_cfg(ssl_keystore_location=p12))


@pytest.mark.parametrize("key", ["ssl.keystore.location", "ssl.truststore.location"])
def test_missing_file_names_the_key_and_the_file(pki: Pki, tmp_path: Path, key: str) -> None:
    missing = str(tmp_path / "nowhere.pem")
    with pytest.raises(ConfigError) as e:
        SslFactory.server_context({**pki.server_cfg(), key: missing})
    assert key in str(e.value) and missing in str(e.value)


def test_keystore_without_key_or_without_certificate(pki: Pki) -> None:
    only_chain = pki.write("chain-only.pem", pki.broker.chain_pem)
    with pytest.raises(ConfigError, match="no private key") as e:
        SslFactory.server_context(pki.server_cfg(ssl_keystore_location=only_chain))
    assert only_chain in str(e.value)
    only_key = pki.write("key-only.pem", pki.broker.key_pem, True)
    with pytest.raises(ConfigError, match="no certificate"):
        SslFactory.server_context(pki.server_cfg(ssl_keystore_location=only_key))


def test_key_must_match_the_first_certificate(pki: Pki) -> None:
    mixed = pki.write("mixed.pem", pki.alice.key_pem + pki.broker.chain_pem, True)
    with pytest.raises(ConfigError, match="does not match the first certificate"):
        SslFactory.server_context(pki.server_cfg(ssl_keystore_location=mixed))
    ca_first = pki.write("ca-first.pem", pki.broker.key_pem + pki.ca.cert_pem +
                         pki.broker.cert_pem, True)
    with pytest.raises(ConfigError, match="does not match the first certificate"):
        SslFactory.server_context(pki.server_cfg(ssl_keystore_location=ca_first))


def test_empty_truststore_file(pki: Pki) -> None:
    empty = pki.write("empty.pem", b"")
    with pytest.raises(ConfigError, match=r"ssl\.truststore\.location.*no certificate"):
        SslFactory.client_context({"ssl.truststore.location": empty})


# --- protocols and cipher suites ---------------------------------------------------------------


def test_tls13_only_server_rejects_a_tls12_max_client(pki: Pki) -> None:
    server_ctx = SslFactory.server_context(pki.server_cfg(ssl_enabled_protocols="TLSv1.3"))
    assert server_ctx.minimum_version == ssl.TLSVersion.TLSv1_3
    tls12_client = SslFactory.client_context(pki.client_cfg(ssl_enabled_protocols="TLSv1.2"))
    assert tls12_client.maximum_version == ssl.TLSVersion.TLSv1_2
    with pytest.raises(ssl.SSLError):
        handshake(server_ctx, tls12_client)
    client, _ = handshake(server_ctx, SslFactory.client_context(pki.client_cfg()))
    assert client.version() == "TLSv1.3"


def test_ssl_protocol_tls12_caps_a_client_but_not_a_server(pki: Pki) -> None:
    client_ctx = SslFactory.client_context(pki.client_cfg(ssl_protocol="TLSv1.2"))
    assert client_ctx.maximum_version == ssl.TLSVersion.TLSv1_2
    server_ctx = SslFactory.server_context(pki.server_cfg(ssl_protocol="TLSv1.2"))
    assert server_ctx.maximum_version == ssl.TLSVersion.TLSv1_3
    client, _ = handshake(server_ctx, client_ctx)
    assert client.version() == "TLSv1.2"
    with pytest.raises(ConfigError, match=r"ssl\.protocol"):
        SslFactory.client_context(pki.client_cfg(ssl_protocol="TLSv1.2",
                                                 ssl_enabled_protocols="TLSv1.3"))


@pytest.mark.parametrize("value", ["TLSv1.1", "TLSv1", "SSLv3", "TLSv1.2,TLSv1.1", "TLSv9"])
def test_old_or_unknown_protocols_are_config_errors(pki: Pki, value: str) -> None:
    with pytest.raises(ConfigError, match=r"ssl\.enabled\.protocols"):
        SslFactory.server_context(pki.server_cfg(ssl_enabled_protocols=value))


def test_bad_ssl_protocol(pki: Pki) -> None:
    with pytest.raises(ConfigError, match=r"ssl\.protocol"):
        SslFactory.server_context(pki.server_cfg(ssl_protocol="SSLv3"))


def test_java_cipher_suite_names(pki: Pki) -> None:
    server_ctx = SslFactory.server_context(pki.server_cfg(
        ssl_cipher_suites="TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, "
                          "TLS_EMPTY_RENEGOTIATION_INFO_SCSV"))
    assert server_ctx.maximum_version == ssl.TLSVersion.TLSv1_2   # no TLS 1.3 suite listed
    client, _ = handshake(server_ctx, SslFactory.client_context(pki.client_cfg()))
    assert client.version() == "TLSv1.2"
    cipher = client.cipher()
    assert cipher is not None and cipher[0] == "ECDHE-ECDSA-AES128-GCM-SHA256"


def test_openssl_cipher_names_are_accepted(pki: Pki) -> None:
    server_ctx = SslFactory.server_context(pki.server_cfg(
        ssl_cipher_suites="ECDHE-ECDSA-AES256-GCM-SHA384"))
    client, _ = handshake(server_ctx, SslFactory.client_context(pki.client_cfg()))
    cipher = client.cipher()
    assert cipher is not None and cipher[0] == "ECDHE-ECDSA-AES256-GCM-SHA384"


def test_only_tls13_suites_disable_tls12(pki: Pki) -> None:
    server_ctx = SslFactory.server_context(pki.server_cfg(
        ssl_cipher_suites="TLS_AES_256_GCM_SHA384,TLS_AES_128_GCM_SHA256,"
                          "TLS_CHACHA20_POLY1305_SHA256"))
    assert server_ctx.minimum_version == ssl.TLSVersion.TLSv1_3
    with pytest.raises(ConfigError, match=r"ssl\.cipher\.suites.*ssl\.enabled\.protocols"):
        SslFactory.server_context(pki.server_cfg(ssl_cipher_suites="TLS_AES_256_GCM_SHA384",
                                                 ssl_enabled_protocols="TLSv1.2"))


def test_a_tls13_subset_is_reported_as_unenforceable(
        pki: Pki, caplog: pytest.LogCaptureFixture) -> None:
    SslFactory.server_context(pki.server_cfg(ssl_cipher_suites="TLS_AES_256_GCM_SHA384"))
    assert "cannot restrict" in caplog.text


@pytest.mark.parametrize("value", ["TLS_RSA_WITH_NULL_SHA256x", "NOT-A-CIPHER"])
def test_unknown_cipher_suites(pki: Pki, value: str) -> None:
    with pytest.raises(ConfigError, match=r"ssl\.cipher\.suites"):
        SslFactory.server_context(pki.server_cfg(ssl_cipher_suites=value))


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_java_to_openssl_table_agrees_with_openssl_stdname() -> None:
    out = subprocess.run(["openssl", "ciphers", "-stdname", "ALL:COMPLEMENTOFALL"],
                         capture_output=True, text=True, check=True).stdout
    openssl_names = {}
    for line in out.splitlines():
        std, _, ossl = line.split()[:3]
        openssl_names[std] = ossl
    checked = [java for java in JAVA_TO_OPENSSL_CIPHERS if java in openssl_names]
    for java in checked:
        assert JAVA_TO_OPENSSL_CIPHERS[java] == openssl_names[java], java
    # the JDK's default TLS 1.2 suites must all be covered
    assert {"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384",
            "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384", "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
            "TLS_RSA_WITH_AES_128_GCM_SHA256"} <= set(checked)


# --- librdkafka-style client contexts ---------------------------------------------------------


def test_client_ssl_context_with_librdkafka_keys(pki: Pki) -> None:
    cert = pki.write("alice.crt", pki.alice.chain_pem)
    key = pki.write("alice.key", pki.alice.encrypted_key_pem("pw"), True)
    ctx = client_ssl_context(ca_location=pki.ca_file, certificate_location=cert,
                             key_location=key, key_password="pw")
    assert ctx.check_hostname and ctx.verify_mode == ssl.CERT_REQUIRED
    server_ctx = SslFactory.server_context(pki.server_cfg(ssl_client_auth="required"))
    _, server = handshake(server_ctx, ctx)
    assert peer_principal_dn(server) == "CN=alice,OU=Unit,O=Org"
    with pytest.raises(ConfigError, match=r"ssl\.key\.password") as e:
        client_ssl_context(ca_location=pki.ca_file, certificate_location=cert,
                           key_location=key, key_password="bad-guess")
    assert "bad-guess" not in str(e.value)


def test_client_ssl_context_ca_pem_and_combined_file_and_no_hostname_check(pki: Pki) -> None:
    ctx = client_ssl_context(ca_location=None, certificate_location=pki.alice_pem,
                             key_location=None, key_password=None,
                             endpoint_identification="none", ca_pem=pki.ca.cert_pem.decode())
    assert not ctx.check_hostname
    handshake(SslFactory.server_context(pki.server_cfg(ssl_client_auth="required")), ctx,
              server_hostname="elsewhere.example")


def test_client_ssl_context_errors(pki: Pki, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"ssl\.certificate\.location"):
        client_ssl_context(ca_location=pki.ca_file, certificate_location=None,
                           key_location=pki.alice_pem, key_password=None)
    missing = str(tmp_path / "ca-missing.pem")
    with pytest.raises(ConfigError, match=r"ssl\.ca\.location") as e:
        client_ssl_context(ca_location=missing, certificate_location=None, key_location=None,
                           key_password=None)
    assert missing in str(e.value)
    with pytest.raises(ConfigError, match=r"ssl\.endpoint\.identification\.algorithm"):
        client_ssl_context(ca_location=pki.ca_file, certificate_location=None,
                           key_location=None, key_password=None, endpoint_identification="x")


# --- config plumbing -----------------------------------------------------------------------------


def test_resolve_ssl_config_reads_every_key_through_the_lookup() -> None:
    props = {"listener.name.ssl.ssl.keystore.location": "/k.pem", "ssl.client.auth": "required"}

    def get(key: str) -> str | None:
        return props.get(f"listener.name.ssl.{key}", props.get(key))

    resolved = resolve_ssl_config(get)
    assert tuple(resolved) == SSL_CONFIG_KEYS
    assert resolved["ssl.keystore.location"] == "/k.pem"
    assert resolved["ssl.client.auth"] == "required"
    assert resolved["ssl.truststore.location"] is None
    assert all(key.startswith("ssl.") for key in SSL_CONFIG_KEYS)
