"""The metrics settings of the broker's config: ``http.listeners`` (parsed into
``HttpListener``s, bad ones refused naming the key), ``http.authentication.method`` and
``metrics.enabled``."""

from __future__ import annotations

import pytest

from millrace.broker.config import HttpListener, KafkaConfig, parse_http_listener
from millrace.common.errors import ConfigError


def test_no_http_listener_unless_set() -> None:
    c = KafkaConfig({})
    assert c.http_listeners == []
    assert c["http.authentication.method"] == "NONE"
    assert c["metrics.enabled"] is True


@pytest.mark.parametrize(("spec", "listener"), [
    ("http://127.0.0.1:9644", HttpListener("http", "127.0.0.1", 9644)),
    ("HTTP://localhost:80", HttpListener("http", "localhost", 80)),
    ("https://broker-1.example.com:9645", HttpListener("https", "broker-1.example.com", 9645)),
    ("http://127.0.0.1:0", HttpListener("http", "127.0.0.1", 0)),  # any free port
    ("http://:9644", HttpListener("http", "", 9644)),  # every interface
    ("http://[::1]:9644", HttpListener("http", "::1", 9644)),
    ("http://0.0.0.0:65535", HttpListener("http", "0.0.0.0", 65535)),
])
def test_good_listeners(spec: str, listener: HttpListener) -> None:
    assert parse_http_listener(spec) == listener
    assert KafkaConfig({"http.listeners": spec}).http_listeners == [listener]


def test_urls_are_printed_back_with_brackets_for_ipv6() -> None:
    assert parse_http_listener("http://[::1]:9644").url == "http://[::1]:9644"
    assert parse_http_listener("HTTPS://h:1").url == "https://h:1"


def test_several_listeners_in_order() -> None:
    c = KafkaConfig({"http.listeners": "http://127.0.0.1:9644, https://0.0.0.0:9645"})
    assert [ls.url for ls in c.http_listeners] == ["http://127.0.0.1:9644",
                                                  "https://0.0.0.0:9645"]


@pytest.mark.parametrize("spec", [
    "ftp://x:1",
    "127.0.0.1:9644",  # no scheme
    "http:/127.0.0.1:9644",
    "http://127.0.0.1",  # no port
    "http://127.0.0.1:",
    "http://127.0.0.1:port",
    "http://127.0.0.1:-1",
    "http://127.0.0.1:65536",
    "http://127.0.0.1:9644/metrics",  # a path
    "PLAINTEXT://127.0.0.1:9092",  # a Kafka listener
    "tcp://127.0.0.1:9644",
])
def test_bad_listeners_are_refused_naming_the_key(spec: str) -> None:
    with pytest.raises(ConfigError, match=r"http\.listeners") as info:
        KafkaConfig({"http.listeners": spec})
    assert spec in str(info.value)


@pytest.mark.parametrize("method", ["NONE", "BASIC"])
def test_authentication_methods(method: str) -> None:
    assert KafkaConfig({"http.authentication.method": method})[
        "http.authentication.method"] == method


@pytest.mark.parametrize("method", ["DIGEST", "basic ", "OAUTHBEARER", ""])
def test_an_unknown_authentication_method_is_refused_naming_the_key(method: str) -> None:
    with pytest.raises(ConfigError, match=r"http\.authentication\.method"):
        KafkaConfig({"http.authentication.method": method})


@pytest.mark.parametrize(("text", "value"), [("false", False), ("true", True),
                                             ("FALSE", False), ("True", True)])
def test_metrics_enabled(text: str, value: bool) -> None:
    assert KafkaConfig({"metrics.enabled": text})["metrics.enabled"] is value


@pytest.mark.parametrize("text", ["yes", "0", "off", ""])
def test_metrics_enabled_takes_only_a_boolean(text: str) -> None:
    with pytest.raises(ConfigError, match=r"metrics\.enabled"):
        KafkaConfig({"metrics.enabled": text})
