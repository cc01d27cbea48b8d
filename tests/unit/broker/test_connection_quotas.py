"""ConnectionQuotas without sockets: counting under churn, per-IP limits and overrides
(IPv4, IPv6, IPv4-mapped), listener and broker max.connections with the inter-broker
listener exempt, the creation rates (broker, listener, and per IP from the IP quota
entities) on MockTime, the rate-limited log line, and the start-up errors that name the
key."""

from __future__ import annotations

import ipaddress

import pytest

from millrace.broker.config import KafkaConfig
from millrace.broker.connection_quotas import ConnectionQuotas, Refusal, parse_ip_overrides
from millrace.broker.quota.entity import CONNECTION_CREATION_RATE, DEFAULT, IpQuotaEntity
from millrace.common.config import INT_MAX
from millrace.common.errors import ConfigError
from millrace.common.time import MockTime

TWO_LISTENERS = {
    "listeners": "CLIENT://:9093,REPLICATION://:9094",
    "listener.security.protocol.map": "CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT",
    "inter.broker.listener.name": "REPLICATION",
}


def quotas(time: MockTime | None = None, /, **props: str) -> ConnectionQuotas:
    return ConnectionQuotas(KafkaConfig(props), time or MockTime())


def test_defaults_refuse_nothing() -> None:
    q = quotas()
    for i in range(1000):
        assert q.accept("PLAINTEXT", f"10.0.{i // 250}.{i % 250}") is None
    assert q.total == 1000


def test_per_ip_limit_counts_exactly_under_churn() -> None:
    q = quotas(**{"max.connections.per.ip": "3"})
    for _ in range(3):
        assert q.accept("PLAINTEXT", "127.0.0.1") is None
    assert q.accept("PLAINTEXT", "127.0.0.1") == Refusal("max.connections.per.ip", 3)
    assert q.accept("PLAINTEXT", "127.0.0.2") is None  # another address has its own count
    for _ in range(100):  # churn: a slot freed is a slot taken
        q.release("PLAINTEXT", "127.0.0.1")
        assert q.accept("PLAINTEXT", "127.0.0.1") is None
        assert q.accept("PLAINTEXT", "127.0.0.1") is not None
    assert q.count_of("127.0.0.1") == 3 and q.total == 4
    for _ in range(3):
        q.release("PLAINTEXT", "127.0.0.1")
    q.release("PLAINTEXT", "127.0.0.2")
    assert q.per_ip == {} and q.total == 0 and q.per_listener == {"PLAINTEXT": 0}


def test_refused_connection_counts_nothing() -> None:
    q = quotas(**{"max.connections.per.ip": "1"})
    q.accept("PLAINTEXT", "127.0.0.1")
    before = (q.total, dict(q.per_listener), dict(q.per_ip))
    assert q.accept("PLAINTEXT", "127.0.0.1") is not None
    assert (q.total, q.per_listener, q.per_ip) == before


def test_override_raises_and_lowers_the_limit_for_its_address_only() -> None:
    q = quotas(**{"max.connections.per.ip": "1",
                  "max.connections.per.ip.overrides": "127.0.0.1:3, 10.0.0.9:0"})
    assert [q.accept("PLAINTEXT", "127.0.0.1") for _ in range(4)][3] == \
        Refusal("max.connections.per.ip.overrides", 3)
    assert q.accept("PLAINTEXT", "10.0.0.9") == Refusal("max.connections.per.ip.overrides", 0)
    assert q.accept("PLAINTEXT", "10.0.0.8") is None
    assert q.accept("PLAINTEXT", "10.0.0.8") == Refusal("max.connections.per.ip", 1)


def test_ipv6_hosts_compare_as_addresses() -> None:
    q = quotas(**{"max.connections.per.ip": "1",
                  "max.connections.per.ip.overrides": "0:0:0:0:0:0:0:1:2,[fe80::1]:3"})
    assert q.accept("PLAINTEXT", "::1") is None  # the same address spelled differently
    assert q.accept("PLAINTEXT", "0::1") is None
    assert q.accept("PLAINTEXT", "::1") is not None
    for _ in range(3):
        assert q.accept("PLAINTEXT", "FE80:0::1") is None
    assert q.accept("PLAINTEXT", "fe80::1") is not None


def test_ipv4_mapped_ipv6_peer_counts_as_its_ipv4_address() -> None:
    q = quotas(**{"max.connections.per.ip": "1"})
    assert q.accept("PLAINTEXT", "::ffff:127.0.0.1") is None
    assert q.accept("PLAINTEXT", "127.0.0.1") is not None
    q.release("PLAINTEXT", "127.0.0.1")
    assert q.per_ip == {}


def test_listener_max_connections_and_inter_broker_exemption() -> None:
    q = quotas(**TWO_LISTENERS, **{"max.connections": "3",
                                   "listener.name.client.max.connections": "2"})
    assert q.accept("CLIENT", "10.0.0.1") is None
    assert q.accept("CLIENT", "10.0.0.2") is None
    assert q.accept("CLIENT", "10.0.0.3") == \
        Refusal("listener.name.client.max.connections", 2)
    assert q.accept("REPLICATION", "10.0.0.4") is None
    # the broker-wide limit is reached: inter-broker connections are still let in ...
    assert q.accept("REPLICATION", "10.0.0.5") is None
    assert q.total == 4
    # ... up to the inter-broker listener's own limit (the broker value, unprefixed)
    assert q.accept("REPLICATION", "10.0.0.6") is None
    assert q.accept("REPLICATION", "10.0.0.7") == Refusal("max.connections", 3)
    q.release("CLIENT", "10.0.0.1")
    assert q.accept("CLIENT", "10.0.0.1") == Refusal("max.connections", 3)  # total is 4


SHORT_WINDOW = {"quota.window.num": "2", "quota.window.size.seconds": "1"}
"""A rate measured over at least one second: a bound of N admits N at once."""


def test_creation_rate_per_listener_and_broker() -> None:
    t = MockTime()
    q = quotas(t, **TWO_LISTENERS, **SHORT_WINDOW,
               **{"max.connection.creation.rate": "5",
                  "listener.name.client.max.connection.creation.rate": "2"})
    assert q.accept("CLIENT", "10.0.0.1") is None
    assert q.accept("CLIENT", "10.0.0.1") is None
    assert q.accept("CLIENT", "10.0.0.1") == \
        Refusal("listener.name.client.max.connection.creation.rate", 2)
    q.release("CLIENT", "10.0.0.1")  # closing does not give back creation rate
    assert q.accept("CLIENT", "10.0.0.1") is not None
    t.sleep(400)  # 3 over 1.4 s would be over 2/s
    assert q.accept("CLIENT", "10.0.0.1") is not None
    t.sleep(100)  # 3 over 1.5 s is 2/s
    assert q.accept("CLIENT", "10.0.0.1") is None
    # the inter-broker listener has its own (broker-value) rate and is exempt from the
    # broker-wide one
    for _ in range(5):
        assert q.accept("REPLICATION", "10.0.0.2") is None
    assert q.accept("REPLICATION", "10.0.0.2") == Refusal("max.connection.creation.rate", 5)


def test_broker_wide_rate_counts_every_other_listener() -> None:
    t = MockTime()
    props = {"listeners": "A://:1,B://:2,C://:3",
             "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT,C:PLAINTEXT",
             "inter.broker.listener.name": "C", "max.connection.creation.rate": "3",
             "listener.name.a.max.connection.creation.rate": "100",
             "listener.name.b.max.connection.creation.rate": "100"}
    q = quotas(t, **props, **SHORT_WINDOW)
    assert [q.accept(n, "10.0.0.1") for n in "ABA"] == [None, None, None]
    assert q.accept("B", "10.0.0.1") == Refusal("max.connection.creation.rate", 3)
    t.sleep(2000)  # the first second's sample has expired
    assert q.accept("B", "10.0.0.1") is None


def test_creation_rate_averages_over_the_quota_window_as_kafka() -> None:
    """Kafka's defaults (11 samples of 1 s): a new burst is spread over 10 s, so a rate of
    2 admits 20 connections at once; past that, about 2 a second."""
    t = MockTime()
    q = quotas(t, **{"max.connection.creation.rate": "2"})
    burst = [q.accept("PLAINTEXT", "10.0.0.1") for _ in range(25)]
    assert burst == [None] * 20 + [Refusal("max.connection.creation.rate", 2)] * 5
    admitted = 0
    for _ in range(6000):  # a try every 10 ms for a minute
        t.sleep(10)
        admitted += q.accept("PLAINTEXT", "10.0.0.1") is None
    assert 2 * 60 - 20 <= admitted <= 2 * 60 + 2


# ---------------------------------------------------------------------- IP rate quotas
def ip_rates(q: ConnectionQuotas, **rates: float) -> None:
    """``ips/<ip>`` quotas; the key ``default`` is ``ips/<default>``."""
    q.load_ip_rates({IpQuotaEntity(DEFAULT if ip == "default" else ip.replace("_", ".")):
                     {CONNECTION_CREATION_RATE: rate} for ip, rate in rates.items()})


def test_ip_rate_refuses_that_address_only_and_counts_nothing() -> None:
    t = MockTime()
    q = quotas(t, **SHORT_WINDOW, **{"max.connection.creation.rate": "100"})
    ip_rates(q, **{"10_0_0_1": 2})
    assert q.accept("PLAINTEXT", "10.0.0.1") is None
    assert q.accept("PLAINTEXT", "10.0.0.1") is None
    for _ in range(10):
        assert q.accept("PLAINTEXT", "10.0.0.1") == Refusal(CONNECTION_CREATION_RATE, 2)
    assert q.count_of("10.0.0.1") == 2
    for _ in range(20):  # another address has no IP quota
        assert q.accept("PLAINTEXT", "10.0.0.2") is None
    # the refused ones took none of the broker-wide rate: 22 of 100 over the first second
    for _ in range(78):
        assert q.accept("PLAINTEXT", "10.0.0.3") is None
    assert q.accept("PLAINTEXT", "10.0.0.3") == Refusal("max.connection.creation.rate", 100)
    t.sleep(500)  # 3 over 1.5 s is 2/s: accepted again, the refusals left no trace
    assert q.accept("PLAINTEXT", "10.0.0.1") is None


def test_ip_default_rate_holds_each_address_to_it_and_an_ip_entity_wins() -> None:
    q = quotas(MockTime(), **SHORT_WINDOW)
    ip_rates(q, default=1, **{"10_0_0_9": 3})
    for ip in ("10.0.0.1", "10.0.0.2", "::1"):  # each address its own rate
        assert q.accept("PLAINTEXT", ip) is None
        assert q.accept("PLAINTEXT", ip) == Refusal(CONNECTION_CREATION_RATE, 1)
    assert [q.accept("PLAINTEXT", "10.0.0.9") for _ in range(4)] == \
        [None, None, None, Refusal(CONNECTION_CREATION_RATE, 3)]


def test_ip_rate_changes_apply_at_once_and_removal_lifts_them() -> None:
    q = quotas(MockTime(), **SHORT_WINDOW)
    assert [q.accept("PLAINTEXT", "10.0.0.1") for _ in range(50)] == [None] * 50
    q.update_ip_rate(IpQuotaEntity("10.0.0.1"), {CONNECTION_CREATION_RATE: 1.0})
    assert q.accept("PLAINTEXT", "10.0.0.1") is None  # counted from the quota's start
    assert q.accept("PLAINTEXT", "10.0.0.1") == Refusal(CONNECTION_CREATION_RATE, 1)
    q.update_ip_rate(IpQuotaEntity("10.0.0.1"), {})  # removed: the default (none) again
    assert q.accept("PLAINTEXT", "10.0.0.1") is None
    q.update_ip_rate(IpQuotaEntity(DEFAULT), {CONNECTION_CREATION_RATE: 1.0})
    assert q.accept("PLAINTEXT", "10.0.0.1") == Refusal(CONNECTION_CREATION_RATE, 1)
    q.update_ip_rate(IpQuotaEntity(DEFAULT), {})
    assert q.accept("PLAINTEXT", "10.0.0.1") is None
    q.load_ip_rates({})
    assert q.rate_for_ip(ipaddress.ip_address("10.0.0.1")) == INT_MAX


def test_ip_entities_compare_as_addresses() -> None:
    q = quotas(MockTime(), **SHORT_WINDOW)
    ip_rates(q, **{"0:0:0:0:0:0:0:1": 1, "10_0_0_1": 1})
    assert q.accept("PLAINTEXT", "::1") is None
    assert q.accept("PLAINTEXT", "::1") == Refusal(CONNECTION_CREATION_RATE, 1)
    assert q.accept("PLAINTEXT", "::ffff:10.0.0.1") is None  # IPv4-mapped: 10.0.0.1
    assert q.accept("PLAINTEXT", "10.0.0.1") == Refusal(CONNECTION_CREATION_RATE, 1)
    assert q.accept("PLAINTEXT", "") is None  # a Unix socket has no address to limit
    assert q.accept("PLAINTEXT", "") is None


def test_ip_rates_of_addresses_gone_quiet_are_forgotten() -> None:
    t = MockTime()
    q = quotas(t, **SHORT_WINDOW)
    ip_rates(q, default=5)
    for i in range(100):
        assert q.accept("PLAINTEXT", f"10.0.1.{i}") is None
    assert q.tracked_ips == 100
    t.sleep(2000)  # every sample expired: they would measure nothing
    assert q.accept("PLAINTEXT", "10.0.2.1") is None
    assert q.tracked_ips == 1


def test_no_ip_quota_tracks_no_address() -> None:
    q = quotas(MockTime(), **{"max.connection.creation.rate": "1000000"})
    for i in range(100):
        assert q.accept("PLAINTEXT", f"10.0.1.{i}") is None
    assert q.tracked_ips == 0


def test_log_line_is_rate_limited_per_limit_and_counts_the_rest() -> None:
    t = MockTime()
    q = quotas(t)
    per_ip, broker = Refusal("max.connections.per.ip", 3), Refusal("max.connections", 9)
    assert q.should_log(per_ip) == 0
    assert [q.should_log(per_ip) for _ in range(50)] == [None] * 50
    assert q.should_log(broker) == 0  # another limit has its own line
    t.sleep(999)
    assert q.should_log(per_ip) is None
    t.sleep(1)
    assert q.should_log(per_ip) == 51
    t.sleep(5000)
    assert q.should_log(per_ip) == 0


def test_unix_socket_peer_is_only_subject_to_listener_limits() -> None:
    q = quotas(**{"max.connections.per.ip": "1", "max.connections": "2"})
    assert q.accept("PLAINTEXT", "") is None
    assert q.accept("PLAINTEXT", "") is None
    assert q.accept("PLAINTEXT", "") == Refusal("max.connections", 2)
    q.release("PLAINTEXT", "")
    assert q.total == 1


@pytest.mark.parametrize(("props", "key"), [
    ({"max.connections.per.ip": "-1"}, "max.connections.per.ip"),
    ({"max.connections": "-5"}, "max.connections"),
    ({"max.connection.creation.rate": "-1"}, "max.connection.creation.rate"),
    ({"listener.name.plaintext.max.connections": "-1"}, "max.connections"),
    ({"max.connections.per.ip": "0"}, "max.connections.per.ip"),
    ({"max.connections.per.ip.overrides": "127.0.0.1"}, "max.connections.per.ip.overrides"),
    ({"max.connections.per.ip.overrides": "127.0.0.1:x"}, "max.connections.per.ip.overrides"),
    ({"max.connections.per.ip.overrides": "127.0.0.1:-2"}, "max.connections.per.ip.overrides"),
    ({"max.connections.per.ip.overrides": "broker1.example:5"},
     "max.connections.per.ip.overrides"),
    ({"max.connections.per.ip.overrides": ":5"}, "max.connections.per.ip.overrides"),
])
def test_bad_values_name_the_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        ConnectionQuotas(KafkaConfig(props), MockTime())


def test_per_ip_zero_is_allowed_with_overrides() -> None:
    q = quotas(**{"max.connections.per.ip": "0",
                  "max.connections.per.ip.overrides": "127.0.0.1:1"})
    assert q.accept("PLAINTEXT", "10.1.1.1") == Refusal("max.connections.per.ip", 0)
    assert q.accept("PLAINTEXT", "127.0.0.1") is None


def test_parse_ip_overrides_splits_on_the_last_colon() -> None:
    assert parse_ip_overrides(" ::1:4 , 10.0.0.1 : 2,,") == {
        ipaddress.ip_address("::1"): 4, ipaddress.ip_address("10.0.0.1"): 2}
    assert parse_ip_overrides("") == {}
