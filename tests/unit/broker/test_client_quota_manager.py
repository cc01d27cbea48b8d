"""Client quota enforcement without sockets: the windowed ``Rate``, Kafka's precedence
of quota entities (defaults included) and which usage they share, the throttle time
formula on MockTime, window expiry, quota removal, and the per-request policy of
``throttling`` (produce bytes, acks=0, throttled fetch without data, exempt
inter-broker principals, handler time counted without waits)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Generator
from types import SimpleNamespace
from typing import Any, cast

import pytest

from millrace.broker.config import KafkaConfig
from millrace.broker.context import RequestContext
from millrace.broker.quota.client_quota_manager import (
    INACTIVE_SENSOR_EXPIRATION_MS,
    ClientQuotaManager,
    ClientQuotas,
)
from millrace.broker.quota.entity import (
    CONSUMER_BYTE_RATE,
    DEFAULT,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaEntity,
)
from millrace.broker.quota.rate import Rate
from millrace.broker.quota.throttling import TimedCoroutine, cap_fetch, charge
from millrace.common.errors import ConfigError
from millrace.common.time import MockTime
from millrace.protocol import API, ApiKey, Request, RequestHeader
from millrace.protocol.types import (
    FetchRequest,
    FetchResponse,
    ProduceRequest,
    ProduceResponse,
    UpdateMetadataResponse,
)
from millrace.security.acl import AclOperation
from millrace.security.kafka_principal import KafkaPrincipal

T0 = 1_700_000_000_000
U, C = "alice", "app"


def manager(samples: int = 11, window_s: int = 1, **kw: Any) -> ClientQuotaManager:
    return ClientQuotaManager(PRODUCER_BYTE_RATE, samples, window_s, **kw)


# ---------------------------------------------------------------------- Rate
def test_rate_spreads_a_first_burst_over_samples_minus_one_windows() -> None:
    r = Rate(11, 1000)
    r.record(20_000, T0)
    assert r.window_size_ms(T0) == 10_000
    assert r.measure(T0) == pytest.approx(2_000.0)
    # 12.5 s later the window is the elapsed time, not the minimum
    r.record(0, T0 + 10_000)
    r.record(5_000, T0 + 10_500)
    assert r.window_size_ms(T0 + 10_500) == 10_500
    assert r.measure(T0 + 10_500) == pytest.approx(25_000 / 10.5)


def test_rate_forgets_samples_older_than_the_window() -> None:
    r = Rate(11, 1000)
    r.record(1_000_000, T0)
    assert r.measure(T0 + 10_999) > 0
    assert r.measure(T0 + 11_000) == 0.0  # samples * window after its last value


def test_rate_recycles_samples_and_takes_values_back() -> None:
    r = Rate(3, 1000)
    for i in range(10):  # one value per window: only the last 3 windows count
        r.record(100, T0 + i * 1000)
    assert r.measure(T0 + 9_000) == pytest.approx(300 * 1000 / r.window_size_ms(T0 + 9_000))
    r.record(-100, T0 + 9_000)
    assert r.measure(T0 + 9_000) == pytest.approx(200 * 1000 / r.window_size_ms(T0 + 9_000))


# ---------------------------------------------------------------------- precedence
PRECEDENCE = [
    QuotaEntity(U, C),
    QuotaEntity(U, DEFAULT),
    QuotaEntity(U, None),
    QuotaEntity(DEFAULT, C),
    QuotaEntity(DEFAULT, DEFAULT),
    QuotaEntity(DEFAULT, None),
    QuotaEntity(None, C),
    QuotaEntity(None, DEFAULT),
]


def test_the_most_specific_entity_wins_then_each_next_one() -> None:
    m = manager()
    m.set_quotas({e: float(i + 1) for i, e in enumerate(PRECEDENCE)})
    for i, entity in enumerate(PRECEDENCE):
        assert m.quota(U, C) == float(i + 1), entity
        m.update_quota(entity, None)
    assert m.quota(U, C) is None
    assert not m.enabled


def test_defaults_apply_to_other_users_and_client_ids_only_where_named() -> None:
    m = manager()
    m.set_quotas({QuotaEntity(U, None): 10.0, QuotaEntity(None, DEFAULT): 99.0,
                  QuotaEntity(DEFAULT, "batch"): 5.0})
    assert m.quota(U, "anything") == 10.0          # users/alice beats every client entity
    assert m.quota("bob", "batch") == 5.0          # users/<default>/clients/batch
    assert m.quota("bob", "web") == 99.0           # clients/<default>
    m.update_quota(QuotaEntity(None, DEFAULT), None)
    assert m.quota("bob", "web") is None           # negative control: no default, no quota


def test_a_user_quota_is_shared_by_its_client_ids_a_default_is_not() -> None:
    m = manager()
    m.set_quotas({QuotaEntity(U, None): 1000.0, QuotaEntity(None, DEFAULT): 1000.0})
    assert m.record_and_get_throttle_time_ms(U, "one", 6_000, T0) == 0
    # the same user through another client id: one bucket, now 12 kB over 10 s
    assert m.record_and_get_throttle_time_ms(U, "two", 6_000, T0) > 0
    # clients/<default>: every client id has a bucket of its own
    assert m.record_and_get_throttle_time_ms("bob", "x", 6_000, T0) == 0
    assert m.record_and_get_throttle_time_ms("carol", "y", 6_000, T0) == 0
    assert m.record_and_get_throttle_time_ms("dave", "x", 6_000, T0) > 0  # bob's client id


# ---------------------------------------------------------------------- throttle time
def test_throttle_time_is_overshoot_over_bound_times_window() -> None:
    clock = MockTime(T0)
    m = manager()
    m.update_quota(QuotaEntity(None, C), 1000.0)
    # 20 kB at once: 2000 B/s over the 10 s minimum window -> (2000-1000)/1000 * 10 s
    assert m.record_and_get_throttle_time_ms(U, C, 20_000, clock.milliseconds()) == 10_000
    clock.sleep(10_500)
    # 25 kB over 10.5 s: 2381 B/s -> (2381-1000)/1000 * 10.5 s = 14500 ms
    got = m.record_and_get_throttle_time_ms(U, C, 5_000, clock.milliseconds())
    assert got == round((25_000 / 10.5 - 1000) / 1000 * 10_500)


def test_within_the_quota_no_throttle() -> None:
    m = manager()
    m.update_quota(QuotaEntity(U, None), 1000.0)
    for i in range(100):  # 1 kB/s exactly, never over
        assert m.record_and_get_throttle_time_ms(U, C, 100, T0 + i * 100) == 0


def test_request_quota_throttle_is_capped_at_one_window() -> None:
    m = ClientQuotaManager(REQUEST_PERCENTAGE, 11, 1, max_throttle_ms=1000)
    m.update_quota(QuotaEntity(U, None), 1.0)
    assert m.record_and_get_throttle_time_ms(U, C, 500.0, T0) == 1000


def test_usage_expires_with_the_window() -> None:
    clock = MockTime(T0)
    m = manager()
    m.update_quota(QuotaEntity(U, None), 1000.0)
    assert m.record_and_get_throttle_time_ms(U, C, 50_000, clock.milliseconds()) > 0
    clock.sleep(11_000)  # quota.window.num * quota.window.size.seconds later
    assert m.record_and_get_throttle_time_ms(U, C, 1_000, clock.milliseconds()) == 0


def test_window_config_keys_drive_the_rate() -> None:
    quotas = ClientQuotas(KafkaConfig({"quota.window.num": "3",
                                       "quota.window.size.seconds": "2"}))
    quotas.update(QuotaEntity(U, None), {PRODUCER_BYTE_RATE: 1000.0})
    # 3 samples of 2 s: the minimum window is 4 s -> 8 kB is 2000 B/s -> 4 s throttle
    assert quotas.produce.record_and_get_throttle_time_ms(U, C, 8_000, T0) == 4_000
    assert quotas.request.max_throttle_ms == 2_000
    with pytest.raises(ConfigError, match=r"quota\.window\.num"):
        KafkaConfig({"quota.window.num": "0"})


def test_removing_the_quota_stops_throttling() -> None:
    quotas = ClientQuotas(KafkaConfig({}))
    assert not quotas.enabled
    entity = QuotaEntity(U, C)
    quotas.load({entity: {PRODUCER_BYTE_RATE: 1000.0, CONSUMER_BYTE_RATE: 500.0}})
    assert quotas.enabled and quotas.produce.enabled and quotas.fetch.enabled
    assert not quotas.request.enabled
    assert quotas.produce.record_and_get_throttle_time_ms(U, C, 50_000, T0) > 0
    quotas.update(entity, {CONSUMER_BYTE_RATE: 500.0})  # producer_byte_rate removed
    assert not quotas.produce.enabled and quotas.enabled
    assert quotas.produce.record_and_get_throttle_time_ms(U, C, 50_000, T0 + 1) == 0
    quotas.update(entity, {})
    assert not quotas.enabled and quotas.fetch.sensor_count == 0


def test_a_changed_bound_applies_to_usage_already_recorded() -> None:
    m = manager()
    entity = QuotaEntity(U, None)
    m.update_quota(entity, 10_000.0)
    assert m.record_and_get_throttle_time_ms(U, C, 20_000, T0) == 0
    m.update_quota(entity, 1_000.0)  # same group, lower bound: 2000 B/s is now over
    assert m.record_and_get_throttle_time_ms(U, C, 0, T0) == 10_000


def test_clients_without_a_quota_record_nothing_and_idle_groups_are_dropped() -> None:
    m = manager()
    m.update_quota(QuotaEntity(U, None), 1000.0)
    assert m.record_and_get_throttle_time_ms("bob", C, 1e9, T0) == 0
    assert m.sensor_count == 0
    m.record_and_get_throttle_time_ms(U, C, 10, T0)
    assert m.sensor_count == 1
    m.record_and_get_throttle_time_ms("bob", C, 10, T0 + INACTIVE_SENSOR_EXPIRATION_MS)
    assert m.sensor_count == 0


def test_limits_says_whether_a_quota_applies_and_follows_changes() -> None:
    m = manager()
    assert not m.limits(U, C)
    m.update_quota(QuotaEntity(None, DEFAULT), 1000.0)
    assert m.limits(U, C) and m.limits("bob", "x")
    m.update_quota(QuotaEntity(None, DEFAULT), None)
    m.update_quota(QuotaEntity(U, None), 1000.0)
    assert m.limits(U, C) and not m.limits("bob", "x")
    assert not m.limits("bob", "x")  # remembered as unlimited: still right


def test_max_value_in_quota_window() -> None:
    m = manager()
    assert m.max_value_in_quota_window(U, C) == float("inf")
    m.update_quota(QuotaEntity(U, None), 1000.0)
    assert m.max_value_in_quota_window(U, C) == 10_000.0  # (11 - 1) windows of 1 s


# ---------------------------------------------------------------------- per request
class _Authorizer:
    """Only User:broker may ClusterAction."""

    def authorize(self, principal: KafkaPrincipal, _host: str, action: Any) -> bool:
        return bool(principal.name == "broker" or action.operation != AclOperation.CLUSTER_ACTION)


def _ctx(key: int, version: int, user: str = U, client_id: str = C,
         authorizer: bool = False) -> RequestContext:
    acls = SimpleNamespace(authorizer=_Authorizer()) if authorizer else None
    services: Any = SimpleNamespace(acls=acls)
    return RequestContext(RequestHeader(key, version, 1, client_id), API[key], "127.0.0.1",
                          5555, services, principal=KafkaPrincipal.user(user))


def _request(ctx: RequestContext, body: Any) -> Request:
    return Request(ctx.header, ctx.api, body)


def _produce(size: int, acks: int = 1) -> ProduceRequest:
    part = ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=bytes(size))
    return ProduceRequest(acks=acks, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[part])])


def _quotas(**values: float) -> ClientQuotas:
    quotas = ClientQuotas(KafkaConfig({}))
    quotas.load({QuotaEntity(U, None): dict(values)})
    return quotas


def _handler_time(ms: float) -> TimedCoroutine:
    """A handler that ran ``ms`` (never awaited here)."""
    timed = TimedCoroutine(cast(Any, None))
    timed.elapsed_ns = int(ms * 1_000_000)
    return timed


def test_produce_is_charged_its_record_bytes_and_the_response_says_so() -> None:
    quotas = _quotas(**{PRODUCER_BYTE_RATE: 1000.0})
    ctx = _ctx(ApiKey.PRODUCE, 9)
    throttle, parts = charge(quotas, ctx, _request(ctx, _produce(5_000)),
                             ProduceResponse(responses=[]), None, T0)
    assert throttle == 0
    body = ProduceResponse(responses=[])
    throttle, parts = charge(quotas, ctx, _request(ctx, _produce(15_000)), body, None, T0)
    assert throttle == 10_000  # 20 kB over 10 s at 1 kB/s
    decoded = API[ApiKey.PRODUCE].response.decode(b"".join(parts)[9:], 9)  # size, id, tags
    assert decoded.throttle_time_ms == 10_000


def test_acks_0_produce_is_muted_for_bytes_but_not_charged_handler_time() -> None:
    quotas = _quotas(**{REQUEST_PERCENTAGE: 1.0})
    ctx = _ctx(ApiKey.PRODUCE, 9)
    throttle, parts = charge(quotas, ctx, _request(ctx, _produce(10, acks=0)), None,
                             _handler_time(900), T0)
    assert (throttle, parts) == (0, [])
    ctx1 = _ctx(ApiKey.PRODUCE, 9)
    throttle, _ = charge(quotas, ctx1, _request(ctx1, _produce(10, acks=1)),
                         ProduceResponse(responses=[]), _handler_time(900), T0)
    assert throttle == 1000  # the same work with acks=1: way over 1 %, capped at 1 s


def _fetch_body(size: int) -> FetchResponse:
    part = FetchResponse.FetchableTopicResponse.PartitionData(
        partition_index=0, error_code=0, high_watermark=5, records=bytes(size))
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[
        FetchResponse.FetchableTopicResponse(topic="t", partitions=[part])])


def _fetch_request(ctx: RequestContext, replica_id: int = -1,
                   max_bytes: int = 50_000_000) -> Request:
    return _request(ctx, FetchRequest(replica_id=replica_id, max_wait_ms=0, min_bytes=1,
                                      max_bytes=max_bytes, topics=[]))


def test_a_throttled_fetch_carries_no_data_and_is_not_charged_for_it() -> None:
    quotas = _quotas(**{CONSUMER_BYTE_RATE: 1000.0})
    ctx = _ctx(ApiKey.FETCH, 12)
    throttle, parts = charge(quotas, ctx, _fetch_request(ctx), _fetch_body(8_000), None, T0)
    assert throttle == 0 and sum(len(p) for p in parts) > 8_000
    throttle, parts = charge(quotas, ctx, _fetch_request(ctx), _fetch_body(8_000), None, T0)
    assert throttle > 0
    decoded = API[ApiKey.FETCH].response.decode(b"".join(parts)[9:], 12)
    assert decoded.responses == [] and decoded.throttle_time_ms == throttle
    # the second 8 kB were taken back: 6 kB more still fit in the 10 s window ...
    assert quotas.fetch.record_and_get_throttle_time_ms(U, C, 1_500, T0) == 0
    # ... and the negative control: past the bound it throttles
    assert quotas.fetch.record_and_get_throttle_time_ms(U, C, 1_000, T0) > 0


def test_fetch_max_bytes_is_capped_to_one_quota_window() -> None:
    quotas = _quotas(**{CONSUMER_BYTE_RATE: 1000.0})
    ctx = _ctx(ApiKey.FETCH, 12)
    request = _fetch_request(ctx)
    cap_fetch(quotas, ctx, request)
    assert request.body.max_bytes == 10_000
    other = _ctx(ApiKey.FETCH, 12, user="bob")
    request = _fetch_request(other)
    cap_fetch(quotas, other, request)
    assert request.body.max_bytes == 50_000_000  # bob has no quota


def test_inter_broker_requests_are_exempt_only_for_cluster_action_principals() -> None:
    quotas = ClientQuotas(KafkaConfig({}))
    quotas.load({QuotaEntity(DEFAULT, None): {REQUEST_PERCENTAGE: 1.0,
                                              CONSUMER_BYTE_RATE: 1000.0}})
    for user, exempt in (("broker", True), ("mallory", False)):
        ctx = _ctx(ApiKey.UPDATE_METADATA, 7, user=user, authorizer=True)
        throttle, _ = charge(quotas, ctx, _request(ctx, None),
                             UpdateMetadataResponse(error_code=0), _handler_time(900), T0)
        assert (throttle == 0) is exempt, user
        # a follower fetch: exempt from the byte rate too, unless the replica id is forged
        ctx = _ctx(ApiKey.FETCH, 12, user=user, authorizer=True)
        throttle, _ = charge(quotas, ctx, _fetch_request(ctx, replica_id=2),
                             _fetch_body(50_000), None, T0)
        assert (throttle == 0) is exempt, user


# ---------------------------------------------------------------------- handler time
class _Clock:
    def __init__(self) -> None:
        self.ns = 0

    def __call__(self) -> int:
        return self.ns


def test_handler_time_counts_running_not_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(time, "perf_counter_ns", clock)

    class _Pause:
        def __await__(self) -> Generator[None, None, None]:
            yield None  # suspended: the test's clock runs on meanwhile

    async def handler() -> str:
        clock.ns += 3_000_000  # 3 ms of work
        await _Pause()
        clock.ns += 2_000_000  # 2 ms more
        return "done"

    timed = TimedCoroutine(handler())
    gen = timed.__await__()
    next(gen)
    clock.ns += 500_000_000  # half a second parked (a purgatory, a long poll)
    with pytest.raises(StopIteration) as done:
        gen.send(None)
    assert done.value.value == "done"
    assert timed.elapsed_ns == 5_000_000


def test_timed_coroutine_passes_cancellation_into_the_handler() -> None:
    seen: list[str] = []

    async def handler() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def main() -> None:
        task = asyncio.ensure_future(TimedCoroutine(handler()))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert seen == ["cancelled"]
