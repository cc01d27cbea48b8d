"""Options of ``format("millrace")``: parsing and validation, with Spark's Kafka names.

``SourceOptions.parse(options, streaming=...)`` and ``SinkOptions.parse(options)`` turn
the case-insensitive string options Spark hands a data source into frozen, picklable
values (they travel to the executors with every reader and writer), and raise
``ConfigError`` naming the option for anything they cannot accept.  No I/O here.

Offset specifications (``startingOffsets``, ``endingOffsets`` and the timestamp variants)
become one of ``EarliestOffsets``, ``LatestOffsets``, ``SpecificOffsets`` (JSON, -2 =
earliest, -1 = latest), ``GlobalTimestamp`` or ``SpecificTimestamps``; they are resolved to
numbers against the cluster by ``offsets.resolve_offsets``.

``kafka.*`` options go to the millrace consumer (or producer) with the prefix stripped,
after the client's own configuration check; the settings the connector must own --
consumer groups, commits, offset resets and (de)serializers -- are refused with the
reason, as Spark's Kafka source refuses them.  Everything else passes through, the way
Spark's Kafka connector does it: ``kafka.security.protocol``, ``kafka.sasl.*`` and
``kafka.ssl.*`` reach every client the connector builds -- the driver's offset lookups,
each executor's readers and writers, and the admin client of the exactly-once sink
(``admin_config``: the keys an admin client has).  The options travel to the executors
pickled with the readers and writers, as Spark's own connector ships its parameters.

Secrets.  ``KafkaParams`` holds the stripped ``kafka.*`` settings; its repr, and so the
reprs of ``SourceOptions`` and ``SinkOptions``, shows ``[hidden]`` (Kafka's
``Password.toString``) for every secret value, and the errors of the configuration check
never quote one.  A secret is a key of the clients' ``password`` type (``sasl.password``,
``sasl.jaas.config``, ``ssl.key.password``) or one whose name Spark's redaction would hide
(``secret``, ``password``, ``token``); Spark itself shows such options as
``*********(redacted)`` in query plans.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from millrace.client.cluster import TopicPartition
from millrace.client.consumer.config import CONSUMER_CONFIG, ConsumerConfig
from millrace.common.errors import ConfigError

KAFKA_PREFIX = "kafka."
EARLIEST = -2
LATEST = -1

# Options Spark itself (not the user of this source) may put into a source's or a sink's
# options: accepted and ignored.
SPARK_GENERIC_OPTIONS = frozenset({"path", "paths", "checkpointlocation", "queryname"})

# Spark Kafka options with no effect here (no consumer group, offsets are looked up once
# per trigger with the client's own retries).
IGNORED_SOURCE_OPTIONS = frozenset({"groupidprefix", "fetchoffset.numretries",
                                    "fetchoffset.retryintervalms"})

UNSUPPORTED_SOURCE_OPTIONS = {
    "minoffsetspertrigger": "the millrace source does not delay micro-batches to wait for "
                            "more data",
    "maxtriggerdelay": "the millrace source does not delay micro-batches to wait for more data",
    "maxbytespertrigger": "use maxOffsetsPerTrigger to bound micro-batches",
    "kafka.group.id": "the millrace source reads without a consumer group: offsets are tracked "
                      "in Spark's checkpoint",
    "kafka.auto.offset.reset": "set the source option 'startingOffsets' to 'earliest' or "
                               "'latest' instead",
    "kafka.enable.auto.commit": "offsets are tracked in Spark's checkpoint, nothing is "
                                "committed to Kafka",
    "kafka.key.deserializer": "keys are always read as bytes; deserialize them with DataFrame "
                              "operations (e.g. CAST(key AS STRING)), or set keyFormat "
                              "(avro, json-schema, protobuf) and schema.registry.url",
    "kafka.value.deserializer": "values are always read as bytes; deserialize them with "
                                "DataFrame operations (e.g. CAST(value AS STRING)), or set "
                                "valueFormat (avro, json-schema, protobuf) and "
                                "schema.registry.url",
    "kafka.interceptor.classes": "interceptors would only see the raw bytes the source reads",
}

UNSUPPORTED_SINK_OPTIONS = {
    "kafka.key.serializer": "keys are written as bytes: cast the key column to binary or "
                            "string with DataFrame operations",
    "kafka.value.serializer": "values are written as bytes: cast the value column to binary "
                              "or string with DataFrame operations",
    "kafka.transactional.id": "set the option deliveryGuarantee=exactly-once: the sink then "
                              "gives each writer task its own transactional id "
                              "(transactionalIdPrefix)",
}

# What the readers run with unless the user says otherwise: large fetches (the executors
# read whole offset ranges), never a group, a commit or a silent offset reset.  Polls stay
# small: a poll's records are alive together, and the fewer there are when the cyclic GC
# runs the less it walks (1,000: about twice as fast as 20,000); the reader gathers several
# polls into one Arrow batch (reader.ARROW_BATCH_ROWS).
READER_CONSUMER_DEFAULTS: dict[str, Any] = {
    "max.poll.records": 1000,
    "max.partition.fetch.bytes": 8 * 1024 * 1024,
    "fetch.max.bytes": 64 * 1024 * 1024,
    "receive.buffer.bytes": 1024 * 1024,
    "fetch.max.wait.ms": 100,
    "allow.auto.create.topics": False,
}
READER_CONSUMER_FIXED: dict[str, Any] = {
    "group.id": None,
    "enable.auto.commit": False,
    "auto.offset.reset": "none",
}
WRITER_PRODUCER_DEFAULTS: dict[str, Any] = {
    "acks": "all",
    "batch.size": 256 * 1024,
    "linger.ms": 5,
}

DEFAULT_POLL_TIMEOUT_MS = 120_000

# ---------------------------------------------------------------------------- secrets
HIDDEN = "[hidden]"
# what Spark's spark.redaction.regex hides by name, and the JAAS text that holds a password
# (and the schema registry's basic.auth.user.info, "user:password")
_SECRET_NAME = re.compile(r"(?i)secret|password|token|jaas|user\.info")


@functools.cache
def _password_keys() -> frozenset[str]:
    # The admin and producer packages are imported on first use: Spark's Python source
    # process imports this module at every query start and needs neither.
    from millrace.client.admin.config import ADMIN_CONFIG
    from millrace.client.producer.config import PRODUCER_CONFIG

    return frozenset(name for config in (CONSUMER_CONFIG, PRODUCER_CONFIG, ADMIN_CONFIG)
                     for name, key in config.keys.items() if key.type == "password")


def is_secret(name: str) -> bool:
    """Whether a client setting (``sasl.password``, or ``kafka.sasl.password``) is secret."""
    key = name.lower().removeprefix(KAFKA_PREFIX)
    return key in _password_keys() or _SECRET_NAME.search(key) is not None


def redact(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A copy with every secret value (``is_secret``) replaced by ``[hidden]``."""
    return {k: HIDDEN if is_secret(k) and v is not None else v for k, v in settings.items()}


def hide_secrets(text: str, settings: Mapping[str, Any]) -> str:
    """``text`` with every secret value of ``settings`` in it replaced by ``[hidden]``."""
    for name, value in settings.items():
        if is_secret(name) and value is not None and str(value):
            text = text.replace(str(value), HIDDEN)
    return text


class KafkaParams(dict[str, str]):
    """The ``kafka.*`` options without the prefix: a dict whose repr hides the secrets."""

    def __repr__(self) -> str:
        return f"KafkaParams({redact(self)!r})"

    __str__ = __repr__


def kafka_options(options: Mapping[str, str]) -> KafkaParams:
    """The ``kafka.<key>`` entries of Spark options as ``{key: value}`` (names are
    case-insensitive, as Spark's; nothing refused or checked here)."""
    return KafkaParams({name[len(KAFKA_PREFIX):]: value for name, value in _lower(options).items()
                        if name.startswith(KAFKA_PREFIX)})


def admin_config(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of a consumer's or producer's configuration that an admin client has too
    (where the cluster is, how to authenticate, timeouts): for the connector's admin calls."""
    from millrace.client.admin.config import ADMIN_CONFIG

    return {k: v for k, v in settings.items() if k in ADMIN_CONFIG.keys}


# ---------------------------------------------------------------------------- strategies
@dataclass(frozen=True)
class Subscribe:
    """``subscribe``: every partition of these topics (a topic may not exist yet)."""

    topics: tuple[str, ...]

    def matches(self, topic: str) -> bool:
        return topic in self.topics

    def __str__(self) -> str:
        return f"Subscribe[{','.join(self.topics)}]"


@dataclass(frozen=True)
class SubscribePattern:
    """``subscribePattern``: every partition of the topics the regex matches (whole name)."""

    pattern: str

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.pattern, topic) is not None

    def __str__(self) -> str:
        return f"SubscribePattern[{self.pattern}]"


@dataclass(frozen=True)
class Assign:
    """``assign``: exactly these partitions."""

    partitions: tuple[TopicPartition, ...]

    def matches(self, topic: str) -> bool:
        return any(tp.topic == topic for tp in self.partitions)

    def __str__(self) -> str:
        return f"Assign[{','.join(map(str, self.partitions))}]"


ConsumerStrategy = Subscribe | SubscribePattern | Assign


# ---------------------------------------------------------------------------- offset specs
@dataclass(frozen=True)
class EarliestOffsets:
    def __str__(self) -> str:
        return "earliest"


@dataclass(frozen=True)
class LatestOffsets:
    def __str__(self) -> str:
        return "latest"


@dataclass(frozen=True)
class SpecificOffsets:
    """Per partition an offset, or -2 (earliest) / -1 (latest)."""

    offsets: dict[TopicPartition, int] = field(hash=False)


@dataclass(frozen=True)
class GlobalTimestamp:
    """The first offset whose timestamp is at least ``timestamp`` (ms), in every partition."""

    timestamp: int


@dataclass(frozen=True)
class SpecificTimestamps:
    timestamps: dict[TopicPartition, int] = field(hash=False)


OffsetSpec = EarliestOffsets | LatestOffsets | SpecificOffsets | GlobalTimestamp | \
    SpecificTimestamps


# ---------------------------------------------------------------------------- helpers
def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): v for k, v in options.items()}


def _bool(options: dict[str, str], name: str, display: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    value = str(raw).strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(f"Invalid value '{raw}' for option '{display}': must be 'true' or "
                          "'false'")
    return value == "true"


def _positive_int(options: dict[str, str], name: str, display: str) -> int | None:
    raw = options.get(name)
    if raw is None:
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ConfigError(f"Invalid value '{raw}' for option '{display}': must be a positive "
                          "integer") from None
    if value <= 0:
        raise ConfigError(f"Invalid value '{raw}' for option '{display}': must be a positive "
                          "integer")
    return value


def _json_object(raw: str, display: str, example: str) -> dict[str, Any]:
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise ConfigError(f"Invalid value '{raw}' for option '{display}': expected JSON like "
                          f"{example}")
    return parsed


def _partition_number(topic: str, key: Any, raw: str, display: str) -> int:
    try:
        partition = int(key)
    except (TypeError, ValueError):
        partition = -1
    if partition < 0 or (isinstance(key, str) and key.strip() != str(partition)):
        raise ConfigError(f"Invalid value '{raw}' for option '{display}': partition '{key}' of "
                          f"topic '{topic}' is not a partition number")
    return partition


def _per_partition_numbers(raw: str, display: str, example: str, minimum: int
                           ) -> dict[TopicPartition, int]:
    """``{"topic": {"0": n, ...}, ...}`` -> ``{TopicPartition: n}``, each n >= minimum."""
    out: dict[TopicPartition, int] = {}
    for topic, partitions in _json_object(raw, display, example).items():
        if not topic or not isinstance(partitions, dict):
            raise ConfigError(f"Invalid value '{raw}' for option '{display}': expected JSON "
                              f"like {example}")
        for key, value in partitions.items():
            partition = _partition_number(topic, key, raw, display)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ConfigError(f"Invalid value '{raw}' for option '{display}': {value!r} for "
                                  f"{topic}-{partition} must be an integer >= {minimum}")
            out[TopicPartition(topic, partition)] = value
    return out


def _offset_spec(raw: str, display: str) -> OffsetSpec:
    value = raw.strip()
    if value.lower() == "earliest":
        return EarliestOffsets()
    if value.lower() == "latest":
        return LatestOffsets()
    return SpecificOffsets(_per_partition_numbers(
        value, display, '{"topicA":{"0":23,"1":-1}} (-2 = earliest, -1 = latest), or '
                        "'earliest' / 'latest'", EARLIEST))


def _timestamp(raw: str, display: str) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        value = -1
    if value < 0:
        raise ConfigError(f"Invalid value '{raw}' for option '{display}': must be a timestamp "
                          "in milliseconds since the epoch (>= 0)")
    return value


def _kafka_params(options: dict[str, str], unsupported: Mapping[str, str]
                  ) -> KafkaParams:
    params = KafkaParams()
    for name, value in options.items():
        if not name.startswith(KAFKA_PREFIX):
            continue
        if name in unsupported:
            raise ConfigError(f"Kafka option '{name}' is not supported: {unsupported[name]}")
        params[name[len(KAFKA_PREFIX):]] = value
    if not str(params.get("bootstrap.servers", "")).strip():
        raise ConfigError("Option 'kafka.bootstrap.servers' must be specified (host:port of "
                          "one or more brokers, comma separated)")
    return params


def _check_client_config(check: Any, props: dict[str, Any]) -> None:
    """Run the client's own configuration check; name the option as the user wrote it."""
    try:
        check(props)
    except ConfigError as e:
        message = hide_secrets(str(e), props)
        unknown = re.match(r"Unknown configuration key(?:\(s\))?: (.*)", message)
        if unknown:
            names = ", ".join(f"'kafka.{n.strip()}'" for n in unknown.group(1).split(","))
            message = f"Unknown Kafka option(s) {names}: not a setting of the millrace client"
        else:
            message = re.sub(r"configuration ([\w.]+)", r"option 'kafka.\1'", message)
        raise ConfigError(message) from None


# ---------------------------------------------------------------------------- registry
# decoding keys and values with a schema registry (registry.py)
REGISTRY_OPTIONS = frozenset({
    "valueformat", "keyformat", "schema.registry.url", "schema.registry.basic.auth.user.info",
    "subject", "schema.version", "key.subject", "key.schema.version", "mode",
    "messagename", "key.messagename",
})
DECODE_MODES = ("FAILFAST", "PERMISSIVE")


def _registry_format(opts: dict[str, str], column: str, topics: tuple[str, ...] | None
                     ) -> Any:
    """The ``RegistryFormat`` of ``column`` (key or value), or None when not set."""
    prefix = "" if column == "value" else "key."
    name = f"{column}format"
    raw = opts.get(name)
    if raw is None or raw.strip().lower() in ("", "binary"):
        for other in (f"{prefix}subject", f"{prefix}schema.version", f"{prefix}messagename"):
            if other in opts:
                shown = other.replace("messagename", "messageName")
                raise ConfigError(f"Option '{shown}' needs the option '{column}Format'")
        return None
    from millrace.spark.registry import FORMATS, RegistryFormat

    fmt = raw.strip().lower()
    if fmt not in FORMATS:
        raise ConfigError(f"Invalid value '{raw}' for option '{column}Format': one of "
                          f"{', '.join(FORMATS)} (or binary: the bytes as they are)")
    url = (opts.get("schema.registry.url") or "").strip()
    if not url:
        raise ConfigError(f"Option '{column}Format' needs the option 'schema.registry.url' "
                          "(e.g. http://127.0.0.1:8081)")
    subject = (opts.get(f"{prefix}subject") or "").strip()
    if not subject:
        if topics is None or len(topics) != 1:
            raise ConfigError(f"Option '{prefix}subject' is required with '{column}Format' "
                              "when the topic is not one named topic (the default subject "
                              f"is <topic>-{column})")
        subject = f"{topics[0]}-{column}"
    version: int | None = None
    raw_version = opts.get(f"{prefix}schema.version")
    if raw_version is not None and raw_version.strip().lower() != "latest":
        version = _positive_int(opts, f"{prefix}schema.version", f"{prefix}schema.version")
    user_info = opts.get("schema.registry.basic.auth.user.info") or None
    message_name = (opts.get(f"{prefix}messagename") or "").strip() or None
    if message_name is not None and fmt != "protobuf":
        raise ConfigError(f"Option '{prefix}messageName' goes with {column}Format=protobuf, "
                          f"not {fmt}")
    return RegistryFormat(fmt, url, subject, version, user_info, message_name)


def _single_topics(strategy: Any) -> tuple[str, ...] | None:
    if isinstance(strategy, Subscribe):
        return strategy.topics
    if isinstance(strategy, Assign):
        return tuple(sorted({tp.topic for tp in strategy.partitions}))
    return None


# ---------------------------------------------------------------------------- source
SOURCE_OPTIONS = frozenset({
    "subscribe", "subscribepattern", "assign", "startingoffsets", "endingoffsets",
    "startingtimestamp", "endingtimestamp", "startingoffsetsbytimestamp",
    "endingoffsetsbytimestamp", "startingoffsetsbytimestampstrategy", "maxoffsetspertrigger",
    "minpartitions", "maxpartitions", "failondataloss", "includeheaders", "kafkaconsumer.polltimeoutms",
    "tracereports", "tracereportsname",
    *REGISTRY_OPTIONS,
})


@dataclass(frozen=True)
class SourceOptions:
    strategy: ConsumerStrategy
    starting: OffsetSpec
    ending: OffsetSpec | None
    timestamp_strategy: str = "error"
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_partitions: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    kafka_params: KafkaParams = field(default_factory=KafkaParams, hash=False)
    # registry.RegistryFormat of the value / key (valueFormat, keyFormat), or None: bytes
    value_format: Any = None
    key_format: Any = None
    permissive: bool = False  # mode=PERMISSIVE: undecodable records as decodeError rows
    # traceReports: report spark.batch to the brokers' record tracers (trace_reports.py),
    # in the lane "spark <traceReportsName>"
    trace_reports: bool = False
    trace_reports_name: str = "millrace"

    @property
    def decodes(self) -> bool:
        return self.value_format is not None or self.key_format is not None

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
        opts = _lower(options)
        for name in opts:
            if name in UNSUPPORTED_SOURCE_OPTIONS and not name.startswith(KAFKA_PREFIX):
                raise ConfigError(f"Option '{name}' is not supported by the millrace source: "
                                  f"{UNSUPPORTED_SOURCE_OPTIONS[name]}")
            if not (name in SOURCE_OPTIONS or name in SPARK_GENERIC_OPTIONS
                    or name in IGNORED_SOURCE_OPTIONS or name.startswith(KAFKA_PREFIX)):
                raise ConfigError(f"Unknown option '{name}' for the millrace source; known "
                                  "options: kafka.bootstrap.servers, kafka.*, subscribe, "
                                  "subscribePattern, assign, startingOffsets, endingOffsets, "
                                  "startingTimestamp, endingTimestamp, "
                                  "startingOffsetsByTimestamp, endingOffsetsByTimestamp, "
                                  "startingOffsetsByTimestampStrategy, maxOffsetsPerTrigger, "
                                  "minPartitions, maxPartitions, failOnDataLoss, "
                                  "includeHeaders, traceReports, traceReportsName, "
                                  "kafkaConsumer.pollTimeoutMs, valueFormat, keyFormat, "
                                  "schema.registry.url, "
                                  "schema.registry.basic.auth.user.info, subject, "
                                  "schema.version, key.subject, key.schema.version, mode, "
                                  "messageName, key.messageName")
        kafka_params = _kafka_params(opts, UNSUPPORTED_SOURCE_OPTIONS)
        _check_client_config(ConsumerConfig, {**READER_CONSUMER_DEFAULTS, **kafka_params,
                                              **READER_CONSUMER_FIXED})
        strategy = _strategy(opts)
        starting = _starting_spec(opts, streaming)
        ending = _ending_spec(opts, streaming)
        timestamp_strategy = opts.get("startingoffsetsbytimestampstrategy", "error")
        timestamp_strategy = timestamp_strategy.strip().lower()
        if timestamp_strategy not in ("error", "latest"):
            raise ConfigError(f"Invalid value '{opts['startingoffsetsbytimestampstrategy']}' "
                              "for option 'startingOffsetsByTimestampStrategy': must be "
                              "'error' or 'latest'")
        max_offsets = _positive_int(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger")
        if max_offsets is not None and not streaming:
            max_offsets = None  # Spark's Kafka source ignores it in batch queries too
        poll_timeout = _positive_int(opts, "kafkaconsumer.polltimeoutms",
                                     "kafkaConsumer.pollTimeoutMs")
        min_partitions = _positive_int(opts, "minpartitions", "minPartitions")
        max_partitions = _positive_int(opts, "maxpartitions", "maxPartitions")
        if min_partitions is not None and max_partitions is not None and \
                max_partitions < min_partitions:
            raise ConfigError(f"Option 'maxPartitions' ({max_partitions}) is below "
                              f"'minPartitions' ({min_partitions})")
        if isinstance(strategy, Assign):
            _check_within_assignment(strategy, starting, "startingOffsets")
            if ending is not None:
                _check_within_assignment(strategy, ending, "endingOffsets")
        topics = _single_topics(strategy)
        value_format = _registry_format(opts, "value", topics)
        key_format = _registry_format(opts, "key", topics)
        mode = opts.get("mode", "FAILFAST").strip().upper()
        if mode not in DECODE_MODES:
            raise ConfigError(f"Invalid value '{opts['mode']}' for option 'mode': FAILFAST "
                              "(a record that does not decode fails the query) or PERMISSIVE "
                              "(it becomes a row with a decodeError)")
        if "mode" in opts and value_format is None and key_format is None:
            raise ConfigError("Option 'mode' applies to decoding: set 'valueFormat' or "
                              "'keyFormat'")
        if "schema.registry.url" in opts and value_format is None and key_format is None:
            raise ConfigError("Option 'schema.registry.url' needs 'valueFormat' or "
                              "'keyFormat' (avro, json-schema or protobuf)")
        return cls(
            strategy=strategy, starting=starting, ending=ending,
            timestamp_strategy=timestamp_strategy,
            max_offsets_per_trigger=max_offsets,
            min_partitions=min_partitions, max_partitions=max_partitions,
            fail_on_data_loss=_bool(opts, "failondataloss", "failOnDataLoss", True),
            include_headers=_bool(opts, "includeheaders", "includeHeaders", False),
            poll_timeout_ms=poll_timeout or DEFAULT_POLL_TIMEOUT_MS,
            kafka_params=kafka_params, value_format=value_format, key_format=key_format,
            permissive=mode == "PERMISSIVE",
            trace_reports=_bool(opts, "tracereports", "traceReports", False),
            trace_reports_name=_trace_reports_name(opts))

    def consumer_config(self, client_id: str) -> dict[str, Any]:
        """The millrace ``KafkaConsumer`` configuration for a reader."""
        return {**READER_CONSUMER_DEFAULTS, "client.id": client_id, **self.kafka_params,
                **READER_CONSUMER_FIXED}


def _trace_reports_name(opts: dict[str, str]) -> str:
    name = opts.get("tracereportsname", "millrace").strip()
    if not name or len(name) > 100:
        raise ConfigError(f"Invalid value '{opts['tracereportsname']}' for option "
                          "'traceReportsName': 1 to 100 characters (the lane of the "
                          "query's trace reports)")
    return name


def _strategy(opts: dict[str, str]) -> ConsumerStrategy:
    given = [name for name in ("subscribe", "subscribepattern", "assign") if name in opts]
    if len(given) != 1:
        found = f"got {', '.join(given)}" if given else "got none"
        raise ConfigError("Exactly one of the options 'subscribe', 'subscribePattern' or "
                          f"'assign' must be specified for the millrace source ({found})")
    name = given[0]
    raw = opts[name]
    if name == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))
        if not topics:
            raise ConfigError(f"Invalid value '{raw}' for option 'subscribe': no topics to "
                              "subscribe to (expected a comma-separated list of topics)")
        return Subscribe(topics)
    if name == "subscribepattern":
        pattern = raw.strip()
        if not pattern:
            raise ConfigError("Invalid value '' for option 'subscribePattern': the pattern is "
                              "empty")
        try:
            re.compile(pattern)
        except re.error as e:
            raise ConfigError(f"Invalid value '{raw}' for option 'subscribePattern': not a "
                              f"regular expression ({e})") from None
        return SubscribePattern(pattern)
    example = '{"topicA":[0,1],"topicB":[2,4]}'
    partitions: list[TopicPartition] = []
    for topic, numbers in _json_object(raw, "assign", example).items():
        if not topic or not isinstance(numbers, list):
            raise ConfigError(f"Invalid value '{raw}' for option 'assign': expected JSON like "
                              f"{example}")
        for number in numbers:
            if isinstance(number, bool) or not isinstance(number, int) or number < 0:
                raise ConfigError(f"Invalid value '{raw}' for option 'assign': {number!r} of "
                                  f"topic '{topic}' is not a partition number")
            partitions.append(TopicPartition(topic, number))
    if not partitions:
        raise ConfigError(f"Invalid value '{raw}' for option 'assign': no partitions to read")
    return Assign(tuple(sorted(set(partitions))))


def _starting_spec(opts: dict[str, str], streaming: bool) -> OffsetSpec:
    if "startingtimestamp" in opts:
        return GlobalTimestamp(_timestamp(opts["startingtimestamp"], "startingTimestamp"))
    if "startingoffsetsbytimestamp" in opts:
        return SpecificTimestamps(_per_partition_numbers(
            opts["startingoffsetsbytimestamp"], "startingOffsetsByTimestamp",
            '{"topicA":{"0":1700000000000}}', 0))
    if "startingoffsets" not in opts:
        return LatestOffsets() if streaming else EarliestOffsets()
    spec = _offset_spec(opts["startingoffsets"], "startingOffsets")
    if not streaming:
        if isinstance(spec, LatestOffsets):
            raise ConfigError("Invalid value 'latest' for option 'startingOffsets': a batch "
                              "query cannot start at the latest offsets")
        if isinstance(spec, SpecificOffsets) and LATEST in spec.offsets.values():
            raise ConfigError("Invalid value for option 'startingOffsets': -1 (latest) is not "
                              "a valid starting offset for a batch query")
    return spec


def _ending_spec(opts: dict[str, str], streaming: bool) -> OffsetSpec | None:
    given = [n for n in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")
             if n in opts]
    if streaming:
        if given:
            raise ConfigError(f"Option '{given[0]}' is not valid in streaming queries: a stream "
                              "has no end (use maxOffsetsPerTrigger or "
                              "trigger(availableNow=True))")
        return None
    if "endingtimestamp" in opts:
        return GlobalTimestamp(_timestamp(opts["endingtimestamp"], "endingTimestamp"))
    if "endingoffsetsbytimestamp" in opts:
        return SpecificTimestamps(_per_partition_numbers(
            opts["endingoffsetsbytimestamp"], "endingOffsetsByTimestamp",
            '{"topicA":{"0":1700000000000}}', 0))
    if "endingoffsets" not in opts:
        return LatestOffsets()
    spec = _offset_spec(opts["endingoffsets"], "endingOffsets")
    if isinstance(spec, EarliestOffsets):
        raise ConfigError("Invalid value 'earliest' for option 'endingOffsets': a batch query "
                          "cannot end at the earliest offsets")
    if isinstance(spec, SpecificOffsets) and EARLIEST in spec.offsets.values():
        raise ConfigError("Invalid value for option 'endingOffsets': -2 (earliest) is not a "
                          "valid ending offset")
    return spec


def _check_within_assignment(strategy: Assign, spec: OffsetSpec, display: str) -> None:
    named = spec.offsets if isinstance(spec, SpecificOffsets) else \
        spec.timestamps if isinstance(spec, SpecificTimestamps) else {}
    outside = sorted(set(named) - set(strategy.partitions))
    if outside:
        raise ConfigError(f"Invalid value for option '{display}': partitions "
                          f"{', '.join(map(str, outside))} are not in 'assign'")


# ---------------------------------------------------------------------------- sink
SINK_OPTIONS = frozenset({"topic", "deliveryguarantee", "transactionalidprefix", "valueformat",
                          "schema.registry.url", "schema.registry.basic.auth.user.info",
                          "subject", "schema.version", "recordname", "messagename"})
DELIVERY_GUARANTEES = ("at-least-once", "exactly-once")


@dataclass(frozen=True)
class SinkOptions:
    topic: str | None
    kafka_params: KafkaParams = field(default_factory=KafkaParams, hash=False)
    exactly_once: bool = False  # deliveryGuarantee=exactly-once (exactly_once.py)
    transactional_id_prefix: str | None = None
    value_format: Any = None  # registry.RegistryFormat of valueFormat
    record_name: str = "topLevelRecord"  # the derived schema's record name / title

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        opts = _lower(options)
        for name in opts:
            if not (name in SINK_OPTIONS or name in SPARK_GENERIC_OPTIONS
                    or name.startswith(KAFKA_PREFIX)):
                raise ConfigError(f"Unknown option '{name}' for the millrace sink; known "
                                  "options: kafka.bootstrap.servers, kafka.*, topic, "
                                  "deliveryGuarantee, transactionalIdPrefix, valueFormat, "
                                  "schema.registry.url, "
                                  "schema.registry.basic.auth.user.info, subject, "
                                  "schema.version, recordName, messageName")
        kafka_params = _kafka_params(opts, UNSUPPORTED_SINK_OPTIONS)
        from millrace.client.producer.config import ProducerConfig

        _check_client_config(ProducerConfig, {**WRITER_PRODUCER_DEFAULTS, **kafka_params})
        topic = opts.get("topic")
        if topic is not None and not topic.strip():
            raise ConfigError("Invalid value '' for option 'topic': the topic name is empty")
        guarantee = opts.get("deliveryguarantee", "at-least-once").strip().lower()
        if guarantee not in DELIVERY_GUARANTEES:
            raise ConfigError(f"Invalid value '{guarantee}' for option 'deliveryGuarantee': "
                              f"one of {', '.join(DELIVERY_GUARANTEES)}")
        prefix = opts.get("transactionalidprefix")
        if prefix is not None and not prefix.strip():
            raise ConfigError("Invalid value '' for option 'transactionalIdPrefix'")
        if prefix is not None and guarantee != "exactly-once":
            raise ConfigError("Option 'transactionalIdPrefix' needs "
                              "deliveryGuarantee=exactly-once")
        topic = topic.strip() if topic else None
        value_format = _registry_format(opts, "value", (topic,) if topic else None)
        if "schema.registry.url" in opts and value_format is None:
            raise ConfigError("Option 'schema.registry.url' needs 'valueFormat' (avro, "
                              "json-schema, protobuf)")
        record_name = (opts.get("recordname") or "topLevelRecord").strip()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", record_name):
            raise ConfigError(f"Invalid value '{record_name}' for option 'recordName': an "
                              "Avro name (letters, digits, '_', dotted namespace)")
        return cls(topic=topic, kafka_params=kafka_params,
                   exactly_once=guarantee == "exactly-once",
                   transactional_id_prefix=prefix.strip() if prefix else None,
                   value_format=value_format, record_name=record_name)

    def producer_config(self, client_id: str) -> dict[str, Any]:
        return {**WRITER_PRODUCER_DEFAULTS, "client.id": client_id, **self.kafka_params}
