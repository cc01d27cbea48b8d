"""AdminResult (per-item futures), error messages naming the item, AdminClientConfig."""

from __future__ import annotations

import pytest

from millrace.client.admin import AdminClientConfig, AdminResult
from millrace.client.admin.results import kafka_error
from millrace.common.errors import ConfigError, TopicExistsError, UnknownTopicOrPartitionError


def test_all_returns_values_or_raises_the_first_error() -> None:
    result: AdminResult[str, int] = AdminResult()
    result.set_value("a", 1)
    assert result.all() == {"a": 1}
    result.set_error("b", TopicExistsError("Topic 'b' already exists."))
    result.set_error("c", UnknownTopicOrPartitionError("topic 'c'"))
    with pytest.raises(TopicExistsError):
        result.all()
    assert result["a"].result() == 1
    assert set(result.errors()) == {"b", "c"}
    assert result.values_or_none() == {"a": 1, "b": None, "c": None}


def test_error_messages_name_the_item() -> None:
    e = kafka_error(36, "Topic 'x' already exists.", "topic", "x")
    assert isinstance(e, TopicExistsError)
    assert str(e) == "[Error 36] TOPIC_ALREADY_EXISTS: Topic 'x' already exists."
    e = kafka_error(69, "The group does not exist", "group", "h")  # 'h' is in "the"
    assert e.message == "group 'h': The group does not exist"
    assert kafka_error(3, None, "topic", "t").message == "topic 't'"
    assert kafka_error(999, None, "topic", "t").name == "UNKNOWN_CODE_999"


def test_config_defaults_and_errors() -> None:
    c = AdminClientConfig({"bootstrap.servers": "a:1,b:2"})
    assert c["bootstrap.servers"] == ["a:1", "b:2"]
    assert c["request.timeout.ms"] == 30000
    assert c["default.api.timeout.ms"] == 60000
    assert c["retry.backoff.ms"] == 100
    assert c["metadata.max.age.ms"] == 300000
    with pytest.raises(ConfigError, match=r"group\.id"):
        AdminClientConfig({"bootstrap.servers": "a:1", "group.id": "x"})
    with pytest.raises(ConfigError, match=r"request\.timeout\.ms"):
        AdminClientConfig({"bootstrap.servers": "a:1", "request.timeout.ms": "soon"})
    with pytest.raises(ConfigError, match=r"bootstrap\.servers"):
        AdminClientConfig({})
