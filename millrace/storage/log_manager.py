"""All partition logs of a broker (Java: ``LogManager``).

Owns the ``log.dirs``.  In each one::

    .lock                                 flock'd while a broker uses the dir
    .kafka_cleanshutdown                  written last by a clean shutdown, removed at startup
    recovery-point-offset-checkpoint      \
    replication-offset-checkpoint          | see checkpoint.py
    log-start-offset-checkpoint           /
    cleaner-offset-checkpoint             (written by the LogCleaner)
    <topic>-<partition>/                  one Log each
    <topic>-<partition>.<uuid>-delete/    a deleted log on its way out

Startup (``startup``): lock each dir, read its checkpoints, and open every partition dir.
Without the clean-shutdown marker the shutdown was unclean (a crash, kill -9, power loss),
so each log is recovered from its recovery point: every batch after it is CRC-checked and a
torn or garbage tail truncated (logged at WARNING).  Recovered data is fsync'd and fresh
checkpoints written before the marker is removed.

Periodic work is steppable (no threads inside): ``cleanup_logs`` (retention, and expiry
of idle producer ids after ``producer.id.expiration.ms``),
``flush_dirty_logs`` (``flush.ms`` and segments rolled since the last flush), ``checkpoint_all``.
The broker schedules them.  ``shutdown`` flushes every log, writes the checkpoints, closes the
logs and writes the marker.

I/O errors: the manager owns the broker's ``LogDirFailureChannel`` (``failure_channel``)
and hands it to every ``Log``.  A checkpoint, marker or new partition dir that cannot be
written reports its dir there and raises ``KafkaStorageError``, as a log's own writes do.
A dir that goes offline is left alone from then on: periodic work skips it, and
``shutdown`` closes its logs without writing anything nor marking it cleanly shut down,
so the next start recovers it from the files.  A dir that fails while the logs are
loaded makes ``startup`` raise ``KafkaStorageError`` naming the dir and the error.

Thread-safety: ``_lock`` guards the map of logs; each ``Log`` guards itself.  Periodic work
iterates over a snapshot, so it may run on a background thread while the broker creates,
deletes and uses logs.  Per-topic configs belong to the broker's metadata: a provider
function gives the config for a topic at load time and ``update_config`` changes it.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import threading
import uuid
from collections.abc import Callable, Sequence

from millrace.common.errors import InvalidTopicError, KafkaError, KafkaStorageError
from millrace.common.time import SYSTEM_TIME, Time
from millrace.storage.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CorruptCheckpointError,
    OffsetCheckpointFile,
    TopicPartition,
    fsync_dir,
)
from millrace.storage.config import LogConfig
from millrace.storage.log import FlushTimer, Log
from millrace.storage.log_dir_failure_channel import LogDirFailureChannel, io_error_of
from millrace.storage.log_loader import log_dir_name, parse_topic_partition_name
from millrace.storage.producer_state_manager import DEFAULT_PRODUCER_ID_EXPIRATION_MS

log = logging.getLogger("millrace.storage")

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
DELETE_DIR_SUFFIX = "-delete"
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")

ConfigProvider = Callable[[str], LogConfig]


def validate_topic_name(topic: str) -> None:
    if topic in (".", "..") or not _LEGAL_TOPIC.match(topic):
        raise InvalidTopicError(f"invalid topic name {topic!r}: use 1-249 of [a-zA-Z0-9._-]")


class LogManager:
    def __init__(self, log_dirs: Sequence[str] | str,
                 config: LogConfig | ConfigProvider | None = None, *,
                 time: Time = SYSTEM_TIME,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 failure_channel: LogDirFailureChannel | None = None,
                 flush_timer: FlushTimer | None = None) -> None:
        dirs = [log_dirs] if isinstance(log_dirs, str) else list(log_dirs)
        if not dirs:
            raise ValueError("log.dirs is empty")
        self.log_dirs = [os.path.abspath(d) for d in dirs]
        if config is None:
            default = LogConfig()
            self._config_for: ConfigProvider = lambda topic: default
        elif isinstance(config, LogConfig):
            fixed = config
            self._config_for = lambda topic: fixed
        else:
            self._config_for = config
        self._time = time
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._lock = threading.RLock()
        self._logs: dict[TopicPartition, Log] = {}  # guarded by _lock
        self._dir_of: dict[TopicPartition, str] = {}  # guarded by _lock
        self._lock_fds: list[int] = []
        self._started = False
        self.had_clean_shutdown: dict[str, bool] = {}
        self.failure_channel = failure_channel if failure_channel is not None \
            else LogDirFailureChannel()
        self.flush_timer = flush_timer  # every log's flush durations (Log.flush_timer)
        # what each checkpoint file was last written with (unchanged: not rewritten)
        self._checkpointed: dict[str, dict[TopicPartition, int]] = {}

    # ------------------------------------------------------------------ I/O errors
    def _io_failed(self, d: str, what: str, error: OSError) -> KafkaError:
        """Report an I/O error in log dir ``d``; the error to raise to the caller."""
        message = f"{what} in log dir {d} failed"
        self.failure_channel.maybe_add_offline_log_dir(d, message, error)
        return KafkaStorageError(f"{message}: {error}")

    def is_online(self, d: str) -> bool:
        return not self.failure_channel.has_offline_log_dir(d)

    @property
    def online_log_dirs(self) -> list[str]:
        return [d for d in self.log_dirs if self.is_online(d)]

    # ------------------------------------------------------------------ lifecycle
    def startup(self) -> None:
        """Lock the dirs and load (recovering if needed) every log.  Idempotent."""
        with self._lock:
            if self._started:
                return
            try:
                for d in self.log_dirs:
                    try:
                        os.makedirs(d, exist_ok=True)
                        self._lock_dir(d)
                        self._load_dir(d)
                    except (OSError, KafkaStorageError) as e:
                        cause = io_error_of(e)
                        if cause is None:
                            raise
                        raise self._io_failed(d, "loading the logs", cause) from cause
            except BaseException:
                self._close_all()
                raise
            self._started = True
        try:
            self.checkpoint_all()
            for d in self.log_dirs:
                marker = os.path.join(d, CLEAN_SHUTDOWN_FILE)
                if os.path.exists(marker):
                    try:
                        os.unlink(marker)
                        fsync_dir(d)
                    except OSError as e:
                        raise self._io_failed(d, "removing the clean shutdown marker",
                                              e) from e
        except KafkaStorageError:
            self.shutdown()  # closes what was opened; writes nothing to a failed dir
            raise

    def _lock_dir(self, d: str) -> None:
        fd = os.open(os.path.join(d, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise KafkaStorageError(f"log dir {d} is in use by another process") from None
        self._lock_fds.append(fd)

    def _read_checkpoint(self, d: str, name: str) -> tuple[dict[TopicPartition, int], bool]:
        try:
            return OffsetCheckpointFile(os.path.join(d, name)).read(), True
        except CorruptCheckpointError as e:
            log.error("%s; ignoring it and recovering every log in %s", e, d)
            return {}, False

    def _load_dir(self, d: str) -> None:
        clean = os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE))
        recovery, ok1 = self._read_checkpoint(d, RECOVERY_POINT_CHECKPOINT)
        starts, ok2 = self._read_checkpoint(d, LOG_START_OFFSET_CHECKPOINT)
        hws, _ = self._read_checkpoint(d, REPLICATION_OFFSET_CHECKPOINT)
        clean = clean and ok1 and ok2
        self.had_clean_shutdown[d] = clean
        warned = clean
        for name in sorted(os.listdir(d)):
            path = os.path.join(d, name)
            if not os.path.isdir(path) or name.startswith("."):
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                log.info("%s: removing deleted log %s", d, name)
                shutil.rmtree(path, ignore_errors=True)
                continue
            try:
                tp = parse_topic_partition_name(name)
            except ValueError:
                log.debug("%s: ignoring directory %s", d, name)
                continue
            if tp in self._logs:
                raise KafkaStorageError(f"duplicate log directories for {name}: "
                                        f"{self._dir_of[tp]} and {d}")
            if not warned:
                log.warning("%s: no clean shutdown marker; recovering logs from their "
                            "recovery points", d)
                warned = True
            lg = Log(path, self._config_for(tp[0]), recovery_point=recovery.get(tp, 0),
                     log_start_offset=starts.get(tp, 0), high_watermark=hws.get(tp, 0),
                     had_clean_shutdown=clean, time=self._time,
                     producer_id_expiration_ms=self.producer_id_expiration_ms,
                     failure_channel=self.failure_channel,
                     flush_timer=self.flush_timer)
            if lg.truncated_on_load:
                log.warning("%s: recovery truncated %d bytes; log now ends at offset %d",
                            name, lg.truncated_on_load, lg.log_end_offset)
            self._logs[tp] = lg
            self._dir_of[tp] = d

    def shutdown(self) -> None:
        """Flush every log, write the checkpoints, close the logs, mark the shutdown clean."""
        with self._lock:
            if not self._started:
                return
            # A dir is marked cleanly shut down only if everything in it was flushed,
            # checkpointed and closed; an offline dir is not touched at all.
            failed = {d: not self.is_online(d) for d in self.log_dirs}
            by_dir = self.logs_by_dir()
            for d, logs in by_dir.items():
                for lg in logs:
                    if failed[d]:
                        break
                    try:
                        lg.flush()
                    except Exception:
                        failed[d] = True
                        log.exception("%r: flush failed at shutdown", lg)
            for d in self.log_dirs:
                if self.is_online(d):
                    try:
                        self.checkpoint_dir(d)
                    except KafkaStorageError:
                        log.exception("checkpoints of %s failed at shutdown", d)
                failed[d] = failed[d] or not self.is_online(d)
            for d, logs in by_dir.items():
                for lg in logs:
                    try:
                        lg.close(sync=not failed[d])
                    except Exception:
                        failed[d] = True
                        log.exception("%r: close failed at shutdown", lg)
            for d in self.log_dirs:
                if failed[d] or not self.is_online(d):
                    log.warning("log dir %s is not marked cleanly shut down: its logs are "
                                "recovered at the next start", d)
                    continue
                try:
                    fd = os.open(os.path.join(d, CLEAN_SHUTDOWN_FILE),
                                 os.O_WRONLY | os.O_CREAT, 0o644)
                    os.close(fd)
                    fsync_dir(d)
                except OSError as e:
                    log.error("%s", self._io_failed(d, "writing the clean shutdown marker", e))
            self._close_all()
            self._started = False

    def _close_all(self) -> None:
        for lg in self._logs.values():
            lg.close()
        self._logs.clear()
        self._dir_of.clear()
        for fd in self._lock_fds:
            os.close(fd)  # releases the flock
        self._lock_fds.clear()

    # ------------------------------------------------------------------ logs
    def get_log(self, topic: str, partition: int) -> Log | None:
        with self._lock:
            return self._logs.get((topic, partition))

    def all_logs(self) -> list[Log]:
        with self._lock:
            return list(self._logs.values())

    def logs_by_dir(self) -> dict[str, list[Log]]:
        with self._lock:
            out: dict[str, list[Log]] = {d: [] for d in self.log_dirs}
            for tp, lg in self._logs.items():
                out[self._dir_of[tp]].append(lg)
            return out

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        with self._lock:
            return self._dir_of.get((topic, partition))

    def get_or_create_log(self, topic: str, partition: int,
                          config: LogConfig | None = None) -> Log:
        """The log of (topic, partition), created in the least loaded log dir if new."""
        with self._lock:
            if not self._started:
                raise KafkaStorageError("LogManager.startup() has not run")
            tp = (topic, partition)
            lg = self._logs.get(tp)
            if lg is not None:
                return lg
            validate_topic_name(topic)
            if partition < 0:
                raise ValueError(f"invalid partition {partition}")
            counts = {d: 0 for d in self.log_dirs}
            for d in self._dir_of.values():
                counts[d] += 1
            d = min(self.log_dirs, key=lambda x: counts[x])
            path = os.path.join(d, log_dir_name(topic, partition))
            existed = os.path.isdir(path)
            if not self.is_online(d):
                raise KafkaStorageError(f"cannot create log {topic}-{partition}: log dir {d} "
                                        f"is offline")
            try:
                lg = Log(path, config if config is not None else self._config_for(topic),
                         had_clean_shutdown=not existed, time=self._time,
                         producer_id_expiration_ms=self.producer_id_expiration_ms,
                         failure_channel=self.failure_channel,
                         flush_timer=self.flush_timer)
                if not existed:
                    fsync_dir(d)
            except (OSError, KafkaStorageError) as e:
                cause = io_error_of(e)
                if cause is None:
                    raise
                raise self._io_failed(d, f"creating log {topic}-{partition}", cause) from cause
            # the internal topics' many partitions get one summary line from the broker
            log.log(logging.DEBUG if topic.startswith("__") else logging.INFO,
                    "created log %s-%d in %s", topic, partition, d)
            self._logs[tp] = lg
            self._dir_of[tp] = d
            return lg

    def update_config(self, topic: str, config: LogConfig) -> None:
        for (t, _), lg in list(self._logs.items()):
            if t == topic:
                lg.update_config(config)

    def delete_log(self, topic: str, partition: int) -> bool:
        """Remove a log: rename its dir to ``<topic>-<partition>.<uuid>-delete``, then delete
        it.  A crash in between is finished at the next startup."""
        with self._lock:
            tp = (topic, partition)
            lg = self._logs.pop(tp, None)
            d = self._dir_of.pop(tp, None)
        if lg is None or d is None:
            return False
        doomed = os.path.join(d, f"{log_dir_name(topic, partition)}.{uuid.uuid4().hex}"
                                 f"{DELETE_DIR_SUFFIX}")
        lg.rename_dir(doomed)
        fsync_dir(d)
        shutil.rmtree(doomed, ignore_errors=True)
        log.info("deleted log %s-%d", topic, partition)
        self.checkpoint_dir(d)
        return True

    # ------------------------------------------------------------------ periodic work
    def cleanup_logs(self, now_ms: int | None = None) -> int:
        """Retention for every log, and expiry of idle producer ids; returns the number of
        segments deleted."""
        now = self._time.milliseconds() if now_ms is None else now_ms
        total = 0
        for lg in self.all_logs():
            try:
                total += lg.delete_old_segments(now)
            except KafkaStorageError:
                log.exception("%r: retention failed", lg)
            lg.remove_expired_producers(now)
        return total

    def flush_dirty_logs(self, now_ms: int | None = None) -> int:
        """fsync logs whose flush.ms has passed, and segments rolled since the last flush;
        returns how many logs were flushed."""
        now = self._time.milliseconds() if now_ms is None else now_ms
        flushed = 0
        for lg in self.all_logs():
            if lg.closed or lg.offline:
                continue
            if now - lg.last_flush_ms >= lg.config.flush_ms:
                lg.flush()
            elif lg.recovery_point < lg.active_segment.base_offset:
                lg.flush(lg.active_segment.base_offset)
            else:
                continue
            flushed += 1
        return flushed

    def checkpoint_dir(self, d: str) -> None:
        """Write the three offset checkpoints of log dir ``d`` (nothing if it is offline;
        KafkaStorageError if it goes offline now)."""
        with self._lock:
            logs = [(tp, lg) for tp, lg in self._logs.items() if self._dir_of[tp] == d]
        self._write_checkpoint(d, RECOVERY_POINT_CHECKPOINT,
                               {tp: lg.recovery_point for tp, lg in logs})
        self._write_checkpoint(d, LOG_START_OFFSET_CHECKPOINT,
                               {tp: lg.log_start_offset for tp, lg in logs})
        self._write_checkpoint(d, REPLICATION_OFFSET_CHECKPOINT,
                               {tp: lg.high_watermark for tp, lg in logs})

    def _write_checkpoint(self, d: str, name: str, offsets: dict[TopicPartition, int]) -> None:
        """Write a checkpoint file, unless it already holds exactly ``offsets`` (written
        by this manager): the periodic pass rewrites and fsyncs only what changed, so
        an idle broker with thousands of partitions does no checkpoint I/O at all."""
        if not self.is_online(d):
            return
        path = os.path.join(d, name)
        if self._checkpointed.get(path) == offsets:
            return
        try:
            OffsetCheckpointFile(path).write(offsets)
        except OSError as e:
            self._checkpointed.pop(path, None)
            raise self._io_failed(d, f"writing {name}", e) from e
        self._checkpointed[path] = offsets

    def checkpoint_all(self) -> None:
        """Write the recovery-point, log-start-offset and high-watermark checkpoints of
        every online dir (each dir's failure reported; the first raised at the end)."""
        first: KafkaError | None = None
        for d in self.log_dirs:
            try:
                self.checkpoint_dir(d)
            except KafkaStorageError as e:
                first = first or e
        if first is not None:
            raise first

    def checkpoint_recovery_points(self) -> None:
        self._write_one(RECOVERY_POINT_CHECKPOINT, lambda lg: lg.recovery_point)

    def checkpoint_log_start_offsets(self) -> None:
        self._write_one(LOG_START_OFFSET_CHECKPOINT, lambda lg: lg.log_start_offset)

    def checkpoint_high_watermarks(self) -> None:
        self._write_one(REPLICATION_OFFSET_CHECKPOINT, lambda lg: lg.high_watermark)

    def _write_one(self, name: str, value: Callable[[Log], int]) -> None:
        for d, logs in self.logs_by_dir().items():
            self._write_checkpoint(d, name, {(lg.topic, lg.partition): value(lg) for lg in logs})
