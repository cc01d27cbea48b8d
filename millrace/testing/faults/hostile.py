"""The hostile clients of the ``security`` scenario, and what they achieved.

While the workload runs as ``User:client`` with exactly the ACLs it needs, principals
with no ACL at all (``mallory`` and ``trudy``: SCRAM users that admin created through
AlterUserScramCredentials) and clients with wrong passwords hammer every broker in a
loop, each over its own SASL_SSL connection with millrace's sans-I/O codec
(``SaslSslConnection``), so the exact request goes out and the exact answer comes back:

==================  ==================================================  ===============
kind                request                                             expected answer
==================  ==================================================  ===============
``produce``         Produce acks=1 of one marked record to every         29 per partition
                    partition of the workload topic
``fetch``           Fetch of every partition from offset 0               29 per partition
``replica-fetch``   the same with ``replica_id`` forged to another       29 per partition
                    broker's id (CVE-2018-1288)                          (3.9)
``find-coord``      FindCoordinator of the workload's group              30
``join-group``      JoinGroup on the workload's group                    30
``offset-commit``   OffsetCommit of offset 0 on the workload's group     30 per partition
``delete-topics``   DeleteTopics of a decoy topic and of a name that     29 per topic
                    does not exist (no probing of names)
``create-acls``     CreateAcls granting itself All on every topic        31
``bad-sasl``        SASL/SCRAM with a wrong password (as client, admin,  58
                    mallory) or an unknown user
==================  ==================================================  ===============

An attacker may not Describe the topic, so it does not know the leaders: each request
goes to every broker.  With the authorizer on, the broker refuses before it looks at
leadership, coordination or existence, so every broker answers the authorization error.

Each attempt's outcome is one of:

- ``denied``: the expected error in every slot (every partition, topic, result);
- ``succeeded``: some slot answered without error -- records appended or returned, the
  group's coordinator named, a member id handed out (JoinGroup's MEMBER_ID_REQUIRED carries one), offsets committed, a
  topic deleted, an ACL created, a session authenticated: an **unauthorized success**;
- ``refused``: some other error code (NOT_LEADER_OR_FOLLOWER from a broker that did not
  check, SECURITY_DISABLED ...), listed by code;
- ``failed``: no answer (a transport error; the connection is opened again).

``SecurityReport`` adds what is left in the cluster after the run: hostile records in any
replica of the workload topic (their values carry ``HOSTILE_MARK``), the decoy topic gone,
ACLs naming a hostile principal; and the brokers' RSS growth (``RssSampler``: VmRSS from
``/proc/<pid>/status``).  The verdict fails on any unauthorized success or effect.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from millrace.common.errors import Errors, error_name
from millrace.launcher.local_cluster import LocalCluster
from millrace.protocol import (
    CreateAclsRequest,
    DeleteTopicsRequest,
    FetchRequest,
    FindCoordinatorRequest,
    JoinGroupRequest,
    OffsetCommitRequest,
    ProduceRequest,
)
from millrace.protocol.consumer_protocol import Subscription, encode_subscription
from millrace.record import RecordBatch, RecordBatchBuilder, iter_batches
from millrace.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from millrace.testing.faults.replica_logs import ReplicaLog
from millrace.testing.faults.sasl_ssl_connection import AuthenticationRefused, SaslSslConnection

HOSTILE_USERS = ("mallory", "trudy")  # SCRAM users with no ACL
HOSTILE_MARK = b"hostile:"  # every value a hostile client writes starts with it
MISSING_TOPIC = "faults-no-such-topic"
EXAMPLES = 5
PRODUCE_V, FETCH_V, FIND_COORDINATOR_V, JOIN_GROUP_V, OFFSET_COMMIT_V = 9, 12, 3, 5, 8
DELETE_TOPICS_V, CREATE_ACLS_V = 5, 2

KINDS = ("produce", "fetch", "replica-fetch", "find-coord", "join-group", "offset-commit",
         "delete-topics", "create-acls", "bad-sasl")
EXPECTED: dict[str, int] = {
    "produce": Errors.TOPIC_AUTHORIZATION_FAILED,
    "fetch": Errors.TOPIC_AUTHORIZATION_FAILED,
    "replica-fetch": Errors.TOPIC_AUTHORIZATION_FAILED,
    "find-coord": Errors.GROUP_AUTHORIZATION_FAILED,
    "join-group": Errors.GROUP_AUTHORIZATION_FAILED,
    "offset-commit": Errors.GROUP_AUTHORIZATION_FAILED,
    "delete-topics": Errors.TOPIC_AUTHORIZATION_FAILED,
    "create-acls": Errors.CLUSTER_AUTHORIZATION_FAILED,
    "bad-sasl": Errors.SASL_AUTHENTICATION_FAILED,
}
# codes that mean "the broker went ahead" although not 0: JoinGroup's first answer to a
# new member hands out its member id
EFFECT_CODES: dict[str, frozenset[int]] = {
    "join-group": frozenset({Errors.MEMBER_ID_REQUIRED}),
}


def code_name(code: int) -> str:
    return error_name(code)


@dataclass(frozen=True)
class Target:
    """What the hostile clients aim at: the workload's topic and group, a decoy topic."""

    topic: str
    partitions: int
    group: str
    decoy: str


@dataclass
class Attempt:
    at: float
    principal: str
    kind: str
    broker: int
    outcome: str  # denied | succeeded | refused | failed
    codes: list[int]
    detail: str = ""


def classify(kind: str, codes: Sequence[int], leaked: bool = False) -> str:
    """The outcome of an answer whose error slots hold ``codes``; ``leaked``: it carried
    data whatever its codes said (records, a high watermark)."""
    if leaked or any(c == 0 or c in EFFECT_CODES.get(kind, ()) for c in codes):
        return "succeeded"
    if not codes:
        return "refused"
    if all(c == EXPECTED[kind] for c in codes):
        return "denied"
    return "refused"


# ---------------------------------------------------------------------- requests
def produce_request(target: Target, value: bytes) -> Any:
    parts = []
    for p in range(target.partitions):
        builder = RecordBatchBuilder()
        builder.append(int(time.time() * 1000), None, value + b"#%d" % p)
        parts.append(ProduceRequest.TopicProduceData.PartitionProduceData(
            index=p, records=builder.build()))
    return ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=target.topic, partition_data=parts)])


def fetch_request(target: Target, replica_id: int = -1) -> Any:
    return FetchRequest(replica_id=replica_id, max_wait_ms=0, min_bytes=1, topics=[
        FetchRequest.FetchTopic(topic=target.topic, partitions=[
            FetchRequest.FetchTopic.FetchPartition(partition=p, fetch_offset=0,
                                                   partition_max_bytes=65536)
            for p in range(target.partitions)])])


def fetched_records(response: Any) -> int:
    count = 0
    for t in response.responses:
        for p in t.partitions:
            data = bytes(p.records or b"")
            for pos, _ in iter_batches(data):
                count += len(RecordBatch(data, pos).record_list())
    return count


def join_group_request(target: Target) -> Any:
    metadata = encode_subscription(Subscription([target.topic]))
    return JoinGroupRequest(group_id=target.group, session_timeout_ms=10_000,
                            rebalance_timeout_ms=10_000, member_id="",
                            protocol_type="consumer", protocols=[
                                JoinGroupRequest.JoinGroupRequestProtocol(
                                    name="range", metadata=metadata)])


def offset_commit_request(target: Target) -> Any:
    return OffsetCommitRequest(group_id=target.group, generation_id_or_member_epoch=-1,
                               member_id="", topics=[
        OffsetCommitRequest.OffsetCommitRequestTopic(name=target.topic, partitions=[
            OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=0, committed_metadata="hostile")
            for p in range(target.partitions)])])


def create_acls_request(principal: str) -> Any:
    return CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
        resource_type=ResourceType.TOPIC, resource_name="*",
        resource_pattern_type=PatternType.LITERAL, principal=f"User:{principal}", host="*",
        operation=AclOperation.ALL, permission_type=AclPermissionType.ALLOW)])


# ---------------------------------------------------------------------- the clients
@dataclass
class Broker:
    id: int
    host: str
    port: int


def brokers_of(cluster: LocalCluster) -> list[Broker]:
    return [Broker(i, "127.0.0.1", b.port) for i, b in sorted(cluster.brokers.items())]


class HostileClients:
    """One thread per hostile user running every kind against every broker, round after
    round (a round every ``interval`` seconds at most), and one thread trying wrong
    passwords.  ``attempts`` collects every outcome; ``stop`` ends the threads."""

    def __init__(self, brokers: Sequence[Broker], ca_path: str, target: Target,
                 passwords: dict[str, str], clock: Callable[[], float], *,
                 interval: float = 0.5,
                 bad_credentials: Sequence[tuple[str, str]] = ()) -> None:
        self.brokers = list(brokers)
        self.ca_path = ca_path
        self.target = target
        self.passwords = dict(passwords)  # hostile user -> its (right) password
        self.clock = clock
        self.interval = interval
        self.bad_credentials = list(bad_credentials) or [
            ("client", "not-the-password"), ("admin", "not-the-password"),
            ("mallory", "not-the-password"), ("nobody", "whatever")]
        self.attempts: list[Attempt] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run_user, args=(user,),
                                          name=f"hostile-{user}", daemon=True)
                         for user in self.passwords]
        self._threads.append(threading.Thread(target=self._run_bad_sasl,
                                              name="hostile-bad-sasl", daemon=True))
        self.error: BaseException | None = None
        self._n = itertools.count()

    def start(self) -> HostileClients:
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)

    def record(self, a: Attempt) -> None:
        with self._lock:
            self.attempts.append(a)

    def snapshot(self) -> list[Attempt]:
        with self._lock:
            return list(self.attempts)

    # ------------------------------------------------------------------ loops
    def _run_user(self, user: str) -> None:
        conns: dict[int, SaslSslConnection] = {}
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                for broker in self.brokers:
                    for kind in KINDS[:-1]:
                        if self._stop.is_set():
                            return
                        self._attempt(user, kind, broker, conns)
                self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))
        except BaseException as e:  # the runner reports it
            self.error = e
        finally:
            for c in conns.values():
                c.close()

    def _connection(self, user: str, broker: Broker,
                    conns: dict[int, SaslSslConnection]) -> SaslSslConnection:
        conn = conns.get(broker.id)
        if conn is None:
            conn = SaslSslConnection(broker.host, broker.port, self.ca_path, user,
                                     self.passwords[user], client_id=f"hostile-{user}",
                                     timeout_s=10).connect()
            conns[broker.id] = conn
        return conn

    def _attempt(self, user: str, kind: str, broker: Broker,
                 conns: dict[int, SaslSslConnection]) -> None:
        at = self.clock()
        try:
            conn = self._connection(user, broker, conns)
            codes, detail, leaked = self._send(conn, user, kind, broker)
        except (OSError, ConnectionError, AuthenticationRefused) as e:
            dropped = conns.pop(broker.id, None)
            if dropped is not None:
                dropped.close()
            self.record(Attempt(at, user, kind, broker.id, "failed", [],
                                f"{type(e).__name__}: {e}"))
            return
        self.record(Attempt(at, user, kind, broker.id, classify(kind, codes, leaked), codes,
                            detail))

    def _send(self, conn: SaslSslConnection, user: str, kind: str, broker: Broker
              ) -> tuple[list[int], str, bool]:
        """Send one attempt of ``kind``: the answer's error codes (one per slot), what it
        carried, and whether it carried data its codes deny (fetch: records or a high
        watermark in a partition answered with an error)."""
        t = self.target
        if kind == "produce":
            value = HOSTILE_MARK + f"{user}:{next(self._n)}".encode()
            r = conn.call(produce_request(t, value), PRODUCE_V)
            codes = [p.error_code for x in r.responses for p in x.partition_responses]
            offsets = [p.base_offset for x in r.responses for p in x.partition_responses
                       if p.error_code == 0]
            return codes, f"appended at {offsets}" if offsets else "", False
        if kind in ("fetch", "replica-fetch"):
            # forge the id of another broker: the leader would take us for its follower
            forged = -1 if kind == "fetch" else next(
                b.id for b in self.brokers if b.id != broker.id)
            r = conn.call(fetch_request(t, forged), FETCH_V)
            codes = [p.error_code for x in r.responses for p in x.partitions]
            if r.error_code:
                codes = [r.error_code]
            n = fetched_records(r)
            hws = [p.high_watermark for x in r.responses for p in x.partitions
                   if p.error_code == 0 or p.high_watermark > 0]
            detail = f"{n} records returned, high watermarks {hws}" if n or hws else ""
            return codes, detail, bool(n or hws)
        if kind == "find-coord":
            r = conn.call(FindCoordinatorRequest(key=t.group, key_type=0), FIND_COORDINATOR_V)
            named = r.error_code == 0 or r.node_id >= 0
            return ([r.error_code], f"coordinator {r.node_id}" if named else "", named)
        if kind == "join-group":
            r = conn.call(join_group_request(t), JOIN_GROUP_V)
            return ([r.error_code], f"member id {r.member_id!r}" if r.member_id else "",
                    bool(r.member_id))
        if kind == "offset-commit":
            r = conn.call(offset_commit_request(t), OFFSET_COMMIT_V)
            return [p.error_code for x in r.topics for p in x.partitions], "", False
        if kind == "delete-topics":
            r = conn.call(DeleteTopicsRequest(topic_names=[t.decoy, MISSING_TOPIC],
                                              timeout_ms=5000), DELETE_TOPICS_V)
            deleted = [x.name for x in r.responses if x.error_code == 0]
            return ([x.error_code for x in r.responses],
                    f"deleted {deleted}" if deleted else "", False)
        if kind == "create-acls":
            r = conn.call(create_acls_request(user), CREATE_ACLS_V)
            return [x.error_code for x in r.results], "", False
        raise ValueError(f"unknown kind {kind!r}")

    def _run_bad_sasl(self) -> None:
        try:
            for i in itertools.count():
                if self._stop.wait(self.interval / 2):
                    return
                user, password = self.bad_credentials[i % len(self.bad_credentials)]
                broker = self.brokers[i % len(self.brokers)]
                self.record(self._bad_sasl(user, password, broker))
        except BaseException as e:  # the runner reports it
            self.error = e

    def _bad_sasl(self, user: str, password: str, broker: Broker) -> Attempt:
        at = self.clock()
        conn = SaslSslConnection(broker.host, broker.port, self.ca_path, user, password,
                                 client_id="hostile-bad-sasl", timeout_s=10)
        try:
            conn.connect()
        except AuthenticationRefused as e:
            return Attempt(at, user, "bad-sasl", broker.id, classify("bad-sasl", [e.code]),
                           [e.code])
        except (OSError, ConnectionError) as e:
            return Attempt(at, user, "bad-sasl", broker.id, "failed", [],
                           f"{type(e).__name__}: {e}")
        conn.close()
        return Attempt(at, user, "bad-sasl", broker.id, "succeeded", [0],
                       f"authenticated as {user} with a wrong password")


# ---------------------------------------------------------------------- broker memory
def rss_kib(pid: int) -> int | None:
    """VmRSS of process ``pid`` in KiB (None when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


class RssSampler:
    """Every broker's RSS every ``interval`` seconds, on a thread of its own."""

    def __init__(self, cluster: LocalCluster, clock: Callable[[], float],
                 interval: float = 2.0) -> None:
        self.cluster = cluster
        self.clock = clock
        self.interval = interval
        self.samples: dict[int, list[tuple[float, int]]] = defaultdict(list)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def sample(self) -> None:
        at = self.clock()
        for broker_id, b in sorted(self.cluster.brokers.items()):
            kib = rss_kib(b.proc.pid) if b.proc is not None and b.running() else None
            if kib is not None:
                self.samples[broker_id].append((at, kib))

    def start(self) -> RssSampler:
        self.sample()
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.sample()

    def summary(self) -> dict[int, dict[str, int]]:
        """Per broker: RSS at the first and last sample, the peak, the growth over the
        run and over its second half (a leak keeps growing; warm-up does not)."""
        out = {}
        for b, s in sorted(self.samples.items()):
            if not s:
                continue
            middle = (s[0][0] + s[-1][0]) / 2
            mid_kib = next(k for at, k in s if at >= middle)
            out[b] = {"start_kib": s[0][1], "end_kib": s[-1][1],
                      "peak_kib": max(k for _, k in s), "growth_kib": s[-1][1] - s[0][1],
                      "second_half_growth_kib": s[-1][1] - mid_kib}
        return out


# ---------------------------------------------------------------------- the verdict
@dataclass
class KindTally:
    attempts: int = 0
    denied: int = 0
    succeeded: int = 0
    refused: int = 0
    failed: int = 0
    codes: dict[str, int] = field(default_factory=dict)  # refused: code name -> count


@dataclass
class SecurityReport:
    authorizer: bool = True
    kinds: dict[str, KindTally] = field(default_factory=dict)
    unauthorized: list[str] = field(default_factory=list)  # examples, EXAMPLES per kind
    hostile_records: list[str] = field(default_factory=list)
    effects: list[str] = field(default_factory=list)
    rss: dict[int, dict[str, int]] = field(default_factory=dict)

    def total(self, what: str) -> int:
        return sum(getattr(t, what) for t in self.kinds.values())

    @property
    def unauthorized_successes(self) -> int:
        return self.total("succeeded")

    @property
    def auth_failures(self) -> int:
        t = self.kinds.get("bad-sasl")
        return t.denied if t is not None else 0

    @property
    def ok(self) -> bool:
        return not (self.unauthorized_successes or self.hostile_records or self.effects)

    def summary(self) -> str:
        head = (f"hostile: {self.total('attempts')} attempts, {self.total('denied')} denied "
                f"({self.auth_failures} bad SASL refused), {self.unauthorized_successes} "
                f"unauthorized successes, {self.total('refused')} refused otherwise, "
                f"{self.total('failed')} without answer; {len(self.hostile_records)} hostile "
                f"records in the log; RSS growth " + ", ".join(
                    f"broker {b} {r['growth_kib'] / 1024:+.1f} MiB"
                    for b, r in self.rss.items()))
        lines = [head]
        for kind, t in self.kinds.items():
            if t.succeeded or t.refused:
                lines.append(f"  {kind}: {t.succeeded} succeeded, {t.refused} refused "
                             f"{t.codes}")
        lines += [f"  UNAUTHORIZED {x}" for x in self.unauthorized]
        lines += [f"  HOSTILE RECORD {x}" for x in self.hostile_records[:EXAMPLES]]
        lines += [f"  EFFECT {x}" for x in self.effects]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "authorizer": self.authorizer,
                "attempts": self.total("attempts"), "denied": self.total("denied"),
                "unauthorized_successes": self.unauthorized_successes,
                "auth_failures": self.auth_failures,
                "refused": self.total("refused"), "failed": self.total("failed"),
                "hostile_records": len(self.hostile_records),
                "kinds": {k: asdict(t) for k, t in self.kinds.items()},
                "examples": {"unauthorized": self.unauthorized,
                             "hostile_records": self.hostile_records[:EXAMPLES],
                             "effects": self.effects},
                "rss": {str(b): r for b, r in self.rss.items()}}


def tally(attempts: Sequence[Attempt], report: SecurityReport) -> None:
    per_kind_examples: dict[str, int] = defaultdict(int)
    for kind in KINDS:
        report.kinds.setdefault(kind, KindTally())
    for a in attempts:
        t = report.kinds.setdefault(a.kind, KindTally())
        t.attempts += 1
        setattr(t, a.outcome, getattr(t, a.outcome) + 1)
        if a.outcome == "refused":
            for c in a.codes:
                if c != EXPECTED[a.kind]:
                    t.codes[code_name(c)] = t.codes.get(code_name(c), 0) + 1
        if a.outcome == "succeeded" and per_kind_examples[a.kind] < EXAMPLES:
            per_kind_examples[a.kind] += 1
            report.unauthorized.append(
                f"{a.kind} by {a.principal} on broker {a.broker} at t={a.at:.1f}s: codes "
                f"{[code_name(c) for c in a.codes]} {a.detail}".rstrip())


def hostile_records(replicas: dict[tuple[str, int], dict[int, ReplicaLog]]) -> list[str]:
    """Every record a hostile client wrote, in any replica (committed or not): one entry
    per record, naming the brokers whose replica holds it."""
    found: dict[tuple[str, int, int, bytes], list[int]] = defaultdict(list)
    for (topic, p), by_broker in sorted(replicas.items()):
        for broker, r in sorted(by_broker.items()):
            for offset, value in r.records:
                if value is not None and value.startswith(HOSTILE_MARK):
                    found[(topic, p, offset, value)].append(broker)
    return [f"{topic}-{p}@{offset} {value[:40]!r} on brokers {brokers}"
            for (topic, p, offset, value), brokers in found.items()]


def security_report(attempts: Sequence[Attempt], replicas: dict[tuple[str, int],
                    dict[int, ReplicaLog]], *, authorizer: bool, effects: Sequence[str] = (),
                    rss: dict[int, dict[str, int]] | None = None) -> SecurityReport:
    report = SecurityReport(authorizer=authorizer, effects=list(effects), rss=dict(rss or {}))
    tally(attempts, report)
    report.hostile_records = hostile_records(replicas)
    return report


def dump_attempts(attempts: Sequence[Attempt], path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for a in attempts:
            f.write(json.dumps(asdict(a)) + "\n")
