"""The broker's HTTP listener (``http.listeners``) on a real ``millrace broker`` process,
bound to port 0 and found from what the broker says it serves (the started line;
``--output json``'s ``"http"``).

``/metrics`` is parsed with prometheus_client's own parsers (the text format and, when
asked by ``Accept``, OpenMetrics) after millrace's producer wrote to a topic; gzip when
asked; the probes; what the listener answers to bad HTTP (unknown path, wrong method, a
malformed request line and a 100 KB header over a raw socket) with the broker still
serving Kafka afterwards; start-up refused for a taken port or a bad listener; and
``http.authentication.method=BASIC`` with PLAIN and SCRAM users of the broker's SASL
listener under the ACL authorizer (401 / 403 / 200, a Describe-on-cluster grant)."""

from __future__ import annotations

import contextlib
import gzip
import json
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from millrace.client.admin import (
    ConfigResource,
    ConfigResourceType,
    KafkaAdminClient,
    NewTopic,
)
from millrace.client.admin.types import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
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
    secured_broker,
)

pytestmark = [pytest.mark.integration]

T = TypeVar("T")
N = 200
PHASES = ("requestqueuetimems", "localtimems", "remotetimems", "throttletimems",
          "responsequeuetimems", "responsesendtimems", "totaltimems")
QUANTILES = {"0.50", "0.75", "0.95", "0.98", "0.99", "0.999"}
BROKER = [sys.executable, "-m", "millrace.cli.main", "broker"]
Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


# ---------------------------------------------------------------------- helpers
def parse(text: str, parser: Callable[[str], Any] = text_string_to_metric_families) -> Series:
    out: Series = {}
    for family in parser(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def samples(series: Series, metric: str, /, **labels: str
            ) -> list[tuple[dict[str, str], float]]:
    """The samples of ``metric`` whose labels include ``labels``."""
    return [(dict(ls), v) for (n, ls), v in series.items()
            if n == metric and set(labels.items()) <= ls]


def raw_http(port: int, payload: bytes) -> bytes:
    """``payload`` sent over a plain socket (not half-closed: aiohttp takes an EOF as
    the client gone and answers nothing), and everything the listener answers until it
    closes (or a reset after its answer)."""
    with socket.create_connection(("127.0.0.1", port), timeout=15) as s:
        # it may answer and close before reading everything: read the answer anyway
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(payload)
        chunks: list[bytes] = []
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks)


def status_of(response: bytes) -> int:
    assert response.startswith(b"HTTP/1."), response[:200]
    return int(response.split(b" ", 2)[1])


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def create_topic(admin_config: dict[str, Any], partitions: int = 2) -> str:
    name = f"http-{uuid.uuid4().hex[:8]}"
    with KafkaAdminClient({**admin_config, "default.api.timeout.ms": 20_000}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])[name].result(20)
    return name


# ---------------------------------------------------------------------- a plain broker
@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data: Path = tmp_path_factory.mktemp("broker-http")
    with BrokerProcess(data, overrides={"http.listeners": "http://127.0.0.1:0"}) as b:
        yield b
    assert b.proc is not None and b.proc.returncode == 0, b.logs()[-5000:]
    assert "Traceback" not in b.logs()


@pytest.fixture(scope="module")
def url(broker: BrokerProcess) -> str:
    (only,) = broker.http_urls  # port 0: the port the broker bound, from its started line
    assert port_of(only) != 0
    return only


def test_describe_configs_shows_the_port_bound_for_port_0(broker: BrokerProcess,
                                                          url: str) -> None:
    """``groups describe`` dials what DescribeConfigs says: the bound port, not 0."""
    resource = ConfigResource(ConfigResourceType.BROKER, "0")
    with KafkaAdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        config = admin.describe_configs([resource])[resource].result()
    assert config["http.listeners"].value == url


def produce(bootstrap: str, topic: str, n: int, **config: Any) -> None:
    producer: KafkaProducer[bytes, bytes] = KafkaProducer(
        {"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5, **config})
    with producer:
        for i in range(n):
            producer.send(ProducerRecord(topic, f"v{i}".encode(), key=str(i).encode()))
        producer.flush(30)


def test_metrics_after_producing(broker: BrokerProcess, url: str) -> None:
    topic = create_topic({"bootstrap.servers": broker.bootstrap})
    produce(broker.bootstrap, topic, N)

    def scraped() -> Series | None:
        reply = http(url + "/metrics")
        assert reply.status == 200
        assert reply.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        series = parse(reply.text)
        got = samples(series, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic)
        return series if got and got[0][1] == N else None

    series = poll(scraped, f"{N} messages in on {topic}")
    produced = samples(series, "kafka_network_requestmetrics_requests_total",
                       request="Produce")
    assert produced and all(int(labels["version"]) >= 0 for labels, _ in produced)
    assert sum(v for _, v in produced) >= 1
    for phase in PHASES:
        name = f"kafka_network_requestmetrics_{phase}"
        quantiles = {labels["quantile"] for labels, _ in
                     samples(series, name, request="Produce")}
        assert quantiles == QUANTILES, phase
        (count,) = samples(series, name + "_count", request="Produce")
        assert count[1] >= 1, phase
        assert samples(series, name + "_sum", request="Produce"), phase
    # the all-topics meter and the raw rate gauges kafbat UI reads, with and without topic
    assert samples(series, "kafka_server_brokertopicmetrics_messagesin_total") and \
        any("topic" not in labels for labels, _ in
            samples(series, "kafka_server_brokertopicmetrics_messagesin_total"))
    rates = samples(series, "kafka_server_BrokerTopicMetrics_FifteenMinuteRate",
                    name="BytesInPerSec")
    assert {frozenset(labels) for labels, _ in rates} >= {frozenset({"name"}),
                                                          frozenset({"name", "topic"})}
    (idle,) = samples(series, "kafka_network_socketserver_networkprocessoravgidlepercent")
    assert 0.0 <= idle[1] <= 1.0
    # negative control: a topic nothing was written to has no messages
    assert not samples(series, "kafka_server_brokertopicmetrics_messagesin_total",
                       topic="no-such-topic")


def test_state_changes_of_a_topic(broker: BrokerProcess, url: str) -> None:
    topic = create_topic({"bootstrap.servers": broker.bootstrap}, partitions=2)

    def recorded() -> list[dict[str, Any]] | None:
        reply = http(f"{url}/v1/partitions/{topic}/state-changes")
        assert reply.status == 200
        assert reply.headers["Content-Type"].startswith("application/json")
        body = json.loads(reply.text)
        assert body["broker"] == 0
        changes: list[dict[str, Any]] = body["changes"]
        return changes if len(changes) >= 2 else None

    changes = poll(recorded, f"the leadership records of {topic}")
    assert {(c["partition"], c["kind"]) for c in changes} >= {(0, "leader"), (1, "leader")}
    assert all(c["topic"] == topic and c["leader"] == 0 and c["isr"] == [0] and
               isinstance(c["t"], int) for c in changes)
    # negative controls: another topic's name, one unknown, a percent-encoded one, a path
    # with a slash in the name: none of them sees this topic's records, none is an error
    for other in ("no-such-topic", "http-%2E%2E", "%2F" + topic):
        reply = http(f"{url}/v1/partitions/{other}/state-changes")
        assert reply.status == 200, other
        assert json.loads(reply.text)["changes"] == [], other
    assert http(f"{url}/v1/partitions/a/b/state-changes").status == 404
    assert http(f"{url}/v1/partitions/{topic}/state-changes", method="POST",
                data=b"{}").status == 405


def test_openmetrics_when_asked(url: str) -> None:
    reply = http(url + "/metrics",
                 headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert reply.status == 200
    assert reply.headers["Content-Type"].startswith("application/openmetrics-text; "
                                                    "version=1.0.0")
    assert reply.text.endswith("# EOF\n")
    series = parse(reply.text, openmetrics_families)
    assert samples(series, "kafka_server_replicamanager_underreplicatedpartitions")
    # negative control: the plain scrape is no OpenMetrics document
    with pytest.raises(ValueError):
        parse(http(url + "/metrics").text, openmetrics_families)


def test_gzip_when_asked(url: str) -> None:
    zipped = http(url + "/metrics", headers={"Accept-Encoding": "gzip"})
    assert zipped.status == 200 and zipped.headers["Content-Encoding"] == "gzip"
    series = parse(gzip.decompress(zipped.body).decode())
    assert samples(series, "kafka_controller_kafkacontroller_activecontrollercount")
    plain = http(url + "/metrics")
    assert plain.headers["Content-Encoding"] is None
    parse(plain.text)


def test_the_probes(url: str) -> None:
    health = http(url + "/healthz")
    assert health.status == 200
    ready = http(url + "/readyz")
    assert ready.status == 200
    assert json.loads(ready.text) == {"ready": True}


def test_unknown_path_and_wrong_method(url: str) -> None:
    assert http(url + "/nope").status == 404
    assert http(url + "/metrics/extra").status == 404
    assert http(url + "/metrics", method="POST", data=b"x=1").status == 405
    assert http(url + "/healthz", method="DELETE").status == 405
    assert http(url + "/metrics", method="HEAD").status == 200


@pytest.mark.parametrize("payload", [
    b"GARBAGE\r\n\r\n",
    b"GET\r\n\r\n",
    b"GET /metrics HTTP/9\r\n\r\n",
    b"GET /metrics HTTP/1.1 extra\r\n\r\n",
    b"GET /me trics HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nHost x\r\n\r\n",  # a header without its colon
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64,  # a TLS ClientHello
])
def test_a_malformed_request_line_is_400(url: str, payload: bytes) -> None:
    assert status_of(raw_http(port_of(url), payload)) == 400


def test_an_oversize_header_is_refused_and_kafka_still_serves(broker: BrokerProcess,
                                                              url: str) -> None:
    port = port_of(url)
    huge = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n"
    assert status_of(raw_http(port, huge)) in (400, 431)
    many = (b"GET /metrics HTTP/1.1\r\nHost: x\r\n"
            + b"".join(b"X-H%d: %s\r\n" % (i, b"b" * 50) for i in range(2000)) + b"\r\n")
    assert status_of(raw_http(port, many)) in (400, 431)
    # negative control: the same request with a small header is served
    ok = raw_http(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: aaa\r\n"
                        b"Connection: close\r\n\r\n")
    assert status_of(ok) == 200
    # one line each in the broker's log, no traceback (checked at teardown), no bytes
    poll(lambda: "bad HTTP request (LineTooLong, answered 400)" in broker.logs(),
         "the bad request's log line")
    assert "aaaaaaaaaa" not in broker.logs()
    # the broker still serves Kafka and HTTP
    topic = create_topic({"bootstrap.servers": broker.bootstrap}, partitions=1)
    produce(broker.bootstrap, topic, 10)
    assert http(url + "/healthz").status == 200
    assert broker.running()


def test_the_started_json_line_names_the_bound_url(tmp_path: Path) -> None:
    proc = subprocess.Popen([*BROKER, "--output", "json", "--override",
                             f"log.dirs={tmp_path / 'logs'}", "--override",
                             "listeners=PLAINTEXT://127.0.0.1:0", "--override",
                             "http.listeners=http://127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        started = json.loads(proc.stdout.readline())
        assert started["event"] == "started"
        (bound,) = started["http"]
        assert bound.startswith("http://127.0.0.1:") and port_of(bound) != 0
        assert http(bound + "/healthz").status == 200
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert f"{bound}/metrics" in err  # the started log line says the same


# ---------------------------------------------------------------------- refused start-ups
def test_a_taken_http_port_stops_start_up_naming_http_listeners(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = [*BROKER, "--override", f"log.dirs={logs}", "--override",
                "listeners=PLAINTEXT://127.0.0.1:0", "--override",
                f"http.listeners=http://127.0.0.1:{port}"]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
        as_json = subprocess.run([*args[:4], "--output", "json", *args[4:]],
                                 capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert "http.listeners" in lines[0] and f"127.0.0.1:{port}" in lines[0]
    assert "Traceback" not in proc.stderr
    assert not logs.exists() or not any(logs.iterdir())  # refused before the log dirs
    assert as_json.returncode == 1
    doc = json.loads(as_json.stdout)
    assert doc["event"] == "error" and "http.listeners" in doc["error"]


@pytest.mark.parametrize("value", ["ftp://x:1", "http://127.0.0.1", "http://h:99999"])
def test_a_bad_http_listener_is_a_config_error_naming_the_key(tmp_path: Path,
                                                              value: str) -> None:
    proc = subprocess.run([*BROKER, "--override", f"log.dirs={tmp_path / 'logs'}",
                           "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                           "--override", f"http.listeners={value}"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "http.listeners" in proc.stderr and value in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "logs").exists()


def test_a_bad_authentication_method_is_a_config_error(tmp_path: Path) -> None:
    proc = subprocess.run([*BROKER, "--override", f"log.dirs={tmp_path / 'logs'}",
                           "--override", "http.authentication.method=DIGEST"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2 and "http.authentication.method" in proc.stderr


# ---------------------------------------------------------------------- BASIC auth
SCRAM_USER, SCRAM_PASSWORD = "sam", "sam-scram-secret"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with secured_broker(tmp_path_factory.mktemp("broker-http-basic"), "PLAIN,SCRAM-SHA-256",
                        secrets=(SCRAM_PASSWORD, "wrong-password")) as b:
        with KafkaAdminClient(admin_config(b)) as admin:
            admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                SCRAM_USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                SCRAM_PASSWORD)]).all()
        yield b


def test_basic_credentials_are_required_but_not_for_the_probes(secured: BrokerProcess) -> None:
    (url,) = secured.http_urls
    missing = http(url + "/metrics")
    assert missing.status == 401
    assert missing.headers["WWW-Authenticate"].startswith("Basic")
    assert "admin-secret" not in missing.text
    assert http(url + "/metrics", headers=basic("admin", "wrong-password")).status == 401
    assert http(url + "/metrics", headers=basic("nobody", "admin-secret")).status == 401
    assert http(url + "/metrics", headers={"Authorization": "Basic %%%"}).status == 401
    assert http(url + "/metrics", headers={"Authorization": "Basic é"}).status == 401
    good = http(url + "/metrics", headers=basic("admin", "admin-secret"))
    assert good.status == 200
    assert samples(parse(good.text), "kafka_controller_kafkacontroller_activecontrollercount")
    assert http(url + "/healthz").status == 200
    assert http(url + "/readyz").status == 200
    assert http(url + "/v1/consumer-groups").status == 401
    assert http(url + "/v1/partitions/any/state-changes").status == 401


def test_the_authorizer_wants_describe_on_the_cluster(secured: BrokerProcess) -> None:
    (url,) = secured.http_urls
    assert http(url + "/metrics", headers=basic("admin", "admin-secret")).status == 200
    # authenticated (a right password) but no ACL: 403, for a PLAIN and a SCRAM user
    alice = http(url + "/metrics", headers=basic("alice", "alice-secret"))
    assert alice.status == 403 and "alice" in alice.text
    assert http(url + "/metrics", headers=basic(SCRAM_USER, SCRAM_PASSWORD)).status == 403
    assert http(url + "/metrics", headers=basic(SCRAM_USER, "wrong-password")).status == 401
    # the partitions' state-change records want the same grant, asked before the topic
    # is looked at: an unknown topic is refused alike
    for topic in ("__consumer_offsets", "no-such-topic"):
        denied = http(f"{url}/v1/partitions/{topic}/state-changes",
                      headers=basic("alice", "alice-secret"))
        assert denied.status == 403 and "changes" not in denied.text, topic
    # an ACL on something else does not do
    with KafkaAdminClient(admin_config(secured)) as admin:
        topic_read = AclBinding(ResourcePattern(ResourceType.TOPIC, "*", PatternType.LITERAL),
                                AccessControlEntry("User:alice", "*", AclOperation.DESCRIBE,
                                                   AclPermissionType.ALLOW))
        admin.create_acls([topic_read])[topic_read].result()
        assert http(url + "/metrics", headers=basic("alice", "alice-secret")).status == 403
        grants = [AclBinding(ResourcePattern(ResourceType.CLUSTER, "kafka-cluster",
                                             PatternType.LITERAL),
                             AccessControlEntry(f"User:{user}", "*", AclOperation.DESCRIBE,
                                                AclPermissionType.ALLOW))
                  for user in ("alice", SCRAM_USER)]
        created = admin.create_acls(grants)
        for grant in grants:
            created[grant].result()

    def allowed(user: str, password: str) -> Reply | None:
        reply = http(url + "/metrics", headers=basic(user, password))
        assert reply.status in (200, 403)
        return reply if reply.status == 200 else None

    reply = poll(lambda: allowed("alice", "alice-secret"), "alice's Describe grant")
    assert samples(parse(reply.text), "kafka_server_replicamanager_underreplicatedpartitions")
    poll(lambda: allowed(SCRAM_USER, SCRAM_PASSWORD), "the SCRAM user's grant")
    granted = http(f"{url}/v1/partitions/no-such-topic/state-changes",
                   headers=basic("alice", "alice-secret"))
    assert granted.status == 200 and json.loads(granted.text)["changes"] == []
    # still authenticated each time: the grant lets no wrong password in
    assert http(url + "/metrics", headers=basic("alice", "wrong-password")).status == 401
