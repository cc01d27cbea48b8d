"""A small X.509 certificate authority for tests, demos and `millrace` dev setups.

Kafka's own test suite mints its certificates on the fly (Java's ``TestSslUtils``); this is the
Python counterpart, built on ``cryptography``'s x509 builder.  Nothing here is meant to run a
production PKI: the CA key lives in memory (or in a PEM file the caller writes), serial numbers
are random, and there is no revocation.

Keys are ECDSA P-256: fast to generate (a test suite mints dozens) and understood by every client
we test against (OpenSSL behind CPython and librdkafka, the JDK).

Certificates follow the "Common Pitfalls" of Kafka's security docs:

* a leaf carries both the ``serverAuth`` and ``clientAuth`` extended key usages, because a broker
  is a TLS server to clients and a TLS client to the other brokers (and one certificate then also
  serves as a client's mTLS identity);
* host names go into the subjectAltName (DNS names and IP addresses), which is what hostname
  verification (``ssl.endpoint.identification.algorithm=https``) checks — never the CN;
* ``IssuedCertificate.chain_pem`` is leaf first, then the CA, the order Kafka's PEM keystores and
  ``ssl.keystore.certificate.chain`` expect.

The subject is built so that its RFC 2253 string (Java's ``X500Principal.getName()``, which is what
``ssl.principal.mapping.rules`` sees) reads ``CN=<cn>,OU=<ou>,O=<o>``: RFC 2253 lists the most
specific RDN first, i.e. the reverse of the ASN.1 order in which the ``Name`` is encoded.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_VALID_DAYS = 3650
# Apple's (and the CA/Browser forum's former) ceiling for a leaf's lifetime; the spec's default.
LEAF_VALID_DAYS = 825
# Backdate notBefore a little so that a peer whose clock is slightly behind still accepts the cert.
_CLOCK_SKEW = datetime.timedelta(hours=1)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pkcs8(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _subject(common_name: str, organizational_unit: str | None,
             organization: str | None) -> x509.Name:
    # ASN.1 order is least specific first; rfc4514_string() (Java's RFC 2253 form) reverses it.
    rdns: list[x509.NameAttribute] = []
    if organization is not None:
        rdns.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    if organizational_unit is not None:
        rdns.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, organizational_unit))
    rdns.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(rdns)


def _san_entry(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


@dataclass(frozen=True)
class IssuedCertificate:
    """A leaf certificate and its key, all PEM.

    ``key_pem`` is PKCS#8 and unencrypted (the only key form Kafka's PEM stores accept, besides
    encrypted PKCS#8: see ``encrypted_key_pem``); ``chain_pem`` is the leaf followed by the CA.
    """

    cert_pem: bytes
    key_pem: bytes
    chain_pem: bytes

    @property
    def key_and_chain_pem(self) -> bytes:
        """Key + chain in one file: a Kafka ``ssl.keystore.type=PEM`` keystore."""
        return self.key_pem + self.chain_pem

    def encrypted_key_pem(self, password: str) -> bytes:
        """The key as encrypted PKCS#8 (``BEGIN ENCRYPTED PRIVATE KEY``), for ssl.key.password."""
        key = serialization.load_pem_private_key(self.key_pem, password=None)
        return key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(password.encode("utf-8")))


class CertificateAuthority:
    """A self-signed root that issues leaf certificates (see the module docstring)."""

    def __init__(self, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
        self._cert = cert
        self._key = key
        self.cert_pem: bytes = _cert_pem(cert)
        self.key_pem: bytes = _pkcs8(key)

    @classmethod
    def generate(cls, common_name: str = "millrace dev CA") -> CertificateAuthority:
        key = _new_key()
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        now = datetime.datetime.now(datetime.UTC)
        ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _CLOCK_SKEW)
            .not_valid_after(now + datetime.timedelta(days=CA_VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(ski, critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(cert, key)

    @classmethod
    def from_pem(cls, cert_pem: bytes, key_pem: bytes,
                 password: bytes | None = None) -> CertificateAuthority:
        """Reload a CA written earlier with ``write_pem`` (EC keys only, as ``generate`` makes)."""
        key = serialization.load_pem_private_key(key_pem, password=password)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError("only EC CA keys are supported")
        return cls(x509.load_pem_x509_certificate(cert_pem), key)

    @property
    def certificate(self) -> x509.Certificate:
        return self._cert

    def issue(self, common_name: str, *, hosts: Sequence[str] = (),
              organizational_unit: str | None = None, organization: str | None = None,
              valid_days: int = LEAF_VALID_DAYS) -> IssuedCertificate:
        """A leaf for a broker or a client.

        ``hosts`` become subjectAltName entries (IP literals as IP addresses, anything else as a DNS
        name); without hosts the certificate has no SAN and can only serve as a client identity.
        """
        if valid_days <= 0:
            raise ValueError(f"valid_days must be positive, not {valid_days}")
        key = _new_key()
        now = datetime.datetime.now(datetime.UTC)
        ca_ski = self._cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
        builder = (
            x509.CertificateBuilder()
            .subject_name(_subject(common_name, organizational_unit, organization))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _CLOCK_SKEW)
            .not_valid_after(now + datetime.timedelta(days=valid_days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=True, key_cert_sign=False,
                crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
                critical=False)
        )
        if hosts:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([_san_entry(h) for h in hosts]), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        cert_pem = _cert_pem(cert)
        return IssuedCertificate(cert_pem=cert_pem, key_pem=_pkcs8(key),
                                 chain_pem=cert_pem + self.cert_pem)


def write_pem(path: str | os.PathLike[str], data: bytes, private: bool = False) -> None:
    """Write PEM bytes; a private key file is created (or narrowed to) mode 0600."""
    if not private:
        with open(path, "wb") as f:
            f.write(data)
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an existing file keeps its mode under O_CREAT
        os.write(fd, data)
    finally:
        os.close(fd)


def pkcs12_bytes(issued: IssuedCertificate, ca: CertificateAuthority, password: str,
                 alias: str = "millrace") -> bytes:
    """A PKCS#12 keystore (key, leaf, CA) for ``ssl.keystore.type=PKCS12``; JDKs read it too."""
    key = serialization.load_pem_private_key(issued.key_pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise ValueError("only EC and RSA keys are supported")
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode("utf-8")) if password
        else serialization.NoEncryption())
    return pkcs12.serialize_key_and_certificates(
        alias.encode("utf-8"), key, x509.load_pem_x509_certificate(issued.cert_pem),
        [ca.certificate], encryption)


def pkcs12_truststore_bytes(ca: CertificateAuthority, password: str,
                            alias: str = "millrace-ca") -> bytes:
    """A PKCS#12 truststore holding the CA as a trusted entry (``ssl.truststore.type=PKCS12``).

    Java only treats PKCS#12 certificates carrying Oracle's "trusted key usage" attribute as
    trust anchors; ``serialize_java_truststore`` (cryptography >= 45) adds it.  On older
    cryptography the CA goes in as a plain certificate bag, which millrace reads but a JDK ignores.
    """
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode("utf-8")) if password
        else serialization.NoEncryption())
    java_truststore = getattr(pkcs12, "serialize_java_truststore", None)
    if java_truststore is not None:
        entry = pkcs12.PKCS12Certificate(ca.certificate, alias.encode("utf-8"))
        data: bytes = java_truststore([entry], encryption)
        return data
    return pkcs12.serialize_key_and_certificates(None, None, None, [ca.certificate], encryption)
