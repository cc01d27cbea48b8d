"""``ZooKeeperClient``: one ZooKeeper session over kazoo, with Kafka's chroot handling,
fenced multi-ops and plain-callback watches (Kafka's ``kafka.zookeeper.ZooKeeperClient``).

``KafkaZkClient`` speaks Kafka's layout on top of it; this module knows nothing of Kafka's
znodes except ``/controller_epoch``, the fence every controller write carries.

Theory of operation:

- **Connect string.**  ``zookeeper.connect`` is ``host:port[,host:port...][/chroot]``.  A
  chroot must exist before a session rooted in it can create anything, so ``start()``
  first creates it through a short-lived session without the chroot (Kafka's
  ``createChrootIfNecessary``), then opens the real session rooted there.
- **Session.**  ``session_timeout_ms`` is what the client asks for (Kafka's
  ``zookeeper.session.timeout.ms``, 18000); the server clamps it into its own
  ``[minSessionTimeout, maxSessionTimeout]``.  ``start()`` waits up to
  ``connection_timeout_ms`` for the first connection.  kazoo reconnects by itself; a
  session that expired comes back as a *new* session (new id), with this client's
  ephemeral znodes gone: listeners see ``LOST`` then ``CONNECTED``, and the broker must
  register again and the controller resign (reference §2).
- **Fenced writes.**  ``multi(ops, expected_controller_epoch_zk_version)`` prepends
  ``check(/controller_epoch, version)``: if another controller has been elected since,
  the check fails, nothing is applied and ``ControllerMovedError`` is raised (KAFKA-6082).
  Otherwise the first failing op's error is mapped to ``ZkBadVersionError``,
  ``ZkNodeExistsError`` or ``ZkNoNodeError``.
- **Threads.**  kazoo runs a connection thread and a callback thread.  Synchronous calls
  block the calling thread until the server answers.  Watch callbacks and state listeners
  run on kazoo's threads, one at a time; they must not block or call back into this
  client (kazoo would deadlock on its own callback thread).  The broker hands each one to
  its asyncio loop with ``loop.call_soon_threadsafe`` and does the reads there (or in an
  executor): a watch says only *that* something changed, never *what* to do.
- **Metrics** (Kafka's ``ZooKeeperClient``): every request's round trip goes into the
  ``kafka.server:type=ZooKeeperClientMetrics,name=ZooKeeperRequestLatencyMs`` histogram
  (on the calling thread), and every session event marks one of the
  ``kafka.server:type=SessionExpireListener`` meters (on kazoo's thread: both are
  ``locked``): ``ZooKeeperSyncConnectsPerSec`` (connected, the first time included),
  ``ZooKeeperReadOnlyConnectsPerSec``, ``ZooKeeperDisconnectsPerSec`` (the connection
  dropped), ``ZooKeeperExpiresPerSec`` (the session expired) and
  ``ZooKeeperAuthFailuresPerSec``.  ``session_state`` is the state in the spelling of
  ZooKeeper's Java ``States`` enum (``CONNECTED``, ``CONNECTING``, ``CONNECTEDREADONLY``,
  ``CLOSED``, ``AUTH_FAILED``), what the broker's ``SessionState`` gauge shows.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any, Concatenate, ParamSpec, TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
)
from kazoo.protocol.states import KeeperState, ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from millrace.broker.metrics.registry import KafkaMetricsRegistry
from millrace.broker.zk.errors import (
    ControllerMovedError,
    ZkBadVersionError,
    ZkError,
    ZkNodeExistsError,
    ZkNoNodeError,
)

log = logging.getLogger(__name__)

CONTROLLER_EPOCH_PATH = "/controller_epoch"
MATCH_ANY_VERSION = -1
# kazoo's detailed state -> ZooKeeper's Java ``ZooKeeper.States`` (an expired session's
# handle is CLOSED there)
SESSION_STATES = {
    KeeperState.CONNECTED: "CONNECTED",
    KeeperState.CONNECTED_RO: "CONNECTEDREADONLY",
    KeeperState.CONNECTING: "CONNECTING",
    KeeperState.CLOSED: "CLOSED",
    KeeperState.EXPIRED_SESSION: "CLOSED",
    KeeperState.AUTH_FAILED: "AUTH_FAILED",
}
P = ParamSpec("P")
R = TypeVar("R")


def _timed(request: Callable[Concatenate[ZooKeeperClient, P], R]
           ) -> Callable[Concatenate[ZooKeeperClient, P], R]:
    """A ZooKeeper request whose round trip goes into ``ZooKeeperRequestLatencyMs``."""
    @functools.wraps(request)
    def timed(self: ZooKeeperClient, *args: P.args, **kwargs: P.kwargs) -> R:
        start = perf_counter()
        try:
            return request(self, *args, **kwargs)
        finally:
            self.request_latency.update((perf_counter() - start) * 1000.0)
    return timed


def split_connect_string(connect: str) -> tuple[str, str | None]:
    """``"h1:2181,h2:2181/kafka"`` -> ``("h1:2181,h2:2181", "/kafka")``; a bare ``/`` is none."""
    slash = connect.find("/")
    if slash < 0:
        return connect, None
    hosts, chroot = connect[:slash], connect[slash:].rstrip("/")
    if not hosts:
        raise ValueError(f"zookeeper.connect {connect!r} names no host")
    return hosts, chroot or None


@dataclass(frozen=True, slots=True)
class CreateOp:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False


@dataclass(frozen=True, slots=True)
class SetDataOp:
    path: str
    data: bytes
    version: int = MATCH_ANY_VERSION


@dataclass(frozen=True, slots=True)
class DeleteOp:
    path: str
    version: int = MATCH_ANY_VERSION


@dataclass(frozen=True, slots=True)
class CheckOp:
    path: str
    version: int


ZkOp = CreateOp | SetDataOp | DeleteOp | CheckOp


def _map_error(op: ZkOp, error: Exception) -> Exception:
    if isinstance(error, BadVersionError):
        return ZkBadVersionError(op.path, getattr(op, "version", MATCH_ANY_VERSION))
    if isinstance(error, NodeExistsError):
        return ZkNodeExistsError(op.path)
    if isinstance(error, NoNodeError):
        return ZkNoNodeError(op.path)
    if isinstance(error, NotEmptyError):
        return ZkError(f"{op.path} still has children")
    return error


class ZkWatch:
    """A registered watch; ``cancel()`` stops further callbacks (from the next change on)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.cancelled = False  # read on kazoo's callback thread; a plain flag suffices

    def cancel(self) -> None:
        self.cancelled = True


class ZooKeeperClient:
    """One ZooKeeper session (thread-safe: kazoo serialises requests on its connection)."""

    def __init__(self, connect: str, *, session_timeout_ms: int = 18_000,
                 connection_timeout_ms: int | None = None,
                 metrics: KafkaMetricsRegistry | None = None) -> None:
        self.connect = connect
        self.hosts, self.chroot = split_connect_string(connect)
        self.session_timeout_ms = session_timeout_ms
        # Kafka: zookeeper.connection.timeout.ms defaults to the session timeout
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self._kazoo = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000)
        self._closed = False
        registry = metrics if metrics is not None else KafkaMetricsRegistry()
        self.request_latency = registry.histogram(
            "kafka.server", "ZooKeeperClientMetrics", "ZooKeeperRequestLatencyMs", locked=True)

        def meter(name: str) -> Any:
            return registry.meter("kafka.server", "SessionExpireListener", name, locked=True)
        self._sync_connects = meter("ZooKeeperSyncConnectsPerSec")
        self._read_only_connects = meter("ZooKeeperReadOnlyConnectsPerSec")
        self._disconnects = meter("ZooKeeperDisconnectsPerSec")
        self._expires = meter("ZooKeeperExpiresPerSec")
        self._auth_failures = meter("ZooKeeperAuthFailuresPerSec")
        self._kazoo.add_listener(self._count_session_event)

    def _count_session_event(self, state: KazooState) -> None:
        """Kazoo's connection thread: mark the meter of this session event."""
        detail = self._kazoo.client_state  # set before kazoo calls its listeners
        if state == KazooState.CONNECTED:
            if detail == KeeperState.CONNECTED_RO:
                self._read_only_connects.mark()
            else:
                self._sync_connects.mark()
        elif state == KazooState.SUSPENDED:
            self._disconnects.mark()
        elif detail == KeeperState.AUTH_FAILED:
            self._auth_failures.mark()
        elif detail == KeeperState.EXPIRED_SESSION:
            self._expires.mark()

    @property
    def session_state(self) -> str:
        """The session's state as ZooKeeper's Java client names it (module docstring)."""
        return "CLOSED" if self._closed else SESSION_STATES.get(
            self._kazoo.client_state, str(self._kazoo.client_state))

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Create the chroot if needed, then connect (``connection_timeout_ms`` at most)."""
        timeout = self.connection_timeout_ms / 1000
        if self.chroot is not None:
            bootstrap = KazooClient(hosts=self.hosts, timeout=self.session_timeout_ms / 1000)
            bootstrap.start(timeout=timeout)
            try:
                bootstrap.ensure_path(self.chroot)
            finally:
                bootstrap.stop()
                bootstrap.close()
        self._kazoo.start(timeout=timeout)

    def close(self) -> None:
        """Close the session: the server deletes its ephemeral znodes at once.  Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._kazoo.stop()
        self._kazoo.close()

    @property
    def session_id(self) -> int | None:
        """The current session's id (None before the first connection)."""
        client_id = self._kazoo.client_id
        return int(client_id[0]) if client_id else None

    @property
    def connected(self) -> bool:
        return bool(self._kazoo.connected)

    def add_state_listener(self, listener: Callable[[str], None]) -> None:
        """``listener("CONNECTED" | "SUSPENDED" | "LOST")`` on kazoo's connection thread.

        SUSPENDED: the connection dropped, the session may survive.  LOST: the session
        expired (or was closed); everything ephemeral of this client is gone.
        """
        def on_state(state: KazooState) -> None:
            listener(str(state))
        self._kazoo.add_listener(on_state)

    # ------------------------------------------------------------------ reads
    @_timed
    def get_data(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        """Data and stat, or None when the znode does not exist."""
        try:
            data, stat = self._kazoo.get(path)
        except NoNodeError:
            return None
        return (data or b""), stat

    @_timed
    def get_children(self, path: str) -> list[str]:
        """The children's names, or ``[]`` when the znode does not exist."""
        try:
            return list(self._kazoo.get_children(path))
        except NoNodeError:
            return []

    @_timed
    def exists(self, path: str) -> ZnodeStat | None:
        return self._kazoo.exists(path)

    # ------------------------------------------------------------------ writes
    @_timed
    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
               sequential: bool = False, make_parents: bool = False) -> str:
        """Create a znode; returns its path (with the sequence suffix when sequential)."""
        try:
            created = self._kazoo.create(path, data, ephemeral=ephemeral, sequence=sequential,
                                         makepath=make_parents)
        except NodeExistsError:
            raise ZkNodeExistsError(path) from None
        except NoNodeError:
            raise ZkNoNodeError(path) from None
        return str(created)

    @_timed
    def ensure_path(self, path: str) -> None:
        """Create ``path`` and its parents, empty, where missing."""
        self._kazoo.ensure_path(path)

    @_timed
    def set_data(self, path: str, data: bytes, version: int = MATCH_ANY_VERSION) -> ZnodeStat:
        """setData, conditional on ``version`` unless it is -1; returns the new stat."""
        try:
            return self._kazoo.set(path, data, version=version)
        except BadVersionError:
            raise ZkBadVersionError(path, version) from None
        except NoNodeError:
            raise ZkNoNodeError(path) from None

    @_timed
    def delete(self, path: str, version: int = MATCH_ANY_VERSION, *,
               recursive: bool = False) -> bool:
        """Delete; False when it was already gone."""
        try:
            self._kazoo.delete(path, version=version, recursive=recursive)
        except NoNodeError:
            return False
        except BadVersionError:
            raise ZkBadVersionError(path, version) from None
        return True

    def subtree_for_delete(self, path: str) -> list[str]:
        """``path`` and every descendant, children before parents (a delete order)."""
        if self.exists(path) is None:
            return []
        ordered: list[str] = []
        for child in self.get_children(path):
            ordered.extend(self.subtree_for_delete(f"{path}/{child}"))
        ordered.append(path)
        return ordered

    @_timed
    def multi(self, ops: Sequence[ZkOp],
              expected_controller_epoch_zk_version: int | None = None) -> list[Any]:
        """Apply ``ops`` atomically; with a controller epoch version, fenced by it.

        Returns one result per op (created path, new stat, True).  Raises
        ``ControllerMovedError`` when the fence fails, else the first failing op's error.
        """
        tx = self._kazoo.transaction()
        fenced = (expected_controller_epoch_zk_version is not None
                  and expected_controller_epoch_zk_version != MATCH_ANY_VERSION)
        all_ops: list[ZkOp] = []
        if fenced:
            assert expected_controller_epoch_zk_version is not None
            all_ops.append(CheckOp(CONTROLLER_EPOCH_PATH, expected_controller_epoch_zk_version))
        all_ops.extend(ops)
        for op in all_ops:
            if isinstance(op, CreateOp):
                tx.create(op.path, op.data, ephemeral=op.ephemeral, sequence=op.sequential)
            elif isinstance(op, SetDataOp):
                tx.set_data(op.path, op.data, version=op.version)
            elif isinstance(op, DeleteOp):
                tx.delete(op.path, version=op.version)
            else:
                tx.check(op.path, op.version)
        results = list(tx.commit())
        if fenced and isinstance(results[0], (BadVersionError, NoNodeError)):
            raise ControllerMovedError(
                f"controller epoch zkVersion {expected_controller_epoch_zk_version} is no "
                "longer current: another controller has been elected")
        for op, result in zip(all_ops, results):
            if isinstance(result, Exception) and not isinstance(result, RolledBackError):
                raise _map_error(op, result)
        return results[1:] if fenced else results

    # ------------------------------------------------------------------ watches
    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> ZkWatch:
        """``callback(children)`` now and after every change of ``path``'s children, on
        kazoo's callback thread (see the module docstring).  ``path`` must exist.  The
        watch survives reconnections and session expiry."""
        handle = ZkWatch(path)

        def on_children(children: list[str]) -> bool | None:
            if handle.cancelled:
                return False
            callback(list(children))
            return None

        ChildrenWatch(self._kazoo, path, func=on_children)
        return handle

    def watch_data(self, path: str,
                   callback: Callable[[bytes | None, ZnodeStat | None], None]) -> ZkWatch:
        """``callback(data, stat)`` now and after every create, change or delete of ``path``
        (``(None, None)`` while it does not exist), on kazoo's callback thread."""
        handle = ZkWatch(path)

        def on_data(data: bytes | None, stat: ZnodeStat | None) -> bool | None:
            if handle.cancelled:
                return False
            callback(data if stat is not None else None, stat)
            return None

        DataWatch(self._kazoo, path, func=on_data)
        return handle
