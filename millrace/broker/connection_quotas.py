"""Connection limits checked when a socket is accepted (Kafka's ``SocketServer.ConnectionQuotas``).

Kafka 3.9's keys and defaults (reference security.md 7):

- ``max.connections`` (INT_MAX): broker-wide, and per listener as
  ``listener.name.<l>.max.connections`` (unprefixed, the broker value is also each
  listener's, as Kafka's ``valuesWithPrefixOverride`` makes it).  The inter-broker listener is exempt from the
  broker-wide limit (its own listener limit still applies), as in Kafka.
- ``max.connections.per.ip`` (INT_MAX), counted over all listeners, and
  ``max.connections.per.ip.overrides`` (``host:count,...``; the last ``:`` splits, so an
  IPv6 address needs no brackets).  Hosts are compared as IP addresses (an IPv4-mapped
  IPv6 peer counts as its IPv4 address); hostnames are refused at start-up rather than
  resolved as Kafka does.  ``max.connections.per.ip=0`` is allowed only with overrides.
- ``max.connection.creation.rate`` (INT_MAX): new connections per second, per listener
  (``listener.name.<l>.max.connection.creation.rate``) and broker-wide (the inter-broker
  listener exempt from the broker-wide one).
- ``connection_creation_rate`` of an IP entity (KIP-612, a client quota: ``ips/<ip>``,
  else ``ips/<default>``, else unlimited), new connections per second from one address,
  on every listener; fed by the quota store (``load_ip_rates`` at start, ``update_ip_rate``
  from its watcher).

The three creation rates are one mechanism, ``ConnectionRate``: Kafka's quota ``Rate``
over ``quota.window.num`` samples of ``quota.window.size.seconds`` (its connection rate
sensors use the quota window too), counting the connections *accepted*: a connection
that the rate would take over its bound is refused and not counted (Kafka records it
and takes it back).  As with every Kafka rate quota, the rate is averaged over at least
``quota.window.num - 1`` windows, so a burst of up to about ``rate * (quota.window.num -
1)`` new connections passes before the bound bites.  An IP's rate is forgotten once its
samples have all expired (it measures nothing then), so addresses that stop connecting
cost nothing.

Theory of operation.  ``accept(listener, ip)`` is called once per accepted socket, before
any work is done for it: it either counts the connection and returns None, or counts
nothing and returns the ``Refusal`` naming the limit hit (the caller aborts the socket).
Every counted connection is given back exactly once by ``release``.  Where Kafka makes a
connection over ``max.connections`` or the broker / listener creation rate *wait* for a
slot (blocking its acceptor thread), and holds a connection over its IP's rate until the
throttle time has passed before closing it, we close it at once, so the event loop never
stalls and holds nothing; and instead of closing the least-recently-used connection of
another listener to make room for an inter-broker one we only exempt the inter-broker
listener.

``should_log(refusal)`` rate-limits the refusal log line: at most one line per limit per
``LOG_INTERVAL_MS``, carrying the number of refusals that were not logged since.

Thread ownership: owned by the broker's event-loop thread (no locking).
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from millrace.broker.quota.entity import (
    CONNECTION_CREATION_RATE,
    DEFAULT,
    IpQuotaEntity,
    QuotaValues,
)
from millrace.broker.quota.rate import Rate
from millrace.common.config import INT_MAX
from millrace.common.errors import ConfigError
from millrace.common.time import Time

if TYPE_CHECKING:
    from millrace.broker.config import KafkaConfig

log = logging.getLogger(__name__)

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

OVERRIDES_KEY = "max.connections.per.ip.overrides"
LOG_INTERVAL_MS = 1000


def _ip(host: str) -> IpAddress:
    """``host`` as an address; an IPv4-mapped IPv6 address becomes its IPv4 address."""
    addr = ipaddress.ip_address(host.strip().strip("[]"))
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def parse_ip_overrides(text: str) -> dict[IpAddress, int]:
    """``max.connections.per.ip.overrides``: ``host:count,...`` -> {address: count}."""
    out: dict[IpAddress, int] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        host, sep, count = entry.rpartition(":")
        if not sep or not host.strip():
            raise ConfigError(f"Invalid value {entry} for configuration {OVERRIDES_KEY}: "
                              "expected host:count")
        try:
            addr = _ip(host)
        except ValueError:
            raise ConfigError(f"Invalid value {entry} for configuration {OVERRIDES_KEY}: "
                              f"{host.strip()} is not an IP address (millrace does not "
                              "resolve hostnames here)") from None
        try:
            n = int(count.strip())
        except ValueError:
            raise ConfigError(f"Invalid value {entry} for configuration {OVERRIDES_KEY}: "
                              f"{count.strip()!r} is not a number") from None
        if n < 0:
            raise ConfigError(f"Invalid value {entry} for configuration {OVERRIDES_KEY}: "
                              "the count must be at least 0")
        out[addr] = n
    return out


@dataclass(frozen=True)
class Refusal:
    """Why a connection was refused: the config key of the limit and its value."""

    key: str
    limit: int

    def __str__(self) -> str:
        return f"{self.key}={self.limit} reached"


class ConnectionRate:
    """Connections accepted per second (module docstring); the bound is the caller's."""

    __slots__ = ("last_ms", "rate")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.rate = Rate(samples, window_ms)
        self.last_ms = 0

    def full(self, bound: int, now_ms: int) -> bool:
        """Whether one more connection now would take the rate over ``bound``."""
        if bound >= INT_MAX:
            return False
        # the rate with one more connection, without recording it: a refused connection
        # leaves no trace (a recorded-then-taken-back one would keep its sample alive)
        return self.rate.measure(now_ms) + 1000.0 / self.rate.window_size_ms(now_ms) > bound

    def record(self, now_ms: int) -> None:
        self.rate.record(1.0, now_ms)
        self.last_ms = now_ms


class ConnectionQuotas:
    """Counts of open connections per listener and per IP, checked at accept."""

    def __init__(self, config: KafkaConfig, time: Time) -> None:
        self.time = time
        self.listeners = [ls.name for ls in config.listeners]
        self.protected_listener = config.inter_broker_listener_name
        self.broker_max = int(config["max.connections"])
        self.broker_rate = int(config["max.connection.creation.rate"])
        self.max_per_ip = int(config["max.connections.per.ip"])
        self.ip_overrides = parse_ip_overrides(config[OVERRIDES_KEY])
        if self.max_per_ip == 0 and not self.ip_overrides:
            raise ConfigError("Invalid value 0 for configuration max.connections.per.ip: "
                              f"0 is allowed only when {OVERRIDES_KEY} is set")
        self.listener_max: dict[str, tuple[str, int]] = {}
        self.listener_rate: dict[str, tuple[str, int]] = {}
        for name in self.listeners:  # unprefixed, the broker value is also each listener's
            for table, key in ((self.listener_max, "max.connections"),
                               (self.listener_rate, "max.connection.creation.rate")):
                table[name] = (config.listener_key(name, key),
                               int(config.listener_value(name, key)))
        self.total = 0
        self.per_listener: dict[str, int] = dict.fromkeys(self.listeners, 0)
        self.per_ip: dict[IpAddress, int] = {}
        self._samples = int(config["quota.window.num"])
        self._window_ms = int(config["quota.window.size.seconds"]) * 1000
        self._broker_window = self._new_rate()
        self._listener_windows = {name: self._new_rate() for name in self.listeners}
        self.default_ip_rate = INT_MAX  # ips/<default>
        self.ip_rates: dict[IpAddress, int] = {}  # ips/<ip>
        self._ip_windows: dict[IpAddress, ConnectionRate] = {}  # only IPs with a rate
        self._next_ip_expiry_ms = 0
        self._log_state: dict[str, tuple[int, int]] = {}  # key -> (last line ms, unlogged)

    def _new_rate(self) -> ConnectionRate:
        return ConnectionRate(self._samples, self._window_ms)

    def max_for_ip(self, ip: IpAddress) -> int:
        return self.ip_overrides.get(ip, self.max_per_ip)

    def rate_for_ip(self, ip: IpAddress) -> int:
        """The IP's ``connection_creation_rate``: its own, else the default's, else
        INT_MAX (unlimited)."""
        return self.ip_rates.get(ip, self.default_ip_rate)

    # ------------------------------------------------------------------ IP quotas
    def load_ip_rates(self, snapshot: Mapping[IpQuotaEntity, QuotaValues]) -> None:
        """Every IP entity's quota (start-up); replaces what was known."""
        self.default_ip_rate = INT_MAX
        self.ip_rates = {}
        for entity, values in snapshot.items():
            self.update_ip_rate(entity, values)

    def update_ip_rate(self, entity: IpQuotaEntity, values: QuotaValues) -> None:
        """The quota store's watch callback: ``entity``'s values now (empty: removed)."""
        value = values.get(CONNECTION_CREATION_RATE)
        rate = INT_MAX if value is None else min(int(value), INT_MAX)
        if entity.ip == DEFAULT:
            self.default_ip_rate = rate
        else:
            try:
                addr = _ip(entity.ip)
            except ValueError:
                log.warning("ignoring connection_creation_rate of %s: not an IP address",
                            entity.ip)
                return
            if value is None:
                self.ip_rates.pop(addr, None)
            else:
                self.ip_rates[addr] = rate
        log.info("connection_creation_rate of %s now %s",
                 "the default IP" if entity.ip == DEFAULT else entity.ip,
                 "unlimited" if value is None else rate)

    @property
    def tracked_ips(self) -> int:
        """Addresses whose creation rate is being measured (tests, metrics)."""
        return len(self._ip_windows)

    def _expire_ip_rates(self, now_ms: int) -> None:
        """Forget the IP rates whose samples have all expired (they measure nothing)."""
        expire = self._samples * self._window_ms
        self._next_ip_expiry_ms = now_ms + expire
        for addr in [a for a, w in self._ip_windows.items() if now_ms - w.last_ms >= expire]:
            del self._ip_windows[addr]

    # ------------------------------------------------------------------ accept / release

    def count_of(self, ip: str) -> int:
        return self.per_ip.get(_ip(ip), 0)

    def accept(self, listener: str, ip: str) -> Refusal | None:
        """Count a new connection from ``ip`` on ``listener``, or say which limit refuses it
        (nothing is counted then).  An unparsable ``ip`` (a Unix socket) is only subject to
        the listener and broker limits."""
        protected = listener == self.protected_listener
        now = self.time.milliseconds()
        key, limit = self.listener_max[listener]
        if self.per_listener[listener] >= limit:
            return Refusal(key, limit)
        if not protected and self.total >= self.broker_max:
            return Refusal("max.connections", self.broker_max)
        window = self._listener_windows[listener]
        key, rate = self.listener_rate[listener]
        if window.full(rate, now):
            return Refusal(key, rate)
        if not protected and self._broker_window.full(self.broker_rate, now):
            return Refusal("max.connection.creation.rate", self.broker_rate)
        addr: IpAddress | None
        try:
            addr = _ip(ip)
        except ValueError:
            addr = None
        ip_window: ConnectionRate | None = None
        if addr is not None:
            ip_rate = self.rate_for_ip(addr)
            if now >= self._next_ip_expiry_ms and self._ip_windows:
                self._expire_ip_rates(now)
            if ip_rate < INT_MAX:
                ip_window = self._ip_windows.get(addr)
                if ip_window is None:
                    ip_window = self._ip_windows[addr] = self._new_rate()
                if ip_window.full(ip_rate, now):
                    return Refusal(CONNECTION_CREATION_RATE, ip_rate)
            limit = self.max_for_ip(addr)
            if self.per_ip.get(addr, 0) >= limit:
                key = OVERRIDES_KEY if addr in self.ip_overrides else "max.connections.per.ip"
                return Refusal(key, limit)
            self.per_ip[addr] = self.per_ip.get(addr, 0) + 1
        self.total += 1
        self.per_listener[listener] += 1
        if rate < INT_MAX:
            window.record(now)
        if not protected and self.broker_rate < INT_MAX:
            self._broker_window.record(now)
        if ip_window is not None:
            ip_window.record(now)
        return None

    def release(self, listener: str, ip: str) -> None:
        """Give back a connection ``accept`` counted (call exactly once per connection)."""
        self.total -= 1
        self.per_listener[listener] -= 1
        try:
            addr = _ip(ip)
        except ValueError:
            return
        left = self.per_ip.get(addr, 0) - 1
        if left > 0:
            self.per_ip[addr] = left
        else:
            self.per_ip.pop(addr, None)

    def should_log(self, refusal: Refusal) -> int | None:
        """None: do not log this refusal (one was logged less than LOG_INTERVAL_MS ago);
        else the number of refusals of the same limit not logged since the last line."""
        now = self.time.milliseconds()
        state = self._log_state.get(refusal.key)
        if state is not None and now - state[0] < LOG_INTERVAL_MS:
            self._log_state[refusal.key] = (state[0], state[1] + 1)
            return None
        self._log_state[refusal.key] = (now, 0)
        return state[1] if state is not None else 0

