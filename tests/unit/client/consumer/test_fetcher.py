"""Fetcher and CompletedFetch: requests per leader at the positions, max.poll.records,
control batches, CRC checks, read_committed, out-of-range handling, stale data, errors that
keep the position; OffsetFetcher resets and lookups."""

from __future__ import annotations

from typing import Any

import pytest
from consumergen import (
    BROKER,
    BROKER1,
    FakeNetworkClient,
    SimBroker,
    batch,
    consumer_metadata,
    metadata_response,
    subscriptions,
    tps,
)

from millrace.client.cluster import TopicPartition
from millrace.client.consumer._internals.fetcher import Fetcher
from millrace.client.consumer._internals.offset_fetcher import OffsetFetcher
from millrace.client.consumer._internals.request_future import RequestFuture
from millrace.client.consumer._internals.subscription_state import (
    FetchPosition,
    OffsetResetStrategy,
    SubscriptionState,
)
from millrace.client.consumer.consumer_record import OffsetAndMetadata
from millrace.client.consumer.errors import (
    LogTruncationError,
    OffsetOutOfRangeError,
    RecordDeserializationError,
)
from millrace.client.errors import KafkaTimeoutError
from millrace.client.metadata import LeaderAndEpoch
from millrace.client.serialization import IntegerDeserializer, StringDeserializer
from millrace.common.errors import CorruptRecordError, Errors, UnsupportedVersionError
from millrace.common.time import MockTime
from millrace.protocol import FetchResponse, ListOffsetsResponse, OffsetForLeaderEpochResponse
from millrace.record import build_end_txn_marker, set_partition_leader_epoch

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def partition_data(partition: int, records: bytes | None = None, *, error: int = 0,
                   hw: int = 100, lso: int = -1, aborted: list[tuple[int, int]] | None = None
                   ) -> Any:
    cls = FetchResponse.FetchableTopicResponse.PartitionData
    txn = cls.AbortedTransaction
    return cls(partition_index=partition, error_code=error, high_watermark=hw,
               last_stable_offset=lso, log_start_offset=0, records=records,
               aborted_transactions=None if aborted is None else [
                   txn(producer_id=p, first_offset=o) for p, o in aborted])


def fetch_response(*parts: Any, topic: str = "t") -> Any:
    return FetchResponse(error_code=0, session_id=0, responses=[
        FetchResponse.FetchableTopicResponse(topic=topic, partitions=list(parts))])


class Env:
    def __init__(self, partitions: int = 2, reset: str = "earliest",
                 leaders: dict[TopicPartition, int] | None = None, **fetcher: Any) -> None:
        self.time = MockTime()
        self.subs: SubscriptionState = subscriptions(reset)
        self.metadata = consumer_metadata(self.subs, {"t": partitions}, self.time, leaders)
        self.broker = SimBroker(self.time)
        self.client = FakeNetworkClient(self.broker, self.time, metadata=self.metadata)
        self.fetcher = Fetcher(self.client, self.metadata, self.subs,  # type: ignore[arg-type]
                               **fetcher)
        self.responses: list[Any] = []
        self.broker.handlers["FetchRequest"] = lambda body, version: self.responses.pop(0)

    def assign(self, *positions: tuple[TopicPartition, int]) -> None:
        self.subs.assign_from_user([tp for tp, _ in positions])
        for tp, offset in positions:
            self.subs.seek(tp, offset)

    def fetch(self, *parts: Any) -> None:
        """Send fetches and answer the first with these partitions."""
        self.responses.append(fetch_response(*parts))
        assert self.fetcher.send_fetches() >= 1
        self.client.poll(0)

    def offsets(self) -> dict[TopicPartition, list[int]]:
        return {tp: [r.offset for r in recs] for tp, recs in self.fetcher.collect_fetch().items()}


def test_fetch_requests_go_to_each_leader_at_the_positions() -> None:
    env = Env(3, leaders={TopicPartition("t", 2): BROKER1.id}, fetch_max_wait_ms=250,
              fetch_min_bytes=7, isolation_level=1, max_partition_fetch_bytes=1234)
    env.assign((T0, 5), (T1, 9), (TopicPartition("t", 2), 0))
    env.subs.pause(T1)
    sent: list[tuple[int, Any]] = []
    env.client.send = lambda node, body, **kw: sent.append((node.id, body)) or \
        FakeNetworkClient.send(env.client, node, body, **kw)  # type: ignore[method-assign]
    assert env.fetcher.send_fetches() == 2
    by_node = {node: body for node, body in sent}
    body = by_node[BROKER.id]
    assert (body.session_id, body.session_epoch, body.replica_id) == (0, -1, -1)
    assert (body.max_wait_ms, body.min_bytes, body.isolation_level) == (250, 7, 1)
    [topic] = body.topics
    assert [(p.partition, p.fetch_offset, p.partition_max_bytes) for p in topic.partitions] \
        == [(0, 5, 1234)]
    assert [p.partition for p in by_node[BROKER1.id].topics[0].partitions] == [2]
    # a node with a fetch in flight gets no second one
    assert env.fetcher.send_fetches() == 0


def test_max_poll_records_and_positions() -> None:
    env = Env(max_poll_records=500)
    env.assign((T0, 0))
    records = b"".join(batch(base, [b"v"] * 400) for base in (0, 400, 800))
    env.fetch(partition_data(0, records))
    sizes = []
    while True:
        got = env.fetcher.collect_fetch()
        if not got:
            break
        sizes.append(len(got[T0]))
        assert env.subs.position(T0) == FetchPosition(sum(sizes))
    assert sizes == [500, 500, 200]
    assert env.subs.partition_lag(T0, read_committed=False) == 100 - 1200


def test_buffered_partitions_are_not_fetched_again() -> None:
    env = Env(max_poll_records=1)
    env.assign((T0, 0), (T1, 0))
    env.fetch(partition_data(0, batch(0, [b"a", b"b"])))  # the broker had nothing for t-1
    assert env.offsets() == {T0: [0]}
    sent: list[Any] = []
    env.client.send = lambda node, body, **kw: sent.append(body) or \
        FakeNetworkClient.send(env.client, node, body, **kw)  # type: ignore[method-assign]
    env.fetcher.send_fetches()
    assert [p.partition for p in sent[0].topics[0].partitions] == [1]


def test_control_batches_are_skipped_and_stepped_over() -> None:
    env = Env()
    env.assign((T0, 0))
    marker = build_end_txn_marker(7, 0, True, 0, 1000, base_offset=3)
    records = batch(0, [b"a", b"b", b"c"]) + marker + batch(4, [b"d"]) \
        + build_end_txn_marker(7, 0, True, 0, 1000, base_offset=5)
    env.fetch(partition_data(0, records))
    got = env.fetcher.collect_fetch()[T0]
    assert [(r.offset, r.value) for r in got] == [(0, b"a"), (1, b"b"), (2, b"c"), (4, b"d")]
    assert env.subs.position(T0) == FetchPosition(6)


def test_a_fetch_offset_inside_a_batch_skips_its_head() -> None:
    env = Env()
    env.assign((T0, 2))
    env.fetch(partition_data(0, batch(0, [b"a", b"b", b"c", b"d"])))
    assert env.offsets() == {T0: [2, 3]}


def test_crc_mismatch_raises_and_keeps_the_position() -> None:
    good = batch(0, [b"a", b"b"])
    bad = bytearray(batch(2, [b"c", b"d"]))
    bad[-2] ^= 0x01  # the last value byte (before the header count): the CRC no longer matches
    env = Env()
    env.assign((T0, 0))
    env.fetch(partition_data(0, good + bytes(bad)))
    assert env.offsets() == {T0: [0, 1]}, "records before the bad batch are handed out"
    for _ in range(2):
        with pytest.raises(CorruptRecordError, match="t-0 at offset 2"):
            env.fetcher.collect_fetch()
    assert env.subs.position(T0) == FetchPosition(2)


def test_crc_check_can_be_turned_off() -> None:
    bad = bytearray(batch(0, [b"c"]))
    bad[-2] ^= 0x01
    env = Env(check_crcs=False)
    env.assign((T0, 0))
    env.fetch(partition_data(0, bytes(bad)))
    [record] = env.fetcher.collect_fetch()[T0]
    assert record.value == b"b"  # the corruption goes unnoticed


def _transactional_log() -> tuple[bytes, list[tuple[int, int]]]:
    aborted = batch(0, [b"x1", b"x2"], producer_id=7, transactional=True)
    abort = build_end_txn_marker(7, 0, False, 0, 1000, base_offset=2)
    committed = batch(3, [b"c1", b"c2"], producer_id=8, transactional=True)
    commit = build_end_txn_marker(8, 0, True, 0, 1000, base_offset=5)
    plain = batch(6, [b"p"], producer_id=7)
    return aborted + abort + committed + commit + plain, [(7, 0)]


@pytest.mark.parametrize("isolation, expected", [(0, [0, 1, 3, 4, 6]), (1, [3, 4, 6])])
def test_read_committed_drops_aborted_transactions(isolation: int, expected: list[int]) -> None:
    records, aborted = _transactional_log()
    env = Env(isolation_level=isolation)
    env.assign((T0, 0))
    env.fetch(partition_data(0, records, aborted=aborted, lso=7))
    assert env.offsets() == {T0: expected}
    assert env.subs.position(T0) == FetchPosition(7)


def test_offset_out_of_range_resets_with_a_policy() -> None:
    env = Env(reset="latest")
    env.assign((T0, 50))
    env.fetch(partition_data(0, None, error=1))
    assert env.offsets() == {}
    assert env.subs.is_offset_reset_needed(T0)


def test_offset_out_of_range_without_a_policy_raises_until_seek() -> None:
    env = Env(reset="none")
    env.assign((T0, 50), (T1, 0))
    env.fetch(partition_data(0, None, error=1), partition_data(1, batch(0, [b"a"])))
    for _ in range(2):
        with pytest.raises(OffsetOutOfRangeError) as e:
            env.fetcher.collect_fetch()
        assert e.value.offsets == {T0: 50}
    env.subs.seek(T0, 0)
    assert env.offsets() == {T1: [0]}


def test_not_leader_requests_a_metadata_update() -> None:
    env = Env()
    env.assign((T0, 0))
    assert not env.metadata.update_requested()
    env.fetch(partition_data(0, None, error=6))
    assert env.offsets() == {}
    assert env.metadata.update_requested()


def test_stale_data_after_a_seek_is_dropped() -> None:
    env = Env()
    env.assign((T0, 0))
    env.fetch(partition_data(0, batch(0, [b"a", b"b"])))
    env.subs.seek(T0, 10)
    assert env.offsets() == {}
    assert env.subs.position(T0) == FetchPosition(10)


def test_paused_partitions_hand_out_nothing() -> None:
    env = Env()
    env.assign((T0, 0))
    env.fetch(partition_data(0, batch(0, [b"a"])))
    env.subs.pause(T0)
    assert env.offsets() == {}
    assert env.subs.position(T0) == FetchPosition(0)


def test_deserializers_and_their_failures() -> None:
    env = Env(key_deserializer=StringDeserializer(), value_deserializer=IntegerDeserializer())
    env.assign((T0, 0))
    values = [(1).to_bytes(4, "big"), (2).to_bytes(4, "big"), b"bad", (4).to_bytes(4, "big")]
    env.fetch(partition_data(0, batch(0, values, keys=[b"k0", None, b"k2", b"k3"])))
    got = env.fetcher.collect_fetch()[T0]
    assert [(r.key, r.value, r.serialized_key_size, r.serialized_value_size) for r in got] == \
        [("k0", 1, 2, 4), (None, 2, -1, 4)]
    with pytest.raises(RecordDeserializationError) as e:
        env.fetcher.collect_fetch()
    assert (e.value.partition, e.value.offset, e.value.is_key) == (T0, 2, False)
    assert env.subs.position(T0) == FetchPosition(2)
    env.subs.seek(T0, 3)  # skip the poison record; the buffered data is now stale
    assert env.offsets() == {}


def test_record_fields() -> None:
    env = Env()
    env.assign((T0, 0))
    env.fetch(partition_data(0, batch(0, [b"v"], timestamp=1234, keys=[b"k"])))
    [r] = env.fetcher.collect_fetch()[T0]
    assert (r.topic, r.partition, r.offset, r.timestamp, r.key, r.value, r.headers) == \
        ("t", 0, 0, 1234, b"k", b"v", ())
    assert r.timestamp_type.name == "CREATE_TIME"


# ---------------------------------------------------------------------- OffsetFetcher
def list_offsets_response(offsets: dict[TopicPartition, tuple[int, int]]) -> Any:
    topic_cls = ListOffsetsResponse.ListOffsetsTopicResponse
    part_cls = topic_cls.ListOffsetsPartitionResponse
    by_topic: dict[str, list[Any]] = {}
    for tp, (error, offset) in offsets.items():
        by_topic.setdefault(tp.topic, []).append(part_cls(
            partition_index=tp.partition, error_code=error, offset=offset, timestamp=-1,
            leader_epoch=0))
    return ListOffsetsResponse(topics=[topic_cls(name=t, partitions=ps)
                                       for t, ps in by_topic.items()])


def offset_env(answers: list[dict[TopicPartition, tuple[int, int]]], reset: str = "earliest"
               ) -> tuple[Env, OffsetFetcher, list[Any]]:
    env = Env(reset=reset)
    asked: list[Any] = []

    def handle(body: Any, version: int) -> Any:
        asked.append(body)
        return list_offsets_response(answers.pop(0))
    env.broker.handlers["ListOffsetsRequest"] = handle
    fetcher = OffsetFetcher(env.client, env.metadata, env.subs, env.time)  # type: ignore[arg-type]
    return env, fetcher, asked


def test_reset_positions_asks_list_offsets_and_seeks() -> None:
    env, fetcher, asked = offset_env([{T0: (0, 40), T1: (0, 41)}], reset="latest")
    env.subs.assign_from_user([T0, T1])
    env.subs.reset_initializing_positions()
    fetcher.reset_positions_if_needed()
    fetcher.reset_positions_if_needed()  # in flight: not asked twice
    env.client.poll(0)
    assert len(asked) == 1
    assert {p.timestamp for p in asked[0].topics[0].partitions} == {-1}
    # the answers carry the leader epoch: the positions are validated first (KIP-320)
    validating = env.subs.partitions_needing_validation(env.time.milliseconds())
    assert {tp: p for tp, (p, _) in validating.items()} == {
        T0: FetchPosition(40, 0), T1: FetchPosition(41, 0)}
    assert validating[T0][1] == LeaderAndEpoch(BROKER, 0)


def test_reset_retries_after_a_retriable_error() -> None:
    env, fetcher, asked = offset_env([{T0: (6, -1)}, {T0: (0, 3)}])
    env.subs.assign_from_user([T0])
    env.subs.reset_initializing_positions()
    fetcher.reset_positions_if_needed()
    env.client.poll(0)
    assert env.subs.position(T0) is None
    fetcher.reset_positions_if_needed()
    assert len(asked) == 1, "backing off"
    env.time.sleep(200)
    fetcher.reset_positions_if_needed()
    env.client.poll(0)
    assert env.subs.awaiting_validation(T0)
    env.subs.complete_validation(T0)
    assert env.subs.position(T0) == FetchPosition(3, 0)


def test_offsets_for_times_and_end_offsets() -> None:
    _, fetcher, asked = offset_env([{T0: (0, 17), T1: (0, -1)}, {T0: (0, 99)}])
    found = fetcher.offsets_for_times({T0: 5000, T1: 5000}, 1000)
    assert found[T0] is not None and found[T0].offset == 17
    assert found[T1] is None
    assert [p.timestamp for p in asked[0].topics[0].partitions] == [5000, 5000]
    assert fetcher.beginning_or_end_offsets([T0], -1, 1000) == {T0: 99}


def test_offsets_for_times_times_out() -> None:
    _, fetcher, asked = offset_env([{T0: (6, -1)}] * 100)
    with pytest.raises(KafkaTimeoutError):
        fetcher.offsets_for_times({T0: 0}, 500)
    assert 2 <= len(asked) <= 6, "retries with a backoff"
    assert tps("t", 0) == [T0]


# ---------------------------------------------------------------------- leader changes (KIP-320)
def epoch_batch(base_offset: int, values: list[bytes], epoch: int) -> bytes:
    buf = bytearray(batch(base_offset, values))
    set_partition_leader_epoch(buf, 0, epoch)
    return bytes(buf)


class FailoverEnv(Env):
    """T0 led by node 0 in epoch 3; an OffsetFetcher validates; the test answers
    OffsetsForLeaderEpoch with ``epoch_answers`` ((error, epoch, end offset) per call)."""

    def __init__(self, reset: str = "earliest") -> None:
        super().__init__(1, reset=reset)
        self.leader(BROKER.id, 3)
        self.offsets_fetcher = OffsetFetcher(self.client, self.metadata, self.subs,
                                             self.time)  # type: ignore[arg-type]
        self.epoch_answers: list[tuple[int, int, int]] = []
        self.epoch_requests: list[tuple[int, Any]] = []
        self.broker.handlers["OffsetForLeaderEpochRequest"] = self._answer_epoch

    def _answer_epoch(self, body: Any, version: int) -> Any:
        self.epoch_requests.append((version, body))
        error, epoch, end = self.epoch_answers.pop(0)
        result = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
        return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=[result(
            topic="t", partitions=[result.EpochEndOffset(
                error_code=error, partition=0, leader_epoch=epoch, end_offset=end)])])

    def leader(self, node: int, epoch: int) -> None:
        self.metadata.update(metadata_response({"t": 1}, {T0: node}, epochs={T0: epoch}),
                             self.metadata.request_version(), self.time.milliseconds())

    def read(self, values: list[bytes], epoch: int) -> list[int]:
        """Fetch ``values`` as the next records (written in ``epoch``) and hand them out."""
        position = self.subs.position(T0)
        assert position is not None
        self.fetch(partition_data(0, epoch_batch(position.offset, values, epoch)))
        return self.offsets()[T0]

    def fetch_bodies(self) -> list[Any]:
        return self.broker.sent("FetchRequest")

    def validate(self) -> None:
        self.offsets_fetcher.validate_positions_if_needed()
        self.client.poll(0)


def consumed_up_to_10_in_epoch_3(reset: str = "earliest") -> FailoverEnv:
    env = FailoverEnv(reset)
    env.assign((T0, 0))
    assert env.read([b"v"] * 10, epoch=3) == list(range(10))
    assert env.subs.position(T0) == FetchPosition(10, 3)
    return env


def test_fetches_carry_the_leader_epoch() -> None:
    env = consumed_up_to_10_in_epoch_3()
    [body] = env.fetch_bodies()
    assert body.topics[0].partitions[0].current_leader_epoch == 3
    assert env.subs.current_leader(T0) == LeaderAndEpoch(BROKER, 3)


def test_after_a_leader_change_the_position_is_validated_then_fetched() -> None:
    env = consumed_up_to_10_in_epoch_3()
    env.leader(BROKER1.id, 4)
    env.epoch_answers.append((0, 3, 10))  # epoch 3 ends at 10 on the new leader too
    env.offsets_fetcher.validate_positions_if_needed()
    assert env.fetcher.send_fetches() == 0, "nothing is fetched while validating"
    env.client.poll(0)
    [(version, body)] = env.epoch_requests
    assert version >= 3 and body.replica_id == -1
    [p] = body.topics[0].partitions
    assert (p.partition, p.leader_epoch, p.current_leader_epoch) == (0, 3, 4)
    assert env.subs.position(T0) == FetchPosition(10, 3)
    assert env.read([b"w"], epoch=4) == [10]
    last = env.fetch_bodies()[-1].topics[0].partitions[0]
    assert (last.fetch_offset, last.current_leader_epoch) == (10, 4)
    assert env.subs.position(T0) == FetchPosition(11, 4)


def test_a_truncated_log_resumes_at_the_divergence_point_with_a_reset_policy() -> None:
    """The new leader's epoch 3 ends at 7: records 7..9 we read are gone.  Reading goes on
    from 7 in the new leader's log -- no record of it is skipped."""
    env = consumed_up_to_10_in_epoch_3()
    env.leader(BROKER1.id, 4)
    env.epoch_answers.append((0, 3, 7))
    env.validate()
    assert env.subs.position(T0) == FetchPosition(7, 3)
    assert env.read([b"x", b"y"], epoch=4) == [7, 8]


def test_a_truncated_log_without_a_reset_policy_raises_log_truncation() -> None:
    env = consumed_up_to_10_in_epoch_3(reset="none")
    env.leader(BROKER1.id, 4)
    env.epoch_answers.append((0, 2, 7))
    env.validate()
    with pytest.raises(LogTruncationError) as e:
        env.offsets_fetcher.validate_positions_if_needed()
    assert isinstance(e.value, OffsetOutOfRangeError)
    assert e.value.offsets == {T0: 10}
    assert e.value.divergent_offsets == {T0: OffsetAndMetadata(7, "", 2)}
    assert env.fetcher.send_fetches() == 0 and env.subs.awaiting_validation(T0)
    env.subs.seek(T0, 7)  # the application decides
    env.offsets_fetcher.validate_positions_if_needed()  # raised once only
    assert env.read([b"x"], epoch=4) == [7]


def test_an_unknown_epoch_resets_by_policy() -> None:
    env = consumed_up_to_10_in_epoch_3(reset="latest")
    env.leader(BROKER1.id, 4)
    env.epoch_answers.append((0, -1, -1))
    env.validate()
    assert env.subs.partitions_needing_reset(env.time.milliseconds()) == {
        T0: OffsetResetStrategy.LATEST}


LEADERSHIP_ERRORS = [Errors.NOT_LEADER_OR_FOLLOWER, Errors.FENCED_LEADER_EPOCH,
                     Errors.UNKNOWN_LEADER_EPOCH]


@pytest.mark.parametrize("error", LEADERSHIP_ERRORS)
def test_validation_is_retried_after_leadership_errors(error: int) -> None:
    env = consumed_up_to_10_in_epoch_3()
    env.leader(BROKER1.id, 4)
    env.epoch_answers += [(error, -1, -1), (0, 3, 10)]
    env.validate()
    assert env.subs.awaiting_validation(T0) and env.metadata.update_requested()
    env.validate()
    assert len(env.epoch_requests) == 1, "backing off"
    env.time.sleep(100)
    env.validate()
    assert len(env.epoch_requests) == 2 and env.subs.position(T0) == FetchPosition(10, 3)


def test_a_leader_without_offsets_for_leader_epoch_v3_is_not_asked() -> None:
    env = consumed_up_to_10_in_epoch_3()
    env.leader(BROKER1.id, 4)
    failed: RequestFuture[Any] = RequestFuture()
    failed.raise_(UnsupportedVersionError("OffsetForLeaderEpoch: needs 3-4"))
    env.client.send = lambda *a, **kw: failed  # type: ignore[method-assign]
    env.offsets_fetcher.validate_positions_if_needed()
    assert env.subs.position(T0) == FetchPosition(10, 3)


@pytest.mark.parametrize("error", LEADERSHIP_ERRORS)
def test_leadership_errors_in_a_fetch_refresh_the_metadata(error: int) -> None:
    env = consumed_up_to_10_in_epoch_3()
    assert not env.metadata.update_requested()
    env.fetch(partition_data(0, None, error=error))
    assert env.offsets() == {}
    assert env.metadata.update_requested()
    assert env.subs.position(T0) == FetchPosition(10, 3)


def test_a_new_epoch_of_the_same_leader_is_validated_too() -> None:
    env = consumed_up_to_10_in_epoch_3()
    env.leader(BROKER.id, 5)
    env.epoch_answers.append((0, 3, 12))
    env.validate()
    assert [b.topics[0].partitions[0].current_leader_epoch
            for _, b in env.epoch_requests] == [5]
    assert env.subs.position(T0) == FetchPosition(10, 3)
