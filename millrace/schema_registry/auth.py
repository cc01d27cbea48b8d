"""HTTP basic authentication for the registry, against the brokers' own SASL users.

``authentication.method=BASIC`` accepts a ``user:password`` pair when it is one of

- the PLAIN users of ``authentication.jaas.config`` (a JAAS entry with ``user_<name>``,
  the value a broker's PLAIN listener has), and/or
- the SCRAM users the brokers keep in ZooKeeper (``authentication.scram.zookeeper.connect``):
  the credentials (salted, never a password) are read at start and again every
  ``REFRESH_S``, so a user added or removed with ``millrace configs`` is honoured within
  that time.

The check itself is the broker's ``HttpBasicAuthenticator``: constant-time comparisons, a
made-up credential for unknown users, PBKDF2 off the event loop, passwords never logged.

Thread ownership: the refresher is its own daemon thread; lookups read a dict it replaces
whole.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from millrace.broker.security.basic_auth import SCRAM_MECHANISMS, HttpBasicAuthenticator
from millrace.common.errors import ConfigError
from millrace.security.jaas import parse_jaas_config, plain_users
from millrace.security.sasl.scram import ScramCredential

log = logging.getLogger(__name__)

REFRESH_S = 10.0


class ZkScramUsers(threading.Thread):
    def __init__(self, connect: str) -> None:
        super().__init__(name="schema-registry-scram-users", daemon=True)
        from millrace.broker.security.credential_cache import ZkUserConfigStore
        from millrace.broker.zk.kafka_zk_client import KafkaZkClient

        self._zk = KafkaZkClient(connect).start()
        self._store = ZkUserConfigStore(self._zk)
        self.credentials: dict[tuple[str, str], ScramCredential] = {}
        self._stop_event = threading.Event()
        self.refresh()

    def refresh(self) -> None:
        found: dict[tuple[str, str], ScramCredential] = {}
        for user in self._store.users_with_configs():
            configs = self._store.user_configs(user)
            for mechanism in SCRAM_MECHANISMS:
                text = configs.get(mechanism)
                if text is None:
                    continue
                try:
                    found[(mechanism, user)] = ScramCredential.from_kafka_string(text)
                except ValueError as e:
                    log.warning("ignoring the %s credential of user %r: %s", mechanism, user, e)
        self.credentials = found

    def lookup(self, mechanism: str, user: str) -> ScramCredential | None:
        return self.credentials.get((mechanism, user))

    def run(self) -> None:
        while not self._stop_event.wait(REFRESH_S):
            try:
                self.refresh()
            except Exception as e:  # ZooKeeper away for a while: keep the last known users
                log.warning("reading the SCRAM users from ZooKeeper: %s", e)

    def stop(self) -> None:
        self._stop_event.set()
        self._zk.close()


def registry_authenticator(values: Mapping[str, str]) -> HttpBasicAuthenticator:
    plain: dict[str, str] = {}
    jaas = values.get("authentication.jaas.config")
    if jaas:
        plain = plain_users(parse_jaas_config(jaas, "authentication.jaas.config"))
    lookup = None
    connect = values.get("authentication.scram.zookeeper.connect")
    if connect:
        users = ZkScramUsers(connect)
        users.start()
        lookup = users.lookup
    if not plain and lookup is None:
        raise ConfigError("authentication.method=BASIC: no users (authentication.jaas.config "
                          "has no user_<name> entries and no ZooKeeper is given)")
    return HttpBasicAuthenticator(plain, lookup)
