"""The Kafka error table: against the reference (kafka-protocol.md section 9) and kafka-python."""

from __future__ import annotations

import warnings

import pytest

from millrace.common import errors
from millrace.common.errors import (
    ConfigError,
    CorruptBatchError,
    DecompressionLimitError,
    FrameTooLargeError,
    KafkaError,
    MillraceError,
    ProtocolDecodeError,
    UnknownErrorCode,
    all_codes,
    error_name,
    for_code,
    for_name,
    raise_for_code,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.errors as kafka_python_errors

# Section 9 of /work/shared/reference/kafka-protocol.md: (code, name, retriable).  The main
# table, then the "other codes" paragraph (retriable only where it says so).
REFERENCE = [
    (-1, "UNKNOWN_SERVER_ERROR", False), (1, "OFFSET_OUT_OF_RANGE", False),
    (2, "CORRUPT_MESSAGE", True), (3, "UNKNOWN_TOPIC_OR_PARTITION", True),
    (5, "LEADER_NOT_AVAILABLE", True), (6, "NOT_LEADER_OR_FOLLOWER", True),
    (7, "REQUEST_TIMED_OUT", True), (10, "MESSAGE_TOO_LARGE", False),
    (13, "NETWORK_EXCEPTION", True), (14, "COORDINATOR_LOAD_IN_PROGRESS", True),
    (15, "COORDINATOR_NOT_AVAILABLE", True), (16, "NOT_COORDINATOR", True),
    (17, "INVALID_TOPIC_EXCEPTION", False), (18, "RECORD_LIST_TOO_LARGE", False),
    (19, "NOT_ENOUGH_REPLICAS", True), (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", True),
    (21, "INVALID_REQUIRED_ACKS", False), (22, "ILLEGAL_GENERATION", False),
    (23, "INCONSISTENT_GROUP_PROTOCOL", False), (24, "INVALID_GROUP_ID", False),
    (25, "UNKNOWN_MEMBER_ID", False), (26, "INVALID_SESSION_TIMEOUT", False),
    (27, "REBALANCE_IN_PROGRESS", False), (28, "INVALID_COMMIT_OFFSET_SIZE", False),
    (29, "TOPIC_AUTHORIZATION_FAILED", False), (30, "GROUP_AUTHORIZATION_FAILED", False),
    (31, "CLUSTER_AUTHORIZATION_FAILED", False), (32, "INVALID_TIMESTAMP", False),
    (33, "UNSUPPORTED_SASL_MECHANISM", False), (34, "ILLEGAL_SASL_STATE", False),
    (35, "UNSUPPORTED_VERSION", False), (36, "TOPIC_ALREADY_EXISTS", False),
    (37, "INVALID_PARTITIONS", False), (38, "INVALID_REPLICATION_FACTOR", False),
    (40, "INVALID_CONFIG", False), (41, "NOT_CONTROLLER", True), (42, "INVALID_REQUEST", False),
    (43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", False), (44, "POLICY_VIOLATION", False),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", False), (46, "DUPLICATE_SEQUENCE_NUMBER", False),
    (47, "INVALID_PRODUCER_EPOCH", False), (48, "INVALID_TXN_STATE", False),
    (49, "INVALID_PRODUCER_ID_MAPPING", False), (50, "INVALID_TRANSACTION_TIMEOUT", False),
    (51, "CONCURRENT_TRANSACTIONS", True), (52, "TRANSACTION_COORDINATOR_FENCED", False),
    (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", False), (56, "KAFKA_STORAGE_ERROR", True),
    (58, "SASL_AUTHENTICATION_FAILED", False), (59, "UNKNOWN_PRODUCER_ID", False),
    (68, "NON_EMPTY_GROUP", False), (69, "GROUP_ID_NOT_FOUND", False),
    (70, "FETCH_SESSION_ID_NOT_FOUND", True), (71, "INVALID_FETCH_SESSION_EPOCH", True),
    (74, "FENCED_LEADER_EPOCH", True), (75, "UNKNOWN_LEADER_EPOCH", True),
    (76, "UNSUPPORTED_COMPRESSION_TYPE", False), (78, "OFFSET_NOT_AVAILABLE", True),
    (79, "MEMBER_ID_REQUIRED", False), (81, "GROUP_MAX_SIZE_REACHED", False),
    (82, "FENCED_INSTANCE_ID", False), (87, "INVALID_RECORD", False),
    (88, "UNSTABLE_OFFSET_COMMIT", True), (89, "THROTTLING_QUOTA_EXCEEDED", True),
    (90, "PRODUCER_FENCED", False), (100, "UNKNOWN_TOPIC_ID", True),
    (110, "FENCED_MEMBER_EPOCH", False), (111, "UNRELEASED_INSTANCE_ID", False),
    (112, "UNSUPPORTED_ASSIGNOR", False), (113, "STALE_MEMBER_EPOCH", False),
    (120, "TRANSACTION_ABORTABLE", False),
    # "Other codes, for completeness"
    (4, "INVALID_FETCH_SIZE", False), (8, "BROKER_NOT_AVAILABLE", False),
    (9, "REPLICA_NOT_AVAILABLE", True), (11, "STALE_CONTROLLER_EPOCH", False),
    (12, "OFFSET_METADATA_TOO_LARGE", False), (39, "INVALID_REPLICA_ASSIGNMENT", False),
    (54, "SECURITY_DISABLED", False), (55, "OPERATION_NOT_ATTEMPTED", False),
    (57, "LOG_DIR_NOT_FOUND", False), (60, "REASSIGNMENT_IN_PROGRESS", False),
    (72, "LISTENER_NOT_FOUND", True), (73, "TOPIC_DELETION_DISABLED", False),
    (77, "STALE_BROKER_EPOCH", False), (80, "PREFERRED_LEADER_NOT_AVAILABLE", True),
    (83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", True), (84, "ELECTION_NOT_NEEDED", True),
    (85, "NO_REASSIGNMENT_IN_PROGRESS", False), (86, "GROUP_SUBSCRIBED_TO_TOPIC", False),
    (91, "RESOURCE_NOT_FOUND", False), (103, "INCONSISTENT_TOPIC_ID", True),
    (106, "FETCH_SESSION_TOPIC_ID_ERROR", True), (107, "INELIGIBLE_REPLICA", False),
    (108, "NEW_LEADER_ELECTED", False), (109, "OFFSET_MOVED_TO_TIERED_STORAGE", False),
    (128, "INVALID_REGULAR_EXPRESSION", False),
]
REFERENCE_RETRIABLE = {code for code, _, retriable in REFERENCE if retriable}

# Where kafka-python's names differ from Kafka's Errors enum (ours follow Kafka's).
KAFKA_PYTHON_NAMES = {
    -1: "UNKNOWN",                          # Kafka: UNKNOWN_SERVER_ERROR
    6: "NOT_LEADER_FOR_PARTITION",          # renamed NOT_LEADER_OR_FOLLOWER in Kafka 2.6 (KIP-392)
    10: "MESSAGE_SIZE_TOO_LARGE",           # Kafka: MESSAGE_TOO_LARGE
    17: "INVALID_TOPIC",                    # Kafka: INVALID_TOPIC_EXCEPTION
    39: "INVALID_REPLICATION_ASSIGNMENT",   # Kafka: INVALID_REPLICA_ASSIGNMENT
}
# Where kafka-python's retriable flag differs from Java's class hierarchy (ours follow Java).
KAFKA_PYTHON_RETRIABLE = {
    2: False,  # Java's CorruptRecordException extends RetriableException
}


def test_reference_table_has_no_duplicates() -> None:
    codes = [code for code, _, _ in REFERENCE]
    assert len(codes) == len(set(codes))


@pytest.mark.parametrize(("code", "name", "retriable"), REFERENCE,
                         ids=[name for _, name, _ in REFERENCE])
def test_matches_the_reference_table(code: int, name: str, retriable: bool) -> None:
    cls = for_code(code)
    assert (cls.code, cls.name, cls.retriable) == (code, name, retriable)
    assert error_name(code) == name


@pytest.mark.parametrize("code", sorted(c for c in all_codes() if c != -1))
def test_for_name_and_for_code_agree(code: int) -> None:
    cls = for_code(code)
    assert for_name(cls.name) is cls


def test_for_name_unknown_server_error_is_the_code_minus_1_class() -> None:
    assert for_name("UNKNOWN_SERVER_ERROR") is for_code(-1) is errors.UnknownServerError


def test_retriable_set_matches_the_reference() -> None:
    ours = {code for code, cls in all_codes().items() if cls.retriable}
    reference_codes = {code for code, _, _ in REFERENCE}
    assert ours & reference_codes == REFERENCE_RETRIABLE


def _kafka_python_table() -> dict[int, type]:
    # Abstract bases (BrokerResponseError, AuthorizationError) carry errno None.
    return {code: cls for code, cls in kafka_python_errors.kafka_errors.items()
            if code is not None and code != 0}


def test_every_code_kafka_python_knows_we_know() -> None:
    assert set(_kafka_python_table()) <= set(all_codes())
    assert kafka_python_errors.kafka_errors[0].message == "NO_ERROR"  # 0 is not an error


@pytest.mark.parametrize("code", sorted(_kafka_python_table()))
def test_agrees_with_kafka_python(code: int) -> None:
    theirs = _kafka_python_table()[code]
    ours = for_code(code)
    assert theirs.message == KAFKA_PYTHON_NAMES.get(code, ours.name)
    assert theirs.retriable == KAFKA_PYTHON_RETRIABLE.get(code, ours.retriable)


def test_listed_kafka_python_differences_are_real() -> None:
    # If kafka-python adopts Kafka's names/flags, these lists should shrink.
    table = _kafka_python_table()
    for code, name in KAFKA_PYTHON_NAMES.items():
        assert table[code].message == name != for_code(code).name
    for code, retriable in KAFKA_PYTHON_RETRIABLE.items():
        assert table[code].retriable == retriable != for_code(code).retriable


def test_table_is_consistent() -> None:
    table = all_codes()
    assert 0 not in table
    assert len({cls.name for cls in table.values()}) == len(table)
    assert len({cls.__name__ for cls in table.values()}) == len(table)
    for code, cls in table.items():
        assert cls.code == code
        assert issubclass(cls, KafkaError)
        assert getattr(errors, cls.__name__) is cls
    assert errors.NotLeaderOrFollowerError.code == 6


@pytest.mark.parametrize("code", [129, 999, 32767, -2])
def test_unknown_code_gives_an_unknown_error_code_subclass(code: int) -> None:
    cls = for_code(code)
    assert issubclass(cls, UnknownErrorCode) and issubclass(cls, KafkaError)
    assert cls.code == code
    assert cls.retriable is False
    assert str(code) in cls.name
    with pytest.raises(UnknownErrorCode) as info:
        raise_for_code(code, "from a newer broker")
    assert info.value.code == code
    assert error_name(code) == cls.name


def test_raise_for_code_zero_does_nothing() -> None:
    assert raise_for_code(0) is None
    assert raise_for_code(0, "ignored") is None
    assert error_name(0) == "NONE"


def test_raise_for_code_raises_the_mapped_class_with_the_message() -> None:
    with pytest.raises(errors.UnknownTopicOrPartitionError) as info:
        raise_for_code(3, "topic t")
    assert str(info.value) == "[Error 3] UNKNOWN_TOPIC_OR_PARTITION: topic t"
    assert info.value.retriable
    with pytest.raises(KafkaError) as unknown:
        raise_for_code(-1)
    assert str(unknown.value) == "[Error -1] UNKNOWN_SERVER_ERROR"
    assert for_code(-1) is KafkaError is errors.UnknownServerError


def test_for_name_of_an_unknown_name() -> None:
    with pytest.raises(KeyError):
        for_name("NO_SUCH_ERROR")


def test_library_errors_are_not_wire_errors() -> None:
    for cls in (ConfigError, ProtocolDecodeError, FrameTooLargeError, CorruptBatchError,
                DecompressionLimitError):
        assert issubclass(cls, MillraceError) and not issubclass(cls, KafkaError)
    assert issubclass(FrameTooLargeError, ProtocolDecodeError)
    assert issubclass(DecompressionLimitError, CorruptBatchError)
    assert issubclass(CorruptBatchError, ProtocolDecodeError)
    assert issubclass(ConfigError, ValueError) and issubclass(ProtocolDecodeError, ValueError)
