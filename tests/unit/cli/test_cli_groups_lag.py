"""``millrace groups describe`` with Burrow's status: the coordinator's ``http.listeners``
(from a fake admin's DescribeConfigs) and a real HTTP server on 127.0.0.1 standing in for
the coordinator's ``/v1/consumer-groups/<group>``; every way of having no status shows
``-``, says why once on stderr and still exits 0."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

import pytest

from millrace.cli import groups as groups_cmd
from millrace.client.admin import (
    AdminResult,
    Config,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
)
from millrace.client.admin.broker_http import base_urls as _base_urls
from millrace.testing.broker_process import free_port
from tests.unit.cli.test_cli_commands import FakeAdmin, run

VIEW = {
    "group": "g1", "coordinator": 0, "state": "Stable", "members": 1,
    "isolation": "read_uncommitted", "status": "ERR", "status_code": 3, "complete": 1.0,
    "totallag": 7, "maxlag": {"topic": "orders", "partition": 0, "lag": 7, "status": "STOP"},
    "partitions": [{"topic": "orders", "partition": 0, "committed_offset": 5,
                    "log_end_offset": 12, "lag": 7, "status": "STOP", "status_code": 4,
                    "complete": 1.0, "window": []}],
}


class LagServer:
    """A coordinator's lag view: ``g1`` is known, any other group answers 404."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None]] = []   # (group, Authorization)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                group = unquote(self.path.removeprefix("/v1/consumer-groups/"))
                outer.seen.append((group, self.headers.get("Authorization")))
                if group == "g1":
                    self.answer(200, VIEW)
                else:
                    self.answer(404, {"error": "broker 0 does not coordinate it",
                                      "status": "NOTFOUND"})

            def answer(self, code: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


class LagAdmin(FakeAdmin):
    """FakeAdmin whose broker 0 reports ``http.listeners``."""

    def __init__(self, http_listeners: str | None) -> None:
        super().__init__()
        self.http_listeners = http_listeners

    def describe_configs(self, resources: Any, **kw: Any) -> AdminResult:
        result: AdminResult[ConfigResource, Config] = AdminResult()
        for r in resources:
            self.calls.append(("describe_configs", r))
            assert r == ConfigResource(ConfigResourceType.BROKER, "0")
            entries = [ConfigEntry("log.dirs", "/tmp/x", ConfigSource.STATIC_BROKER_CONFIG)]
            if self.http_listeners is not None:
                entries.append(ConfigEntry("http.listeners", self.http_listeners,
                                           ConfigSource.STATIC_BROKER_CONFIG))
            result.set_value(r, Config(entries))
        return result


@pytest.fixture
def server() -> Iterator[LagServer]:
    s = LagServer()
    try:
        yield s
    finally:
        s.close()


def use(monkeypatch: pytest.MonkeyPatch, http_listeners: str | None) -> LagAdmin:
    fake = LagAdmin(http_listeners)
    monkeypatch.setattr(groups_cmd, "admin_client", lambda args: fake)
    return fake


def test_the_status_column_and_the_group_status_line(
        monkeypatch: pytest.MonkeyPatch, server: LagServer,
        capsys: pytest.CaptureFixture[str]) -> None:
    # a wildcard host means the coordinator's own Kafka host (127.0.0.1)
    use(monkeypatch, f"http://0.0.0.0:{server.port}")
    code, out, err = run(["groups", "describe", "--group", "g1"], capsys)
    assert (code, err) == (0, "")
    lines = [line for line in out.splitlines() if line]
    assert lines[0] == ("Consumer group 'g1' lag status: ERR (total lag 7, max lag 7 on "
                        "orders-0 (STOP), window 100% complete).")
    assert [line.split()[-1] for line in lines[1:]] == ["STATUS", "STOP", "-"]
    assert lines[1].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                                "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID",
                                "STATUS"]
    assert server.seen == [("g1", None)]


def test_the_json_output_carries_the_statuses(
        monkeypatch: pytest.MonkeyPatch, server: LagServer,
        capsys: pytest.CaptureFixture[str]) -> None:
    use(monkeypatch, f"http://127.0.0.1:{server.port}")
    code, out, err = run(["groups", "describe", "-g", "g1", "-o", "json"], capsys)
    assert (code, err) == (0, "")
    (group,) = json.loads(out)
    assert [(o["partition"], o["lag"], o["status"]) for o in group["offsets"]] == [
        (0, 7, "STOP"), (1, None, None)]
    assert group["lag_status"] == {k: VIEW[k] for k in groups_cmd.LAG_SUMMARY_KEYS}


def test_a_group_the_listener_does_not_know_shows_dashes_and_the_brokers_reason(
        monkeypatch: pytest.MonkeyPatch, server: LagServer,
        capsys: pytest.CaptureFixture[str]) -> None:
    admin = use(monkeypatch, f"http://127.0.0.1:{server.port}")
    code, out, err = run(["groups", "describe", "-g", "other,another"], capsys)
    assert code == 0
    assert "lag status:" not in out
    rows = [line.split() for line in out.splitlines() if line.startswith(("other", "another"))]
    assert [row[-1] for row in rows] == ["-", "-", "-", "-"]
    assert err.splitlines() == [   # one line for each distinct reason
        f"No lag status (STATUS -): broker 0 (http://127.0.0.1:{server.port}): HTTP 404: "
        "broker 0 does not coordinate it"]
    # the broker's listeners were asked for once for both groups
    assert [c for c in admin.calls if c[0] == "describe_configs"] == [
        ("describe_configs", ConfigResource(ConfigResourceType.BROKER, "0"))]


@pytest.mark.parametrize(("listeners", "reason"), [
    ("", "broker 0 has no HTTP listener (http.listeners is empty)"),
    (None, "broker 0 has no http.listeners config (an older broker?)"),
    ("http://127.0.0.1:0", "broker 0's HTTP listener is on an ephemeral port "
                           "(http.listeners=http://127.0.0.1:0), which its configs do not "
                           "tell"),
])
def test_no_listener_shows_dashes_and_says_why_once(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        listeners: str | None, reason: str) -> None:
    use(monkeypatch, listeners)
    code, out, err = run(["groups", "describe", "-g", "g1", "-g", "g2"], capsys)
    assert code == 0
    assert err == f"No lag status (STATUS -): {reason}\n"
    assert [line.split()[-1] for line in out.splitlines()
            if line.startswith(("g1 ", "g2 "))] == ["-"] * 4


def test_an_unreachable_listener_does_not_fail_the_command(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()     # nothing listens there
    use(monkeypatch, f"http://127.0.0.1:{port}")
    code, out, err = run(["groups", "describe", "-g", "g1"], capsys)
    assert code == 0
    assert err.startswith(f"No lag status (STATUS -): broker 0 (http://127.0.0.1:{port}): "
                          "not reachable:")
    assert "consumer-1 -" in out


def test_sasl_credentials_go_as_http_basic(
        monkeypatch: pytest.MonkeyPatch, server: LagServer,
        capsys: pytest.CaptureFixture[str]) -> None:
    use(monkeypatch, f"http://127.0.0.1:{server.port}")
    run(["groups", "describe", "-g", "g1", "-X", "sasl.username=alice",
         "-X", "sasl.password=s3cret"], capsys)
    run(["groups", "describe", "-g", "g1", "-X",
         'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule '
         'required username="bob" password="pw";'], capsys)
    assert server.seen == [
        ("g1", "Basic " + base64.b64encode(b"alice:s3cret").decode()),
        ("g1", "Basic " + base64.b64encode(b"bob:pw").decode())]


def test_listener_urls() -> None:
    assert _base_urls(1, "https://h:1,http://:2", "kafka-host") == [
        "http://kafka-host:2", "https://h:1"]
    assert _base_urls(1, "http://[::]:9644", "::1") == ["http://[::1]:9644"]
    assert _base_urls(1, "http://h:0,http://h:5", "x") == ["http://h:5"]
