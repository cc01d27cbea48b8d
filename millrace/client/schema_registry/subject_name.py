"""Subject name strategies: under which registry subject a topic's key or value schema lives.

Confluent's three (Java ``io.confluent.kafka.serializers.subject``):

- ``TopicNameStrategy`` (the default): ``<topic>-key`` / ``<topic>-value``; one schema
  (and its evolutions) per topic.
- ``RecordNameStrategy``: ``<record full name>``; one subject per record type, shared by
  every topic that carries it.
- ``TopicRecordNameStrategy``: ``<topic>-<record full name>``; several record types per
  topic, each evolving on its own.

The record name is the Avro record's full name, the JSON Schema's ``title``, the protobuf
message's full name.  A strategy is ``fn(topic, is_key, record_name) -> subject``;
``resolve_strategy`` takes what a config may hold: one of the names above (bare, or with
the Java package), or a callable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from millrace.client.errors import SerializationError
from millrace.common.errors import ConfigError

SubjectNameStrategy = Callable[[str, bool, str | None], str]

_JAVA_PACKAGE = "io.confluent.kafka.serializers.subject."


def topic_name_strategy(topic: str, is_key: bool, record_name: str | None) -> str:
    return f"{topic}-key" if is_key else f"{topic}-value"


def record_name_strategy(topic: str, is_key: bool, record_name: str | None) -> str:
    if not record_name:
        raise SerializationError("RecordNameStrategy needs a named record (an Avro record, "
                                 "a JSON Schema with a title, a protobuf message); this "
                                 "schema has no name")
    return record_name


def topic_record_name_strategy(topic: str, is_key: bool, record_name: str | None) -> str:
    return f"{topic}-{record_name_strategy(topic, is_key, record_name)}"


# The strategies whose subject does not depend on the record: a serializer may compute
# the subject (and so the schema id) once per topic.
RECORD_INDEPENDENT = frozenset({topic_name_strategy})

STRATEGIES: dict[str, SubjectNameStrategy] = {
    "TopicNameStrategy": topic_name_strategy,
    "RecordNameStrategy": record_name_strategy,
    "TopicRecordNameStrategy": topic_record_name_strategy,
}


def resolve_strategy(value: Any, config_name: str = "subject.name.strategy"
                     ) -> SubjectNameStrategy:
    """A strategy from a config value (``None`` -> ``TopicNameStrategy``)."""
    if value is None:
        return topic_name_strategy
    if isinstance(value, str):
        name = value.strip().removeprefix(_JAVA_PACKAGE)
        strategy = STRATEGIES.get(name)
        if strategy is None:
            raise ConfigError(f"Invalid value {value} for configuration {config_name}: "
                              f"expected one of {', '.join(STRATEGIES)}")
        return strategy
    if callable(value):
        return value
    raise ConfigError(f"Invalid value {value!r} for configuration {config_name}: "
                      "not a subject name strategy")
