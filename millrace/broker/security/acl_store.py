"""``AclStore``: where the broker's ACLs are persisted and how a change reaches every
broker (the storage half of Kafka's ``AclAuthorizer``; the decisions are in
``authorizer.AclAuthorizer``, which holds the ACLs in memory).

ACLs are kept per resource pattern: ``{pattern: {entry, ...}}``.  Two places:

* ZooKeeper cluster: ``ZkAclStore``, Kafka's layout (``zk_data``), so ``kafka-acls
  --authorizer-properties zookeeper.connect=..`` and Kafka brokers read what we write and
  the other way round.  A LITERAL pattern's entries are the JSON of
  ``/kafka-acl/<Type>/<name>``, a PREFIXED one's of
  ``/kafka-acl-extended/prefixed/<Type>/<name>``.
* single node: ``LocalAclStore``, a section of the ``LocalMetadataStore``'s atomic JSON
  (each pattern with the JSON its znode would hold).

**Read-modify-write** (``update(pattern, fn)``, Kafka's ``updateResourceAcls``): read the
entries with the znode version, ``new = fn(entries)``, then write conditionally: set at
that version, create if there was no znode, delete at that version once ``new`` is empty.
A writer that lost a race (BADVERSION, NODEEXISTS, NONODE) waits 100-150 ms, re-reads and
applies ``fn`` again -- so ``fn`` must be a pure function of the entries it is given
(add these, remove those), never a value computed before the call.  Two brokers adding
to one resource at once therefore both land.  After a write that changed the entries an
``acl_changes_<n>`` node names the pattern.

**Change notifications** (``watch(callback)``, Kafka's ``ZkNodeChangeNotificationListener``
on ``/kafka-acl-changes`` and ``/kafka-acl-extended-changes``): a watcher thread wakes on
every new child, reads the nodes it has not seen, and calls ``callback(patterns)`` with
the patterns they name; the callee re-reads those patterns (``get``) -- a notification
says *which* resource changed, never what it holds now.  The first round after
``start()`` covers every notification present (Kafka's listener starts from -1), so a
change made between ``load()`` and ``start()`` is never missed, at the price of some
patterns reported that had not changed.  Nodes older than 15 minutes (by their creation
time) are deleted in the same round, as Kafka does.

Thread ownership: ``ZkAclStore`` may be called from any thread; each call blocks until
ZooKeeper answers (``blocking = True``: the broker calls it in an executor).  The ZooKeeper
watcher calls back on its own thread ``acl-change-watcher`` (never kazoo's), where the
callee may block (re-read) or hand over to the event loop.  ``LocalAclStore`` is called on
the event-loop thread only, and calls back there, synchronously after the write.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from millrace.broker.zk import zk_data as zd
from millrace.broker.zk.errors import ZkError
from millrace.common.time import SYSTEM_TIME, Time
from millrace.security.acl import (
    AccessControlEntry,
    PatternType,
    ResourcePattern,
    decode_acls,
    encode_acls,
)

if TYPE_CHECKING:
    from millrace.broker.metadata.local_store import LocalMetadataStore
    from millrace.broker.zk import KafkaZkClient, ZkWatch

log = logging.getLogger(__name__)

AclUpdate = Callable[[set[AccessControlEntry]], set[AccessControlEntry]]
AclChangeCallback = Callable[[list[ResourcePattern]], None]

# AclAuthorizer: maxUpdateRetries, retryBackoffMs, retryBackoffJitterMs
MAX_UPDATE_RETRIES = 10
RETRY_BACKOFF_MS = 100
RETRY_BACKOFF_JITTER_MS = 50
# ZkNodeChangeNotificationListener.changeExpirationMs
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
# after a failed round (ZooKeeper unreachable) the watcher tries again this much later
WATCH_RETRY_S = 1.0
CHANGE_PATHS = (zd.KAFKA_ACL_CHANGES_PATH, zd.KAFKA_ACL_EXTENDED_CHANGES_PATH)


class AclWatch(Protocol):
    """A change watcher, idle until ``start()``; ``stop()`` ends the callbacks."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


class AclStore(Protocol):
    """The persisted ACLs.  ``blocking``: the calls do network I/O and must run off the
    event loop."""

    blocking: bool

    def load(self) -> dict[ResourcePattern, set[AccessControlEntry]]:
        """Every pattern that has entries (at start-up)."""
        ...

    def get(self, pattern: ResourcePattern) -> set[AccessControlEntry]:
        """The pattern's entries now; empty if it has none."""
        ...

    def update(self, pattern: ResourcePattern, fn: AclUpdate) -> set[AccessControlEntry]:
        """Replace the pattern's entries by ``fn(entries)`` (read-modify-write, retried
        on a concurrent change; see the module docstring) and tell every broker; returns
        the entries written.  Durable when it returns."""
        ...

    def watch(self, callback: AclChangeCallback) -> AclWatch:
        """A watcher calling ``callback(patterns)`` when patterns change (once started)."""
        ...


# ---------------------------------------------------------------------------- ZooKeeper
class ZkAclStore:
    """Kafka's ACL znodes over a ``KafkaZkClient``."""

    blocking = True

    def __init__(self, zk: KafkaZkClient, *, max_update_retries: int = MAX_UPDATE_RETRIES,
                 sleep: Callable[[float], None] = time.sleep,
                 rng: random.Random | None = None) -> None:
        self.zk = zk
        self.max_update_retries = max_update_retries
        self._sleep = sleep
        self._rng = rng or random.Random()

    def create_paths(self) -> None:
        """The store and change dirs (Kafka's authorizer makes sure of them at start-up;
        reads and writes here work without them)."""
        self.zk.create_acl_paths()

    def load(self) -> dict[ResourcePattern, set[AccessControlEntry]]:
        """Every pattern in both stores (``AclAuthorizer.loadAllAcls``).  A znode that does
        not hold Kafka's ACL JSON raises ValueError naming it: an authorizer must not start
        with some ACLs (a DENY, say) silently left out."""
        acls: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for pattern_type in zd.ACL_STORE_PATTERN_TYPES:
            for type_name in self.zk.get_acl_resource_types(pattern_type):
                resource_type = zd.resource_type_from_path_name(type_name)
                if resource_type is None:
                    log.warning("Ignoring unknown ResourceType: %s (%s)", type_name,
                                zd.acl_store_path(pattern_type))
                    continue
                for name in self.zk.get_acl_resource_names(pattern_type, resource_type):
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    entries = self._read(pattern).entries
                    if entries:
                        acls[pattern] = set(entries)
        return acls

    def get(self, pattern: ResourcePattern) -> set[AccessControlEntry]:
        return set(self._read(pattern).entries)

    def _read(self, pattern: ResourcePattern) -> zd.VersionedAcls:
        path = zd.acl_resource_path(pattern)  # ValueError for a name with no znode
        try:
            return self.zk.get_versioned_acls(pattern)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from e

    def update(self, pattern: ResourcePattern, fn: AclUpdate) -> set[AccessControlEntry]:
        current = self._read(pattern)
        retries = 0
        while True:
            new = frozenset(fn(set(current.entries)))
            if self._write(pattern, current, new):
                break
            if retries >= self.max_update_retries:
                raise ZkError(f"Failed to update ACLs for {pattern} after trying a maximum "
                              f"of {self.max_update_retries} times")
            retries += 1
            log.debug("ACLs of %s changed under us (version %d); re-reading", pattern,
                      current.zk_version)
            self._sleep((RETRY_BACKOFF_MS + self._rng.randrange(RETRY_BACKOFF_JITTER_MS))
                        / 1000)
            current = self._read(pattern)
        if new != current.entries:
            log.info("Updated ACLs for %s (%d entries)", pattern, len(new))
            self.zk.create_acl_change_notification(pattern)
        return set(new)

    def _write(self, pattern: ResourcePattern, current: zd.VersionedAcls,
               new: frozenset[AccessControlEntry]) -> bool:
        """One conditional write of ``new`` over ``current``; False when it lost a race."""
        if new:
            if current.exists:
                return self.zk.conditional_set_acls(pattern, new, current.zk_version) is not None
            return self.zk.create_acls_if_not_exists(pattern, new)
        if current.exists:
            return self.zk.conditional_delete_acls(pattern, current.zk_version)
        return True  # no znode and nothing to write

    def watch(self, callback: AclChangeCallback) -> ZkAclChangeWatcher:
        return ZkAclChangeWatcher(self.zk, callback)


class ZkAclChangeWatcher:
    """The ``acl_changes_<n>`` nodes of both change dirs, turned into
    ``callback(patterns)`` calls on a thread of its own (see the module docstring).
    ``run_once`` is one round; tests call it directly instead of ``start``."""

    def __init__(self, zk: KafkaZkClient, callback: AclChangeCallback, *,
                 time: Time = SYSTEM_TIME,
                 change_expiration_ms: int = CHANGE_EXPIRATION_MS) -> None:
        self.zk = zk
        self._callback = callback
        self._time = time
        self.change_expiration_ms = change_expiration_ms
        # owned by whichever thread runs the rounds (the watcher thread once started)
        self._last_change: dict[str, int] = {path: -1 for path in CHANGE_PATHS}
        self._ctimes: dict[str, dict[str, int]] = {path: {} for path in CHANGE_PATHS}
        self._wakeup = threading.Event()
        self._stopping = threading.Event()
        self._watches: list[ZkWatch] = []
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the ACL change watcher is already started")
        self._thread = threading.Thread(target=self._run, name="acl-change-watcher",
                                        daemon=True)
        self._thread.start()
        for path in CHANGE_PATHS:  # each fires once at once: the first round
            self._watches.append(self.zk.watch_acl_changes(path, self._notified))

    def stop(self, timeout: float = 5.0) -> None:
        for watch in self._watches:
            watch.cancel()
        self._stopping.set()
        self._wakeup.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _notified(self, _sequence_numbers: list[str]) -> None:  # kazoo's thread
        self._wakeup.set()

    def _run(self) -> None:
        while True:
            self._wakeup.wait()
            if self._stopping.is_set():
                return
            self._wakeup.clear()
            try:
                changed = self.run_once()
            except Exception:  # ZooKeeper unreachable, say: try the round again later
                log.exception("Error while processing ACL change notifications")
                if self._stopping.wait(WATCH_RETRY_S):
                    return
                self._wakeup.set()
                continue
            if changed and not self._stopping.is_set():
                try:
                    self._callback(changed)
                except Exception:
                    log.exception("ACL change callback failed for %s", changed)

    def run_once(self) -> list[ResourcePattern]:
        """Read the notifications not seen yet, oldest first, and purge expired ones;
        the patterns named (each once, in order)."""
        now = self._time.milliseconds()
        changed: list[ResourcePattern] = []
        for path in CHANGE_PATHS:
            sequence_numbers = self.zk.get_acl_change_notifications(path)
            for seq in sequence_numbers:
                if int(seq) <= self._last_change[path]:
                    continue
                self._last_change[path] = int(seq)
                got = self.zk.get_acl_change_notification(path, seq)
                if got is None:
                    continue  # purged meanwhile
                data, ctime = got
                self._ctimes[path][seq] = ctime
                try:
                    changed.append(zd.decode_acl_change_notification(path, data))
                except ValueError as e:
                    log.error("error processing change notification %r from %s/%s%s: %s",
                              data, path, zd.ACL_CHANGE_PREFIX, seq, e)
            self._purge(path, sequence_numbers, now)
        return list(dict.fromkeys(changed))

    def _purge(self, path: str, sequence_numbers: Iterable[str], now: int) -> None:
        ctimes = self._ctimes[path]
        present = set(sequence_numbers)
        for seq in list(ctimes):
            if seq not in present:
                del ctimes[seq]
        for seq in sorted(present):
            ctime = ctimes.get(seq)
            if ctime is None:  # seen before this watcher started, or skipped
                got = self.zk.get_acl_change_notification(path, seq)
                if got is None:
                    continue
                ctime = ctimes[seq] = got[1]
            if now - ctime > self.change_expiration_ms:
                log.debug("Purging change notification %s/%s%s", path, zd.ACL_CHANGE_PREFIX,
                          seq)
                self.zk.delete_acl_change_notification(path, seq)
                del ctimes[seq]


# ---------------------------------------------------------------------------- single node
# The LocalMetadataStore's "acls" section: one JSON object per pattern,
# {"resourceType":"Topic","name":"orders","patternType":"LITERAL","data":<znode JSON>},
# "data" being exactly what the pattern's znode would hold.
def _encode_record(pattern: ResourcePattern,
                   entries: Iterable[AccessControlEntry]) -> dict[str, Any]:
    return {"resourceType": pattern.resource_type.kafka_name, "name": pattern.name,
            "patternType": pattern.pattern_type.name,
            "data": json.loads(encode_acls(entries))}


def _decode_record(record: dict[str, Any]) -> tuple[ResourcePattern, set[AccessControlEntry]]:
    resource_type = zd.resource_type_from_path_name(str(record["resourceType"]))
    if resource_type is None:
        raise ValueError(f"unknown resource type {record['resourceType']!r}")
    pattern = ResourcePattern(resource_type, str(record["name"]),
                              PatternType[str(record["patternType"])])
    return pattern, decode_acls(json.dumps(record["data"]).encode("utf-8"))


def _record_key(pattern: ResourcePattern) -> tuple[str, str, str]:
    return pattern.pattern_type.name, pattern.resource_type.kafka_name, pattern.name


class LocalAclStore:
    """The single node's ACLs, in the ``LocalMetadataStore``'s JSON file (written
    atomically on every change, read back at start-up)."""

    blocking = False

    def __init__(self, metadata: LocalMetadataStore) -> None:
        self._metadata = metadata
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        for record in metadata.acl_records():
            pattern, entries = _decode_record(record)
            if entries:
                self._acls[pattern] = frozenset(entries)
        self._watchers: list[LocalAclChangeWatcher] = []

    def load(self) -> dict[ResourcePattern, set[AccessControlEntry]]:
        return {p: set(entries) for p, entries in self._acls.items()}

    def get(self, pattern: ResourcePattern) -> set[AccessControlEntry]:
        return set(self._acls.get(pattern, ()))

    def update(self, pattern: ResourcePattern, fn: AclUpdate) -> set[AccessControlEntry]:
        current = self._acls.get(pattern, frozenset())
        new = frozenset(fn(set(current)))
        if new != current:
            if new:
                self._acls[pattern] = new
            else:
                del self._acls[pattern]
            self._metadata.set_acl_records(
                [_encode_record(p, self._acls[p]) for p in sorted(self._acls, key=_record_key)])
            for watcher in list(self._watchers):
                watcher.notify([pattern])
        return set(new)

    def watch(self, callback: AclChangeCallback) -> LocalAclChangeWatcher:
        return LocalAclChangeWatcher(self, callback)

    def _add_watcher(self, watcher: LocalAclChangeWatcher) -> None:
        self._watchers.append(watcher)

    def _remove_watcher(self, watcher: LocalAclChangeWatcher) -> None:
        if watcher in self._watchers:
            self._watchers.remove(watcher)


class LocalAclChangeWatcher:
    """Calls back after each change made through its ``LocalAclStore`` (the only writer
    of a single node), on the writer's thread."""

    def __init__(self, store: LocalAclStore, callback: AclChangeCallback) -> None:
        self._store = store
        self._callback = callback

    def start(self) -> None:
        self._store._add_watcher(self)

    def stop(self) -> None:
        self._store._remove_watcher(self)

    def notify(self, patterns: list[ResourcePattern]) -> None:
        self._callback(patterns)
