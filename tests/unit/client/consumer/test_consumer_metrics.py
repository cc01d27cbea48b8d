"""The consumer's metric families on a MockTime: fetch-manager (lag, lead, throttle, sizes,
per-partition groups), consumer-metrics (poll timing) and coordinator-metrics (join, sync,
rebalance, heartbeat, commit) against the broker's own group coordinator (``SimBroker``)."""

from __future__ import annotations

from typing import Any

import pytest
from consumergen import SimBroker, batch
from test_coordinator import Member, settle
from test_fetcher import T0, T1, Env, fetch_response, partition_data

from millrace.client.consumer._internals.consumer_metrics import KafkaConsumerMetrics
from millrace.client.consumer._internals.fetch_metrics import FetchMetrics
from millrace.client.consumer._internals.request_future import Timer
from millrace.client.consumer.consumer_record import OffsetAndMetadata
from millrace.client.metrics import Metrics
from millrace.common.time import MockTime

FETCH = "consumer-fetch-manager-metrics"


def env_with_metrics(**kw: Any) -> tuple[Env, Metrics]:
    env = Env(**kw)
    metrics = Metrics(env.time, window_ms=1000, samples=2, tags={"client-id": "c"})
    env.fetcher._metrics = FetchMetrics(metrics)
    return env, metrics


def test_records_lag_and_lead_after_a_fetch_at_a_known_high_watermark() -> None:
    env, metrics = env_with_metrics()
    env.assign((T0, 0), (T1, 0))
    part0 = partition_data(0, batch(0, [b"v"] * 10), hw=100)
    part0.log_start_offset = 0
    part1 = partition_data(1, batch(0, [b"v"] * 4), hw=4)
    env.fetch(part0, part1)
    assert env.offsets() == {T0: list(range(10)), T1: list(range(4))}
    m = metrics.snapshot()
    assert m[FETCH]["records-lag-max"] == 90  # HW 100 - position 10
    assert m[f"{FETCH}.t-0"]["records-lag"] == 90 and m[f"{FETCH}.t-0"]["records-lead"] == 10
    assert m[f"{FETCH}.t-1"]["records-lag"] == 0 and m[f"{FETCH}.t-1"]["records-lead"] == 4
    assert m[FETCH]["records-lead-min"] == 4
    assert m[FETCH]["fetch-total"] == 1
    assert m[FETCH]["bytes-consumed-total"] == len(part0.records) + len(part1.records)
    assert m[FETCH]["fetch-size-max"] == len(part0.records) + len(part1.records)


def test_lag_max_falls_back_to_zero_once_the_window_passes() -> None:
    env, metrics = env_with_metrics()
    env.assign((T0, 0))
    env.fetch(partition_data(0, batch(0, [b"v"] * 10), hw=50))
    env.offsets()
    assert metrics.snapshot()[FETCH]["records-lag-max"] == 40
    env.fetch(partition_data(0, batch(10, [b"v"] * 40), hw=50))
    env.offsets()
    group = metrics.snapshot()
    assert group[f"{FETCH}.t-0"]["records-lag"] == 0
    assert group[FETCH]["records-lag-max"] == 40  # still in the window
    env.time.sleep(2500)  # two 1 s samples: the lagging one has aged out
    env.fetch(partition_data(0, None, hw=50))  # an empty answer still measures the lag
    env.offsets()
    assert metrics.snapshot()[FETCH]["records-lag-max"] == 0


def test_fetch_throttle_time_and_latency_from_the_response() -> None:
    env, metrics = env_with_metrics()
    env.assign((T0, 0))
    response = fetch_response(partition_data(0, batch(0, [b"v"])))
    response.throttle_time_ms = 300
    env.responses.append(response)
    env.fetcher.send_fetches()
    env.time.sleep(25)
    env.client.poll(0)
    group = metrics.snapshot()[FETCH]
    assert group["fetch-throttle-time-max"] == 300 and group["fetch-latency-max"] == 25
    env.offsets()
    env.fetch(partition_data(0, None))  # throttle 0 this time
    assert metrics.snapshot()[FETCH]["fetch-throttle-time-avg"] == 150


def test_a_partition_s_metrics_go_when_it_is_unassigned() -> None:
    env, metrics = env_with_metrics()
    env.assign((T0, 0), (T1, 0))
    env.fetch(partition_data(0, batch(0, [b"v"])), partition_data(1, batch(0, [b"v"])))
    env.offsets()
    assert {f"{FETCH}.t-0", f"{FETCH}.t-1"} <= set(metrics.snapshot())
    env.subs.assign_from_user([T0])
    env.fetcher.collect_fetch()
    groups = set(metrics.snapshot())
    assert f"{FETCH}.t-0" in groups and f"{FETCH}.t-1" not in groups


def test_poll_metrics() -> None:
    clock = MockTime(0)
    metrics = Metrics(clock)
    poll = KafkaConsumerMetrics(metrics)
    assert metrics.snapshot()["consumer-metrics"]["last-poll-seconds-ago"] == -1
    poll.record_poll_start(clock.milliseconds())
    clock.sleep(100)  # 100 ms inside the first poll
    poll.record_poll_end(clock.milliseconds())
    clock.sleep(300)  # the application works
    poll.record_poll_start(clock.milliseconds())  # 400 ms after the first began
    clock.sleep(100)
    poll.record_poll_end(clock.milliseconds())
    group = metrics.snapshot()["consumer-metrics"]
    assert group["time-between-poll-max"] == 400 and group["time-between-poll-avg"] == 200
    # first poll: 100 / (100 + 0); second: 100 / (100 + 400)
    assert group["poll-idle-ratio-avg"] == pytest.approx((1.0 + 0.2) / 2)
    clock.sleep(2900)
    assert metrics.snapshot()["consumer-metrics"]["last-poll-seconds-ago"] == 3


@pytest.fixture
def broker() -> SimBroker:
    return SimBroker(MockTime())


def coordinator_metrics(member: Member) -> dict[str, float]:
    group: dict[str, float] = member.coord.sensors.metrics.snapshot()[
        "consumer-coordinator-metrics"]
    return group


def test_join_sync_and_rebalance_counts(broker: SimBroker) -> None:
    a = Member(broker, "a")
    before = coordinator_metrics(a)
    assert (before["rebalance-total"], before["last-rebalance-seconds-ago"]) == (0, -1)
    settle(a)
    m = coordinator_metrics(a)
    # the first JoinGroup is answered MEMBER_ID_REQUIRED: a protocol step, not a failure
    assert (m["join-total"], m["sync-total"], m["rebalance-total"]) == (1, 1, 1)
    assert m["failed-rebalance-total"] == 0
    assert m["rebalance-latency-total"] == m["rebalance-latency-max"] >= 0
    assert m["rebalance-rate-per-hour"] > 0
    b = Member(broker, "b")
    settle(a, b, until=lambda: a.assigned and b.assigned)
    m = coordinator_metrics(a)
    assert m["rebalance-total"] == 2 and m["join-total"] == 2
    a.time.sleep(5000)
    assert coordinator_metrics(a)["last-rebalance-seconds-ago"] == 5


def test_a_failed_sync_counts_as_a_failed_rebalance(broker: SimBroker) -> None:
    from millrace.protocol import SyncGroupResponse

    a = Member(broker, "a")

    def fail_once(body: Any, version: int) -> Any:
        del broker.handlers["SyncGroupRequest"]  # the next SyncGroup reaches the coordinator
        return SyncGroupResponse(error_code=27, assignment=b"")  # REBALANCE_IN_PROGRESS

    broker.handlers["SyncGroupRequest"] = fail_once
    settle(a)
    m = coordinator_metrics(a)
    assert (m["failed-rebalance-total"], m["rebalance-total"], m["sync-total"]) == (1, 1, 1)


def test_heartbeats_and_commit_latency(broker: SimBroker) -> None:
    a = Member(broker, "a")
    settle(a)
    from millrace.protocol import HeartbeatResponse

    def slow(body: Any, version: int) -> Any:
        a.time.sleep(12)  # the answer takes 12 ms
        return HeartbeatResponse(error_code=0)

    hb = coordinator_metrics(a)["heartbeat-total"]
    assert coordinator_metrics(a)["heartbeat-response-time-max"] < 12
    broker.handlers["HeartbeatRequest"] = slow
    a.time.sleep(1000)
    a.heartbeat()  # heartbeat.interval.ms passed: one is sent
    m = coordinator_metrics(a)
    assert m["heartbeat-total"] == hb + 1 and m["heartbeat-response-time-max"] == 12
    a.time.sleep(3000)
    assert coordinator_metrics(a)["last-heartbeat-seconds-ago"] == 3

    assert coordinator_metrics(a)["commit-total"] == 0
    a.coord.commit_offsets_async({T0: OffsetAndMetadata(5)}, None)
    a.time.sleep(37)
    a.client.poll(0)
    m = coordinator_metrics(a)
    assert (m["commit-total"], m["commit-latency-max"], m["commit-latency-avg"]) == (1, 37, 37)
    assert a.coord.commit_offsets_sync({T0: OffsetAndMetadata(6)}, Timer(a.time, 1000))
    assert coordinator_metrics(a)["commit-total"] == 2
