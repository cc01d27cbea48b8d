"""``CredentialCache``: the SCRAM credentials this broker checks, and where they live
(Kafka's ``CredentialCache`` + ``CredentialProvider`` and the credential half of
``UserConfigHandler``).

A user's SCRAM credentials are entries of the user's *entity config*, one per mechanism:
``"SCRAM-SHA-256" -> "salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>"``
(``ScramCredential.to_kafka_string``).  Other keys of the same entity (the quotas
``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``) are kept as they
are and never cached here.

Where the entity configs live is a ``UserConfigStore``:

* single node: ``LocalUserConfigStore`` over the ``LocalMetadataStore`` (its atomic JSON
  in the first log dir, next to the topic configs);
* ZooKeeper cluster: ``ZkUserConfigStore``: ``/config/users/<sanitized user>`` holding
  ``{"version":1,"config":{...}}`` (Kafka's layout, so Kafka's tools read it and
  ``kafka-configs --zookeeper`` writes it), and after every write a
  ``/config/changes/config_change_<n>`` notification ``{"version":2,"entity_path":
  "users/<sanitized user>"}``.  Every broker watches the notifications and re-reads the
  user (``reload_user``, wired in ``zk_broker.start_config_change_listener``).

The cache answers the SASL/SCRAM server's lookups (``scram_credential``) from memory and
holds only the mechanisms this broker enables (``sasl.enabled.mechanisms`` of any
listener).  The admin APIs (DescribeUserScramCredentials, AlterUserScramCredentials)
read and write the *store*, as Kafka's ZooKeeper mode reads ZooKeeper, so they see every
mechanism; the broker that writes refreshes its own cache at once.  A new credential
applies to connections that authenticate after it (Kafka's rule).

Thread ownership: the cache is read and updated on the event-loop thread.  A blocking
store (ZooKeeper) is called through ``run_store``, on the loop's default executor.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar

from millrace.security.sanitizer import desanitize, sanitize
from millrace.security.sasl.scram import ScramCredential, ScramMechanism

if TYPE_CHECKING:
    from millrace.broker.config import KafkaConfig
    from millrace.broker.metadata.local_store import LocalMetadataStore
    from millrace.broker.zk import KafkaZkClient

log = logging.getLogger(__name__)

T = TypeVar("T")

USER_CONFIG_TYPE = "users"  # Kafka's ConfigType.USER: /config/users, entity path users/<u>
SCRAM_MECHANISM_NAMES = tuple(m.mechanism_name for m in ScramMechanism)


class UserConfigStore(Protocol):
    """The persisted user entity configs (SCRAM credentials and quotas), by user name
    (unsanitized).  ``blocking``: the calls do network I/O and must run off the loop."""

    blocking: bool

    def user_configs(self, user: str) -> dict[str, str]:
        """The user's configs; {} when the user has none."""
        ...

    def users_with_configs(self) -> list[str]:
        """Every user that has an entity config (with or without SCRAM keys)."""
        ...

    def set_user_configs(self, user: str, configs: Mapping[str, str]) -> None:
        """Replace the user's configs and tell every broker (durable when it returns)."""
        ...


class LocalUserConfigStore:
    """The single node's user configs: the ``LocalMetadataStore``'s JSON file."""

    blocking = False

    def __init__(self, metadata: LocalMetadataStore) -> None:
        self._metadata = metadata

    def user_configs(self, user: str) -> dict[str, str]:
        return self._metadata.user_configs(user)

    def users_with_configs(self) -> list[str]:
        return self._metadata.users_with_configs()

    def set_user_configs(self, user: str, configs: Mapping[str, str]) -> None:
        self._metadata.set_user_configs(user, configs)


class ZkUserConfigStore:
    """``/config/users/<sanitized user>`` plus a change notification per write (Kafka's
    ``AdminZkClient.changeUserOrUserClientIdConfig``).  Used by the brokers of a cluster
    and by ``millrace configs --zookeeper``."""

    blocking = True

    def __init__(self, zk: KafkaZkClient) -> None:
        self._zk = zk

    def user_configs(self, user: str) -> dict[str, str]:
        return self._zk.get_entity_configs(USER_CONFIG_TYPE, sanitize(user))

    def users_with_configs(self) -> list[str]:
        # quota entities of (user, client-id) pairs live below a user's znode as
        # users/<u>/clients/<c>; the user's own znode is what is listed here
        users = []
        for name in self._zk.get_all_entities_with_config(USER_CONFIG_TYPE):
            try:
                users.append(desanitize(name))
            except ValueError:  # not written by Kafka's tools or ours: skip, say so
                log.warning("ignoring /config/users/%s: not a sanitized user name", name)
        return sorted(users)

    def set_user_configs(self, user: str, configs: Mapping[str, str]) -> None:
        name = sanitize(user)
        self._zk.set_or_create_entity_configs(USER_CONFIG_TYPE, name, configs)
        self._zk.create_config_change_notification(f"{USER_CONFIG_TYPE}/{name}")


def scram_credentials_of(configs: Mapping[str, str]) -> dict[str, str]:
    """The SCRAM entries of a user's configs, by mechanism name (quota keys left out)."""
    return {k: v for k, v in configs.items() if k in SCRAM_MECHANISM_NAMES}


class CredentialCache:
    """SCRAM credentials by mechanism name and user, for the mechanisms in
    ``enabled_mechanisms``; ``store`` is where they are persisted.  ``alter_lock``
    serialises this broker's read-modify-write of user configs (AlterUserScramCredentials)."""

    def __init__(self, enabled_mechanisms: Iterable[str], store: UserConfigStore) -> None:
        self.enabled_mechanisms = frozenset(
            m.upper() for m in enabled_mechanisms if m.upper() in SCRAM_MECHANISM_NAMES)
        self.store = store
        self.alter_lock = asyncio.Lock()
        # reloads one at a time: a read that started earlier never lands after a later one
        self._reload_lock = asyncio.Lock()
        self._credentials: dict[str, dict[str, ScramCredential]] = {
            m: {} for m in self.enabled_mechanisms}

    # ------------------------------------------------------------------ lookups
    def scram_credential(self, mechanism_name: str, user: str) -> ScramCredential | None:
        """The user's credential for the mechanism, None if it has none (or the
        mechanism is not enabled here)."""
        return self._credentials.get(mechanism_name.upper(), {}).get(user)

    def users_with_credentials(self) -> list[str]:
        """The users holding a credential of an enabled mechanism, sorted."""
        return sorted({u for by_user in self._credentials.values() for u in by_user})

    # ------------------------------------------------------------------ updates
    def update_user(self, user: str, configs: Mapping[str, str]) -> None:
        """The user's entity configs as they are now: every enabled mechanism's
        credential is replaced by the one in ``configs`` or dropped if absent.  A value
        that does not parse drops that credential (logged; the user cannot log in with
        it) rather than failing the broker."""
        for mechanism, by_user in self._credentials.items():
            text = configs.get(mechanism)
            if text is None:
                by_user.pop(user, None)
                continue
            try:
                by_user[user] = ScramCredential.from_kafka_string(text)
            except ValueError as e:
                by_user.pop(user, None)
                log.warning("ignoring the %s credential of user %r: %s", mechanism, user, e)

    def remove_user(self, user: str) -> None:
        self.update_user(user, {})

    def load(self) -> None:
        """Read every user's configs from the store (at start-up; blocking)."""
        for user in self.store.users_with_configs():
            self.update_user(user, self.store.user_configs(user))
        users = self.users_with_credentials()
        if users:
            log.info("loaded SCRAM credentials of %d user(s) for %s", len(users),
                     ", ".join(sorted(self.enabled_mechanisms)))

    async def run_store(self, call: Callable[[], T]) -> T:
        """``call()`` (which uses ``self.store``): inline for the local store, on the
        default executor for a blocking one."""
        if self.store.blocking:
            return await asyncio.get_running_loop().run_in_executor(None, call)
        return call()

    async def reload(self) -> None:
        """Re-read every user (a cluster broker does so once it listens to change
        notifications: a change between start-up's ``load`` and then is not missed)."""
        store = self.store

        def read() -> dict[str, dict[str, str]]:
            return {u: store.user_configs(u) for u in store.users_with_configs()}

        async with self._reload_lock:
            configs = await self.run_store(read)
            for user in self.users_with_credentials():
                if user not in configs:
                    self.remove_user(user)
            for user, user_configs in configs.items():
                self.update_user(user, user_configs)

    async def reload_user(self, user: str) -> None:
        """Re-read one user from the store (a change notification named it)."""
        store = self.store
        async with self._reload_lock:
            configs = await self.run_store(lambda: store.user_configs(user))
            self.update_user(user, configs)
        log.info("SCRAM credentials of user %r now: %s", user,
                 ", ".join(sorted(scram_credentials_of(configs))) or "none")


def enabled_scram_mechanisms(config: KafkaConfig) -> set[str]:
    """The SCRAM mechanisms any listener enables (``sasl.enabled.mechanisms``, listener
    prefixes included)."""
    enabled: set[str] = set()
    for listener in config.listeners:
        for m in config.listener_value(listener.name, "sasl.enabled.mechanisms"):
            if m.upper() in SCRAM_MECHANISM_NAMES:
                enabled.add(m.upper())
    return enabled


def build_credential_cache(config: KafkaConfig, store: UserConfigStore) -> CredentialCache:
    """The broker's cache over ``store``, loaded (blocking: call it where the services
    are built, before the listeners serve)."""
    cache = CredentialCache(enabled_scram_mechanisms(config), store)
    cache.load()
    return cache


def build_local_credential_cache(config: KafkaConfig,
                                 metadata: LocalMetadataStore) -> CredentialCache:
    """The single node's cache: credentials in the local metadata store."""
    return build_credential_cache(config, LocalUserConfigStore(metadata))


def build_zk_credential_cache(config: KafkaConfig, zk: KafkaZkClient) -> CredentialCache:
    """A cluster broker's cache: credentials in ZooKeeper ``/config/users``."""
    return build_credential_cache(config, ZkUserConfigStore(zk))
