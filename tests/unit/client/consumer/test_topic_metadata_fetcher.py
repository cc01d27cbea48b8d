"""``list_topics`` asks the broker with a request of its own (``TopicMetadataFetcher``)."""

from __future__ import annotations

from typing import Any

import pytest
from consumergen import (
    FakeNetworkClient,
    SimBroker,
    consumer_metadata,
    metadata_response,
    subscriptions,
)

from millrace.client.consumer._internals.topic_metadata_fetcher import TopicMetadataFetcher
from millrace.client.errors import KafkaTimeoutError
from millrace.common.errors import InvalidTopicError
from millrace.common.time import MockTime
from millrace.protocol import MetadataResponse

LEADER_NOT_AVAILABLE = 5
INVALID_TOPIC_EXCEPTION = 17
UNKNOWN_TOPIC_OR_PARTITION = 3


class Env:
    def __init__(self, answers: list[Any]) -> None:
        self.time = MockTime()
        self.metadata = consumer_metadata(subscriptions(), {"cached": 1}, self.time)
        self.broker = SimBroker(self.time)
        self.client = FakeNetworkClient(self.broker, self.time, metadata=self.metadata)
        self.asked: list[Any] = []

        def handle(body: Any, version: int) -> Any:
            self.asked.append(body)
            return answers.pop(0) if len(answers) > 1 else answers[0]
        self.broker.handlers["MetadataRequest"] = handle
        self.fetcher = TopicMetadataFetcher(self.client, self.time,  # type: ignore[arg-type]
                                            retry_backoff_ms=100)


def with_internal(response: Any) -> Any:
    topic_cls = MetadataResponse.MetadataResponseTopic
    part_cls = topic_cls.MetadataResponsePartition
    response.topics.append(topic_cls(name="__consumer_offsets", error_code=0, is_internal=True,
                                     partitions=[part_cls(error_code=0, partition_index=0,
                                                          leader_id=0, leader_epoch=0,
                                                          replica_nodes=[0], isr_nodes=[0],
                                                          offline_replicas=[])]))
    return response


def test_lists_every_topic_with_its_partitions_without_touching_the_cache() -> None:
    env = Env([with_internal(metadata_response({"b": 2, "a": 3}))])
    cached = env.metadata.fetch()
    topics = env.fetcher.all_topics(1000)
    assert list(topics) == ["a", "b"]
    assert [p.partition for p in topics["a"]] == [0, 1, 2]
    assert topics["a"][0].leader is not None and topics["a"][0].leader.id == 0
    assert env.metadata.fetch() is cached, "a listing is not a metadata refresh"
    [request] = env.asked
    assert request.topics is None and request.allow_auto_topic_creation is False
    assert "__consumer_offsets" in env.fetcher.all_topics(1000, include_internal=True)


def test_back_to_back_listings_do_not_wait_for_a_backoff() -> None:
    env = Env([metadata_response({"a": 1})])
    start = env.time.milliseconds()
    for _ in range(5):
        assert list(env.fetcher.all_topics(1000)) == ["a"]
    assert env.time.milliseconds() == start
    assert len(env.asked) == 5


def test_a_topic_electing_its_leader_is_asked_again_after_the_backoff() -> None:
    env = Env([metadata_response({"a": 1}, error_topics={"b": LEADER_NOT_AVAILABLE}),
               metadata_response({"a": 1, "b": 2})])
    start = env.time.milliseconds()
    topics = env.fetcher.all_topics(1000)
    assert [len(topics[t]) for t in ("a", "b")] == [1, 2]
    assert len(env.asked) == 2
    assert env.time.milliseconds() - start >= 100


def test_a_topic_deleted_while_listed_is_left_out() -> None:
    env = Env([metadata_response({"a": 1}, error_topics={"gone": UNKNOWN_TOPIC_OR_PARTITION})])
    assert list(env.fetcher.all_topics(1000)) == ["a"]
    assert len(env.asked) == 1


def test_a_non_retriable_topic_error_is_raised_with_the_topic() -> None:
    env = Env([metadata_response({"a": 1}, error_topics={"bad!": INVALID_TOPIC_EXCEPTION})])
    with pytest.raises(InvalidTopicError, match="bad!"):
        env.fetcher.all_topics(1000)


def test_retriable_errors_until_the_timeout_raise_a_timeout() -> None:
    env = Env([metadata_response({}, error_topics={"b": LEADER_NOT_AVAILABLE})])
    with pytest.raises(KafkaTimeoutError, match="list of topics"):
        env.fetcher.all_topics(500)
    assert 2 <= len(env.asked) <= 6, "retries with a backoff"
