"""SchemaRegistryClient against the in-memory registry: the REST calls, the caches (counted
in requests), Confluent's error bodies, failover over URLs and credentials."""

from __future__ import annotations

import json
import logging

import pytest

from millrace.client.schema_registry.client import SchemaRegistryClient, SchemaRegistryError
from millrace.client.schema_registry.schemas import JSON, Schema
from millrace.common.errors import ConfigError
from tests.unit.client.schema_registry.fake_registry import FakeRegistry

ORDER = Schema(json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": "string"}]}))
ORDER_V2 = Schema(json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
    {"name": "note", "type": ["null", "string"], "default": None}]}))


@pytest.fixture
def registry() -> FakeRegistry:
    return FakeRegistry()


def test_register_look_up_and_fetch(registry: FakeRegistry) -> None:
    client = registry.client()
    schema_id = client.register_schema("orders-value", ORDER)
    assert client.register_schema("orders-value", ORDER) == schema_id  # cached
    registered = client.lookup_schema("orders-value", ORDER)
    assert (registered.id, registered.subject, registered.version) == (schema_id, "orders-value", 1)
    assert registered.schema == ORDER
    v2 = client.register_schema("orders-value", ORDER_V2)
    assert v2 != schema_id
    assert client.get_versions("orders-value") == [1, 2]
    latest = client.get_latest_version("orders-value")
    assert (latest.id, latest.version, latest.schema) == (v2, 2, ORDER_V2)
    assert client.get_version("orders-value", 1).id == schema_id
    assert client.get_subjects() == ["orders-value"]
    assert client.get_schema_types() == ["JSON", "PROTOBUF", "AVRO"]
    # a fresh client (empty caches) reads the schema back by id
    assert registry.client().get_schema(v2) == ORDER_V2


def test_the_caches_make_repeat_calls_free(registry: FakeRegistry) -> None:
    client = registry.client()
    schema_id = client.register_schema("orders-value", ORDER)
    for _ in range(100):
        assert client.register_schema("orders-value", ORDER) == schema_id
        assert client.get_schema(schema_id) == ORDER  # known from the registration
        assert client.lookup_schema("orders-value", ORDER).id == schema_id
        assert client.get_version("orders-value", 1).id == schema_id
    assert registry.count() == 3  # register, look-up, version 1: once each
    assert client.requests == 3
    other = registry.client()
    for _ in range(100):
        other.get_schema(schema_id)
    assert registry.count("GET", f"/schemas/ids/{schema_id}") == 1


def test_latest_is_asked_every_time(registry: FakeRegistry) -> None:
    client = registry.client()
    client.register_schema("s", ORDER)
    assert client.get_latest_version("s").version == 1
    client.register_schema("s", ORDER_V2)
    assert client.get_latest_version("s").version == 2  # not a stale cache
    assert registry.count("GET", "/subjects/s/versions/latest") == 2


def test_the_same_schema_under_two_subjects_has_one_id(registry: FakeRegistry) -> None:
    client = registry.client()
    assert client.register_schema("a", ORDER) == client.register_schema("b", ORDER)


def test_errors_carry_confluents_codes(registry: FakeRegistry) -> None:
    client = registry.client()
    with pytest.raises(SchemaRegistryError) as e:
        client.get_latest_version("nope")
    assert (e.value.http_status, e.value.error_code) == (404, 40401)
    assert "Subject 'nope' not found" in str(e.value)
    client.register_schema("s", ORDER)
    with pytest.raises(SchemaRegistryError) as e:
        client.get_version("s", 9)
    assert e.value.error_code == 40402
    with pytest.raises(SchemaRegistryError) as e:
        client.get_schema(999)
    assert (e.value.http_status, e.value.error_code) == (404, SchemaRegistryError.SCHEMA_NOT_FOUND)
    with pytest.raises(SchemaRegistryError) as e:
        client.lookup_schema("s", ORDER_V2)
    assert e.value.error_code == 40403
    with pytest.raises(SchemaRegistryError) as e:
        client.register_schema("s", Schema("{not json", JSON))
    assert (e.value.http_status, e.value.error_code) == (422, 42201)


def test_an_incompatible_registration_and_the_compatibility_check(registry: FakeRegistry) -> None:
    client = registry.client()
    client.register_schema("s", ORDER)
    registry.incompatible["s"] = ["READER_FIELD_MISSING_DEFAULT_VALUE: note"]
    assert client.test_compatibility("s", ORDER_V2) is False
    verbose = client.test_compatibility_verbose("s", ORDER_V2, version=1)
    assert not verbose
    assert verbose.messages == ("READER_FIELD_MISSING_DEFAULT_VALUE: note",)
    with pytest.raises(SchemaRegistryError) as e:
        client.register_schema("s", ORDER_V2)
    assert (e.value.http_status, e.value.error_code) == (409, 409)
    del registry.incompatible["s"]
    assert client.test_compatibility("s", ORDER_V2) is True  # control


def test_delete_forgets_the_subjects_cached_entries(registry: FakeRegistry) -> None:
    client = registry.client()
    schema_id = client.register_schema("s", ORDER)
    client.lookup_schema("s", ORDER)
    assert client.delete_subject("s") == [1]
    with pytest.raises(SchemaRegistryError) as e:
        client.lookup_schema("s", ORDER)  # asked again, not answered from the cache
    assert e.value.error_code == 40401
    assert client.get_schema(schema_id) == ORDER  # ids stay valid
    assert client.register_schema("s", ORDER) == schema_id
    assert client.delete_version("s", 2) == 2


def test_config_and_mode(registry: FakeRegistry) -> None:
    client = registry.client()
    assert client.get_compatibility() == "BACKWARD"
    assert client.set_compatibility(level="full") == "FULL"
    assert client.set_compatibility("s", "NONE") == "NONE"
    assert client.get_compatibility("s") == "NONE"
    assert client.get_compatibility() == "FULL"
    assert client.get_mode() == "READWRITE"
    assert client.set_mode("READONLY") == "READONLY"


def test_subjects_are_url_encoded(registry: FakeRegistry) -> None:
    client = registry.client()
    client.register_schema("weird/subject name", ORDER)
    assert registry.requests[-1][1] == "/subjects/weird%2Fsubject%20name/versions"
    assert client.get_subjects() == ["weird/subject name"]


def test_urls_are_tried_in_order(registry: FakeRegistry) -> None:
    registry.unreachable.add("down.test")
    client = registry.client({"url": "http://down.test:8081, http://up.test:8081"})
    assert client.register_schema("s", ORDER) == 1
    assert client.urls == ["http://down.test:8081", "http://up.test:8081"]


def test_no_reachable_url_names_every_url(registry: FakeRegistry) -> None:
    registry.unreachable.update({"a.test", "b.test"})
    client = registry.client({"url": "http://a.test:1,http://b.test:2"})
    with pytest.raises(SchemaRegistryError) as e:
        client.get_subjects()
    assert e.value.http_status is None
    assert "http://a.test:1" in str(e.value) and "http://b.test:2" in str(e.value)
    assert "Connection refused" in str(e.value)


def test_user_info_is_sent_and_never_shown(registry: FakeRegistry,
                                           caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    registry.unreachable.add("down.test")
    client = registry.client({"url": "http://down.test:1,http://up.test:2",
                              "basic.auth.credentials.source": "USER_INFO",
                              "basic.auth.user.info": "alice:s3cret"})
    client.get_subjects()
    assert registry.requests[-1][2]["Authorization"] == "Basic YWxpY2U6czNjcmV0"
    assert "s3cret" not in caplog.text and "YWxpY2U6czNjcmV0" not in caplog.text
    assert "s3cret" not in repr(client)


def test_credentials_in_the_url_are_used_and_stripped(registry: FakeRegistry) -> None:
    registry.unreachable.add("down.test")
    client = registry.client({"url": "http://bob:hunter2@down.test:1"})
    assert client.urls == ["http://down.test:1"]
    with pytest.raises(SchemaRegistryError) as e:
        client.get_subjects()
    assert "hunter2" not in str(e.value) and "bob" not in str(e.value)
    registry.unreachable.clear()
    client.get_subjects()
    assert registry.requests[-1][2]["Authorization"] == "Basic Ym9iOmh1bnRlcjI="


@pytest.mark.parametrize(("conf", "match"), [
    ({}, "url"),
    ({"url": "ftp://x"}, "http:// or https://"),
    ({"url": "http://x", "schema.registry.url": "http://x"}, "Unknown"),
    ({"url": "http://x", "basic.auth.credentials.source": "USER_INFO"}, "user:password"),
    ({"url": "http://u:p@x", "basic.auth.user.info": "a:b"}, "keep one"),
    ({"url": "http://x", "basic.auth.credentials.source": "SASL_INHERIT"}, "USER_INFO or URL"),
])
def test_bad_configs_name_the_key(conf: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        SchemaRegistryClient(conf)


def test_a_non_json_answer_raises_with_its_text(registry: FakeRegistry) -> None:
    client = registry.client()
    registry.broken = (502, b"<html>Bad Gateway</html>")
    with pytest.raises(SchemaRegistryError) as e:
        client.get_subjects()
    assert (e.value.http_status, e.value.error_code) == (502, SchemaRegistryError.UNKNOWN)
    assert "Bad Gateway" in str(e.value)
    registry.broken = (200, b"<html>a proxy's page</html>")
    with pytest.raises(SchemaRegistryError, match="not JSON"):
        client.get_subjects()
