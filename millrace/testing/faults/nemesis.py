"""The nemesis: faults injected into a ``LocalCluster`` on a schedule drawn from a seed.

A ``Fault`` has two steps: ``inject`` (kill, pause, cut, fill...) returns a description of
what it did, ``heal`` undoes it (restart, resume, reconnect...).  ``Nemesis.run`` loops
until told to stop: wait for the cluster to settle (every partition led, ISR == replicas),
pick a fault with the seeded ``random.Random``, inject it, hold it for a drawn number of
seconds, heal it, and record a ``FaultEvent`` (times of injection, healing and settling).
The same seed and the same fault list give the same choices, so a failing run is replayed
with ``--seed``; what a fault hits (which broker leads which partition) depends on the
cluster's own elections and is recorded in the event's description.

``ClusterProbe`` is how the nemesis looks at the cluster: Metadata requests through
confluent-kafka's admin client to a broker that is up (never one the nemesis has paused
or cut off), so what it sees comes from a third-party client.
"""

from __future__ import annotations

import random
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from millrace.launcher.local_cluster import LocalCluster
from millrace.testing.faults.history import FaultEvent, History


class NemesisError(Exception):
    """The cluster did not come back (no settle within the bound): a finding, not a crash."""


@dataclass
class ClusterProbe:
    """Leader, replicas and ISR per partition, and the controller, as Metadata shows them."""

    cluster: LocalCluster
    topics: Sequence[str]
    # brokers not to ask (paused or cut off by a fault: their answers may be stale)
    avoid: set[int] = field(default_factory=set)
    # the admin client's security settings (a secured cluster: the super user's)
    config: dict[str, Any] = field(default_factory=dict)
    _admins: dict[str, Any] = field(default_factory=dict)

    def _admin(self) -> Any:
        from confluent_kafka.admin import AdminClient
        live = [b for b in sorted(self.cluster.brokers)
                if self.cluster.running(b) and b not in self.avoid]
        if not live:
            raise NemesisError("no broker is up to ask for metadata")
        servers = ",".join(self.cluster.broker(b).bootstrap for b in live)
        if servers not in self._admins:  # one client per set of brokers to ask
            self._admins[servers] = AdminClient({**self.config, "bootstrap.servers": servers,
                                                 "log_level": 0,
                                                 "log.connection.close": False})
        return self._admins[servers]

    def metadata(self, timeout: float = 5.0) -> Any:
        return self._admin().list_topics(timeout=timeout)

    def partitions(self) -> dict[tuple[str, int], tuple[int, tuple[int, ...], tuple[int, ...]]]:
        """``{(topic, partition): (leader, replicas, isr)}`` for the watched topics."""
        md = self.metadata()
        out = {}
        for name in self.topics:
            t = md.topics.get(name)
            if t is None or t.error is not None:
                continue
            for p in t.partitions.values():
                out[(name, p.id)] = (p.leader, tuple(p.replicas), tuple(p.isrs))
        return out

    def leader(self, topic: str, partition: int) -> int:
        return self.partitions().get((topic, partition), (-1, (), ()))[0]

    def controller(self) -> int:
        return int(self.metadata().controller_id)

    def settled(self, expected_partitions: int) -> bool:
        """Every partition of the watched topics led by a live broker, with a full ISR."""
        try:
            view = self.partitions()
        except Exception:  # a broker going away mid-request: not settled
            return False
        if len(view) < expected_partitions:
            return False
        return all(leader >= 0 and set(isr) == set(replicas)
                   for leader, replicas, isr in view.values())

    def wait_settled(self, expected_partitions: int, timeout: float) -> float:
        """Wait until ``settled``; return the seconds it took, NemesisError after timeout."""
        t0 = time.monotonic()
        while not self.settled(expected_partitions):
            if time.monotonic() - t0 > timeout:
                try:
                    view = self.partitions()
                except Exception as e:
                    view = {"error": str(e)}  # type: ignore[dict-item]
                raise NemesisError(f"cluster did not settle within {timeout:.0f}s: {view}")
            time.sleep(0.2)
        return time.monotonic() - t0


@dataclass
class NemesisContext:
    """What a fault may use: the cluster, its probe, the seeded random source and the
    broker settings its timing depends on."""

    cluster: LocalCluster
    probe: ClusterProbe
    rng: random.Random
    zk_session_timeout_s: float
    replica_lag_time_max_s: float
    partitions: int  # of the watched topics, for settle checks

    def random_partition(self) -> tuple[str, int]:
        return self.rng.choice(sorted(self.probe.partitions()))

    def random_leader(self) -> tuple[int, str]:
        """A live leader of a random partition and a description of what it leads."""
        topic, p = self.random_partition()
        leader = self.probe.leader(topic, p)
        if leader < 0:
            raise NemesisError(f"{topic}-{p} has no leader to hit")
        return leader, f"leader of {topic}-{p}"

    def random_follower(self) -> tuple[int, str]:
        topic, p = self.random_partition()
        leader, replicas, _ = self.probe.partitions()[(topic, p)]
        followers = sorted(r for r in replicas if r != leader)
        return self.rng.choice(followers), f"follower of {topic}-{p} (leader {leader})"


class Fault(ABC):
    """One kind of fault.  ``inject`` returns what it did; ``heal`` undoes it."""

    name: ClassVar[str]

    def hold_seconds(self, ctx: NemesisContext) -> float:
        """How long the fault stays in place before ``heal`` (drawn from ``ctx.rng``)."""
        return ctx.rng.uniform(2.0, 5.0)

    @abstractmethod
    def inject(self, ctx: NemesisContext) -> str: ...

    @abstractmethod
    def heal(self, ctx: NemesisContext) -> None: ...


class _RestartOnHeal(Fault):
    """A fault that takes broker ``victim`` down; heal starts it again on its port and
    log dir (if it is not running)."""

    def __init__(self) -> None:
        self.victim = -1

    def heal(self, ctx: NemesisContext) -> None:
        if not ctx.cluster.running(self.victim):
            ctx.cluster.restart_broker(self.victim)


class _KillBroker(_RestartOnHeal):
    """kill -9 (or, with ``sigterm``, SIGTERM: a controlled shutdown) the broker chosen
    by ``target``."""

    sigterm: ClassVar[bool] = False

    @abstractmethod
    def target(self, ctx: NemesisContext) -> tuple[int, str]: ...

    def inject(self, ctx: NemesisContext) -> str:
        self.victim, what = self.target(ctx)
        if self.sigterm:
            ctx.cluster.stop_broker(self.victim)
            return f"SIGTERM broker {self.victim} ({what})"
        ctx.cluster.kill_broker(self.victim)
        return f"kill -9 broker {self.victim} ({what})"


class KillLeader(_KillBroker):
    name = "kill-leader"

    def target(self, ctx: NemesisContext) -> tuple[int, str]:
        return ctx.random_leader()


class KillController(_KillBroker):
    name = "kill-controller"

    def target(self, ctx: NemesisContext) -> tuple[int, str]:
        return ctx.probe.controller(), "controller"


class KillFollower(_KillBroker):
    name = "kill-follower"

    def target(self, ctx: NemesisContext) -> tuple[int, str]:
        return ctx.random_follower()


class StopLeader(KillLeader):
    """SIGTERM a leader (controlled shutdown moves its leadership first), then restart."""

    name = "stop-leader"
    sigterm = True


class PauseLeader(Fault):
    """SIGSTOP a leader for longer than ``replica.lag.time.max.ms`` (``beyond="lag"``) or
    than the ZooKeeper session (``beyond="session"``: it comes back as a zombie whose
    leadership has moved), then SIGCONT."""

    def __init__(self, beyond: str = "session") -> None:
        if beyond not in ("lag", "session"):
            raise ValueError(f"beyond must be 'lag' or 'session', got {beyond!r}")
        self.beyond = beyond
        self.name = f"pause-leader-{beyond}"  # type: ignore[misc]
        self.victim = -1

    def hold_seconds(self, ctx: NemesisContext) -> float:
        base = (ctx.zk_session_timeout_s if self.beyond == "session"
                else ctx.replica_lag_time_max_s)
        return base + ctx.rng.uniform(1.0, 3.0)

    def inject(self, ctx: NemesisContext) -> str:
        self.victim, what = ctx.random_leader()
        ctx.cluster.pause_broker(self.victim)
        ctx.probe.avoid.add(self.victim)
        return f"SIGSTOP broker {self.victim} ({what})"

    def heal(self, ctx: NemesisContext) -> None:
        ctx.cluster.resume_broker(self.victim)
        ctx.probe.avoid.discard(self.victim)


class KillZooKeeper(Fault):
    """kill -9 the ZooKeeper server; start it again on its port and data."""

    name = "kill-zookeeper"

    def inject(self, ctx: NemesisContext) -> str:
        ctx.cluster.zookeeper.kill()
        return "kill -9 ZooKeeper"

    def heal(self, ctx: NemesisContext) -> None:
        if not ctx.cluster.zookeeper.running():
            ctx.cluster.zookeeper.start()


class RollingRestart(Fault):
    """SIGTERM and restart every broker in turn, waiting for the cluster to settle between
    them (the whole roll happens in ``inject``)."""

    name = "rolling-restart"

    def hold_seconds(self, ctx: NemesisContext) -> float:
        return 0.0

    def inject(self, ctx: NemesisContext) -> str:
        order = sorted(ctx.cluster.brokers)
        for b in order:
            ctx.cluster.stop_broker(b)
            ctx.cluster.restart_broker(b)
            ctx.probe.wait_settled(ctx.partitions, timeout=90)
        return "rolling restart of brokers " + ", ".join(map(str, order))

    def heal(self, ctx: NemesisContext) -> None:
        return None


class KillLeaderWithLaggingFollowers(_RestartOnHeal):
    """SIGSTOP both followers of a partition, let the leader take writes alone for a
    moment (shorter than ``replica.lag.time.max.ms``: the followers stay in the ISR),
    kill -9 the leader, resume the followers: one of them is elected, cleanly, without
    what the leader took alone.  With ``acks=all`` nothing of that was acknowledged (the
    high watermark could not move); with ``acks=1`` it was, and is lost -- the negative
    control the checker must catch."""

    name = "kill-leader-lagging-followers"

    def __init__(self) -> None:
        super().__init__()
        self.partition = ("", -1)
        self.followers: list[int] = []

    def hold_seconds(self, ctx: NemesisContext) -> float:
        return 1.0

    def heal(self, ctx: NemesisContext) -> None:
        """Restart the victim once one of the followers leads the partition.  A victim
        back before that -- inside its ZooKeeper session, or before the controller it
        hosted has failed over -- is handed its leadership back with its log whole (no
        election happened), and what it took alone is not lost after all.  If no follower
        is elected in time (the ISR shrank to the victim), it is restarted anyway."""
        deadline = time.monotonic() + 3 * ctx.zk_session_timeout_s + 30
        while time.monotonic() < deadline:
            try:
                if ctx.probe.leader(*self.partition) in self.followers:
                    break
            except Exception:  # a broker coming or going: ask again
                pass
            time.sleep(0.2)
        super().heal(ctx)

    def inject(self, ctx: NemesisContext) -> str:
        topic, p = ctx.random_partition()
        leader, replicas, _ = ctx.probe.partitions()[(topic, p)]
        followers = [r for r in replicas if r != leader]
        self.partition, self.followers = (topic, p), followers
        for f in followers:
            ctx.cluster.pause_broker(f)
            ctx.probe.avoid.add(f)
        try:
            time.sleep(min(1.5, ctx.replica_lag_time_max_s / 3))
            ctx.cluster.kill_broker(leader)
        finally:
            for f in followers:
                ctx.cluster.resume_broker(f)
                ctx.probe.avoid.discard(f)
        self.victim = leader
        return (f"SIGSTOP followers {followers} of {topic}-{p}, kill -9 its leader "
                f"{leader}, SIGCONT the followers")


class KillIsrThenStartLaggard(Fault):
    """Kill one follower and wait until the controller drops it from every ISR; let the
    other two take acknowledged writes; kill both (the whole ISR) and start the laggard
    first.  With ``unclean.leader.election.enable=false`` its partitions stay offline
    until an ISR member is back: nothing lost.  With ``true`` it is elected and the
    writes it missed are lost -- a negative control."""

    name = "kill-isr-start-laggard"

    def __init__(self) -> None:
        self.down: list[int] = []

    def hold_seconds(self, ctx: NemesisContext) -> float:
        """Until the laggard has surely been alone for a while: the killed brokers'
        ZooKeeper sessions (the controller's among them) outlive them by up to the
        session timeout, and only then can the laggard become controller and elect
        itself.  Restarting the others sooner made the election a race they could win
        (a clean one: the unclean control then lost nothing, one run in several)."""
        return ctx.zk_session_timeout_s + 6.0

    def inject(self, ctx: NemesisContext) -> str:
        laggard, what = ctx.random_follower()
        ctx.cluster.kill_broker(laggard)
        deadline = time.monotonic() + ctx.zk_session_timeout_s + 30
        while any(laggard in isr for _, _, isr in ctx.probe.partitions().values()):
            if time.monotonic() > deadline:
                raise NemesisError(f"broker {laggard} was not dropped from the ISRs")
            time.sleep(0.2)
        time.sleep(2.0)  # acknowledged writes the laggard misses
        self.down = [b for b in sorted(ctx.cluster.brokers) if b != laggard]
        for b in self.down:
            ctx.cluster.kill_broker(b)
        ctx.cluster.restart_broker(laggard)
        return (f"kill -9 broker {laggard} ({what}), then the rest of the ISR "
                f"{self.down}; restart broker {laggard} first")

    def heal(self, ctx: NemesisContext) -> None:
        for b in self.down:
            if not ctx.cluster.running(b):
                ctx.cluster.restart_broker(b)


FAULTS: dict[str, Callable[[], Fault]] = {
    "kill-leader": KillLeader,
    "kill-controller": KillController,
    "kill-follower": KillFollower,
    "stop-leader": StopLeader,
    "pause-leader-lag": lambda: PauseLeader("lag"),
    "pause-leader-session": lambda: PauseLeader("session"),
    "kill-zookeeper": KillZooKeeper,
    "rolling-restart": RollingRestart,
    "kill-leader-lagging-followers": KillLeaderWithLaggingFollowers,
    "kill-isr-start-laggard": KillIsrThenStartLaggard,
}


def register(name: str, factory: Callable[[], Fault]) -> None:
    """Add a fault kind (``network`` and ``disk`` register theirs)."""
    FAULTS[name] = factory


class Nemesis:
    """Injects faults from ``kinds`` one at a time until ``stop()`` or ``max_faults``."""

    def __init__(self, ctx: NemesisContext, kinds: Sequence[str], history: History, *,
                 max_faults: int | None = None, gap_s: tuple[float, float] = (1.0, 3.0),
                 settle_timeout_s: float = 120.0) -> None:
        unknown = [k for k in kinds if k not in FAULTS]
        if unknown:
            raise ValueError(f"unknown fault kinds {unknown}; known: {sorted(FAULTS)}")
        self.ctx = ctx
        self.kinds = list(kinds)
        self.history = history
        self.max_faults = max_faults
        self.gap_s = gap_s
        self.settle_timeout_s = settle_timeout_s
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self.injected = 0

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        try:
            while not self._stop.is_set():
                if self.max_faults is not None and self.injected >= self.max_faults:
                    return
                self.ctx.probe.wait_settled(self.ctx.partitions, self.settle_timeout_s)
                if self._stop.wait(self.ctx.rng.uniform(*self.gap_s)):
                    return
                self.one(FAULTS[self.ctx.rng.choice(self.kinds)]())
        except BaseException as e:  # reported by the runner
            self.error = e

    def one(self, fault: Fault) -> FaultEvent:
        """Inject, hold, heal and settle one fault; record and return its event."""
        hold = fault.hold_seconds(self.ctx)
        start = self.history.now()
        description = fault.inject(self.ctx)
        self.injected += 1
        event = FaultEvent(kind=fault.name, description=description, start=start,
                           healed=None, settled=None)
        self.history.add_fault(event)
        try:
            self._stop.wait(hold)  # a stop request cuts the hold short, never the heal
        finally:
            fault.heal(self.ctx)
            event.healed = self.history.now()
        self.ctx.probe.wait_settled(self.ctx.partitions, self.settle_timeout_s)
        event.settled = self.history.now()
        return event
