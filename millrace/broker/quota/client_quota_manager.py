"""Client quota enforcement: how much a (user, client id) may use, how much it has used,
and how long it must wait (Kafka's ``ClientQuotaManager`` / ``ClientRequestQuotaManager``
and the default quota callback, KIP-13 / KIP-55 / KIP-124).

One ``ClientQuotaManager`` per quota type: ``producer_byte_rate`` (bytes of produce
requests per second), ``consumer_byte_rate`` (bytes of fetch responses per second) and
``request_percentage`` (handler time as a percentage of one thread per second; the
broker's capacity is ``(num.io.threads + num.network.threads) * 100`` in Kafka's terms,
one event-loop thread's 100 here -- a client can use at most that).  ``ClientQuotas``
holds the three and is fed the configured quotas (``load`` at start-up, ``update`` from
the quota store's watcher).

Which quota applies (Kafka's precedence, most specific first)::

    users/<u>/clients/<c>         users/<u>/clients/<default>   users/<u>
    users/<default>/clients/<c>   users/<default>/clients/<default>   users/<default>
    clients/<c>                   clients/<default>

The first entity configured with the manager's key gives the bound.  Usage is kept per
*quota group*, as Kafka's metric tags do: a quota on ``users/<u>`` or ``users/<default>``
is shared by every client id of that user; one on ``clients/<c>`` or
``clients/<default>`` by every user with that client id; the user-and-client entities
measure each (user, client id) pair on its own.  So ``clients/<default>`` gives *each*
client id the bound; it is not one bucket for all of them.

The measure is a ``Rate`` over ``quota.window.num`` samples of
``quota.window.size.seconds``.  Each request's amount is recorded first, then the rate
is compared with the bound; over it, the throttle time is the delay that brings the rate
back to the bound if nothing more were recorded: ``(rate - bound) / bound * window``
(Kafka's ``QuotaUtils.throttleTime``), for the request quota capped at one window
(``ClientRequestQuotaManager``).  A throttled fetch sends no data, so its bytes are taken
back (``unrecord``).  Clients with no quota record nothing; a group's usage is dropped
after an hour without requests (Kafka's inactive-sensor expiry).

Cost.  ``enabled`` is False while no quota of the type is configured; the network layer
checks ``ClientQuotas.enabled`` once per request and does nothing else when it is False.
With quotas, a client's group is looked up once and remembered until the quotas change.

Thread ownership: the event-loop thread (the store calls back on it).  Quota changes
replace the lookup tables rather than mutate them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from millrace.broker.config import KafkaConfig
from millrace.broker.quota.entity import (
    CONSUMER_BYTE_RATE,
    DEFAULT,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaEntity,
    QuotaValues,
)
from millrace.broker.quota.rate import Rate

if TYPE_CHECKING:
    from millrace.broker.quota.quota_store import QuotaStore

log = logging.getLogger(__name__)

INACTIVE_SENSOR_EXPIRATION_MS = 3_600_000  # Kafka: InactiveSensorExpirationTimeSeconds
EXPIRY_CHECK_INTERVAL_MS = 60_000
MAX_REMEMBERED_CLIENTS = 10_000  # (user, client id) lookups kept before starting afresh
NANOS_TO_PERCENT = 100.0 / 1_000_000_000  # one second of handler time = 100 %

_Key = tuple[str, str]
_UNKNOWN: object = object()


class _ClientSensor:
    """The usage of one quota group and the bound it is held to."""

    __slots__ = ("bound", "last_ms", "rate")

    def __init__(self, rate: Rate, bound: float, now_ms: int) -> None:
        self.rate = rate
        self.bound = bound
        self.last_ms = now_ms


def _candidates(user: str, client_id: str) -> tuple[tuple[QuotaEntity, _Key], ...]:
    """The entities that may hold the quota of (user, client id), most specific first,
    each with the quota group it measures (module docstring)."""
    both, user_only, client_only = (user, client_id), (user, ""), ("", client_id)
    return ((QuotaEntity(user, client_id), both),
            (QuotaEntity(user, DEFAULT), both),
            (QuotaEntity(user, None), user_only),
            (QuotaEntity(DEFAULT, client_id), both),
            (QuotaEntity(DEFAULT, DEFAULT), both),
            (QuotaEntity(DEFAULT, None), user_only),
            (QuotaEntity(None, client_id), client_only),
            (QuotaEntity(None, DEFAULT), client_only))


def describe(entity: QuotaEntity) -> str:
    """``users/alice/clients/<default>``, ``clients/app`` (names unsanitized)."""
    user, client_id = entity
    parts = ([f"users/{user}"] if user is not None else []) + \
            ([f"clients/{client_id}"] if client_id is not None else [])
    return "/".join(parts) or "(no entity)"


class ClientQuotaManager:
    """Usage against the configured bounds of one quota key (module docstring)."""

    def __init__(self, key: str, samples: int, window_seconds: int, *,
                 max_throttle_ms: int | None = None) -> None:
        self.key = key
        self.samples = samples
        self.window_ms = window_seconds * 1000
        self.max_throttle_ms = max_throttle_ms
        self.enabled = False  # any quota of this key configured
        self._quotas: dict[QuotaEntity, float] = {}
        self._sensors: dict[_Key, _ClientSensor] = {}
        # (user, client id) -> its group's sensor, None: no quota applies
        self._resolved: dict[_Key, _ClientSensor | None] = {}
        self._next_expiry_check_ms = 0

    # ------------------------------------------------------------------ configuration
    def update_quota(self, entity: QuotaEntity, bound: float | None) -> None:
        """Set (or with None remove) the entity's bound."""
        if self._quotas.get(entity) == bound:
            return
        quotas = dict(self._quotas)
        if bound is None:
            quotas.pop(entity, None)
        else:
            quotas[entity] = float(bound)
        self.set_quotas(quotas)

    def set_quotas(self, quotas: Mapping[QuotaEntity, float]) -> None:
        """Replace every bound; the groups' usage so far is kept."""
        self._quotas = dict(quotas)
        self._resolved = {}  # every client is looked up again under the new bounds
        self.enabled = bool(self._quotas)
        if not self.enabled:
            self._sensors = {}

    def quota(self, user: str, client_id: str) -> float | None:
        """The bound that applies to (user, client id), None when none does."""
        found = self._resolve(user, client_id)
        return found[1] if found is not None else None

    def limits(self, user: str, client_id: str) -> bool:
        """Does a quota apply to (user, client id)?  (Cheap: the lookup is remembered.)"""
        key = (user, client_id)
        resolved = self._resolved
        found = resolved.get(key, _UNKNOWN)
        if found is not _UNKNOWN:
            return found is not None
        if self._resolve(user, client_id) is not None:
            return True  # its sensor is made when it first records
        if len(resolved) >= MAX_REMEMBERED_CLIENTS:
            resolved.clear()
        resolved[key] = None
        return False

    def _resolve(self, user: str, client_id: str) -> tuple[_Key, float] | None:
        quotas = self._quotas
        for entity, group in _candidates(user, client_id):
            bound = quotas.get(entity)
            if bound is not None:
                return group, bound
        return None

    # ------------------------------------------------------------------ usage
    def _sensor(self, user: str, client_id: str, now_ms: int) -> _ClientSensor | None:
        """The sensor of the client's quota group; None when no quota applies."""
        if now_ms >= self._next_expiry_check_ms:
            self._expire(now_ms)
        key = (user, client_id)
        resolved = self._resolved
        try:
            return resolved[key]
        except KeyError:
            pass
        found = self._resolve(user, client_id)
        sensor: _ClientSensor | None = None
        if found is not None:
            group, bound = found
            sensor = self._sensors.get(group)
            if sensor is None:
                sensor = self._sensors[group] = _ClientSensor(
                    Rate(self.samples, self.window_ms), bound, now_ms)
            sensor.bound = bound  # the quotas may have changed since it was made
        if len(resolved) >= MAX_REMEMBERED_CLIENTS:
            resolved.clear()
        resolved[key] = sensor
        return sensor

    def record_and_get_throttle_time_ms(self, user: str, client_id: str, value: float,
                                        now_ms: int) -> int:
        """Record ``value`` for the client's group at ``now_ms``; the ms it must now wait
        (0: within its quota, or no quota applies)."""
        sensor = self._sensor(user, client_id, now_ms)
        if sensor is None:
            return 0
        sensor.last_ms = now_ms
        rate = sensor.rate
        rate.record(value, now_ms)
        observed = rate.measure(now_ms)
        bound = sensor.bound
        if observed <= bound:
            return 0
        throttle_ms = int((observed - bound) / bound * rate.window_size_ms(now_ms) + 0.5)
        if self.max_throttle_ms is not None and throttle_ms > self.max_throttle_ms:
            throttle_ms = self.max_throttle_ms
        log.debug("%s quota of user %r client %r violated: %.1f/s over %.1f/s; throttled "
                  "%d ms", self.key, user, client_id, observed, bound, throttle_ms)
        return throttle_ms

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back ``value`` recorded before (a throttled fetch sends no data)."""
        sensor = self._sensor(user, client_id, now_ms)
        if sensor is not None:
            sensor.rate.record(-value, now_ms)

    def record_no_throttle(self, user: str, client_id: str, value: float,
                           now_ms: int) -> None:
        """Count ``value`` towards the next check without checking now."""
        sensor = self._sensor(user, client_id, now_ms)
        if sensor is not None:
            sensor.last_ms = now_ms
            sensor.rate.record(value, now_ms)

    def max_value_in_quota_window(self, user: str, client_id: str) -> float:
        """The most that can be recorded at once without a certain throttle (a fetch's
        ``max_bytes`` is capped to it: a response bigger than this would be throttled --
        and taken back -- every time, and the consumer would never progress)."""
        found = self._resolve(user, client_id) if self.limits(user, client_id) else None
        if found is None:
            return float("inf")
        return found[1] * (self.samples - 1) * self.window_ms / 1000

    def _expire(self, now_ms: int) -> None:
        """Drop the groups with no request for an hour (checked once a minute)."""
        self._next_expiry_check_ms = now_ms + EXPIRY_CHECK_INTERVAL_MS
        idle = [k for k, s in self._sensors.items()
                if now_ms - s.last_ms >= INACTIVE_SENSOR_EXPIRATION_MS]
        if idle:
            for k in idle:
                del self._sensors[k]
            self._resolved = {}

    @property
    def sensor_count(self) -> int:
        """Quota groups being measured (tests, metrics)."""
        return len(self._sensors)


class ClientQuotas:
    """The three client quota managers of a broker (``services.client_quotas``), fed the
    configured quotas by the quota store."""

    def __init__(self, config: KafkaConfig) -> None:
        samples = config["quota.window.num"]
        window_s = config["quota.window.size.seconds"]
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, samples, window_s)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, samples, window_s)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, samples, window_s,
                                          max_throttle_ms=window_s * 1000)
        self._managers = (self.produce, self.fetch, self.request)
        self._values: dict[QuotaEntity, QuotaValues] = {}
        self.enabled = False  # any quota at all: the one check per request

    @classmethod
    def fed_by(cls, config: KafkaConfig, store: QuotaStore) -> ClientQuotas:
        """The managers with the store's quotas now and every change after (``load()``
        blocks on ZooKeeper: call it where the broker builds its services)."""
        quotas = cls(config)
        quotas.load(store.load())
        store.watch(quotas.update)
        return quotas

    def load(self, snapshot: Mapping[QuotaEntity, QuotaValues]) -> None:
        """Every configured quota (start-up); replaces what was known."""
        self._values = {e: dict(v) for e, v in snapshot.items() if v}
        for manager in self._managers:
            manager.set_quotas({e: v[manager.key] for e, v in self._values.items()
                                if manager.key in v})
        self.enabled = any(m.enabled for m in self._managers)
        if self._values:
            log.info("client quotas: %s", "; ".join(
                f"{describe(e)} {v}" for e, v in sorted(self._values.items(), key=str)))

    def update(self, entity: QuotaEntity, values: QuotaValues) -> None:
        """The quota store's watch callback: ``entity``'s values now (empty: removed)."""
        old = self._values.get(entity, {})
        if values:
            self._values[entity] = dict(values)
        else:
            self._values.pop(entity, None)
        for manager in self._managers:
            if old.get(manager.key) != values.get(manager.key):
                manager.update_quota(entity, values.get(manager.key))
        self.enabled = any(m.enabled for m in self._managers)
        log.info("client quotas of %s now %s", describe(entity), values or "none")
