"""The partition log on disk, in Kafka's layout: segments, offset/time indexes, crash
recovery, retention, compaction, checkpoints.  No network code.

Modules: ``config`` (LogConfig), ``index`` (OffsetIndex, TimeIndex), ``segment``
(LogSegment), ``log_loader`` (opening and recovering a partition dir), ``local_log``
(LocalLog: a partition dir's segment list, log end, recovery point), ``log`` (Log, one
partition), ``log_manager`` (LogManager, all log dirs), ``log_dir_failure_channel``
(LogDirFailureChannel: where I/O errors take a log dir offline; LogDirErrorHandler and
``@reports_io_errors``: how a log reports them), ``checkpoint`` (checkpoint files),
``cleaner`` (LogCleaner), ``info`` (FetchDataInfo, LogAppendInfo, ...),
``leader_epoch_cache`` (LeaderEpochFileCache: where each leader epoch starts, the
``leader-epoch-checkpoint`` file); idempotence:
``producer_state`` (ProducerStateEntry, ProducerAppendInfo: the per-producer rules),
``producer_state_manager`` (ProducerStateManager: one partition's producers, snapshots,
expiry), ``producer_snapshot`` (the snapshot file format).
"""

from millrace.storage.checkpoint import CorruptCheckpointError, OffsetCheckpointFile
from millrace.storage.cleaner import CleanResult, LogCleaner
from millrace.storage.config import LogConfig
from millrace.storage.index import CorruptIndexError, OffsetIndex, TimeIndex
from millrace.storage.info import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AppendOrigin,
    FetchDataInfo,
    FetchIsolation,
    LogAppendInfo,
    LogOffsetMetadata,
    TimestampAndOffset,
)
from millrace.storage.leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochFileCache,
)
from millrace.storage.log import Log
from millrace.storage.log_dir_failure_channel import LogDirFailureChannel
from millrace.storage.log_loader import log_dir_name, parse_topic_partition_name
from millrace.storage.log_manager import LogManager
from millrace.storage.segment import LogSegment

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "AppendOrigin",
    "CleanResult",
    "CorruptCheckpointError",
    "CorruptIndexError",
    "EpochEntry",
    "FetchDataInfo",
    "FetchIsolation",
    "LeaderEpochFileCache",
    "Log",
    "LogAppendInfo",
    "LogCleaner",
    "LogConfig",
    "LogDirFailureChannel",
    "LogManager",
    "LogOffsetMetadata",
    "LogSegment",
    "OffsetCheckpointFile",
    "OffsetIndex",
    "TimeIndex",
    "TimestampAndOffset",
    "log_dir_name",
    "parse_topic_partition_name",
]
