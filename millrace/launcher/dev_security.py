"""``DevSecurity``: everything a secured development cluster needs, made on this machine.

``millrace cluster up --security sasl_ssl`` and ``millrace demo --security sasl_ssl`` (and
the secured cluster tests) run brokers whose only listener is ``SASL_SSL`` -- clients and
inter-broker traffic alike -- with SCRAM-SHA-512.  This module makes the pieces, under
``<dir>/security/``:

* ``ca.pem``: a fresh certificate authority (``millrace.security.certs``; its key stays in
  ``ca.key``, 0600, so later certificates can be issued by the same CA);
* ``broker.pem``: one broker key + certificate chain (0600), with SANs for ``localhost``
  and ``127.0.0.1`` (clients check the advertised host against it), serverAuth and
  clientAuth (brokers are clients of each other);
* ``users.json`` (0600): two SCRAM users with random passwords -- ``admin``, the brokers'
  own inter-broker identity, and ``client``, for applications;
* ``admin.password`` (0600): admin's password alone, for Prometheus's
  ``basic_auth.password_file`` (a secured cluster's HTTP listeners want basic credentials:
  ``http.authentication.method=BASIC``);
* ``client.properties``: what a client needs (security.protocol, sasl.*, ssl.ca.location),
  readable by ``--command-config`` of every millrace command and by Kafka's tools;
  ``admin.properties`` the same as admin, written when the authorizer is on (the only
  user who can grant ACLs then).

``authorizer_overrides`` turns on Kafka's ACL authorizer with ``admin`` as the only super
user (the brokers authenticate to each other as admin, so replication and controller
requests pass; every other user, ``client`` included, may do only what an ACL grants).

Running it again on the same directory reuses every file, so a restarted cluster keeps
its CA and passwords.  The SCRAM credentials go straight into ZooKeeper
(``/config/users/<user>``, Kafka's layout) before any broker starts -- Kafka's own way
(``kafka-configs --zookeeper``) of bootstrapping the brokers' SCRAM user.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from millrace.broker.security.credential_cache import ZkUserConfigStore
from millrace.broker.security.scram_admin import (
    ScramCredentialUpsertion,
    alter_user_scram_credentials,
)
from millrace.broker.zk import KafkaZkClient
from millrace.security.certs import CertificateAuthority, write_pem
from millrace.security.sasl.scram import ScramFormatter, ScramMechanism

PROFILES = ("none", "sasl_ssl")
MECHANISM = ScramMechanism.SCRAM_SHA_512
ITERATIONS = 8192
ADMIN_USER = "admin"
CLIENT_USER = "client"
AUTHORIZER_CLASS = "kafka.security.authorizer.AclAuthorizer"  # Kafka's ZooKeeper-mode name
SUPER_USER = f"User:{ADMIN_USER}"
JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="{user}" password="{password}";')


@dataclass
class DevSecurity:
    directory: Path
    passwords: dict[str, str] = field(repr=False)

    @property
    def ca_path(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def keystore_path(self) -> Path:
        return self.directory / "broker.pem"

    @property
    def client_properties_path(self) -> Path:
        return self.properties_path(CLIENT_USER)

    def properties_path(self, user: str) -> Path:
        """``client.properties`` for the client user, ``<user>.properties`` for another."""
        name = "client" if user == CLIENT_USER else user
        return self.directory / f"{name}.properties"

    @classmethod
    def create(cls, cluster_dir: Path | str,
               hosts: Sequence[str] = ("localhost", "127.0.0.1")) -> DevSecurity:
        """Make (or reuse) the CA, the broker certificate and the users' passwords."""
        directory = Path(cluster_dir) / "security"
        directory.mkdir(parents=True, exist_ok=True)
        ca_key = directory / "ca.key"
        if (directory / "ca.pem").exists() and ca_key.exists():
            ca = CertificateAuthority.from_pem((directory / "ca.pem").read_bytes(),
                                               ca_key.read_bytes())
        else:
            ca = CertificateAuthority.generate("millrace dev CA")
            write_pem(directory / "ca.pem", ca.cert_pem)
            write_pem(ca_key, ca.key_pem, private=True)
        if not (directory / "broker.pem").exists():
            broker = ca.issue("millrace-broker", hosts=list(hosts),
                              organizational_unit="brokers", organization="millrace")
            write_pem(directory / "broker.pem", broker.key_and_chain_pem, private=True)
        users = directory / "users.json"
        if users.exists():
            passwords = dict(json.loads(users.read_text()))
        else:
            passwords = {ADMIN_USER: secrets.token_urlsafe(18),
                         CLIENT_USER: secrets.token_urlsafe(18)}
            fd = os.open(users, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(passwords, f)
        return cls(directory, passwords)

    def broker_overrides(self) -> dict[str, str]:
        """Broker settings for a cluster whose only listener is SASL_SSL (the caller
        sets ``listeners=SASL_SSL://host:port`` per broker)."""
        return {
            "security.inter.broker.protocol": "SASL_SSL",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256",
            "sasl.mechanism.inter.broker.protocol": MECHANISM.mechanism_name,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
                JAAS.format(user=ADMIN_USER, password=self.passwords[ADMIN_USER]),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.keystore_path),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_path),
            # a secured cluster's /metrics (topic and group names) is not open either:
            # basic credentials of its SCRAM users; the probes stay open
            "http.authentication.method": "BASIC",
        }

    @staticmethod
    def authorizer_overrides() -> dict[str, str]:
        """The ACL authorizer on, ``admin`` (the brokers' own identity) its super user."""
        return {"authorizer.class.name": AUTHORIZER_CLASS, "super.users": SUPER_USER}

    def client_properties(self, bootstrap: str | None = None,
                          user: str = CLIENT_USER) -> dict[str, str]:
        props = {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": MECHANISM.mechanism_name,
            "sasl.username": user,
            "sasl.password": self.passwords[user],
            "ssl.ca.location": str(self.ca_path),
        }
        if bootstrap:
            props = {"bootstrap.servers": bootstrap, **props}
        return props

    def write_client_properties(self, bootstrap: str, user: str = CLIENT_USER) -> Path:
        """``client.properties`` (``admin.properties`` for admin); 0600: it holds a
        password."""
        lines = [f"{k}={v}" for k, v in self.client_properties(bootstrap, user).items()]
        path = self.properties_path(user)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(f"# millrace development cluster: SASL_SSL with SCRAM-SHA-512 as {user}\n")
            f.write("\n".join(lines) + "\n")
        return path

    def write_password_file(self, user: str = ADMIN_USER) -> Path:
        """``<user>.password`` (0600): the user's password alone, for a scraper's
        ``basic_auth.password_file`` (Prometheus reads it at every scrape)."""
        path = self.directory / f"{user}.password"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self.passwords[user])
        return path

    def create_users(self, zookeeper_connect: str) -> None:
        """The SCRAM credentials of ``admin`` and ``client``, written into ZooKeeper
        before the brokers start (the brokers authenticate to each other as admin)."""
        zk = KafkaZkClient(zookeeper_connect).start()
        try:
            zk.create_top_level_paths()
            formatter = ScramFormatter(MECHANISM)
            upserts = []
            for user, password in sorted(self.passwords.items()):
                salt = secrets.token_bytes(24)
                upserts.append(ScramCredentialUpsertion(
                    user, MECHANISM.type_id, ITERATIONS, salt,
                    formatter.salted_password(password.encode(), salt, ITERATIONS)))
            outcome = alter_user_scram_credentials(ZkUserConfigStore(zk), [], upserts)
            failed = [r for r in outcome.results if r.error]
            if failed:
                raise RuntimeError(f"creating the SCRAM users failed: {failed}")
        finally:
            zk.close()
