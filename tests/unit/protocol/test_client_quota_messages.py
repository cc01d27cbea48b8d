"""The client quota APIs (DescribeClientQuotas 48, AlterClientQuotas 49) against a second,
independent encoder: kafka-python's message classes (built from Kafka's JSON).  What
kafka-python encodes we decode to the same values, and what we encode it decodes, at v0
(non-flexible) and v1 (flexible); the field comparison with the JSON is test_schemas'.
"""

from __future__ import annotations

import warnings

import pytest

with warnings.catch_warnings():  # kafka-python's JSON loader calls a deprecated function
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.admin import client_quotas as kp

from millrace.protocol import API, ApiKey
from millrace.protocol.types import AlterClientQuotasResponse, DescribeClientQuotasResponse


@pytest.mark.parametrize("version", [0, 1])
def test_describe_request_from_kafka_python_decodes(version: int) -> None:
    R = kp.DescribeClientQuotasRequest
    data = bytes(R(version=version, strict=True, components=[
        R.ComponentData(entity_type="user", match_type=0, match="alice"),
        R.ComponentData(entity_type="client-id", match_type=1, match=None)]).encode())
    got = API[ApiKey.DESCRIBE_CLIENT_QUOTAS].request.decode(data, version)
    assert got.strict is True
    assert [(c.entity_type, c.match_type, c.match) for c in got.components] == [
        ("user", 0, "alice"), ("client-id", 1, None)]


@pytest.mark.parametrize("version", [0, 1])
def test_describe_response_decodes_in_kafka_python(version: int) -> None:
    entry = DescribeClientQuotasResponse.EntryData
    body = DescribeClientQuotasResponse(throttle_time_ms=5, error_code=0, error_message=None,
                                        entries=[entry(
        entity=[entry.EntityData(entity_type="user", entity_name=None)],
        values=[entry.ValueData(key="producer_byte_rate", value=1048576.0),
                entry.ValueData(key="request_percentage", value=12.5)])])
    data = API[ApiKey.DESCRIBE_CLIENT_QUOTAS].response.encode(body, version)
    got = kp.DescribeClientQuotasResponse.decode(data, version=version)
    assert got.throttle_time_ms == 5
    (e,) = got.entries
    assert [(x.entity_type, x.entity_name) for x in e.entity] == [("user", None)]
    assert [(v.key, v.value) for v in e.values] == [("producer_byte_rate", 1048576.0),
                                                    ("request_percentage", 12.5)]


@pytest.mark.parametrize("version", [0, 1])
def test_describe_error_response_has_null_entries(version: int) -> None:
    body = DescribeClientQuotasResponse(throttle_time_ms=0, error_code=31,
                                        error_message="Cluster authorization failed.",
                                        entries=None)
    data = API[ApiKey.DESCRIBE_CLIENT_QUOTAS].response.encode(body, version)
    got = kp.DescribeClientQuotasResponse.decode(data, version=version)
    assert (got.error_code, got.entries) == (31, None)


@pytest.mark.parametrize("version", [0, 1])
def test_alter_request_from_kafka_python_decodes(version: int) -> None:
    R = kp.AlterClientQuotasRequest
    E = R.EntryData
    data = bytes(R(version=version, validate_only=True, entries=[E(
        entity=[E.EntityData(entity_type="user", entity_name="alice"),
                E.EntityData(entity_type="client-id", entity_name=None)],
        ops=[E.OpData(key="consumer_byte_rate", value=2048.0, remove=False),
             E.OpData(key="producer_byte_rate", value=0.0, remove=True)])]).encode())
    got = API[ApiKey.ALTER_CLIENT_QUOTAS].request.decode(data, version)
    assert got.validate_only is True
    (e,) = got.entries
    assert [(x.entity_type, x.entity_name) for x in e.entity] == [("user", "alice"),
                                                                  ("client-id", None)]
    assert [(o.key, o.value, o.remove) for o in e.ops] == [
        ("consumer_byte_rate", 2048.0, False), ("producer_byte_rate", 0.0, True)]


@pytest.mark.parametrize("version", [0, 1])
def test_alter_response_decodes_in_kafka_python(version: int) -> None:
    entry = AlterClientQuotasResponse.EntryData
    body = AlterClientQuotasResponse(throttle_time_ms=0, entries=[entry(
        error_code=42, error_message="Invalid configuration key x",
        entity=[entry.EntityData(entity_type="client-id", entity_name="app")])])
    data = API[ApiKey.ALTER_CLIENT_QUOTAS].response.encode(body, version)
    got = kp.AlterClientQuotasResponse.decode(data, version=version)
    (e,) = got.entries
    assert (e.error_code, e.error_message) == (42, "Invalid configuration key x")
    assert [(x.entity_type, x.entity_name) for x in e.entity] == [("client-id", "app")]
