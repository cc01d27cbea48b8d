"""``QuotaStore``: where client quota configs are persisted and how every broker hears of a
change (the storage half of Kafka's quota configuration: ``AdminZkClient`` writes,
``ZkConfigManager`` + ``QuotaConfigHandler`` reads; the enforcing half is the quota
manager, which takes ``load()`` at start-up and ``watch()`` callbacks after).

Entities and their stored form.  A ``QuotaEntity`` is kept under its *entity path*,
Kafka's config change notification path: ``users/<u>``, ``users/<u>/clients/<c>``,
``clients/<c>``, each name sanitized (``millrace.security.sanitizer``) and the default
entity spelled ``<default>``.  An ``IpQuotaEntity`` is kept under ``ips/<ip>`` (the
address as it was set, not sanitized: an IP address needs no escaping) or
``ips/<default>``, with ``connection_creation_rate`` only.  The configs are Kafka's
strings: the byte rates and the connection rate as whole numbers (``"1048576"``, Kafka's
LONG and INT keys), ``request_percentage`` and ``controller_mutation_rate`` as decimals
(``"200.0"``).

* ZooKeeper cluster: ``ZkQuotaStore``, Kafka's layout -- ``/config/<entity path>`` with
  ``{"version":1,"config":{...}}`` and a ``/config/changes/config_change_<n>``
  notification ``{"version":2,"entity_path":"<entity path>"}`` after each write, so
  ``kafka-configs`` and Kafka brokers read what we write and the other way round.  A
  user's znode also holds its SCRAM credentials: a quota write keeps every other key.
  A write is a read-modify-write at the znode's version (retried when another writer got
  there first), so a SCRAM credential written at the same time is never lost.  A quota
  znode left with no config and no children is deleted, and with it an emptied
  ``users/<u>/clients`` and a user znode holding nothing else (Kafka's
  ``tryCleanQuotaNodes``).
* single node: ``LocalQuotaStore``, the ``quotas`` section of the
  ``LocalMetadataStore``'s atomic JSON (entity path -> configs); SCRAM credentials stay
  in its ``users`` section.

Publishing.  ``watch(callback)`` registers ``callback(entity, values)``, called after a
change of a client entity's quota values (empty values: its quotas were removed), on the
event-loop thread, once per actual change: the store remembers what it last told
(``load()`` sets that), and ``publish`` calls back only when the values differ.  IP
entities go to their own watchers, ``load_ip_quotas()`` / ``watch_ip_quotas(callback)``
(the connection quotas), so the client quota manager never sees them.  The
single node publishes synchronously inside ``alter``.  In a cluster every change, this
broker's own included, arrives as a config change notification; the broker's config
change listener (``zk_broker.start_config_change_listener``) reads the entities named
(``read_entities``, in an executor) and publishes them, and, when it starts, re-reads
every entity (``publish_all``), so a change made between ``load()`` and the listener's
start is never missed.  The handler also publishes what it has just written, so this
broker applies its own change without waiting for the notification round.

Thread ownership: ``publish``/``publish_all``/``watch`` on the event-loop thread only.
``ZkQuotaStore``'s reads and writes block until ZooKeeper answers (``blocking = True``:
the broker calls them in an executor); ``LocalQuotaStore`` is called on the loop.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import random
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, TypeVar

from millrace.broker.quota.entity import (
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    DEFAULT,
    PRODUCER_BYTE_RATE,
    STORED_KEYS,
    AnyQuotaEntity,
    IpQuotaEntity,
    QuotaEntity,
    QuotaValues,
    keys_of,
)
from millrace.broker.zk import zk_data as zd
from millrace.broker.zk.errors import (
    ZkBadVersionError,
    ZkError,
    ZkNodeExistsError,
    ZkNoNodeError,
)
from millrace.security.sanitizer import desanitize, sanitize

if TYPE_CHECKING:
    from millrace.broker.metadata.local_store import LocalMetadataStore
    from millrace.broker.zk import KafkaZkClient

log = logging.getLogger(__name__)

QuotaCallback = Callable[[QuotaEntity, QuotaValues], None]
IpQuotaCallback = Callable[[IpQuotaEntity, QuotaValues], None]
E = TypeVar("E", QuotaEntity, IpQuotaEntity)
QuotaOps = Mapping[str, "float | None"]
"""Key -> new value, None to remove the key (applied in order; a key given twice: the
last wins)."""

USERS, CLIENTS, IPS = "users", "clients", "ips"
INTEGER_KEYS = frozenset({PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE,  # Kafka's LONG keys
                          CONNECTION_CREATION_RATE})  # and its INT key
MAX_UPDATE_RETRIES = 10
RETRY_BACKOFF_MS = 100
RETRY_BACKOFF_JITTER_MS = 50


# ---------------------------------------------------------------------------- names
def _segment(name: str) -> str:
    return name if name == DEFAULT else sanitize(name)


def _name(segment: str) -> str:
    return segment if segment == DEFAULT else desanitize(segment)


def valid_ip_name(name: str) -> bool:
    """Whether ``name`` can name an IP entity: an IPv4 or IPv6 address (no zone) or
    ``<default>`` (Kafka's ``isValidIpEntity``, without resolving hostnames)."""
    if name == DEFAULT:
        return True
    try:
        addr = ipaddress.ip_address(name)
    except ValueError:
        return False
    return not (isinstance(addr, ipaddress.IPv6Address) and addr.scope_id)


def entity_path(entity: AnyQuotaEntity) -> str:
    """The entity's config path (``users/alice%40corp/clients/<default>``, ``ips/10.0.0.1``);
    ValueError for an entity with neither part."""
    if isinstance(entity, IpQuotaEntity):
        return f"{IPS}/{entity.ip}"
    user, client_id = entity
    if user is not None and client_id is not None:
        return f"{USERS}/{_segment(user)}/{CLIENTS}/{_segment(client_id)}"
    if user is not None:
        return f"{USERS}/{_segment(user)}"
    if client_id is not None:
        return f"{CLIENTS}/{_segment(client_id)}"
    raise ValueError("a quota entity names a user, a client id or both")


def entity_of_path(path: str) -> AnyQuotaEntity | None:
    """The quota entity a config path names; None for any other path (``topics/t``,
    ``brokers/1``).  ValueError for a malformed user, client or ip path."""
    parts = path.split("/")
    if parts[0] == IPS and len(parts) == 2 and valid_ip_name(parts[1]):
        return IpQuotaEntity(parts[1])
    if parts[0] == CLIENTS and len(parts) == 2 and parts[1]:
        return QuotaEntity(None, _name(parts[1]))
    if parts[0] == USERS and len(parts) == 2 and parts[1]:
        return QuotaEntity(_name(parts[1]), None)
    if parts[0] == USERS and len(parts) == 4 and parts[2] == CLIENTS and parts[1] and parts[3]:
        return QuotaEntity(_name(parts[1]), _name(parts[3]))
    if parts[0] in (USERS, CLIENTS, IPS):
        raise ValueError(f"malformed quota entity path {path!r}")
    return None


# ---------------------------------------------------------------------------- values
def format_value(key: str, value: float) -> str:
    """Kafka's string for a (validated) quota value: whole numbers for the byte rates."""
    if key in INTEGER_KEYS:
        return str(math.floor(value + 1e-6))
    return repr(float(value))


def quota_values(configs: Mapping[str, str], where: str = "",
                 keys: tuple[str, ...] = STORED_KEYS) -> QuotaValues:
    """The quota keys (``keys``, those of the entity's kind) of an entity's configs as
    floats; other keys (a user's SCRAM credentials) are left out, and so is a value that
    is not a number (logged)."""
    values: QuotaValues = {}
    for key, text in configs.items():
        if key not in keys:
            continue
        try:
            values[key] = float(text)
        except ValueError:
            log.warning("ignoring quota %s=%r of %s: not a number", key, text, where)
    return values


def check_keys(entity: AnyQuotaEntity, ops: QuotaOps) -> None:
    """ValueError if ``ops`` name a key ``entity``'s kind cannot carry (the admin rules
    check this first; this keeps a mismatched key out of storage whatever the caller)."""
    wrong = [k for k in ops if k not in keys_of(entity)]
    if wrong:
        raise ValueError(f"Invalid configuration key {wrong[0]} for {entity_path(entity)}")


def apply_ops(configs: Mapping[str, str], ops: QuotaOps) -> dict[str, str]:
    """``configs`` with the quota ops applied; every other key kept as it is."""
    new = dict(configs)
    for key, value in ops.items():
        if value is None:
            new.pop(key, None)
        else:
            new[key] = format_value(key, value)
    return new


# ---------------------------------------------------------------------------- base
def _register(callbacks: list[Callable[[E, QuotaValues], None]],
              callback: Callable[[E, QuotaValues], None]) -> Callable[[], None]:
    callbacks.append(callback)

    def unwatch() -> None:
        if callback in callbacks:
            callbacks.remove(callback)
    return unwatch


def _tell(callbacks: list[Callable[[E, QuotaValues], None]], entity: E,
          values: QuotaValues) -> None:
    for callback in list(callbacks):
        try:
            callback(entity, dict(values))
        except Exception:
            log.exception("quota change callback failed for %s", entity)


class QuotaStore:
    """The persisted client quotas and their publication (module docstring).  Subclasses
    give ``read_all``, ``get`` and ``alter``."""

    blocking = False

    def __init__(self) -> None:
        self._callbacks: list[QuotaCallback] = []
        self._ip_callbacks: list[IpQuotaCallback] = []
        self._known: dict[AnyQuotaEntity, QuotaValues] = {}  # what the callbacks were told

    def read_all(self) -> dict[AnyQuotaEntity, QuotaValues]:
        """Every entity with a quota now, IP entities included (blocking for ZooKeeper)."""
        raise NotImplementedError

    def get(self, entity: AnyQuotaEntity) -> QuotaValues:
        """The entity's quota values now; empty if it has none."""
        raise NotImplementedError

    def alter(self, entity: AnyQuotaEntity, ops: QuotaOps) -> QuotaValues:
        """Apply (validated) ``ops`` to the entity's quotas, durably, and tell every
        broker; returns the entity's quota values written."""
        raise NotImplementedError

    def load(self) -> dict[QuotaEntity, QuotaValues]:
        """Every client entity with a quota, remembered as what the watchers know
        (start-up)."""
        snapshot = self._remember(QuotaEntity)
        return {e: v for e, v in snapshot.items() if isinstance(e, QuotaEntity)}

    def load_ip_quotas(self) -> dict[IpQuotaEntity, QuotaValues]:
        """``load()`` for the IP entities."""
        snapshot = self._remember(IpQuotaEntity)
        return {e: v for e, v in snapshot.items() if isinstance(e, IpQuotaEntity)}

    def _remember(self, kind: type) -> dict[AnyQuotaEntity, QuotaValues]:
        """Read everything; what the watchers of ``kind`` know becomes that (the other
        kind's watchers keep what they were told)."""
        snapshot = self.read_all()
        self._known = {e: v for e, v in self._known.items() if not isinstance(e, kind)}
        self._known.update((e, dict(v)) for e, v in snapshot.items() if isinstance(e, kind))
        return {e: dict(v) for e, v in snapshot.items()}

    def watch(self, callback: QuotaCallback) -> Callable[[], None]:
        """Call ``callback(entity, values)`` after each change of a client entity (module
        docstring); returns the function that stops it."""
        return _register(self._callbacks, callback)

    def watch_ip_quotas(self, callback: IpQuotaCallback) -> Callable[[], None]:
        """``watch()`` for the IP entities."""
        return _register(self._ip_callbacks, callback)

    def publish(self, entity: AnyQuotaEntity, values: QuotaValues) -> None:
        """Tell the entity's watchers its values now, if they changed (loop thread)."""
        if self._known.get(entity, {}) == values:
            return
        if values:
            self._known[entity] = dict(values)
        else:
            self._known.pop(entity, None)
        if isinstance(entity, IpQuotaEntity):
            _tell(self._ip_callbacks, entity, values)
        else:
            _tell(self._callbacks, entity, values)

    def publish_all(self, snapshot: Mapping[AnyQuotaEntity, QuotaValues]) -> None:
        """Publish a full re-read: changed and new entities, and those gone."""
        for entity in [e for e in self._known if e not in snapshot]:
            self.publish(entity, {})
        for entity, values in snapshot.items():
            self.publish(entity, values)


# ---------------------------------------------------------------------------- ZooKeeper
class ZkQuotaStore(QuotaStore):
    """Kafka's ``/config/users``, ``/config/clients`` and ``/config/ips`` znodes over a
    ``KafkaZkClient``."""

    blocking = True

    def __init__(self, zk: KafkaZkClient, *, max_update_retries: int = MAX_UPDATE_RETRIES,
                 sleep: Callable[[float], None] = time.sleep,
                 rng: random.Random | None = None) -> None:
        super().__init__()
        self.zk = zk
        self.max_update_retries = max_update_retries
        self._sleep = sleep
        self._rng = rng or random.Random()

    def _children(self, path: str) -> list[str]:
        return sorted(self.zk.zk.get_children(f"{zd.CONFIG_PATH}/{path}"))

    def _entity(self, path: str) -> tuple[AnyQuotaEntity, QuotaValues] | None:
        try:
            entity = entity_of_path(path)
        except ValueError as e:
            log.warning("ignoring the config of %s: %s", path, e)
            return None
        if entity is None:
            return None
        got = self.zk.zk.get_data(f"{zd.CONFIG_PATH}/{path}")
        configs = zd.decode_entity_config(got[0]) if got is not None else {}
        return entity, quota_values(configs, path, keys_of(entity))

    def read_all(self) -> dict[AnyQuotaEntity, QuotaValues]:
        """Every quota entity of the layout (Kafka's ``fetchAllEntityConfigs`` of users,
        clients and ips and ``fetchAllChildEntityConfigs`` of users/clients)."""
        paths = [f"{CLIENTS}/{c}" for c in self._children(CLIENTS)]
        paths += [f"{IPS}/{ip}" for ip in self._children(IPS)]
        for user in self._children(USERS):
            paths.append(f"{USERS}/{user}")
            paths += [f"{USERS}/{user}/{CLIENTS}/{c}"
                      for c in self._children(f"{USERS}/{user}/{CLIENTS}")]
        found = {}
        for path in paths:
            got = self._entity(path)
            if got is not None and got[1]:
                found[got[0]] = got[1]
        return found

    def read_entities(self, paths: Iterable[str]) -> list[tuple[AnyQuotaEntity, QuotaValues]]:
        """The quota entities among config change notification paths, re-read (each
        once; other paths ignored)."""
        found = []
        for path in dict.fromkeys(paths):
            got = self._entity(path)
            if got is not None:
                found.append(got)
        return found

    def get(self, entity: AnyQuotaEntity) -> QuotaValues:
        got = self._entity(entity_path(entity))
        return got[1] if got is not None else {}

    def alter(self, entity: AnyQuotaEntity, ops: QuotaOps) -> QuotaValues:
        path = entity_path(entity)
        check_keys(entity, ops)
        keys = keys_of(entity)
        znode = f"{zd.CONFIG_PATH}/{path}"
        retries = 0
        while True:
            got = self.zk.zk.get_data(znode)
            current = zd.decode_entity_config(got[0]) if got is not None else {}
            new = apply_ops(current, ops)
            try:
                self._write(entity, znode, got[1].version if got is not None else None, new)
                break
            except (ZkBadVersionError, ZkNodeExistsError, ZkNoNodeError):
                if retries >= self.max_update_retries:
                    raise ZkError(f"Failed to update the quotas of {path} after trying a "
                                  f"maximum of {self.max_update_retries} times") from None
                retries += 1
                log.debug("the configs of %s changed under us; re-reading", path)
                self._sleep((RETRY_BACKOFF_MS + self._rng.randrange(RETRY_BACKOFF_JITTER_MS))
                            / 1000)
        self.zk.create_config_change_notification(path)
        log.info("Updated the quotas of %s: %s", path,
                 quota_values(new, path, keys) or "none")
        return quota_values(new, path, keys)

    def _write(self, entity: AnyQuotaEntity, znode: str, version: int | None,
               new: dict[str, str]) -> None:
        """One conditional write; a lost race raises (the caller re-reads)."""
        zk = self.zk.zk
        if version is None:
            if new:
                zk.create(znode, zd.encode_entity_config(new), make_parents=True)
            return
        if new or zk.get_children(znode):
            zk.set_data(znode, zd.encode_entity_config(new), version)
            return
        zk.delete(znode, version)
        if isinstance(entity, QuotaEntity) and entity.user is not None and entity.client_id is not None:
            self._clean_user(f"{zd.CONFIG_PATH}/{USERS}/{_segment(entity.user)}")

    def _clean_user(self, user_znode: str) -> None:
        """After a user/client znode went away: remove an emptied ``clients`` dir, then
        the user znode if it holds no config and no children.  Best effort: a concurrent
        writer that adds a child or a config wins."""
        zk = self.zk.zk
        try:
            if zk.get_children(f"{user_znode}/{CLIENTS}"):
                return
            zk.delete(f"{user_znode}/{CLIENTS}")
            got = zk.get_data(user_znode)
            if got is None or zd.decode_entity_config(got[0]) or zk.get_children(user_znode):
                return
            zk.delete(user_znode, got[1].version)
            log.info("Deleted %s: no configs and no client entities left", user_znode)
        except Exception as e:  # a child or a config appeared meanwhile: keep the node
            log.debug("keeping %s: %s", user_znode, e)


# ---------------------------------------------------------------------------- single node
class LocalQuotaStore(QuotaStore):
    """The single node's quotas, in the ``LocalMetadataStore``'s JSON file (written
    atomically on every change, read back at start-up)."""

    def __init__(self, metadata: LocalMetadataStore) -> None:
        super().__init__()
        self._metadata = metadata

    def read_all(self) -> dict[AnyQuotaEntity, QuotaValues]:
        found = {}
        for path, configs in self._metadata.quota_configs().items():
            try:
                entity = entity_of_path(path)
            except ValueError as e:
                log.warning("ignoring the stored quotas of %s: %s", path, e)
                continue
            if entity is None:
                continue
            values = quota_values(configs, path, keys_of(entity))
            if values:
                found[entity] = values
        return found

    def get(self, entity: AnyQuotaEntity) -> QuotaValues:
        path = entity_path(entity)
        return quota_values(self._metadata.quota_configs().get(path, {}), path,
                            keys_of(entity))

    def alter(self, entity: AnyQuotaEntity, ops: QuotaOps) -> QuotaValues:
        path = entity_path(entity)
        check_keys(entity, ops)
        current = self._metadata.quota_configs().get(path, {})
        new = apply_ops(current, ops)
        if new != current:
            self._metadata.set_quota_configs(path, new)
            log.info("Updated the quotas of %s: %s", path,
                     quota_values(new, path, keys_of(entity)) or "none")
        values = quota_values(new, path, keys_of(entity))
        self.publish(entity, values)
        return values
