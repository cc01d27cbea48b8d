"""DescribeUserScramCredentials and AlterUserScramCredentials through the handlers of one
in-process node (the rules of Kafka's ``{Alter,Describe}UserScramCredentialsRequestTest``):
per-user errors, one result per user, never a salt or key on the wire, the credential
derived from the salted password, the cache updated and the store written."""

from __future__ import annotations

import asyncio
import dataclasses
from types import SimpleNamespace
from typing import Any

from millrace.broker.context import RequestContext
from millrace.broker.handlers import HANDLERS
from millrace.common.errors import Errors
from millrace.protocol import (
    API,
    AlterUserScramCredentialsRequest,
    ApiKey,
    DescribeUserScramCredentialsRequest,
    RequestHeader,
)
from millrace.security.sasl.scram import ScramFormatter, ScramMechanism
from tests.unit.broker.brokergen import Broker

DESCRIBE, ALTER = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS
SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
SALT = b"0123456789abcdef"
OK, NOT_FOUND, DUPLICATE, UNACCEPTABLE, UNSUPPORTED = (
    Errors.NONE, Errors.RESOURCE_NOT_FOUND, Errors.DUPLICATE_RESOURCE,
    Errors.UNACCEPTABLE_CREDENTIAL, Errors.UNSUPPORTED_SASL_MECHANISM)


def upsert(user: str, mechanism: int = 1, iterations: int = 4096,
           password: str = "secret") -> Any:
    m = ScramMechanism.from_type(mechanism) or SHA256
    salted = ScramFormatter(m).salted_password(password.encode(), SALT, max(iterations, 1))
    return AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
        name=user, mechanism=mechanism, iterations=iterations, salt=SALT,
        salted_password=salted)


def delete(user: str, mechanism: int = 1) -> Any:
    return AlterUserScramCredentialsRequest.ScramCredentialDeletion(name=user,
                                                                    mechanism=mechanism)


def alter_req(*items: Any) -> Any:
    cls = AlterUserScramCredentialsRequest
    return cls(deletions=[i for i in items if isinstance(i, cls.ScramCredentialDeletion)],
               upsertions=[i for i in items if isinstance(i, cls.ScramCredentialUpsertion)])


def describe_req(*users: str, null: bool = False) -> Any:
    cls = DescribeUserScramCredentialsRequest
    return cls(users=None if null else [cls.UserName(name=u) for u in users])


def alter(broker: Broker, *items: Any) -> list[tuple[str, int, str | None]]:
    got = asyncio.run(broker.call(ALTER, 0, alter_req(*items)))
    return [(r.user, r.error_code, r.error_message) for r in got.results]


def codes(results: list[tuple[str, int, str | None]]) -> list[tuple[str, int]]:
    return [(user, code) for user, code, _ in results]


def describe(broker: Broker, *users: str, null: bool = False) -> list[Any]:
    got = asyncio.run(broker.call(DESCRIBE, 0, describe_req(*users, null=null)))
    assert (got.error_code, got.error_message) == (0, None)
    return [(r.user, r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
            for r in got.results]


# ---------------------------------------------------------------------- alter + describe
def test_alter_then_describe(broker: Broker) -> None:
    assert alter(broker, upsert("alice", 1, 8192), upsert("alice", 2, 4096),
                 upsert("bob", 2, 16384)) == [("alice", 0, None), ("bob", 0, None)]
    assert describe(broker, null=True) == [
        ("alice", 0, [(1, 8192), (2, 4096)]), ("bob", 0, [(2, 16384)])]
    assert describe(broker) == describe(broker, null=True)  # empty list = all users
    assert describe(broker, "bob", "alice") == [
        ("bob", 0, [(2, 16384)]), ("alice", 0, [(1, 8192), (2, 4096)])]


def test_the_broker_derives_the_stored_credential_and_caches_it(tmp_path: Any) -> None:
    broker = Broker(str(tmp_path / "logs"), **{"sasl.enabled.mechanisms": "SCRAM-SHA-256"})
    try:
        cache = broker.services.credentials
        alter(broker, upsert("alice", 1, 4096, "alice-secret"), upsert("alice", 2))
        expected = ScramFormatter(SHA256).generate_credential("alice-secret", 4096, SALT)
        assert cache.store.user_configs("alice")["SCRAM-SHA-256"] == \
            expected.to_kafka_string()
        assert cache.scram_credential("SCRAM-SHA-256", "alice") == expected
        assert cache.scram_credential("SCRAM-SHA-512", "alice") is None  # not enabled
        alter(broker, delete("alice", 1))
        assert cache.scram_credential("SCRAM-SHA-256", "alice") is None
    finally:
        broker.close()


def test_an_upsertion_replaces_and_a_deletion_removes(broker: Broker) -> None:
    alter(broker, upsert("alice", 1, 4096), upsert("alice", 2, 4096))
    assert codes(alter(broker, upsert("alice", 1, 10000), delete("alice", 2))) == [
        ("alice", OK)]
    assert describe(broker, "alice") == [("alice", 0, [(1, 10000)])]
    assert codes(alter(broker, delete("alice", 1))) == [("alice", OK)]
    assert describe(broker, null=True) == []
    assert describe(broker, "alice") == [("alice", NOT_FOUND, [])]


def test_quota_keys_of_the_user_survive_credential_changes(broker: Broker) -> None:
    store = broker.services.credentials.store
    store.set_user_configs("alice", {"producer_byte_rate": "1024"})
    assert describe(broker, null=True) == []  # a user with only quotas is not listed
    alter(broker, upsert("alice"))
    alter(broker, delete("alice"))
    assert store.user_configs("alice") == {"producer_byte_rate": "1024"}


def test_credentials_survive_a_restart(broker: Broker, tmp_path: Any) -> None:
    alter(broker, upsert("alice", 2, 5000))
    broker.close()
    again = Broker(str(tmp_path / "logs"))
    try:
        assert describe(again, "alice") == [("alice", 0, [(2, 5000)])]
    finally:
        again.close()


# ---------------------------------------------------------------------- alter errors
def test_alter_nothing_answers_nothing(broker: Broker) -> None:
    assert alter(broker) == []


def test_empty_user_name(broker: Broker) -> None:
    assert alter(broker, upsert("")) == [("", UNACCEPTABLE, "Username must not be empty")]
    assert alter(broker, delete("")) == [("", UNACCEPTABLE, "Username must not be empty")]


def test_unknown_mechanism(broker: Broker) -> None:
    for mechanism in (0, 3, -1):
        assert alter(broker, upsert("alice", mechanism)) == [
            ("alice", UNSUPPORTED, "Unknown SCRAM mechanism")]
        assert alter(broker, delete("alice", mechanism)) == [
            ("alice", UNSUPPORTED, "Unknown SCRAM mechanism")]


def test_iteration_bounds(broker: Broker) -> None:
    assert alter(broker, upsert("a", 1, 4095), upsert("b", 2, 16385),
                 upsert("c", 1, 4096), upsert("d", 2, 16384)) == [
        ("a", UNACCEPTABLE, "Too few iterations"), ("b", UNACCEPTABLE, "Too many iterations"),
        ("c", OK, None), ("d", OK, None)]


def test_the_same_thing_twice(broker: Broker) -> None:
    message = "A user credential cannot be altered twice in the same request"
    assert alter(broker, upsert("alice"), upsert("alice"), upsert("bob")) == [
        ("alice", DUPLICATE, message), ("bob", OK, None)]
    assert alter(broker, delete("bob"), upsert("bob")) == [("bob", DUPLICATE, message)]
    # different mechanisms of one user are fine
    assert codes(alter(broker, upsert("carol", 1), upsert("carol", 2))) == [("carol", OK)]


def test_delete_of_a_missing_credential(broker: Broker) -> None:
    alter(broker, upsert("alice", 1))
    assert alter(broker, delete("alice", 2), upsert("alice", 1, 9000), delete("zed")) == [
        ("alice", NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        ("zed", NOT_FOUND, "Attempt to delete a user credential that does not exist")]
    # a failing user changes nothing, not even its valid upsertion
    assert describe(broker, "alice") == [("alice", 0, [(1, 4096)])]


def test_a_failing_user_leaves_the_others_alone(broker: Broker) -> None:
    # one result per user, in the order the request first names them
    assert codes(alter(broker, upsert("", 1), upsert("ok"), upsert("few", 1, 10))) == [
        ("", UNACCEPTABLE), ("ok", OK), ("few", UNACCEPTABLE)]
    assert [u for u, _, _ in describe(broker, null=True)] == ["ok"]


# ---------------------------------------------------------------------- describe errors
def test_describe_errors(broker: Broker) -> None:
    alter(broker, upsert("alice"))
    got = asyncio.run(broker.call(DESCRIBE, 0, describe_req("", "bob", "alice", "alice")))
    assert [(r.user, r.error_code, r.error_message) for r in got.results] == [
        ("", NOT_FOUND, "Cannot describe SCRAM credentials for empty username"),
        ("bob", NOT_FOUND, "Attempt to describe a user credential that does not exist: bob"),
        ("alice", DUPLICATE, "Cannot describe SCRAM credentials for the same user twice in "
                             "a single request: alice")]


def test_describe_never_carries_salt_or_keys(broker: Broker) -> None:
    alter(broker, upsert("alice", 1, 4096, "alice-secret"))
    api = API[DESCRIBE]
    response = asyncio.run(broker.call(DESCRIBE, 0, describe_req(null=True)))
    assert [r.user for r in response.results] == ["alice"]
    wire = api.response.encode(response, 0)
    for secret in (SALT, ScramFormatter(SHA256).generate_credential(
            "alice-secret", 4096, SALT).stored_key):
        assert secret not in wire


# ---------------------------------------------------------------------- cluster: controller
def _cluster_ctx(broker: Broker, key: int, controller: Any) -> RequestContext:
    services = SimpleNamespace(**{f.name: getattr(broker.services, f.name)
                                  for f in dataclasses.fields(broker.services)})
    services.cluster = SimpleNamespace(controller=controller)
    return RequestContext(RequestHeader(key, 0, 1, "test"), API[key], "127.0.0.1", 1,
                          services)  # type: ignore[arg-type]


def test_only_the_active_controller_alters(broker: Broker) -> None:
    request = alter_req(upsert("alice"), delete("bob"), upsert("bob", 2))
    for controller in (None, SimpleNamespace(is_active=False)):
        got = asyncio.run(HANDLERS[ALTER](_cluster_ctx(broker, ALTER, controller), request))
        assert [(r.user, r.error_code) for r in got.results] == [
            ("bob", Errors.NOT_CONTROLLER), ("alice", Errors.NOT_CONTROLLER)]
    assert broker.services.credentials.store.users_with_configs() == []
    got = asyncio.run(HANDLERS[ALTER](
        _cluster_ctx(broker, ALTER, SimpleNamespace(is_active=True)),
        alter_req(upsert("alice"))))
    assert [(r.user, r.error_code) for r in got.results] == [("alice", 0)]
    # any broker describes
    got = asyncio.run(HANDLERS[DESCRIBE](_cluster_ctx(broker, DESCRIBE, None),
                                         describe_req("alice")))
    assert [(r.user, r.error_code) for r in got.results] == [("alice", 0)]


def test_both_apis_are_advertised(broker: Broker) -> None:
    advertised = broker.services.api_versions.advertised
    assert advertised[DESCRIBE] == (0, 0) and advertised[ALTER] == (0, 0)
