"""Kafka's error codes and the exception classes they map to.

Every error a Kafka broker can put in a response has a numeric code, a name and a
"retriable" flag (in Java: whether the exception class extends RetriableException).
The table below is the single source: one ``KafkaError`` subclass is created per row and
``for_code`` maps a code from the wire back to its class.  Names follow Kafka's
``Errors`` enum so that log lines and CLI output read like Kafka's.

Library-side errors that never travel on the wire (a malformed frame, a bad config)
derive from ``MillraceError`` directly.
"""

from __future__ import annotations

from typing import ClassVar


class MillraceError(Exception):
    """Root of every exception millrace raises on purpose."""


class KafkaError(MillraceError):
    """An error with a Kafka error code; ``retriable`` says whether a retry may succeed."""

    code: ClassVar[int] = -1
    name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    retriable: ClassVar[bool] = False

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.name)
        self.message = message or self.name

    def __str__(self) -> str:
        if self.message and self.message != self.name:
            return f"[Error {self.code}] {self.name}: {self.message}"
        return f"[Error {self.code}] {self.name}"


# (code, NAME, ClassName, retriable)
_TABLE: tuple[tuple[int, str, str, bool], ...] = (
    (-1, "UNKNOWN_SERVER_ERROR", "UnknownServerError", False),
    (1, "OFFSET_OUT_OF_RANGE", "OffsetOutOfRangeError", False),
    (2, "CORRUPT_MESSAGE", "CorruptRecordError", True),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", "UnknownTopicOrPartitionError", True),
    (4, "INVALID_FETCH_SIZE", "InvalidFetchSizeError", False),
    (5, "LEADER_NOT_AVAILABLE", "LeaderNotAvailableError", True),
    (6, "NOT_LEADER_OR_FOLLOWER", "NotLeaderOrFollowerError", True),
    (7, "REQUEST_TIMED_OUT", "RequestTimedOutError", True),
    (8, "BROKER_NOT_AVAILABLE", "BrokerNotAvailableError", False),
    (9, "REPLICA_NOT_AVAILABLE", "ReplicaNotAvailableError", True),
    (10, "MESSAGE_TOO_LARGE", "RecordTooLargeError", False),
    (11, "STALE_CONTROLLER_EPOCH", "StaleControllerEpochError", False),
    (12, "OFFSET_METADATA_TOO_LARGE", "OffsetMetadataTooLargeError", False),
    (13, "NETWORK_EXCEPTION", "NetworkError", True),
    (14, "COORDINATOR_LOAD_IN_PROGRESS", "CoordinatorLoadInProgressError", True),
    (15, "COORDINATOR_NOT_AVAILABLE", "CoordinatorNotAvailableError", True),
    (16, "NOT_COORDINATOR", "NotCoordinatorError", True),
    (17, "INVALID_TOPIC_EXCEPTION", "InvalidTopicError", False),
    (18, "RECORD_LIST_TOO_LARGE", "RecordBatchTooLargeError", False),
    (19, "NOT_ENOUGH_REPLICAS", "NotEnoughReplicasError", True),
    (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "NotEnoughReplicasAfterAppendError", True),
    (21, "INVALID_REQUIRED_ACKS", "InvalidRequiredAcksError", False),
    (22, "ILLEGAL_GENERATION", "IllegalGenerationError", False),
    (23, "INCONSISTENT_GROUP_PROTOCOL", "InconsistentGroupProtocolError", False),
    (24, "INVALID_GROUP_ID", "InvalidGroupIdError", False),
    (25, "UNKNOWN_MEMBER_ID", "UnknownMemberIdError", False),
    (26, "INVALID_SESSION_TIMEOUT", "InvalidSessionTimeoutError", False),
    (27, "REBALANCE_IN_PROGRESS", "RebalanceInProgressError", False),
    (28, "INVALID_COMMIT_OFFSET_SIZE", "InvalidCommitOffsetSizeError", False),
    (29, "TOPIC_AUTHORIZATION_FAILED", "TopicAuthorizationFailedError", False),
    (30, "GROUP_AUTHORIZATION_FAILED", "GroupAuthorizationFailedError", False),
    (31, "CLUSTER_AUTHORIZATION_FAILED", "ClusterAuthorizationFailedError", False),
    (32, "INVALID_TIMESTAMP", "InvalidTimestampError", False),
    (33, "UNSUPPORTED_SASL_MECHANISM", "UnsupportedSaslMechanismError", False),
    (34, "ILLEGAL_SASL_STATE", "IllegalSaslStateError", False),
    (35, "UNSUPPORTED_VERSION", "UnsupportedVersionError", False),
    (36, "TOPIC_ALREADY_EXISTS", "TopicExistsError", False),
    (37, "INVALID_PARTITIONS", "InvalidPartitionsError", False),
    (38, "INVALID_REPLICATION_FACTOR", "InvalidReplicationFactorError", False),
    (39, "INVALID_REPLICA_ASSIGNMENT", "InvalidReplicaAssignmentError", False),
    (40, "INVALID_CONFIG", "InvalidConfigurationError", False),
    (41, "NOT_CONTROLLER", "NotControllerError", True),
    (42, "INVALID_REQUEST", "InvalidRequestError", False),
    (43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", "UnsupportedForMessageFormatError", False),
    (44, "POLICY_VIOLATION", "PolicyViolationError", False),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", "OutOfOrderSequenceError", False),
    (46, "DUPLICATE_SEQUENCE_NUMBER", "DuplicateSequenceError", False),
    (47, "INVALID_PRODUCER_EPOCH", "InvalidProducerEpochError", False),
    (48, "INVALID_TXN_STATE", "InvalidTxnStateError", False),
    (49, "INVALID_PRODUCER_ID_MAPPING", "InvalidPidMappingError", False),
    (50, "INVALID_TRANSACTION_TIMEOUT", "InvalidTxnTimeoutError", False),
    (51, "CONCURRENT_TRANSACTIONS", "ConcurrentTransactionsError", True),
    (52, "TRANSACTION_COORDINATOR_FENCED", "TransactionCoordinatorFencedError", False),
    (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "TransactionalIdAuthorizationError", False),
    (54, "SECURITY_DISABLED", "SecurityDisabledError", False),
    (55, "OPERATION_NOT_ATTEMPTED", "OperationNotAttemptedError", False),
    (56, "KAFKA_STORAGE_ERROR", "KafkaStorageError", True),
    (57, "LOG_DIR_NOT_FOUND", "LogDirNotFoundError", False),
    (58, "SASL_AUTHENTICATION_FAILED", "SaslAuthenticationError", False),
    (59, "UNKNOWN_PRODUCER_ID", "UnknownProducerIdError", False),
    (60, "REASSIGNMENT_IN_PROGRESS", "ReassignmentInProgressError", False),
    (61, "DELEGATION_TOKEN_AUTH_DISABLED", "DelegationTokenDisabledError", False),
    (62, "DELEGATION_TOKEN_NOT_FOUND", "DelegationTokenNotFoundError", False),
    (63, "DELEGATION_TOKEN_OWNER_MISMATCH", "DelegationTokenOwnerMismatchError", False),
    (64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", "UnsupportedByAuthenticationError", False),
    (65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED", "DelegationTokenAuthorizationError", False),
    (66, "DELEGATION_TOKEN_EXPIRED", "DelegationTokenExpiredError", False),
    (67, "INVALID_PRINCIPAL_TYPE", "InvalidPrincipalTypeError", False),
    (68, "NON_EMPTY_GROUP", "GroupNotEmptyError", False),
    (69, "GROUP_ID_NOT_FOUND", "GroupIdNotFoundError", False),
    (70, "FETCH_SESSION_ID_NOT_FOUND", "FetchSessionIdNotFoundError", True),
    (71, "INVALID_FETCH_SESSION_EPOCH", "InvalidFetchSessionEpochError", True),
    (72, "LISTENER_NOT_FOUND", "ListenerNotFoundError", True),
    (73, "TOPIC_DELETION_DISABLED", "TopicDeletionDisabledError", False),
    (74, "FENCED_LEADER_EPOCH", "FencedLeaderEpochError", True),
    (75, "UNKNOWN_LEADER_EPOCH", "UnknownLeaderEpochError", True),
    (76, "UNSUPPORTED_COMPRESSION_TYPE", "UnsupportedCompressionTypeError", False),
    (77, "STALE_BROKER_EPOCH", "StaleBrokerEpochError", False),
    (78, "OFFSET_NOT_AVAILABLE", "OffsetNotAvailableError", True),
    (79, "MEMBER_ID_REQUIRED", "MemberIdRequiredError", False),
    (80, "PREFERRED_LEADER_NOT_AVAILABLE", "PreferredLeaderNotAvailableError", True),
    (81, "GROUP_MAX_SIZE_REACHED", "GroupMaxSizeReachedError", False),
    (82, "FENCED_INSTANCE_ID", "FencedInstanceIdError", False),
    (83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", "EligibleLeadersNotAvailableError", True),
    (84, "ELECTION_NOT_NEEDED", "ElectionNotNeededError", True),
    (85, "NO_REASSIGNMENT_IN_PROGRESS", "NoReassignmentInProgressError", False),
    (86, "GROUP_SUBSCRIBED_TO_TOPIC", "GroupSubscribedToTopicError", False),
    (87, "INVALID_RECORD", "InvalidRecordError", False),
    (88, "UNSTABLE_OFFSET_COMMIT", "UnstableOffsetCommitError", True),
    (89, "THROTTLING_QUOTA_EXCEEDED", "ThrottlingQuotaExceededError", True),
    (90, "PRODUCER_FENCED", "ProducerFencedError", False),
    (91, "RESOURCE_NOT_FOUND", "ResourceNotFoundError", False),
    (92, "DUPLICATE_RESOURCE", "DuplicateResourceError", False),
    (93, "UNACCEPTABLE_CREDENTIAL", "UnacceptableCredentialError", False),
    (94, "INCONSISTENT_VOTER_SET", "InconsistentVoterSetError", False),
    (95, "INVALID_UPDATE_VERSION", "InvalidUpdateVersionError", False),
    (96, "FEATURE_UPDATE_FAILED", "FeatureUpdateFailedError", False),
    (97, "PRINCIPAL_DESERIALIZATION_FAILURE", "PrincipalDeserializationError", False),
    (98, "SNAPSHOT_NOT_FOUND", "SnapshotNotFoundError", False),
    (99, "POSITION_OUT_OF_RANGE", "PositionOutOfRangeError", False),
    (100, "UNKNOWN_TOPIC_ID", "UnknownTopicIdError", True),
    (101, "DUPLICATE_BROKER_REGISTRATION", "DuplicateBrokerRegistrationError", False),
    (102, "BROKER_ID_NOT_REGISTERED", "BrokerIdNotRegisteredError", False),
    (103, "INCONSISTENT_TOPIC_ID", "InconsistentTopicIdError", True),
    (104, "INCONSISTENT_CLUSTER_ID", "InconsistentClusterIdError", False),
    (105, "TRANSACTIONAL_ID_NOT_FOUND", "TransactionalIdNotFoundError", False),
    (106, "FETCH_SESSION_TOPIC_ID_ERROR", "FetchSessionTopicIdError", True),
    (107, "INELIGIBLE_REPLICA", "IneligibleReplicaError", False),
    (108, "NEW_LEADER_ELECTED", "NewLeaderElectedError", False),
    (109, "OFFSET_MOVED_TO_TIERED_STORAGE", "OffsetMovedToTieredStorageError", False),
    (110, "FENCED_MEMBER_EPOCH", "FencedMemberEpochError", False),
    (111, "UNRELEASED_INSTANCE_ID", "UnreleasedInstanceIdError", False),
    (112, "UNSUPPORTED_ASSIGNOR", "UnsupportedAssignorError", False),
    (113, "STALE_MEMBER_EPOCH", "StaleMemberEpochError", False),
    (114, "MISMATCHED_ENDPOINT_TYPE", "MismatchedEndpointTypeError", False),
    (115, "UNSUPPORTED_ENDPOINT_TYPE", "UnsupportedEndpointTypeError", False),
    (116, "UNKNOWN_CONTROLLER_ID", "UnknownControllerIdError", False),
    (117, "UNKNOWN_SUBSCRIPTION_ID", "UnknownSubscriptionIdError", False),
    (118, "TELEMETRY_TOO_LARGE", "TelemetryTooLargeError", False),
    (119, "INVALID_REGISTRATION", "InvalidRegistrationError", False),
    (120, "TRANSACTION_ABORTABLE", "TransactionAbortableError", False),
    (121, "INVALID_RECORD_STATE", "InvalidRecordStateError", False),
    (122, "SHARE_SESSION_NOT_FOUND", "ShareSessionNotFoundError", True),
    (123, "INVALID_SHARE_SESSION_EPOCH", "InvalidShareSessionEpochError", True),
    (124, "FENCED_STATE_EPOCH", "FencedStateEpochError", False),
    (125, "INVALID_VOTER_KEY", "InvalidVoterKeyError", False),
    (126, "DUPLICATE_VOTER", "DuplicateVoterError", False),
    (127, "VOTER_NOT_FOUND", "VoterNotFoundError", False),
    (128, "INVALID_REGULAR_EXPRESSION", "InvalidRegularExpressionError", False),
)

_BY_CODE: dict[int, type[KafkaError]] = {}
_BY_NAME: dict[str, type[KafkaError]] = {}


def _build() -> None:
    for code, name, cls_name, retriable in _TABLE:
        cls = type(cls_name, (KafkaError,), {"code": code, "name": name, "retriable": retriable,
                                             "__module__": __name__})
        _BY_CODE[code] = cls
        _BY_NAME[name] = cls
        globals()[cls_name] = cls


_build()
_BY_CODE[-1] = KafkaError
_BY_NAME["UNKNOWN_SERVER_ERROR"] = KafkaError
UnknownServerError = KafkaError  # code -1 is the base class itself


class UnknownErrorCode(KafkaError):
    """A code this table does not know (a newer broker); never retried."""


def __getattr__(name: str) -> type[KafkaError]:
    # Typed access for the generated classes (mypy honours a module __getattr__).
    for cls in _BY_CODE.values():
        if cls.__name__ == name:
            return cls
    raise AttributeError(name)


def for_code(code: int) -> type[KafkaError]:
    """The exception class for a wire error code (``UnknownErrorCode`` for codes we lack)."""
    cls = _BY_CODE.get(code)
    if cls is not None:
        return cls
    return type(f"UnknownErrorCode{code}", (UnknownErrorCode,), {"code": code,
                                                               "name": f"UNKNOWN_CODE_{code}"})


def for_name(name: str) -> type[KafkaError]:
    return _BY_NAME[name]


def error_name(code: int) -> str:
    return "NONE" if code == 0 else for_code(code).name


def raise_for_code(code: int, message: str = "") -> None:
    """Raise the mapped exception when ``code`` is not 0 (NONE)."""
    if code:
        raise for_code(code)(message)


def all_codes() -> dict[int, type[KafkaError]]:
    return dict(_BY_CODE)


# Library-side errors (never on the wire).
class ConfigError(MillraceError, ValueError):
    """A configuration key is unknown or has a bad value; the message names the key."""


class ProtocolDecodeError(MillraceError, ValueError):
    """Bytes do not form a valid message of the claimed API/version."""


class FrameTooLargeError(ProtocolDecodeError):
    """A size prefix claims more than the configured maximum."""


class CorruptBatchError(ProtocolDecodeError):
    """A record batch is malformed or fails its CRC check."""


class DecompressionLimitError(CorruptBatchError):
    """Decompressed data would exceed the configured cap (a compression bomb)."""
