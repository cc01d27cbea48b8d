"""``describe_client_quotas`` / ``alter_client_quotas`` against scripted brokers (no
sockets): the filter and the alterations on the wire (a None value is a removal, the
default entity a null name, an entity given twice sent once), answers keyed by the entity
the broker names, each entity's error as Kafka's exception, a top-level error raised."""

from __future__ import annotations

from typing import Any

import pytest

from millrace.client.admin import (
    ClientQuotaAlteration,
    ClientQuotaEntity,
    ClientQuotaFilter,
    ClientQuotaFilterComponent,
    ClientQuotaOp,
    _client_quotas,
)
from millrace.common.errors import (
    ClusterAuthorizationFailedError,
    InvalidRequestError,
    KafkaError,
)
from millrace.protocol import AlterClientQuotasResponse, DescribeClientQuotasResponse
from tests.unit.client.admin.scripted_network import ScriptedNetwork

DEADLINE = 2_000_000_000_000
A, D = AlterClientQuotasResponse, DescribeClientQuotasResponse
ALICE = ClientQuotaEntity({"user": "alice"})
ALICE_DEFAULT_CLIENT = ClientQuotaEntity({"user": "alice", "client-id": None})


def test_describe_sends_the_filter_and_keys_the_answer_by_entity() -> None:
    seen: list[Any] = []

    def handle(request: Any, version: int, node: Any) -> Any:
        seen.append(request)
        entry = D.EntryData
        return D(throttle_time_ms=0, error_code=0, error_message=None, entries=[entry(
            entity=[entry.EntityData(entity_type="user", entity_name="alice"),
                    entry.EntityData(entity_type="client-id", entity_name=None)],
            values=[entry.ValueData(key="producer_byte_rate", value=10.0)])])

    net = ScriptedNetwork({"DescribeClientQuotas": handle})
    got = _client_quotas.describe_client_quotas(net, ClientQuotaFilter.contains_only([
        ClientQuotaFilterComponent.of_entity("user", "alice"),
        ClientQuotaFilterComponent.of_default_entity("client-id")]), DEADLINE)
    assert got == {ALICE_DEFAULT_CLIENT: {"producer_byte_rate": 10.0}}
    (request,) = seen
    assert request.strict is True
    assert [(c.entity_type, c.match_type, c.match) for c in request.components] == [
        ("user", 0, "alice"), ("client-id", 1, None)]


def test_describe_raises_the_brokers_error() -> None:
    net = ScriptedNetwork({"DescribeClientQuotas": lambda r, v, n: D(
        throttle_time_ms=0, error_code=31, error_message="Cluster authorization failed.",
        entries=None)})
    with pytest.raises(ClusterAuthorizationFailedError, match="Cluster authorization"):
        _client_quotas.describe_client_quotas(net, ClientQuotaFilter.all(), DEADLINE)


def test_alter_merges_an_entity_given_twice_and_answers_per_entity() -> None:
    seen: list[Any] = []
    client = ClientQuotaEntity({"client-id": "app"})
    lost = ClientQuotaEntity({"client-id": "lost"})

    def handle(request: Any, version: int, node: Any) -> Any:
        seen.append(request)
        e = A.EntryData
        return A(throttle_time_ms=0, entries=[  # answered out of order, one left out
            e(error_code=42, error_message="Invalid configuration key x", entity=[
                e.EntityData(entity_type="client-id", entity_name="app")]),
            e(error_code=0, error_message=None, entity=[
                e.EntityData(entity_type="user", entity_name="alice")])])

    net = ScriptedNetwork({"AlterClientQuotas": handle})
    result = _client_quotas.alter_client_quotas(net, [
        ClientQuotaAlteration(ALICE, [ClientQuotaOp("producer_byte_rate", 5)]),
        ClientQuotaAlteration(client, [ClientQuotaOp("x", 1.0)]),
        ClientQuotaAlteration({"user": "alice"}, [ClientQuotaOp("consumer_byte_rate", None)]),
        ClientQuotaAlteration(lost, [ClientQuotaOp("producer_byte_rate", 1.0)]),
    ], True, DEADLINE)
    assert list(result) == [ALICE, client, lost]
    assert result[ALICE].result() is None
    with pytest.raises(InvalidRequestError, match="client quota entity 'client-id=app': "
                                                  "Invalid configuration key x"):
        result[client].result()
    with pytest.raises(KafkaError, match="did not answer"):
        result[lost].result()
    (request,) = seen
    assert request.validate_only is True
    assert [([(x.entity_type, x.entity_name) for x in e.entity],
             [(o.key, o.value, o.remove) for o in e.ops]) for e in request.entries] == [
        ([("user", "alice")], [("producer_byte_rate", 5.0, False),
                               ("consumer_byte_rate", 0.0, True)]),
        ([("client-id", "app")], [("x", 1.0, False)]),
        ([("client-id", "lost")], [("producer_byte_rate", 1.0, False)])]


def test_alter_with_nothing_sends_nothing() -> None:
    net = ScriptedNetwork({})
    assert dict(_client_quotas.alter_client_quotas(net, [], False, DEADLINE)) == {}
