"""DescribeClientQuotas (48) and AlterClientQuotas (49) through the handlers of one
in-process node: what is altered is described back (entities with defaults, filters
exact / default / any, strict) for user / client-id and for ip entities, invalid entries
fail alone with INVALID_REQUEST naming why, validate_only writes nothing, the quotas survive a restart (the metadata file), the
store's watchers hear each change once, and with an authorizer both APIs need
DescribeConfigs / AlterConfigs on the Cluster (31 in every error slot without)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from millrace.broker.metadata.local_store import LocalMetadataStore
from millrace.broker.quota.entity import DEFAULT, IpQuotaEntity, QuotaEntity, QuotaValues
from millrace.broker.quota.quota_admin import QuotaRequestError, parse_ops
from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from millrace.protocol.types import AlterClientQuotasRequest, DescribeClientQuotasRequest
from millrace.security.acl import AclOperation, ResourceType
from millrace.security.kafka_principal import KafkaPrincipal
from tests.unit.broker.brokergen import AUTHORIZER, Broker

DESCRIBE, ALTER = ApiKey.DESCRIBE_CLIENT_QUOTAS, ApiKey.ALTER_CLIENT_QUOTAS
VERSIONS = [0, 1]
EXACT, DEFAULT_MATCH, SPECIFIED = 0, 1, 2
ALICE = KafkaPrincipal.user("alice")
INVALID = Errors.INVALID_REQUEST
Pairs = list[tuple[str, str | None]]


def entry(entity: Pairs, *ops: tuple[str, float | None]) -> Any:
    """An AlterClientQuotas entry; an op value None removes the key."""
    E = AlterClientQuotasRequest.EntryData
    return E(entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in entity],
             ops=[E.OpData(key=k, value=0.0 if v is None else v, remove=v is None)
                  for k, v in ops])


def alter_req(*entries: Any, validate_only: bool = False) -> Any:
    return AlterClientQuotasRequest(entries=list(entries), validate_only=validate_only)


def describe_req(*components: tuple[str, int, str | None], strict: bool = False) -> Any:
    C = DescribeClientQuotasRequest.ComponentData
    return DescribeClientQuotasRequest(components=[
        C(entity_type=t, match_type=m, match=n) for t, m, n in components], strict=strict)


def results(response: Any) -> list[tuple[Pairs, int, str | None]]:
    return [([(e.entity_type, e.entity_name) for e in r.entity], r.error_code,
              r.error_message) for r in response.entries]


def described(response: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    assert response.error_code == 0, response
    return {tuple((e.entity_type, e.entity_name) for e in r.entity):
            {v.key: v.value for v in r.values} for r in response.entries}


@pytest.fixture
def broker(tmp_path: Path) -> Any:
    b = Broker(str(tmp_path))
    yield b
    b.close()


def call(b: Broker, key: int, version: int, body: Any, **kw: Any) -> Any:
    return asyncio.run(b.call(key, version, body, **kw))


SETUP = [
    entry([("user", "alice")], ("producer_byte_rate", 1048576.0),
          ("request_percentage", 12.5)),
    entry([("user", None)], ("consumer_byte_rate", 2048.0)),
    entry([("user", "alice"), ("client-id", "app")], ("producer_byte_rate", 4096.0)),
    entry([("user", "alice"), ("client-id", None)], ("consumer_byte_rate", 8192.0)),
    entry([("client-id", "app")], ("controller_mutation_rate", 3.0)),
    entry([("client-id", None)], ("producer_byte_rate", 100.0)),
]


# ---------------------------------------------------------------------- alter + describe
@pytest.mark.parametrize("version", VERSIONS)
def test_altered_quotas_are_described_back_with_defaults_as_null(broker: Broker,
                                                                   version: int) -> None:
    response = call(broker, ALTER, version, alter_req(*SETUP))
    assert [err for _, err, _ in results(response)] == [0] * len(SETUP)
    assert results(response)[1][0] == [("user", None)]  # each entry named back
    got = described(call(broker, DESCRIBE, version, describe_req()))
    assert got == {
        (("user", "alice"),): {"producer_byte_rate": 1048576.0, "request_percentage": 12.5},
        (("user", None),): {"consumer_byte_rate": 2048.0},
        (("user", "alice"), ("client-id", "app")): {"producer_byte_rate": 4096.0},
        (("user", "alice"), ("client-id", None)): {"consumer_byte_rate": 8192.0},
        (("client-id", "app"),): {"controller_mutation_rate": 3.0},
        (("client-id", None),): {"producer_byte_rate": 100.0},
    }


@pytest.mark.parametrize(("components", "strict", "expected"), [
    # exact user, not strict: the user alone and with any client id
    ([("user", EXACT, "alice")], False,
     {(("user", "alice"),), (("user", "alice"), ("client-id", "app")),
      (("user", "alice"), ("client-id", None))}),
    # exact user, strict: only the user entity
    ([("user", EXACT, "alice")], True, {(("user", "alice"),)}),
    # the default user
    ([("user", DEFAULT_MATCH, None)], True, {(("user", None),)}),
    # any specified user, strict: every user-only entity, the default included
    ([("user", SPECIFIED, None)], True, {(("user", "alice"),), (("user", None),)}),
    # user and client id both named
    ([("user", EXACT, "alice"), ("client-id", DEFAULT_MATCH, None)], True,
     {(("user", "alice"), ("client-id", None))}),
    ([("user", SPECIFIED, None), ("client-id", EXACT, "app")], False,
     {(("user", "alice"), ("client-id", "app"))}),
    # client ids, strict: no user part
    ([("client-id", SPECIFIED, None)], True, {(("client-id", "app"),), (("client-id", None),)}),
    ([("client-id", EXACT, "app")], False,
     {(("client-id", "app"),), (("user", "alice"), ("client-id", "app"))}),
    # no component, strict: nothing; an exact name that has no quota: nothing
    ([], True, set()),
    ([("user", EXACT, "bob")], False, set()),
    # an ip filter matches no user / client entity
    ([("ip", SPECIFIED, None)], False, set()),
])
def test_describe_filters(broker: Broker, components: list[Any], strict: bool,
                          expected: set[Any]) -> None:
    call(broker, ALTER, 1, alter_req(*SETUP))
    got = described(call(broker, DESCRIBE, 1, describe_req(*components, strict=strict)))
    assert set(got) == expected


@pytest.mark.parametrize(("components", "error", "message"), [
    ([("user", EXACT, "a"), ("user", EXACT, "b")], INVALID,
     "Duplicate user filter component entity type"),
    ([("client-id", EXACT, "a"), ("client-id", SPECIFIED, None)], INVALID,
     "Duplicate client filter component entity type"),
    ([("ip", SPECIFIED, None), ("user", SPECIFIED, None)], INVALID,
     "Invalid entity filter component combination, IP filter component should not be used "
     "with user or clientId filter component."),
    ([("", SPECIFIED, None)], INVALID, "Unexpected empty filter component entity type"),
    ([("group", SPECIFIED, None)], Errors.UNSUPPORTED_VERSION,
     "Custom entity type 'group' not supported"),
    ([("user", 7, None)], INVALID, "Unexpected match type: 7"),
    ([("user", EXACT, None)], INVALID, "An exact user filter component needs a name to match"),
])
def test_invalid_describe_filters_fail_the_request(broker: Broker, components: list[Any],
                                                   error: int, message: str) -> None:
    call(broker, ALTER, 1, alter_req(*SETUP))
    response = call(broker, DESCRIBE, 1, describe_req(*components))
    assert (response.error_code, response.error_message, response.entries) == \
        (error, message, None)


@pytest.mark.parametrize(("bad", "message"), [
    (entry([("user", "bob")], ("producer_bytes", 1.0)), "Invalid configuration key producer_bytes"),
    (entry([("user", "bob")], ("SCRAM-SHA-256", None)), "Invalid configuration key SCRAM-SHA-256"),
    (entry([("user", "bob")], ("producer_byte_rate", -5.0)),
     "Quota producer_byte_rate must be greater than 0"),
    (entry([("user", "bob")], ("request_percentage", 0.0)),
     "Quota request_percentage must be greater than 0"),
    (entry([("user", "bob")], ("consumer_byte_rate", 10.5)),
     "consumer_byte_rate cannot be a fractional value."),
    (entry([("user", "bob")], ("consumer_byte_rate", float("inf"))),
     "Quota consumer_byte_rate must be a finite number"),
    (entry([("user", "a"), ("user", "b")], ("producer_byte_rate", 1.0)),
     "Invalid client quota entity, duplicate entity entry user"),
    (entry([("group", "g")], ("producer_byte_rate", 1.0)),
     "Unhandled client quota entity type: group"),
    (entry([("client-id", "")], ("producer_byte_rate", 1.0)), "Empty client-id not supported"),
    (entry([], ("producer_byte_rate", 1.0)), "Invalid empty client quota entity"),
    (entry([("user", DEFAULT)], ("producer_byte_rate", 1.0)),
     "user name <default> is reserved for the default entity: ask for the default with a "
     "null name"),
    (entry([("ip", "10.0.0.1"), ("user", "a")], ("connection_creation_rate", 1.0)),
     "Invalid quota entity combination, IP entity should not be combined with User or "
     "ClientId"),
    (entry([("ip", "kafka.example.com")], ("connection_creation_rate", 1.0)),
     "kafka.example.com is not a valid IP address (hostnames are not resolved)"),
    (entry([("ip", "fe80::1%eth0")], ("connection_creation_rate", 1.0)),
     "fe80::1%eth0 is not a valid IP address (hostnames are not resolved)"),
    (entry([("ip", "10.0.0.1")], ("connection_creation_rate", 2.5)),
     "connection_creation_rate cannot be a fractional value."),
    (entry([("ip", "10.0.0.1")], ("connection_creation_rate", 3e9)),
     "Proposed value for connection_creation_rate is too large for an INT."),
    (entry([("ip", None)], ("connection_creation_rate", 0.0)),
     "Quota connection_creation_rate must be greater than 0"),
    (entry([("ip", DEFAULT)], ("connection_creation_rate", 1.0)),
     "ip name <default> is reserved for the default entity: ask for the default with a "
     "null name"),
])
def test_an_invalid_entry_fails_alone(broker: Broker, bad: Any, message: str) -> None:
    good = entry([("client-id", "ok")], ("producer_byte_rate", 10.0))
    response = call(broker, ALTER, 1, alter_req(bad, good))
    (_, bad_error, bad_message), (_, good_error, _) = results(response)
    assert (bad_error, bad_message) == (INVALID, message)
    assert good_error == 0
    got = described(call(broker, DESCRIBE, 1, describe_req()))
    assert got == {(("client-id", "ok"),): {"producer_byte_rate": 10.0}}


IP_SETUP = [
    entry([("ip", "10.0.0.1")], ("connection_creation_rate", 2.0)),
    entry([("ip", "::1")], ("connection_creation_rate", 7.0)),
    entry([("ip", None)], ("connection_creation_rate", 50.0)),
    entry([("user", "alice")], ("producer_byte_rate", 1024.0)),
]


@pytest.mark.parametrize(("components", "strict", "expected"), [
    ([("ip", SPECIFIED, None)], True, {(("ip", "10.0.0.1"),), (("ip", "::1"),), (("ip", None),)}),
    ([("ip", EXACT, "10.0.0.1")], True, {(("ip", "10.0.0.1"),)}),
    ([("ip", DEFAULT_MATCH, None)], False, {(("ip", None),)}),
    ([("ip", EXACT, "10.0.0.2")], False, set()),
    # user / client-id filters never find an ip entity
    ([("user", SPECIFIED, None)], False, {(("user", "alice"),)}),
    ([("client-id", SPECIFIED, None)], False, set()),
    # no component: strict finds nothing, not strict finds every entity
    ([], True, set()),
    ([], False, {(("ip", "10.0.0.1"),), (("ip", "::1"),), (("ip", None),),
                 (("user", "alice"),)}),
])
def test_ip_entities_are_altered_and_described(broker: Broker, components: list[Any],
                                               strict: bool, expected: set[Any]) -> None:
    response = call(broker, ALTER, 1, alter_req(*IP_SETUP))
    assert [err for _, err, _ in results(response)] == [0] * len(IP_SETUP)
    got = described(call(broker, DESCRIBE, 1, describe_req(*components, strict=strict)))
    assert set(got) == expected
    assert all(v == {"connection_creation_rate": got[e]["connection_creation_rate"]}
               for e, v in got.items() if e[0][0] == "ip")


def test_ip_quotas_are_stored_under_ips_and_survive_a_restart(tmp_path: Path) -> None:
    b = Broker(str(tmp_path))
    call(b, ALTER, 1, alter_req(*IP_SETUP))
    b.close()
    saved = json.loads((tmp_path / LocalMetadataStore.FILE).read_text())["quotas"]
    assert saved["ips/10.0.0.1"] == {"connection_creation_rate": "2"}
    assert saved["ips/<default>"] == {"connection_creation_rate": "50"}
    again = Broker(str(tmp_path))
    try:
        store = again.services.quota_store
        assert store.load_ip_quotas() == {
            IpQuotaEntity("10.0.0.1"): {"connection_creation_rate": 2.0},
            IpQuotaEntity("::1"): {"connection_creation_rate": 7.0},
            IpQuotaEntity(DEFAULT): {"connection_creation_rate": 50.0}}
        assert store.load() == {QuotaEntity("alice", None): {"producer_byte_rate": 1024.0}}
    finally:
        again.close()


@pytest.mark.parametrize("validate_only", [False, True])
def test_a_key_of_the_other_kind_of_entity_is_an_invalid_request(broker: Broker,
                                                                  validate_only: bool) -> None:
    for bad in (entry([("ip", "10.0.0.1")], ("producer_byte_rate", 1.0)),
                entry([("user", "bob")], ("connection_creation_rate", 1.0))):
        (_, error, message), = results(call(broker, ALTER, 1,
                                            alter_req(bad, validate_only=validate_only)))
        assert error == INVALID and message is not None and \
            message.startswith("Invalid configuration key")
    assert broker.services.quota_store.read_all() == {}


def test_the_key_rules_follow_the_entity_kind() -> None:
    ip, user = IpQuotaEntity("10.0.0.1"), QuotaEntity("bob", None)
    assert parse_ops([("connection_creation_rate", 3.0, False)], ip) == \
        {"connection_creation_rate": 3.0}
    for key, entity in (("producer_byte_rate", ip), ("connection_creation_rate", user),
                        ("request_percentage", ip)):
        with pytest.raises(QuotaRequestError, match=f"Invalid configuration key {key}"):
            parse_ops([(key, 1.0, False)], entity)


def test_ip_watchers_hear_ip_changes_and_client_watchers_do_not(broker: Broker) -> None:
    store = broker.services.quota_store
    assert store.load() == {} and store.load_ip_quotas() == {}
    heard_ip: list[tuple[IpQuotaEntity, QuotaValues]] = []
    heard_client: list[tuple[QuotaEntity, QuotaValues]] = []
    store.watch_ip_quotas(lambda entity, values: heard_ip.append((entity, values)))
    store.watch(lambda entity, values: heard_client.append((entity, values)))
    ip = [("ip", "10.0.0.1")]
    call(broker, ALTER, 1, alter_req(entry(ip, ("connection_creation_rate", 2.0))))
    call(broker, ALTER, 1, alter_req(entry(ip, ("connection_creation_rate", 2.0))))  # same
    call(broker, ALTER, 1, alter_req(entry([("user", "a")], ("producer_byte_rate", 1.0))))
    call(broker, ALTER, 1, alter_req(entry(ip, ("connection_creation_rate", None))))
    e = IpQuotaEntity("10.0.0.1")
    assert heard_ip == [(e, {"connection_creation_rate": 2.0}), (e, {})]
    assert heard_client == [(QuotaEntity("a", None), {"producer_byte_rate": 1.0})]


def test_the_connection_quotas_follow_the_ip_quotas(broker: Broker) -> None:
    """What start_serving wires: the socket server's connection quotas are fed by the
    store's IP watchers (here, attached the same way by hand)."""
    from millrace.broker.connection_quotas import ConnectionQuotas, Refusal
    from millrace.common.time import MockTime

    store = broker.services.quota_store
    q = ConnectionQuotas(broker.services.config, MockTime())
    q.load_ip_rates(store.load_ip_quotas())
    store.watch_ip_quotas(q.update_ip_rate)
    call(broker, ALTER, 1, alter_req(entry([("ip", None)], ("connection_creation_rate", 1.0))))
    # Kafka's quota window (11 x 1 s): a rate of 1 admits a burst of 10
    assert [q.accept("PLAINTEXT", "10.0.0.5") for _ in range(11)] == \
        [None] * 10 + [Refusal("connection_creation_rate", 1)]
    call(broker, ALTER, 1, alter_req(entry([("ip", None)], ("connection_creation_rate", None))))
    assert q.accept("PLAINTEXT", "10.0.0.5") is None


def test_a_fractional_request_percentage_is_fine_and_removal_deletes(broker: Broker) -> None:
    alice = [("user", "alice")]
    call(broker, ALTER, 0, alter_req(entry(alice, ("request_percentage", 0.25),
                                           ("producer_byte_rate", 10.0))))
    call(broker, ALTER, 0, alter_req(entry(alice, ("producer_byte_rate", None))))
    assert described(call(broker, DESCRIBE, 0, describe_req())) == {
        (("user", "alice"),): {"request_percentage": 0.25}}
    # removing the last key removes the entity; removing an absent key is no error
    response = call(broker, ALTER, 0, alter_req(entry(alice, ("request_percentage", None),
                                                      ("consumer_byte_rate", None))))
    assert results(response)[0][1] == 0
    assert described(call(broker, DESCRIBE, 0, describe_req())) == {}


def test_validate_only_writes_nothing_but_still_checks(broker: Broker) -> None:
    response = call(broker, ALTER, 1, alter_req(
        entry([("user", "alice")], ("producer_byte_rate", 1.0)),
        entry([("user", "bob")], ("producer_byte_rate", -1.0)), validate_only=True))
    assert [err for _, err, _ in results(response)] == [0, INVALID]
    assert described(call(broker, DESCRIBE, 1, describe_req())) == {}


# ---------------------------------------------------------------------- storage
def test_quotas_survive_a_restart_and_keep_scram_credentials_apart(tmp_path: Path) -> None:
    b = Broker(str(tmp_path))
    b.services.metadata.set_user_configs("alice", {"SCRAM-SHA-256": "salt=..."})  # type: ignore[attr-defined]
    call(b, ALTER, 1, alter_req(*SETUP))
    before = described(call(b, DESCRIBE, 1, describe_req()))
    b.close()
    saved = json.loads((tmp_path / LocalMetadataStore.FILE).read_text())
    assert saved["quotas"]["users/alice/clients/<default>"] == {"consumer_byte_rate": "8192"}
    assert saved["quotas"]["users/alice"] == {"producer_byte_rate": "1048576",
                                              "request_percentage": "12.5"}
    assert saved["users"]["alice"] == {"SCRAM-SHA-256": "salt=..."}

    again = Broker(str(tmp_path))
    try:
        assert described(call(again, DESCRIBE, 1, describe_req())) == before
        loaded = again.services.quota_store.load()
        assert loaded[QuotaEntity("alice", DEFAULT)] == {"consumer_byte_rate": 8192.0}
        assert loaded[QuotaEntity(None, DEFAULT)] == {"producer_byte_rate": 100.0}
        assert len(loaded) == len(SETUP)
    finally:
        again.close()


def test_names_are_sanitized_in_the_stored_paths(broker: Broker) -> None:
    call(broker, ALTER, 1, alter_req(entry([("user", "CN=a b/c"), ("client-id", "x*")],
                                           ("producer_byte_rate", 5.0))))
    store = broker.services.metadata
    assert list(store.quota_configs()) == ["users/CN%3Da%20b%2Fc/clients/x%2A"]  # type: ignore[attr-defined]
    assert described(call(broker, DESCRIBE, 1, describe_req())) == {
        (("user", "CN=a b/c"), ("client-id", "x*")): {"producer_byte_rate": 5.0}}


def test_watchers_hear_each_change_once(broker: Broker) -> None:
    store = broker.services.quota_store
    assert store.load() == {}
    heard: list[tuple[QuotaEntity, QuotaValues]] = []
    store.watch(lambda entity, values: heard.append((entity, values)))
    alice = [("user", "alice")]
    call(broker, ALTER, 1, alter_req(entry(alice, ("producer_byte_rate", 10.0))))
    call(broker, ALTER, 1, alter_req(entry(alice, ("producer_byte_rate", 10.0))))  # same
    call(broker, ALTER, 1, alter_req(entry(alice, ("producer_byte_rate", 20.0))),
         )
    call(broker, ALTER, 1, alter_req(entry(alice, ("producer_byte_rate", 30.0)),
                                     validate_only=True))
    call(broker, ALTER, 1, alter_req(entry(alice, ("producer_byte_rate", None))))
    a = QuotaEntity("alice", None)
    assert heard == [(a, {"producer_byte_rate": 10.0}), (a, {"producer_byte_rate": 20.0}),
                     (a, {})]


# ---------------------------------------------------------------------- authorization
@pytest.fixture
def secured(tmp_path: Path) -> Any:
    b = Broker(str(tmp_path), **AUTHORIZER, **{"super.users": "User:admin"})
    yield b
    b.close()


@pytest.mark.parametrize("version", VERSIONS)
def test_without_acls_both_apis_answer_31_in_every_slot(secured: Broker, version: int) -> None:
    response = call(secured, ALTER, version, alter_req(*SETUP[:2], entry([("group", "x")])),
                    principal=ALICE)
    assert [(ent, err, msg) for ent, err, msg in results(response)] == [
        ([("user", "alice")], 31, "Cluster authorization failed."),
        ([("user", None)], 31, "Cluster authorization failed."),
        ([("group", "x")], 31, "Cluster authorization failed.")]
    response = call(secured, DESCRIBE, version, describe_req(("group", SPECIFIED, None)),
                    principal=ALICE)
    assert (response.error_code, response.error_message, response.entries) == \
        (31, "Cluster authorization failed.", None)
    assert secured.services.quota_store.read_all() == {}  # nothing written


def test_alter_needs_alter_configs_and_describe_describe_configs(secured: Broker) -> None:
    secured.allow("User:alice", AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER,
                  "kafka-cluster")
    # DescribeConfigs alone: describe works, alter does not (negative control)
    assert described(call(secured, DESCRIBE, 1, describe_req(), principal=ALICE)) == {}
    response = call(secured, ALTER, 1, alter_req(SETUP[0]), principal=ALICE)
    assert results(response)[0][1] == 31
    # AlterConfigs on the Cluster: alter works
    secured.allow("User:alice", AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER,
                  "kafka-cluster")
    response = call(secured, ALTER, 1, alter_req(SETUP[0]), principal=ALICE)
    assert results(response)[0][1] == 0
    assert set(described(call(secured, DESCRIBE, 1, describe_req(), principal=ALICE))) == {
        (("user", "alice"),)}


def test_alter_configs_implies_describe_configs_and_topic_acls_do_not_count(
        secured: Broker) -> None:
    secured.allow("User:alice", AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, "*")
    response = call(secured, DESCRIBE, 1, describe_req(), principal=ALICE)
    assert response.error_code == 31  # configs of topics are not the Cluster's
    secured.allow("User:alice", AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER,
                  "kafka-cluster")
    assert call(secured, DESCRIBE, 1, describe_req(), principal=ALICE).error_code == 0


def test_a_super_user_needs_no_acl(secured: Broker) -> None:
    admin = KafkaPrincipal.user("admin")
    response = call(secured, ALTER, 1, alter_req(SETUP[1]), principal=admin)
    assert results(response)[0][1] == 0
    assert described(call(secured, DESCRIBE, 1, describe_req(), principal=admin)) == {
        (("user", None),): {"consumer_byte_rate": 2048.0}}
