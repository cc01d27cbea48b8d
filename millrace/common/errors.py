"""Kafka's error codes and the exception classes they map to.

Every error a Kafka broker can put in a response has a numeric code, a name and a
"retriable" flag (in Java: whether the exception class extends RetriableException).
The ``Errors`` enum below is the single source: one ``KafkaError`` subclass is created per row and
``for_code`` maps a code from the wire back to its class.  Names follow Kafka's
``Errors`` enum so that log lines and CLI output read like Kafka's.

Library-side errors that never travel on the wire (a malformed frame, a bad config)
derive from ``MillraceError`` directly.
"""

from __future__ import annotations

from enum import IntEnum
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


class Errors(IntEnum):
    """Kafka's ``Errors`` enum: every wire error code, its name, the exception class it
    maps to and whether a retry may succeed.  The one table of error codes in millrace:
    code that answers or checks a code uses ``Errors.X``, never a literal or a constant
    of its own (``tests/unit/common/test_error_table.py`` fails on one)."""

    exception_name: str
    retriable: bool

    def __new__(cls, code: int, exception_name: str, retriable: bool) -> Errors:
        member = int.__new__(cls, code)
        member._value_ = code
        member.exception_name = exception_name
        member.retriable = retriable
        return member

    @property
    def exception(self) -> type[KafkaError]:
        """The exception class for this code (``KafkaError`` itself for -1 and 0)."""
        return _BY_CODE.get(int(self), KafkaError)

    UNKNOWN_SERVER_ERROR = (-1, "UnknownServerError", False)
    NONE = (0, "", False)
    OFFSET_OUT_OF_RANGE = (1, "OffsetOutOfRangeError", False)
    CORRUPT_MESSAGE = (2, "CorruptRecordError", True)
    UNKNOWN_TOPIC_OR_PARTITION = (3, "UnknownTopicOrPartitionError", True)
    INVALID_FETCH_SIZE = (4, "InvalidFetchSizeError", False)
    LEADER_NOT_AVAILABLE = (5, "LeaderNotAvailableError", True)
    NOT_LEADER_OR_FOLLOWER = (6, "NotLeaderOrFollowerError", True)
    REQUEST_TIMED_OUT = (7, "RequestTimedOutError", True)
    BROKER_NOT_AVAILABLE = (8, "BrokerNotAvailableError", False)
    REPLICA_NOT_AVAILABLE = (9, "ReplicaNotAvailableError", True)
    MESSAGE_TOO_LARGE = (10, "RecordTooLargeError", False)
    STALE_CONTROLLER_EPOCH = (11, "StaleControllerEpochError", False)
    OFFSET_METADATA_TOO_LARGE = (12, "OffsetMetadataTooLargeError", False)
    NETWORK_EXCEPTION = (13, "NetworkError", True)
    COORDINATOR_LOAD_IN_PROGRESS = (14, "CoordinatorLoadInProgressError", True)
    COORDINATOR_NOT_AVAILABLE = (15, "CoordinatorNotAvailableError", True)
    NOT_COORDINATOR = (16, "NotCoordinatorError", True)
    INVALID_TOPIC_EXCEPTION = (17, "InvalidTopicError", False)
    RECORD_LIST_TOO_LARGE = (18, "RecordBatchTooLargeError", False)
    NOT_ENOUGH_REPLICAS = (19, "NotEnoughReplicasError", True)
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = (20, "NotEnoughReplicasAfterAppendError", True)
    INVALID_REQUIRED_ACKS = (21, "InvalidRequiredAcksError", False)
    ILLEGAL_GENERATION = (22, "IllegalGenerationError", False)
    INCONSISTENT_GROUP_PROTOCOL = (23, "InconsistentGroupProtocolError", False)
    INVALID_GROUP_ID = (24, "InvalidGroupIdError", False)
    UNKNOWN_MEMBER_ID = (25, "UnknownMemberIdError", False)
    INVALID_SESSION_TIMEOUT = (26, "InvalidSessionTimeoutError", False)
    REBALANCE_IN_PROGRESS = (27, "RebalanceInProgressError", False)
    INVALID_COMMIT_OFFSET_SIZE = (28, "InvalidCommitOffsetSizeError", False)
    TOPIC_AUTHORIZATION_FAILED = (29, "TopicAuthorizationFailedError", False)
    GROUP_AUTHORIZATION_FAILED = (30, "GroupAuthorizationFailedError", False)
    CLUSTER_AUTHORIZATION_FAILED = (31, "ClusterAuthorizationFailedError", False)
    INVALID_TIMESTAMP = (32, "InvalidTimestampError", False)
    UNSUPPORTED_SASL_MECHANISM = (33, "UnsupportedSaslMechanismError", False)
    ILLEGAL_SASL_STATE = (34, "IllegalSaslStateError", False)
    UNSUPPORTED_VERSION = (35, "UnsupportedVersionError", False)
    TOPIC_ALREADY_EXISTS = (36, "TopicExistsError", False)
    INVALID_PARTITIONS = (37, "InvalidPartitionsError", False)
    INVALID_REPLICATION_FACTOR = (38, "InvalidReplicationFactorError", False)
    INVALID_REPLICA_ASSIGNMENT = (39, "InvalidReplicaAssignmentError", False)
    INVALID_CONFIG = (40, "InvalidConfigurationError", False)
    NOT_CONTROLLER = (41, "NotControllerError", True)
    INVALID_REQUEST = (42, "InvalidRequestError", False)
    UNSUPPORTED_FOR_MESSAGE_FORMAT = (43, "UnsupportedForMessageFormatError", False)
    POLICY_VIOLATION = (44, "PolicyViolationError", False)
    OUT_OF_ORDER_SEQUENCE_NUMBER = (45, "OutOfOrderSequenceError", False)
    DUPLICATE_SEQUENCE_NUMBER = (46, "DuplicateSequenceError", False)
    INVALID_PRODUCER_EPOCH = (47, "InvalidProducerEpochError", False)
    INVALID_TXN_STATE = (48, "InvalidTxnStateError", False)
    INVALID_PRODUCER_ID_MAPPING = (49, "InvalidPidMappingError", False)
    INVALID_TRANSACTION_TIMEOUT = (50, "InvalidTxnTimeoutError", False)
    CONCURRENT_TRANSACTIONS = (51, "ConcurrentTransactionsError", True)
    TRANSACTION_COORDINATOR_FENCED = (52, "TransactionCoordinatorFencedError", False)
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = (53, "TransactionalIdAuthorizationError", False)
    SECURITY_DISABLED = (54, "SecurityDisabledError", False)
    OPERATION_NOT_ATTEMPTED = (55, "OperationNotAttemptedError", False)
    KAFKA_STORAGE_ERROR = (56, "KafkaStorageError", True)
    LOG_DIR_NOT_FOUND = (57, "LogDirNotFoundError", False)
    SASL_AUTHENTICATION_FAILED = (58, "SaslAuthenticationError", False)
    UNKNOWN_PRODUCER_ID = (59, "UnknownProducerIdError", False)
    REASSIGNMENT_IN_PROGRESS = (60, "ReassignmentInProgressError", False)
    DELEGATION_TOKEN_AUTH_DISABLED = (61, "DelegationTokenDisabledError", False)
    DELEGATION_TOKEN_NOT_FOUND = (62, "DelegationTokenNotFoundError", False)
    DELEGATION_TOKEN_OWNER_MISMATCH = (63, "DelegationTokenOwnerMismatchError", False)
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = (64, "UnsupportedByAuthenticationError", False)
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = (65, "DelegationTokenAuthorizationError", False)
    DELEGATION_TOKEN_EXPIRED = (66, "DelegationTokenExpiredError", False)
    INVALID_PRINCIPAL_TYPE = (67, "InvalidPrincipalTypeError", False)
    NON_EMPTY_GROUP = (68, "GroupNotEmptyError", False)
    GROUP_ID_NOT_FOUND = (69, "GroupIdNotFoundError", False)
    FETCH_SESSION_ID_NOT_FOUND = (70, "FetchSessionIdNotFoundError", True)
    INVALID_FETCH_SESSION_EPOCH = (71, "InvalidFetchSessionEpochError", True)
    LISTENER_NOT_FOUND = (72, "ListenerNotFoundError", True)
    TOPIC_DELETION_DISABLED = (73, "TopicDeletionDisabledError", False)
    FENCED_LEADER_EPOCH = (74, "FencedLeaderEpochError", True)
    UNKNOWN_LEADER_EPOCH = (75, "UnknownLeaderEpochError", True)
    UNSUPPORTED_COMPRESSION_TYPE = (76, "UnsupportedCompressionTypeError", False)
    STALE_BROKER_EPOCH = (77, "StaleBrokerEpochError", False)
    OFFSET_NOT_AVAILABLE = (78, "OffsetNotAvailableError", True)
    MEMBER_ID_REQUIRED = (79, "MemberIdRequiredError", False)
    PREFERRED_LEADER_NOT_AVAILABLE = (80, "PreferredLeaderNotAvailableError", True)
    GROUP_MAX_SIZE_REACHED = (81, "GroupMaxSizeReachedError", False)
    FENCED_INSTANCE_ID = (82, "FencedInstanceIdError", False)
    ELIGIBLE_LEADERS_NOT_AVAILABLE = (83, "EligibleLeadersNotAvailableError", True)
    ELECTION_NOT_NEEDED = (84, "ElectionNotNeededError", True)
    NO_REASSIGNMENT_IN_PROGRESS = (85, "NoReassignmentInProgressError", False)
    GROUP_SUBSCRIBED_TO_TOPIC = (86, "GroupSubscribedToTopicError", False)
    INVALID_RECORD = (87, "InvalidRecordError", False)
    UNSTABLE_OFFSET_COMMIT = (88, "UnstableOffsetCommitError", True)
    THROTTLING_QUOTA_EXCEEDED = (89, "ThrottlingQuotaExceededError", True)
    PRODUCER_FENCED = (90, "ProducerFencedError", False)
    RESOURCE_NOT_FOUND = (91, "ResourceNotFoundError", False)
    DUPLICATE_RESOURCE = (92, "DuplicateResourceError", False)
    UNACCEPTABLE_CREDENTIAL = (93, "UnacceptableCredentialError", False)
    INCONSISTENT_VOTER_SET = (94, "InconsistentVoterSetError", False)
    INVALID_UPDATE_VERSION = (95, "InvalidUpdateVersionError", False)
    FEATURE_UPDATE_FAILED = (96, "FeatureUpdateFailedError", False)
    PRINCIPAL_DESERIALIZATION_FAILURE = (97, "PrincipalDeserializationError", False)
    SNAPSHOT_NOT_FOUND = (98, "SnapshotNotFoundError", False)
    POSITION_OUT_OF_RANGE = (99, "PositionOutOfRangeError", False)
    UNKNOWN_TOPIC_ID = (100, "UnknownTopicIdError", True)
    DUPLICATE_BROKER_REGISTRATION = (101, "DuplicateBrokerRegistrationError", False)
    BROKER_ID_NOT_REGISTERED = (102, "BrokerIdNotRegisteredError", False)
    INCONSISTENT_TOPIC_ID = (103, "InconsistentTopicIdError", True)
    INCONSISTENT_CLUSTER_ID = (104, "InconsistentClusterIdError", False)
    TRANSACTIONAL_ID_NOT_FOUND = (105, "TransactionalIdNotFoundError", False)
    FETCH_SESSION_TOPIC_ID_ERROR = (106, "FetchSessionTopicIdError", True)
    INELIGIBLE_REPLICA = (107, "IneligibleReplicaError", False)
    NEW_LEADER_ELECTED = (108, "NewLeaderElectedError", False)
    OFFSET_MOVED_TO_TIERED_STORAGE = (109, "OffsetMovedToTieredStorageError", False)
    FENCED_MEMBER_EPOCH = (110, "FencedMemberEpochError", False)
    UNRELEASED_INSTANCE_ID = (111, "UnreleasedInstanceIdError", False)
    UNSUPPORTED_ASSIGNOR = (112, "UnsupportedAssignorError", False)
    STALE_MEMBER_EPOCH = (113, "StaleMemberEpochError", False)
    MISMATCHED_ENDPOINT_TYPE = (114, "MismatchedEndpointTypeError", False)
    UNSUPPORTED_ENDPOINT_TYPE = (115, "UnsupportedEndpointTypeError", False)
    UNKNOWN_CONTROLLER_ID = (116, "UnknownControllerIdError", False)
    UNKNOWN_SUBSCRIPTION_ID = (117, "UnknownSubscriptionIdError", False)
    TELEMETRY_TOO_LARGE = (118, "TelemetryTooLargeError", False)
    INVALID_REGISTRATION = (119, "InvalidRegistrationError", False)
    TRANSACTION_ABORTABLE = (120, "TransactionAbortableError", False)
    INVALID_RECORD_STATE = (121, "InvalidRecordStateError", False)
    SHARE_SESSION_NOT_FOUND = (122, "ShareSessionNotFoundError", True)
    INVALID_SHARE_SESSION_EPOCH = (123, "InvalidShareSessionEpochError", True)
    FENCED_STATE_EPOCH = (124, "FencedStateEpochError", False)
    INVALID_VOTER_KEY = (125, "InvalidVoterKeyError", False)
    DUPLICATE_VOTER = (126, "DuplicateVoterError", False)
    VOTER_NOT_FOUND = (127, "VoterNotFoundError", False)
    INVALID_REGULAR_EXPRESSION = (128, "InvalidRegularExpressionError", False)


_BY_CODE: dict[int, type[KafkaError]] = {}
_BY_NAME: dict[str, type[KafkaError]] = {}


def _build() -> None:
    for err in Errors:
        if err.value <= 0:
            continue
        cls = type(err.exception_name, (KafkaError,), {
            "code": err.value, "name": err.name, "retriable": err.retriable,
            "__module__": __name__})
        _BY_CODE[err.value] = cls
        _BY_NAME[err.name] = cls
        globals()[err.exception_name] = cls


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
