"""Scenarios and the run of one: cluster, workload, nemesis, settle, read, check.

A ``Scenario`` names the faults the nemesis draws from, the workload (which producers,
``acks``, idempotence), the topic's settings, and whether it is a **negative control**:
a run whose configuration or build is known to lose acknowledged records, which the
checker must therefore report.  A control that comes back clean is itself a failure:
the checker, or the control, is broken.

``run_scenario`` does, in order:

1. start ZooKeeper and three brokers (``LocalCluster``) with failure detection in
   seconds (``BROKER_SETTINGS``), create the topic (RF 3, ``min.insync.replicas=2``);
2. start the writers, the group readers and the commit watcher; wait for first acks;
3. run the nemesis until it injected ``faults`` faults or ``seconds`` passed;
4. heal, wait until every partition is led with a full ISR, keep writing a moment,
   stop the writers and wait for every outstanding delivery report;
5. let the readers catch up, record which member owns which partition;
6. stop the cluster cleanly, read every replica's log from disk and ``check``.

A scenario without faults (``security``) runs its workload for ``seconds`` instead.  The
security scenarios run a SASL_SSL cluster (``DevSecurity``): the harness itself (topic
creation, probe) acts as ``admin``, the super user, and the workload as ``client``; with
the authorizer on, admin first grants ``client`` exactly the ACLs the workload needs
(``security_setup``).  Their hostile clients (``hostile``) start with the first
acknowledgements and stop before the settle; what they achieved is the run's
``SecurityReport``, next to the workload's ``Report``.

Everything lands in the run's directory: ``history.jsonl``, ``report.json`` (and, with
hostile clients, ``hostile.jsonl``: every attempt) and the brokers' and ZooKeeper's logs.
"""

from __future__ import annotations

import contextlib
import json
import random
import shutil
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from millrace.launcher.dev_security import ADMIN_USER, CLIENT_USER, DevSecurity
from millrace.launcher.local_cluster import LocalCluster
from millrace.testing.confluent_admin import create_topic
from millrace.testing.faults.checker import Report, check
from millrace.testing.faults.history import History
from millrace.testing.faults.hostile import (
    HOSTILE_USERS,
    HostileClients,
    RssSampler,
    SecurityReport,
    Target,
    brokers_of,
    dump_attempts,
    security_report,
)
from millrace.testing.faults.nemesis import (
    FAULTS,
    ClusterProbe,
    Nemesis,
    NemesisContext,
    NemesisError,
)
from millrace.testing.faults.replica_logs import read_replica_logs
from millrace.testing.faults.security_setup import (
    create_scram_users,
    grant_workload_acls,
    leftover_effects,
    wait_visible,
    workload_acls,
)
from millrace.testing.faults.workload import (
    CommitWatcher,
    ConfluentWriter,
    GroupReaders,
    MillraceWriter,
    Writer,
)

TOPIC = "faults"
PARTITIONS = 3
GROUP = "faults-readers"
DECOY = "faults-decoy"  # a topic the hostile clients try to delete
DRAIN_IDLE_S = 60.0  # the group's commits stood still this long: it will not catch up
DRAIN_MAX_S = 300.0
ZK_SESSION_TIMEOUT_MS = 6000
REPLICA_LAG_TIME_MAX_MS = 6000
BROKER_SETTINGS = {
    "zookeeper.session.timeout.ms": str(ZK_SESSION_TIMEOUT_MS),
    "replica.lag.time.max.ms": str(REPLICA_LAG_TIME_MAX_MS),
    "controlled.shutdown.retry.backoff.ms": "500",
    "replica.fetch.backoff.ms": "200",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "auto.create.topics.enable": "false",
}


@dataclass(frozen=True)
class Scenario:
    name: str
    faults: tuple[str, ...]
    description: str
    writers: tuple[str, ...] = ("confluent", "millrace")
    acks: str = "all"
    idempotent: bool = True
    topic_config: dict[str, str] = field(default_factory=dict)
    broker_env: dict[str, str] = field(default_factory=dict)
    negative_control: bool = False
    # One member: two members committing asynchronously can move a group's offset back
    # legitimately (a commit still in flight when a rebalance hands the partition to the
    # other, which starts from the offset committed before it).  With one member that
    # never commits below what it committed itself, any step back is the broker's.
    readers: int = 1
    rate: float = 150.0  # records per second per writer
    # SASL_SSL everywhere (DevSecurity); the ACL authorizer on; hostile clients beside
    # the workload (millrace.testing.faults.hostile)
    secured: bool = False
    authorizer: bool = False
    hostile: bool = False
    seconds: float = 60.0  # how long a run lasts when the scenario has no faults


SCENARIOS: dict[str, Scenario] = {s.name: s for s in [
    Scenario("leader-kills", ("kill-leader",),
             "kill -9 the leader of a random partition, restart it"),
    Scenario("broker-faults",
             ("kill-leader", "kill-controller", "kill-follower", "stop-leader",
              "pause-leader-lag", "pause-leader-session", "kill-zookeeper",
              "rolling-restart", "kill-leader-lagging-followers"),
             "every process fault, drawn at random"),
    Scenario("network", ("partition-leader", "partition-follower", "partition-zookeeper"),
             "network partitions: a leader cut off from ZooKeeper and its peers (clients "
             "still reach it), a follower cut off from its peers, a broker cut off from "
             "ZooKeeper"),
    Scenario("disk-full", ("disk-full",), "one broker's log dir file system filled up"),
    Scenario("clean-election-only", ("kill-isr-start-laggard",),
             "the whole ISR killed, the out-of-sync replica started first; unclean "
             "election off: the partition waits for an ISR member",
             writers=("confluent",)),
    Scenario("control-acks1", ("kill-leader-lagging-followers",),
             "NEGATIVE CONTROL: acks=1 (no idempotence), the leader killed while its "
             "followers lag", writers=("confluent",), acks="1", idempotent=False,
             negative_control=True, readers=0),
    Scenario("control-unclean", ("kill-isr-start-laggard",),
             "NEGATIVE CONTROL: unclean.leader.election.enable=true, the whole ISR "
             "killed and the out-of-sync replica started first",
             writers=("confluent",), idempotent=False,
             topic_config={"unclean.leader.election.enable": "true"},
             negative_control=True, readers=0),
    Scenario("control-ack-before-append", ("kill-leader",),
             "NEGATIVE CONTROL: a broken build that acknowledges a produce before "
             "appending it (MILLRACE_UNSAFE_ACK_BEFORE_APPEND_MS=1500), leader killed",
             writers=("confluent",),
             broker_env={"MILLRACE_UNSAFE_ACK_BEFORE_APPEND_MS": "1500"},
             negative_control=True, readers=0),
    Scenario("security", (),
             "SASL_SSL with the ACL authorizer: the workload as a user holding exactly "
             "its ACLs, while users without ACLs and wrong passwords hammer every broker "
             "(produce, fetch, forged replica fetch, join/commit on the workload's group, "
             "delete topics, create ACLs, bad SASL)",
             secured=True, authorizer=True, hostile=True),
    # no group readers: with the hostile clients unchecked (joining the readers' group,
    # committing to it, fetching as forged followers) the one reader committed ~10
    # offsets/s instead of ~200 and did not catch up within the drain's minute; the
    # control is about what the hostile clients achieve
    Scenario("control-no-authorizer", (),
             "NEGATIVE CONTROL: the same hostile clients against the same SASL_SSL "
             "cluster without the authorizer: nothing is checked, their requests succeed",
             secured=True, hostile=True, negative_control=True, readers=0),
]}


def load_fault_modules() -> list[str]:
    """Import the optional fault kinds (network, disk); return why any is unavailable."""
    missing = []
    for module in ("network", "disk"):
        try:
            __import__(f"millrace.testing.faults.{module}")
        except ImportError as e:
            missing.append(f"{module}: {e}")
    return missing


@dataclass
class RunResult:
    scenario: str
    seed: int
    faults_injected: int
    report: Report
    history: History
    directory: Path
    error: str | None = None  # the run itself broke (cluster did not come back...)
    seconds: float = 0.0
    security: SecurityReport | None = None  # what the hostile clients achieved

    @property
    def ok(self) -> bool:
        return self.report.ok and (self.security is None or self.security.ok)

    @property
    def passed(self) -> bool:
        """A normal scenario passes clean; a negative control passes when caught."""
        if self.error is not None:
            return False
        control = SCENARIOS[self.scenario].negative_control if self.scenario in SCENARIOS \
            else False
        return (not self.ok) if control else self.ok

    def summary(self) -> str:
        text = self.report.summary()
        return text if self.security is None else text + "\n  " + self.security.summary()

    def to_json(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "seed": self.seed, "passed": self.passed,
                "faults_injected": self.faults_injected, "seconds": round(self.seconds, 1),
                "error": self.error, "report": self.report.to_json(),
                "security": self.security.to_json() if self.security is not None else None,
                "faults": [asdict(f) for f in self.history.faults]}


def _writer(kind: str, index: int, history: History, bootstrap: str, s: Scenario,
            config: dict[str, str]) -> Writer:
    name = f"{kind}-{index}"
    if kind == "confluent":
        return ConfluentWriter(name, history, bootstrap, TOPIC, PARTITIONS, s.rate, {
            **config, "acks": s.acks, "enable.idempotence": s.idempotent})
    if kind == "millrace":
        return MillraceWriter(name, history, bootstrap, TOPIC, PARTITIONS, s.rate, {
            **config, "acks": s.acks, "enable.idempotence": s.idempotent})
    raise ValueError(f"unknown writer {kind!r}: confluent or millrace")


def _wait(what: str, condition: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


def run_scenario(scenario: Scenario, seed: int, directory: Path, *,
                 faults: int | None = None, seconds: float | None = None,
                 log: Any = None) -> RunResult:
    """Run ``scenario`` until ``faults`` faults were injected or ``seconds`` passed (a
    scenario without faults: ``seconds``, default its own duration)."""
    if faults is None and seconds is None and scenario.faults:
        raise ValueError("give a number of faults, a duration, or both")
    load_fault_modules()
    missing = [f for f in scenario.faults if f not in FAULTS]
    if missing:
        raise ValueError(f"{scenario.name}: fault kinds {missing} are not available "
                         f"({'; '.join(load_fault_modules()) or 'not registered'})")
    if log is None:
        def log(*parts: object) -> None:
            print(*parts, flush=True)
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    started = time.monotonic()
    history = History()
    resources = contextlib.ExitStack()  # what the cluster needs around it, released last
    cgroups = None
    if any(kind.startswith("partition-") for kind in scenario.faults):
        from millrace.testing.faults.network import BrokerCgroups
        cgroups = resources.enter_context(BrokerCgroups())
    security = DevSecurity.create(directory / "cluster") if scenario.secured else None
    cluster = LocalCluster(directory / "cluster", 3, overrides=BROKER_SETTINGS,
                           env=scenario.broker_env, broker_cgroups=cgroups,
                           security=security, authorizer=scenario.authorizer)
    if any(kind.startswith("disk-full") for kind in scenario.faults):
        # every log dir a small tmpfs of its own, so any broker's may be filled; the
        # replicas are read (below) before they are unmounted
        from millrace.testing.faults.disk import small_log_dirs
        resources.enter_context(small_log_dirs(cluster, sorted(range(1, 4))))
    result = RunResult(scenario.name, seed, 0, Report(), history, directory)
    writers: list[Writer] = []
    readers: GroupReaders | None = None
    watcher: CommitWatcher | None = None
    hostile: HostileClients | None = None
    rss: RssSampler | None = None
    effects: list[str] = []
    consumed: set[bytes] | None = None
    cluster_up = False
    try:
        cluster.start()
        cluster_up = True
        bootstrap = cluster.bootstrap
        admin_config = _security_config(cluster, ADMIN_USER)  # the harness: super user
        client_config = _security_config(cluster, CLIENT_USER)  # the workload
        probe = ClusterProbe(cluster, [TOPIC], config=admin_config)
        _create_topic(bootstrap, scenario, admin_config)
        probe.wait_settled(PARTITIONS, 60)
        log(f"[{scenario.name} seed={seed}] cluster up at {bootstrap}")
        passwords: dict[str, str] = {}
        if security is not None:
            passwords = _prepare_security(cluster, security, scenario, admin_config)

        writers = [_writer(kind, i, history, bootstrap, scenario, client_config).start()
                   for i, kind in enumerate(scenario.writers)]
        if scenario.readers:
            readers = GroupReaders(bootstrap, GROUP, [TOPIC], scenario.readers,
                                   history, config=client_config).start()
            watcher = CommitWatcher(bootstrap, GROUP, TOPIC, PARTITIONS, history,
                                    config=client_config).start()
        if not _wait("first acknowledgements",
                     lambda: sum(op.outcome == "ok" for op in history.sends) >= 50, 60):
            raise NemesisError("no record was acknowledged in 60 s before any fault")
        if scenario.hostile:
            assert security is not None
            rss = RssSampler(cluster, history.now).start()
            hostile = HostileClients(brokers_of(cluster), str(security.ca_path),
                                     Target(TOPIC, PARTITIONS, GROUP, DECOY), passwords,
                                     history.now).start()
            log(f"[{scenario.name} seed={seed}] hostile clients started")

        if scenario.faults:
            _run_nemesis(scenario, seed, cluster, probe, history, result, writers, hostile,
                         faults, seconds)
            log(f"[{scenario.name} seed={seed}] {result.faults_injected} faults injected; "
                "settling")
        else:
            deadline = time.monotonic() + (seconds if seconds is not None
                                           else scenario.seconds)
            while time.monotonic() < deadline:
                time.sleep(0.5)
                _check_clients(writers, hostile)
        if hostile is not None and security is not None:
            hostile.stop()
            _check_clients(writers, hostile)
            if rss is not None:
                rss.stop()
            from confluent_kafka.admin import AdminClient
            effects = leftover_effects(
                AdminClient({**admin_config, "bootstrap.servers": bootstrap, "log_level": 0}),
                brokers_of(cluster)[0], str(security.ca_path),
                security.passwords[ADMIN_USER], DECOY, HOSTILE_USERS)

        probe.avoid.clear()
        probe.wait_settled(PARTITIONS, 120)
        time.sleep(2.0)  # writes after the last fault, on a healed cluster
        for w in writers:
            w.stop()
        for w in writers:
            w.finish(90)
        if readers is not None:
            consumed = _drain_readers(probe, readers, watcher, history)
        probe.wait_settled(PARTITIONS, 60)
        time.sleep(1.0)  # the last high-watermark moves reach the followers
    except BaseException as e:
        lines = str(e).splitlines() or [""]
        # a launcher error carries the whole broker log: keep its head and its last lines
        short = lines[0] if len(lines) == 1 else "\n".join([lines[0], "...", *lines[-3:]])
        result.error = f"{type(e).__name__}: {short}"
        log(f"[{scenario.name} seed={seed}] run broke: {result.error}")
    finally:
        if hostile is not None:
            hostile.stop()
        if rss is not None:
            rss.stop()
        for w in writers:
            w.stop()
        if watcher is not None:
            watcher.stop()
        if readers is not None:
            readers.stop()
        if cluster_up:
            try:
                cluster.stop()
            except Exception as e:  # a broker that would not stop: kill, and say so
                history.note(f"clean stop failed, killed: {e}")
                cluster.kill_all()
        else:
            cluster.kill_all()
        try:
            if cluster_up:
                replicas = read_replica_logs(cluster, [TOPIC], directory / "scratch")
                shutil.rmtree(directory / "scratch", ignore_errors=True)
                result.report = check(history, replicas, consumed=consumed)
                if hostile is not None:
                    attempts = hostile.snapshot()
                    dump_attempts(attempts, directory / "hostile.jsonl")
                    result.security = security_report(
                        attempts, replicas, authorizer=scenario.authorizer, effects=effects,
                        rss=rss.summary() if rss is not None else None)
        finally:
            resources.close()
    result.seconds = time.monotonic() - started
    history.dump(directory / "history.jsonl")
    (directory / "report.json").write_text(json.dumps(result.to_json(), indent=2))
    return result


def _run_nemesis(scenario: Scenario, seed: int, cluster: LocalCluster, probe: ClusterProbe,
                 history: History, result: RunResult, writers: list[Writer],
                 hostile: HostileClients | None, faults: int | None,
                 seconds: float | None) -> None:
    ctx = NemesisContext(cluster, probe, random.Random(seed),
                         ZK_SESSION_TIMEOUT_MS / 1000, REPLICA_LAG_TIME_MAX_MS / 1000,
                         PARTITIONS)
    nemesis = Nemesis(ctx, scenario.faults, history, max_faults=faults)
    thread = threading.Thread(target=nemesis.run, name="nemesis", daemon=True)
    thread.start()
    deadline = time.monotonic() + seconds if seconds is not None else None
    while thread.is_alive():
        if deadline is not None and time.monotonic() > deadline:
            nemesis.stop()
        thread.join(0.5)
        result.faults_injected = nemesis.injected
        try:
            _check_clients(writers, hostile)
        except BaseException:
            nemesis.stop()
            raise
    result.faults_injected = nemesis.injected
    if nemesis.error is not None:
        raise nemesis.error


def _check_clients(writers: list[Writer], hostile: HostileClients | None) -> None:
    for w in writers:
        if w.error is not None:
            raise RuntimeError(f"writer {w.name} broke: {w.error!r}") from w.error
    if hostile is not None and hostile.error is not None:
        raise RuntimeError(f"the hostile clients broke: {hostile.error!r}") from hostile.error


def _security_config(cluster: LocalCluster, user: str) -> dict[str, str]:
    """``user``'s security settings ({} on a PLAINTEXT cluster), without the bootstrap."""
    if cluster.security is None:
        return {}
    props = cluster.client_properties(user)
    props.pop("bootstrap.servers")
    return props


def _prepare_security(cluster: LocalCluster, security: DevSecurity, scenario: Scenario,
                      admin_config: dict[str, str]) -> dict[str, str]:
    """As admin: the workload's ACLs (authorizer on), and for hostile clients a decoy
    topic and the hostile users; wait until every broker sees them.  The hostile users'
    passwords."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({**admin_config, "bootstrap.servers": cluster.bootstrap,
                         "log_level": 0})
    brokers = brokers_of(cluster)
    principal, expected = None, 0
    if scenario.authorizer:
        principal = f"User:{CLIENT_USER}"
        grant_workload_acls(admin, principal, TOPIC, GROUP)
        expected = len(workload_acls(TOPIC, GROUP))
    passwords: dict[str, str] = {}
    if scenario.hostile:
        create_topic(admin, NewTopic(DECOY, 1, 3), timeout=90)
        passwords = create_scram_users(admin, HOSTILE_USERS)
    wait_visible(brokers, str(security.ca_path), security.passwords[ADMIN_USER], principal,
                 expected, passwords)
    return passwords


def _create_topic(bootstrap: str, scenario: Scenario, admin_config: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    config = {"min.insync.replicas": "2", **scenario.topic_config}
    create_topic(AdminClient({**admin_config, "bootstrap.servers": bootstrap,
                              "log_level": 0}),
                 NewTopic(TOPIC, PARTITIONS, 3, config=config), timeout=90)


def _drain_readers(probe: ClusterProbe, readers: GroupReaders,
                   watcher: CommitWatcher | None, history: History) -> set[bytes] | None:
    """Wait until the group committed up to every partition's end and owns each
    partition once; return what it consumed, or None if it did not catch up (then the
    at-least-once check is skipped and a note says so)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({**probe.config,
                  "bootstrap.servers": ",".join(probe.cluster.broker(b).bootstrap
                                                for b in sorted(probe.cluster.brokers)),
                  "group.id": "faults-probe", "log_level": 0})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
                for p in range(PARTITIONS)}
    finally:
        c.close()

    if watcher is not None:
        watcher.stop_polling()  # observed from here on, on this thread only

    progress = {"committed": -1, "at": time.monotonic()}

    def caught_up() -> bool:
        if watcher is not None:
            watcher.observe()
        latest: dict[int, int] = {}
        for obs in history.commits:
            if obs.topic == TOPIC:
                latest[obs.partition] = obs.offset
        if all(latest.get(p, -1) >= end for p, end in ends.items()):
            return True
        committed = sum(latest.values())
        if committed > progress["committed"]:  # still moving: give it another minute
            progress.update(committed=committed, at=time.monotonic())
        elif time.monotonic() - progress["at"] > DRAIN_IDLE_S:
            raise TimeoutError
        return False

    def owned_once() -> bool:
        tps = [tp for tps in readers.assignment().values() for tp in tps]
        return sorted(tps) == [(TOPIC, p) for p in range(PARTITIONS)]

    # a long run's backlog (the readers over SASL_SSL on a busy machine are slower than
    # the writers) takes longer than a minute: wait while the commits move, a minute
    # without progress at most, DRAIN_MAX_S in all
    try:
        ok = _wait("the group to catch up", caught_up, DRAIN_MAX_S)
    except TimeoutError:
        ok = False
    if not _wait("each partition owned once", owned_once, 30):
        history.note("the group's final assignment did not cover every partition once")
    history.final_assignment = {m: list(tps) for m, tps in readers.assignment().items()}
    if not ok:
        history.note(f"the group did not commit up to the log ends {ends} (no progress "
                     f"for {DRAIN_IDLE_S:.0f} s or {DRAIN_MAX_S:.0f} s in all): the "
                     "at-least-once check is skipped")
        return None
    return readers.seen_values()
