"""The dev certificate authority: what brokers and clients need from its certificates."""

from __future__ import annotations

import datetime
import ipaddress
import os
import stat
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID

from millrace.security.certs import (
    CertificateAuthority,
    IssuedCertificate,
    pkcs12_bytes,
    pkcs12_truststore_bytes,
    write_pem,
)


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return CertificateAuthority.generate("test CA")


@pytest.fixture(scope="module")
def broker(ca: CertificateAuthority) -> IssuedCertificate:
    return ca.issue("broker1", hosts=["localhost", "broker1.example", "127.0.0.1", "::1"],
                    organizational_unit="Unit", organization="Org")


def _spki(cert_or_key: Any) -> bytes:
    public = cert_or_key.public_key()
    return bytes(public.public_bytes(serialization.Encoding.DER,
                                     serialization.PublicFormat.SubjectPublicKeyInfo))


def test_ca_is_a_self_signed_ca_certificate(ca: CertificateAuthority) -> None:
    cert = x509.load_pem_x509_certificate(ca.cert_pem)
    cert.verify_directly_issued_by(cert)
    assert cert.subject.rfc4514_string() == "CN=test CA"
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert cert.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    assert ca.key_pem.startswith(b"-----BEGIN PRIVATE KEY-----")
    key = serialization.load_pem_private_key(ca.key_pem, password=None)
    assert _spki(key) == _spki(cert)


def test_leaf_has_sans_both_ekus_and_java_ordered_subject(
        ca: CertificateAuthority, broker: IssuedCertificate) -> None:
    cert = x509.load_pem_x509_certificate(broker.cert_pem)
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.cert_pem))
    assert cert.subject.rfc4514_string() == "CN=broker1,OU=Unit,O=Org"
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost", "broker1.example"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1"),
                                                       ipaddress.ip_address("::1")]
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert datetime.timedelta(days=825) <= lifetime <= datetime.timedelta(days=826)


def test_leaf_key_is_unencrypted_pkcs8_matching_the_cert_and_chain_is_leaf_then_ca(
        ca: CertificateAuthority, broker: IssuedCertificate) -> None:
    assert broker.key_pem.startswith(b"-----BEGIN PRIVATE KEY-----")
    key = serialization.load_pem_private_key(broker.key_pem, password=None)
    assert _spki(key) == _spki(x509.load_pem_x509_certificate(broker.cert_pem))
    chain = x509.load_pem_x509_certificates(broker.chain_pem)
    assert [c.public_bytes(serialization.Encoding.PEM) for c in chain] == [broker.cert_pem,
                                                                           ca.cert_pem]
    assert broker.key_and_chain_pem == broker.key_pem + broker.chain_pem


def test_client_cert_without_hosts_has_no_san(ca: CertificateAuthority) -> None:
    cert = x509.load_pem_x509_certificate(ca.issue("alice").cert_pem)
    assert cert.subject.rfc4514_string() == "CN=alice"
    with pytest.raises(x509.ExtensionNotFound):
        cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)


def test_issue_rejects_non_positive_validity(ca: CertificateAuthority) -> None:
    with pytest.raises(ValueError, match="valid_days"):
        ca.issue("x", valid_days=0)


def test_encrypted_key_needs_its_password(broker: IssuedCertificate) -> None:
    pem = broker.encrypted_key_pem("s3cret")
    assert pem.startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
    with pytest.raises(TypeError):
        serialization.load_pem_private_key(pem, password=None)
    with pytest.raises(ValueError):
        serialization.load_pem_private_key(pem, password=b"wrong")
    key = serialization.load_pem_private_key(pem, password=b"s3cret")
    assert _spki(key) == _spki(x509.load_pem_x509_certificate(broker.cert_pem))


def test_write_pem_private_files_are_0600_even_when_they_existed(tmp_path: os.PathLike[str],
                                                                 ca: CertificateAuthority) -> None:
    key_path = os.path.join(tmp_path, "ca.key")
    with open(key_path, "wb") as f:
        f.write(b"old")
    os.chmod(key_path, 0o644)
    write_pem(key_path, ca.key_pem, private=True)
    assert stat.S_IMODE(os.stat(key_path).st_mode) == 0o600
    with open(key_path, "rb") as f:
        assert f.read() == ca.key_pem
    cert_path = os.path.join(tmp_path, "ca.pem")
    write_pem(cert_path, ca.cert_pem)
    with open(cert_path, "rb") as f:
        assert f.read() == ca.cert_pem


def test_pkcs12_keystore_round_trip(ca: CertificateAuthority, broker: IssuedCertificate) -> None:
    data = pkcs12_bytes(broker, ca, "changeit")
    with pytest.raises(ValueError):
        pkcs12.load_key_and_certificates(data, b"wrong")
    key, cert, extra = pkcs12.load_key_and_certificates(data, b"changeit")
    assert key is not None and cert is not None
    assert cert.public_bytes(serialization.Encoding.PEM) == broker.cert_pem
    assert _spki(key) == _spki(cert)
    assert [c.public_bytes(serialization.Encoding.PEM) for c in extra] == [ca.cert_pem]


def test_pkcs12_without_password(ca: CertificateAuthority, broker: IssuedCertificate) -> None:
    key, cert, _ = pkcs12.load_key_and_certificates(pkcs12_bytes(broker, ca, ""), None)
    assert key is not None and cert is not None


def test_pkcs12_truststore_holds_the_ca(ca: CertificateAuthority) -> None:
    key, cert, extra = pkcs12.load_key_and_certificates(
        pkcs12_truststore_bytes(ca, "changeit"), b"changeit")
    assert key is None and cert is None
    assert [c.public_bytes(serialization.Encoding.PEM) for c in extra] == [ca.cert_pem]


def test_ca_reloaded_from_pem_issues_verifiable_certs(ca: CertificateAuthority) -> None:
    again = CertificateAuthority.from_pem(ca.cert_pem, ca.key_pem)
    leaf = x509.load_pem_x509_certificate(again.issue("bob").cert_pem)
    leaf.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.cert_pem))
