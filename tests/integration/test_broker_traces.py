"""A record's journey as a real ``millrace broker`` process records it (issue 28,
``millrace.broker.record_tracer``): a topic armed over the HTTP listener, records with a
W3C ``traceparent`` header produced by millrace's producer with acks=1 and acks=-1,
consumed by a group that commits, then ``GET /v1/traces/{trace_id}`` shows the stages
in time order; untraced records (no header, a malformed one) are not recorded; bad
input answers 400 / 413 / 415; under BASIC authentication and the ACL authorizer the
arm and watch POSTs want Alter on the cluster (401 without credentials, 403 without the
grant) and a report wants Read on its topic."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from millrace.client.admin import KafkaAdminClient, NewTopic
from millrace.client.consumer import KafkaConsumer
from millrace.client.producer import KafkaProducer, ProducerRecord
from millrace.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from millrace.testing.broker_process import BrokerProcess
from tests.integration.broker_http_support import (
    Reply,
    admin_config,
    basic,
    http,
    poll,
    post,
    secured_broker,
)

pytestmark = [pytest.mark.integration]

JOURNEY = ("broker.receive", "broker.append", "hw.advance", "broker.response",
           "consumer.fetch", "group.commit")


def traceparent() -> tuple[str, str, bytes]:
    trace_id, span_id = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    return trace_id, span_id, f"00-{trace_id}-{span_id}-01".encode()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data: Path = tmp_path_factory.mktemp("broker-traces")
    with BrokerProcess(data, overrides={"http.listeners": "http://127.0.0.1:0"}) as b:
        yield b
    assert b.proc is not None and b.proc.returncode == 0, b.logs()[-5000:]
    assert "Traceback" not in b.logs()


@pytest.fixture(scope="module")
def url(broker: BrokerProcess) -> str:
    (only,) = broker.http_urls
    return only


def create_topic(bootstrap: str, replicas: int = 1) -> str:
    name = f"traces-{uuid.uuid4().hex[:8]}"
    with KafkaAdminClient({"bootstrap.servers": bootstrap,
                           "default.api.timeout.ms": 20_000}) as admin:
        admin.create_topics([NewTopic(name, 1, replicas)])[name].result(20)
    return name


def test_a_traced_records_journey(broker: BrokerProcess, url: str) -> None:
    topic = create_topic(broker.bootstrap)
    armed = post(url + "/v1/traces/arm", {"topic": topic, "ttl_ms": 120_000})
    assert armed.status == 200, armed.body
    doc = armed.json()
    assert doc["broker"] == 0 and doc["topic"] == topic and doc["partitions"] == 1
    assert doc["armed_until_ms"] > time.time() * 1000
    assert f"tracing armed for topic {topic} for 120000 ms" in broker.logs()

    traced: dict[str, tuple[str, int]] = {}  # trace id -> (acks, offset)
    for acks in ("1", "-1"):
        producer: KafkaProducer[bytes, bytes] = KafkaProducer(
            {"bootstrap.servers": broker.bootstrap, "acks": acks, "client.id": f"p{acks}"})
        with producer:
            producer.send(ProducerRecord(topic, b"plain")).get(20)  # untraced
            bad = producer.send(ProducerRecord(
                topic, b"bad", headers=[("traceparent", b"00-" + b"0" * 32 + b"-"
                                         + b"1" * 16 + b"-01")])).get(20)
            trace_id, _, header = traceparent()
            meta = producer.send(ProducerRecord(topic, b"traced",
                                                headers=[("traceparent", header)])).get(20)
            traced[trace_id] = (acks, meta.offset)
        untraced = http(f"{url}/v1/traces?topic={topic}&partition=0&offset={bad.offset}")
        assert untraced.status == 200 and untraced.json()["records"] == []

    consumer: KafkaConsumer[bytes, bytes] = KafkaConsumer(
        topic, bootstrap_servers=broker.bootstrap, group_id=f"g-{topic}",
        client_id="journey-consumer", auto_offset_reset="earliest",
        enable_auto_commit=False)
    try:
        seen: list[Any] = []
        deadline = time.monotonic() + 30
        while len(seen) < 6 and time.monotonic() < deadline:
            seen.extend(consumer.poll(200))
        assert len(seen) == 6
        consumer.commit_sync()
    finally:
        consumer.close()

    for trace_id, (acks, offset) in traced.items():
        reply = http(f"{url}/v1/traces/{trace_id}")
        assert reply.status == 200
        doc = reply.json()
        assert doc["broker"] == 0
        (record,) = doc["records"]
        assert (record["trace_id"], record["topic"], record["partition"],
                record["offset"]) == (trace_id, topic, 0, offset)
        events = record["events"]
        stages = [e["stage"] for e in events]
        assert [s for s in stages if s in JOURNEY] == list(JOURNEY), (acks, stages)
        times = [e["t_us"] for e in events]
        assert times == sorted(times)
        by_stage = {e["stage"]: e for e in events}
        assert all(e["broker"] == 0 and e["detail"] for e in events)
        receive = by_stage["broker.receive"]
        assert receive["client_id"] == f"p{acks}"
        assert receive["client_address"].startswith("127.0.0.1:")
        assert receive["api_version"] >= 3
        append = by_stage["broker.append"]
        assert append["offset"] == offset and append["leader_epoch"] >= 0
        assert append["append_us"] >= 0 and append["queue_us"] >= 0
        assert by_stage["hw.advance"]["high_watermark"] > offset
        assert by_stage["broker.response"]["acks"] == int(acks)
        assert by_stage["broker.response"]["error"] == "NONE"
        fetch = by_stage["consumer.fetch"]
        assert fetch["client_id"] == "journey-consumer"
        assert fetch["fetch_offset"] <= offset and fetch["isolation"] == "read_uncommitted"
        commit = by_stage["group.commit"]
        assert commit["group"] == f"g-{topic}" and commit["committed_offset"] > offset
        assert commit["member_id"] and commit["generation"] >= 1
        # the same record by topic, partition and offset
        same = http(f"{url}/v1/traces?topic={topic}&partition=0&offset={offset}").json()
        assert [r["trace_id"] for r in same["records"]] == [trace_id]
    assert http(f"{url}/v1/traces/{uuid.uuid4().hex}").json()["records"] == []


def test_watch_registers_a_record_already_in_the_log(broker: BrokerProcess, url: str
                                                     ) -> None:
    topic = create_topic(broker.bootstrap)
    producer: KafkaProducer[bytes, bytes] = KafkaProducer(
        {"bootstrap.servers": broker.bootstrap, "acks": "1"})
    trace_id, span_id, header = traceparent()
    with producer:  # not armed: nothing is recorded
        offset = producer.send(ProducerRecord(topic, b"x", headers=[("traceparent", header)])
                               ).get(20).offset
    assert http(f"{url}/v1/traces/{trace_id}").json()["records"] == []
    watched = post(url + "/v1/traces/watch", {"trace_id": trace_id, "span_id": span_id,
                                              "topic": topic, "partition": 0,
                                              "offset": offset})
    assert watched.status == 200 and watched.json() == {"broker": 0, "watching": True}
    consumer: KafkaConsumer[bytes, bytes] = KafkaConsumer(
        topic, bootstrap_servers=broker.bootstrap, group_id=f"w-{topic}",
        auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        poll(lambda: list(consumer.poll(200)), "the record")
        consumer.commit_sync()
    finally:
        consumer.close()
    (record,) = http(f"{url}/v1/traces/{trace_id}").json()["records"]
    assert record["span_id"] == span_id and record["offset"] == offset
    assert [e["stage"] for e in record["events"]] == ["consumer.fetch", "group.commit"]

    # a client reports a stage for a range with the record in it, twice: one event
    report = {"ranges": [{"topic": topic, "partition": 0, "from_offset": offset,
                          "until_offset": offset + 1},
                         {"topic": topic, "partition": 1, "from_offset": 0,
                          "until_offset": 100}],
              "stage": "sink.write", "lane": "sink orders", "detail": "batch 3",
              "attrs": {"batch_id": 3}}
    for _ in range(2):
        reply = post(url + "/v1/traces/report", report)
        assert reply.status == 200 and reply.json() == {"broker": 0, "matched": 1}
    (record,) = http(f"{url}/v1/traces/{trace_id}").json()["records"]
    *_, last = record["events"]
    assert [e["stage"] for e in record["events"]] == ["consumer.fetch", "group.commit",
                                                      "sink.write"]
    assert (last["lane"], last["detail"], last["batch_id"], last["broker"]) == \
        ("sink orders", "batch 3", 3, 0)


REPORT = {"topic": "t", "partition": 0, "from_offset": 0, "until_offset": 10,
          "stage": "spark.batch", "lane": "spark p", "detail": "micro-batch 0"}
RANGE = {"topic": "t", "partition": 0, "from_offset": 0, "until_offset": 10}


@pytest.mark.parametrize(("path", "body", "status", "word"), [
    ("/v1/traces/arm", {"ttl_ms": 1000}, 400, "topic"),
    ("/v1/traces/arm", {"topic": "t", "ttl_ms": 0}, 400, "ttl_ms"),
    ("/v1/traces/arm", {"topic": "t", "ttl_ms": 600_001}, 400, "ttl_ms"),
    ("/v1/traces/arm", {"topic": "t", "ttl_ms": "60000"}, 400, "ttl_ms"),
    ("/v1/traces/arm", ["topic"], 400, "object"),
    ("/v1/traces/watch", {"trace_id": "A" * 32, "topic": "t", "partition": 0,
                          "offset": 0}, 400, "trace_id"),
    ("/v1/traces/watch", {"trace_id": "a" * 32, "span_id": "xyz", "topic": "t",
                          "partition": 0, "offset": 0}, 400, "span_id"),
    ("/v1/traces/watch", {"trace_id": "a" * 32, "topic": "t", "partition": -1,
                          "offset": 0}, 400, "partition"),
    ("/v1/traces/watch", {"trace_id": "a" * 32, "topic": "t", "partition": 0},
     400, "offset"),
    ("/v1/traces/report", {"partition": 0}, 400, "topic"),
    ("/v1/traces/report", {**REPORT, "partition": "0"}, 400, "partition"),
    ("/v1/traces/report", {**REPORT, "stage": "broker.append"}, 400, "stage"),
    ("/v1/traces/report", {**REPORT, "until_offset": 0, "from_offset": 1}, 400,
     "until_offset"),
    ("/v1/traces/report", {**REPORT, "lane": "x" * 201}, 400, "lane"),
    ("/v1/traces/report", {**REPORT, "attrs": {f"a{i}": i for i in range(17)}}, 400,
     "attrs"),
    ("/v1/traces/report", {k: v for k, v in REPORT.items() if k != "detail"}, 400,
     "detail"),
    ("/v1/traces/report", {**REPORT, "ranges": []}, 400, "ranges"),
    ("/v1/traces/report", {**REPORT, "ranges": [{"topic": "t", "partition": 0}]}, 400,
     "from_offset"),
    ("/v1/traces/report", {**REPORT, "ranges": [RANGE, {**RANGE, "partition": -1}]}, 400,
     "partition"),
])
def test_bad_posts_are_400_naming_the_field(url: str, path: str, body: object, status: int,
                                            word: str) -> None:
    reply = post(url + path, body)
    assert reply.status == status
    assert word in reply.json()["error"]


def test_bad_requests(url: str) -> None:
    assert http(url + "/v1/traces/not-hex").status == 400
    assert "error" in http(url + "/v1/traces/" + "A" * 32).json()
    assert http(url + "/v1/traces?topic=t&partition=0").status == 400
    assert http(url + "/v1/traces?topic=t&partition=x&offset=1").status == 400
    assert http(url + "/v1/traces?partition=0&offset=1").status == 400
    not_json = http(url + "/v1/traces/arm", method="POST", data=b"topic=t",
                    headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert not_json.status == 415
    broken = http(url + "/v1/traces/arm", method="POST", data=b"{",
                  headers={"Content-Type": "application/json"})
    assert broken.status == 400
    big = post(url + "/v1/traces/arm", {"topic": "t", "pad": "x" * 70_000})
    assert big.status == 413
    assert post(url + "/v1/traces/report", {**REPORT, "pad": "x" * 70_000}).status == 413
    assert http(url + "/v1/traces/report", method="POST", data=b"{}",
                headers={"Content-Type": "text/plain"}).status == 415
    # nothing traced there: matched nothing, and a topic need not exist
    assert post(url + "/v1/traces/report", REPORT).json() == {"broker": 0, "matched": 0}
    assert http(url + "/v1/traces/arm").status in (400, 405)  # GET: not an id either


# ---------------------------------------------------------------------- BASIC + ACLs
@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with secured_broker(tmp_path_factory.mktemp("broker-traces-basic")) as b:
        yield b


def test_the_posts_want_alter_on_the_cluster(secured: BrokerProcess) -> None:
    (url,) = secured.http_urls
    arm = {"topic": "no-such-topic", "ttl_ms": 1000}
    assert post(url + "/v1/traces/arm", arm).status == 401
    assert http(url + "/v1/traces/" + "a" * 32).status == 401
    with KafkaAdminClient(admin_config(secured)) as admin:
        describe = AclBinding(ResourcePattern(ResourceType.CLUSTER, "kafka-cluster",
                                              PatternType.LITERAL),
                              AccessControlEntry("User:alice", "*", AclOperation.DESCRIBE,
                                                 AclPermissionType.ALLOW))
        admin.create_acls([describe])[describe].result()
    alice = basic("alice", "alice-secret")
    poll(lambda: http(url + "/v1/traces/" + "a" * 32, headers=alice).status == 200,
         "alice's Describe grant")
    # Describe lets her read traces, not arm or watch: refused before the topic is
    # looked at, and before the body is
    for path, body in (("/v1/traces/arm", arm),
                       ("/v1/traces/watch", {"trace_id": "a" * 32, "topic": "x",
                                             "partition": 0, "offset": 0}),
                       ("/v1/traces/arm", "not an object")):
        denied = post(url + path, body, alice)
        assert denied.status == 403
        assert denied.json()["error"] == "User:alice may not Alter the cluster"
    admin_ok = post(url + "/v1/traces/arm", arm, basic("admin", "admin-secret"))
    assert admin_ok.status == 200 and admin_ok.json()["partitions"] == 0


def test_a_report_wants_read_on_its_topic(secured: BrokerProcess) -> None:
    (url,) = secured.http_urls
    grants = [AclBinding(ResourcePattern(ResourceType.CLUSTER, "kafka-cluster",
                                         PatternType.LITERAL),
                         AccessControlEntry("User:alice", "*", AclOperation.DESCRIBE,
                                            AclPermissionType.ALLOW)),
              AclBinding(ResourcePattern(ResourceType.TOPIC, "reported",
                                         PatternType.LITERAL),
                         AccessControlEntry("User:alice", "*", AclOperation.READ,
                                            AclPermissionType.ALLOW))]
    with KafkaAdminClient(admin_config(secured)) as admin:
        for result in admin.create_acls(grants).values():
            result.result()
    alice = basic("alice", "alice-secret")
    body = {**REPORT, "topic": "reported"}
    assert post(url + "/v1/traces/report", body).status == 401
    def granted() -> Reply | None:
        reply = post(url + "/v1/traces/report", body, alice)
        return reply if reply.status == 200 else None

    assert poll(granted, "alice's Read grant").json() == {"broker": 0, "matched": 0}
    # no Read on the topic: 403 naming it, whether or not it exists, and before the rest
    # of the body is looked at; Alter on the cluster is not what a report wants
    for topic in ("no-such-topic", "__consumer_offsets"):
        for extra in ({}, {"stage": "not a stage", "partition": -1}):
            denied = post(url + "/v1/traces/report", {**REPORT, "topic": topic, **extra},
                          alice)
            assert denied.status == 403, denied.body
            assert denied.json()["error"] == f"User:alice may not Read topic {topic!r}"
    # several ranges: Read on every topic named, the first refused one named
    ranges = {**REPORT, "ranges": [{**RANGE, "topic": "reported"},
                                   {**RANGE, "topic": "secret"}]}
    denied = post(url + "/v1/traces/report", ranges, alice)
    assert denied.status == 403
    assert denied.json()["error"] == "User:alice may not Read topic 'secret'"
    # the super user may
    assert post(url + "/v1/traces/report", REPORT,
                basic("admin", "admin-secret")).json()["matched"] == 0


# ---------------------------------------------------------------------- three brokers
def test_replication_stages_on_a_three_broker_cluster(tmp_path: Path) -> None:
    """The leader records each follower's first fetch of the record and the fetch that
    shows it has it; each follower records its own append of it, naming the leader."""
    from confluent_kafka.admin import AdminClient

    from millrace.launcher.local_cluster import LocalCluster

    cluster = LocalCluster(tmp_path / "cluster", 3, overrides={
        "default.replication.factor": "3", "offsets.topic.replication.factor": "3",
        "replica.fetch.backoff.ms": "200"}).start()
    ok = False
    try:
        urls = cluster.http_urls()
        assert set(urls) == {1, 2, 3}
        topic = create_topic(cluster.bootstrap, 3)
        client = AdminClient({"bootstrap.servers": cluster.bootstrap})

        def in_sync() -> tuple[int, list[int]] | None:
            meta = client.list_topics(topic, timeout=10).topics[topic].partitions.get(0)
            if meta is None or meta.leader < 0 or sorted(meta.isrs) != [1, 2, 3]:
                return None
            return meta.leader, sorted(meta.isrs)

        leader, _ = poll(in_sync, "the partition in sync on three brokers", 60)
        followers = sorted({1, 2, 3} - {leader})
        for url in urls.values():
            assert post(url + "/v1/traces/arm", {"topic": topic}).status == 200
        trace_id, _, header = traceparent()
        producer: KafkaProducer[bytes, bytes] = KafkaProducer(
            {"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        with producer:
            offset = producer.send(ProducerRecord(topic, b"replicated",
                                                  headers=[("traceparent", header)])
                                   ).get(30).offset

        def stages_on(broker_id: int) -> list[dict[str, Any]]:
            records = http(f"{urls[broker_id]}/v1/traces/{trace_id}").json()["records"]
            return records[0]["events"] if records else []

        def leader_done() -> list[dict[str, Any]] | None:
            events = stages_on(leader)
            caught_up = {e["replica"] for e in events if e["stage"] == "replica.caught-up"}
            return events if caught_up == set(followers) else None

        events = poll(leader_done, "both followers caught up, on the leader", 60)
        by_stage: dict[str, list[dict[str, Any]]] = {}
        for e in events:
            by_stage.setdefault(e["stage"], []).append(e)
        assert {e["replica"] for e in by_stage["replica.fetch"]} == set(followers)
        assert all(e["fetch_offset"] <= offset for e in by_stage["replica.fetch"])
        assert all(e["fetch_offset"] > offset for e in by_stage["replica.caught-up"])
        assert all(e["broker"] == leader for e in events)
        for stage in ("broker.receive", "broker.append", "hw.advance", "broker.response"):
            assert len(by_stage[stage]) == 1, stage
        assert by_stage["broker.response"][0]["acks"] == -1
        assert by_stage["broker.append"][0]["t_us"] <= by_stage["hw.advance"][0]["t_us"] \
            <= by_stage["broker.response"][0]["t_us"]
        for follower in followers:
            appended = poll(lambda f=follower: [e for e in stages_on(f)
                                                if e["stage"] == "follower.append"],
                            f"broker {follower}'s follower.append")
            assert [(e["broker"], e["offset"], e["leader"]) for e in appended] == \
                [(follower, offset, leader)]
        ok = True
    finally:
        if ok:
            cluster.stop()
        else:
            cluster.kill_all()
