"""DescribeLogDirs (key 35, v0-4; KIP-113): the size on disk of the partitions this broker
hosts, per log dir (Kafka 3.9's ``KafkaApis.handleDescribeLogDirsRequest`` and
``ReplicaManager.describeLogDirs``).  What ``kafka-log-dirs.sh --describe`` and consoles'
topic sizes read.

Every configured log dir answers, in ``log.dirs`` order, by its absolute path.  An online
dir lists, topic by topic, the requested partitions it holds (all of them when Topics is
null; a requested partition the broker does not hold is simply absent, and so is a topic
none of whose partitions it holds): PartitionSize, the bytes of the log's segments;
OffsetLag, ``max(0, HW - LEO)`` -- 0 for every current log, as Kafka reports (only a
future log, which AlterReplicaLogDirs would create and millrace does not, lags); IsFutureKey
false.  v4 adds the volume's TotalBytes and UsableBytes (``statvfs``: blocks and blocks
available to unprivileged users, times the fragment size -- Java's ``FileStore`` total and
usable space).  An offline dir answers KAFKA_STORAGE_ERROR with no topics and -1 sizes.

Authorization: Describe on the Cluster, asked before anything is looked at.  Denied, the
answer is empty, with CLUSTER_AUTHORIZATION_FAILED as the top-level error from v3 (v0-2
have no field for it: the empty result is all a caller sees).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable

from millrace.broker.context import RequestContext
from millrace.broker.handlers import handles
from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from millrace.protocol.types import DescribeLogDirsRequest, DescribeLogDirsResponse
from millrace.security.acl import AclOperation
from millrace.storage.log_manager import LogManager

log = logging.getLogger(__name__)

Result = DescribeLogDirsResponse.DescribeLogDirsResult
TopicResult = Result.DescribeLogDirsTopic
PartitionResult = TopicResult.DescribeLogDirsPartition


def _volume_bytes(d: str) -> tuple[int, int]:
    """(total, usable) bytes of the volume holding ``d``."""
    st = os.statvfs(d)
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def describe_log_dirs(log_manager: LogManager,
                      partitions: set[tuple[str, int]] | None) -> list[Result]:
    """One result per log dir; ``partitions`` None means every hosted partition."""
    results = []
    for d, logs in log_manager.logs_by_dir().items():
        if not log_manager.is_online(d):
            results.append(Result(error_code=Errors.KAFKA_STORAGE_ERROR, log_dir=d, topics=[]))
            continue
        try:
            total, usable = _volume_bytes(d)
            by_topic: dict[str, list[PartitionResult]] = {}
            for lg in sorted(logs, key=lambda x: (x.topic, x.partition)):
                if partitions is not None and (lg.topic, lg.partition) not in partitions:
                    continue
                by_topic.setdefault(lg.topic, []).append(PartitionResult(
                    partition_index=lg.partition, partition_size=lg.size,
                    offset_lag=max(0, lg.high_watermark - lg.log_end_offset),
                    is_future_key=False))
        except OSError as e:
            log.warning("describing log dir %s failed: %s", d, e)
            results.append(Result(error_code=Errors.KAFKA_STORAGE_ERROR, log_dir=d, topics=[]))
            continue
        results.append(Result(
            error_code=Errors.NONE, log_dir=d, total_bytes=total, usable_bytes=usable,
            topics=[TopicResult(name=t, partitions=ps) for t, ps in by_topic.items()]))
    return results


def _requested(topics: Iterable[DescribeLogDirsRequest.DescribableLogDirTopic]
               ) -> set[tuple[str, int]]:
    return {(t.topic, p) for t in topics for p in t.partitions}


@handles(ApiKey.DESCRIBE_LOG_DIRS)
async def handle_describe_log_dirs(ctx: RequestContext, body: DescribeLogDirsRequest
                                   ) -> DescribeLogDirsResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return DescribeLogDirsResponse(throttle_time_ms=0,
                                       error_code=Errors.CLUSTER_AUTHORIZATION_FAILED,
                                       results=[])
    partitions = None if body.topics is None else _requested(body.topics)
    return DescribeLogDirsResponse(
        throttle_time_ms=0, error_code=Errors.NONE,
        results=describe_log_dirs(ctx.services.log_manager, partitions))
