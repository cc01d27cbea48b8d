"""``describe_user_scram_credentials`` / ``alter_user_scram_credentials`` against scripted
brokers (no sockets): the salted password computed client side (never the password on
the wire), alterations refused before sending, the controller and its NOT_CONTROLLER
retry, per-user results with Kafka's exceptions."""

from __future__ import annotations

from typing import Any

import pytest

from millrace.client.admin import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
    _scram,
)
from millrace.client.cluster import Node
from millrace.client.errors import KafkaTimeoutError
from millrace.common.errors import (
    ClusterAuthorizationFailedError,
    DuplicateResourceError,
    Errors,
    KafkaError,
    ResourceNotFoundError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
)
from millrace.protocol import (
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsResponse,
)
from millrace.security.sasl.scram import ScramFormatter
from millrace.security.sasl.scram import ScramMechanism as SaslMechanism
from tests.unit.client.admin.scripted_network import NODE, ScriptedNetwork

DEADLINE = 2_000_000_000_000
NODE1 = Node(1, "broker1", 9093)
SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
A = AlterUserScramCredentialsResponse
D = DescribeUserScramCredentialsResponse


def ok(*users: str, errors: dict[str, tuple[int, str]] | None = None) -> Any:
    errors = errors or {}
    return A(results=[A.AlterUserScramCredentialsResult(
        user=u, error_code=errors.get(u, (0, None))[0], error_message=errors.get(u, (0, None))[1])
        for u in users])


def upsert(user: str, mechanism: ScramMechanism = SHA256, iterations: int = 4096,
           password: str | bytes = "pw", salt: bytes | None = None) -> UserScramCredentialUpsertion:
    return UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, iterations),
                                        password, salt)


def test_upsertions_carry_the_salted_password_not_the_password() -> None:
    seen: list[tuple[Any, Node | None]] = []

    def handle(request: Any, version: int, node: Node | None) -> Any:
        seen.append((request, node))
        return ok("alice", "bob")

    net = ScriptedNetwork({"AlterUserScramCredentials": handle}, nodes=[NODE, NODE1])
    net.controller = NODE1
    result = _scram.alter_user_scram_credentials(net, [
        upsert("alice", SHA256, 8192, "alice-secret", salt=b"NaCl"),
        upsert("alice", SHA512, 4096, b"alice-secret"),
        UserScramCredentialDeletion("bob", SHA512)], DEADLINE)
    assert result.all() == {"alice": None, "bob": None}
    (request, node), = seen
    assert node == NODE1  # the controller
    assert [(d.name, d.mechanism) for d in request.deletions] == [("bob", 2)]
    first, second = request.upsertions
    assert (first.name, first.mechanism, first.iterations, first.salt) == (
        "alice", 1, 8192, b"NaCl")
    assert first.salted_password == ScramFormatter(SaslMechanism.SCRAM_SHA_256).salted_password(
        b"alice-secret", b"NaCl", 8192)
    # a random salt, Kafka-style (base-36 text), and the matching salted password
    assert second.salt.isalnum() and len(second.salt) >= 20 and second.salt != first.salt
    assert second.salted_password == ScramFormatter(SaslMechanism.SCRAM_SHA_512) \
        .salted_password(b"alice-secret", second.salt, 4096)


def test_the_password_is_not_in_the_request_bytes() -> None:
    from millrace.protocol import API, ApiKey

    captured: list[bytes] = []

    def handle(request: Any, version: int, node: Node | None) -> Any:
        captured.append(API[ApiKey.ALTER_USER_SCRAM_CREDENTIALS].request.encode(request, version))
        return ok("alice")

    net = ScriptedNetwork({"AlterUserScramCredentials": handle})
    _scram.alter_user_scram_credentials(net, [upsert("alice", password="hunter2hunter2")],
                                        DEADLINE)
    assert captured and b"hunter2hunter2" not in captured[0]
    assert "hunter2" not in repr(upsert("alice", password="hunter2hunter2"))


def test_client_side_refusals_are_not_sent() -> None:
    sent: list[Any] = []

    def handle(request: Any, version: int, node: Node | None) -> Any:
        sent.append(request)
        return ok(*dict.fromkeys([u.name for u in request.upsertions]
                                 + [d.name for d in request.deletions]))

    net = ScriptedNetwork({"AlterUserScramCredentials": handle})
    result = _scram.alter_user_scram_credentials(net, [
        upsert(""), upsert("nopw", password=""), upsert("unk", ScramMechanism.UNKNOWN),
        UserScramCredentialDeletion("unk2", ScramMechanism.UNKNOWN),
        upsert("good"), UserScramCredentialDeletion("nopw", SHA512)], DEADLINE)
    assert list(result) == ["", "nopw", "unk", "unk2", "good"]
    errors = result.errors()
    assert isinstance(errors[""], UnacceptableCredentialError)
    assert isinstance(errors["nopw"], UnacceptableCredentialError)
    assert "Password must not be empty" in str(errors["nopw"])
    assert isinstance(errors["unk"], UnsupportedSaslMechanismError)
    assert isinstance(errors["unk2"], UnsupportedSaslMechanismError)
    assert result["good"].result() is None
    (request,) = sent
    assert [u.name for u in request.upsertions] == ["good"] and request.deletions == []


def test_nothing_valid_sends_nothing() -> None:
    net = ScriptedNetwork({})
    assert list(_scram.alter_user_scram_credentials(net, [upsert("")], DEADLINE)) == [""]
    assert _scram.alter_user_scram_credentials(net, [], DEADLINE) == {}
    assert net.sent == []


def test_iterations_out_of_bounds_are_left_to_the_broker() -> None:
    def handle(request: Any, version: int, node: Node | None) -> Any:
        assert [(u.iterations, u.salted_password) for u in request.upsertions] == [
            (0, b""), (10**9, b"")]
        return ok("dan", "erin", errors={"dan": (Errors.UNACCEPTABLE_CREDENTIAL,
                                                 "Too few iterations"),
                                         "erin": (Errors.UNACCEPTABLE_CREDENTIAL,
                                                  "Too many iterations")})

    net = ScriptedNetwork({"AlterUserScramCredentials": handle})
    result = _scram.alter_user_scram_credentials(
        net, [upsert("dan", iterations=0), upsert("erin", iterations=10**9)], DEADLINE)
    assert str(result.errors()["erin"]) == ("[Error 93] UNACCEPTABLE_CREDENTIAL: user "
                                            "'erin': Too many iterations")


def test_per_user_errors_and_a_missing_result() -> None:
    net = ScriptedNetwork({"AlterUserScramCredentials": lambda r, v, n: ok(
        "a", "b", errors={"a": (Errors.DUPLICATE_RESOURCE, "A user credential cannot be "
                                                           "altered twice in the same request"),
                          "b": (Errors.RESOURCE_NOT_FOUND, "Attempt to delete a user "
                                                           "credential that does not exist")})})
    result = _scram.alter_user_scram_credentials(net, [
        upsert("a"), upsert("a"), UserScramCredentialDeletion("b", SHA256), upsert("c")],
        DEADLINE)
    errors = result.errors()
    assert isinstance(errors["a"], DuplicateResourceError)
    assert isinstance(errors["b"], ResourceNotFoundError)
    assert type(errors["c"]) is KafkaError and "did not contain a result" in str(errors["c"])


def test_not_controller_refreshes_and_retries_on_the_new_controller() -> None:
    def handle(request: Any, version: int, node: Node | None) -> Any:
        if node != NODE1:
            return ok("alice", errors={"alice": (Errors.NOT_CONTROLLER, "")})
        return ok("alice")

    net = ScriptedNetwork({"AlterUserScramCredentials": handle}, nodes=[NODE, NODE1])
    net.controller_after_refresh = NODE1
    assert _scram.alter_user_scram_credentials(net, [upsert("alice")], DEADLINE).all() == {
        "alice": None}
    assert [node for _, _, node in net.sent] == [NODE, NODE1] and net.refreshes == 1


def test_not_controller_until_the_deadline_is_a_timeout() -> None:
    net = ScriptedNetwork({"AlterUserScramCredentials": lambda r, v, n: ok(
        "alice", errors={"alice": (Errors.NOT_CONTROLLER, "")})})
    with pytest.raises(KafkaTimeoutError, match="altering SCRAM credentials: timed out"):
        _scram.alter_user_scram_credentials(net, [upsert("alice")], net.now() + 1_000)


# ---------------------------------------------------------------------- describe
def described(*users: tuple[str, int, list[tuple[int, int]]], error: int = 0) -> Any:
    r = D.DescribeUserScramCredentialsResult
    return D(error_code=error, error_message="denied" if error else None, results=[
        r(user=u, error_code=code, error_message=None if not code else f"{u}: bad",
          credential_infos=[r.CredentialInfo(mechanism=m, iterations=i) for m, i in infos])
        for u, code, infos in users])


def test_describe_all_sends_an_empty_list() -> None:
    seen: list[Any] = []

    def handle(request: Any, version: int, node: Node | None) -> Any:
        seen.append(request.users)
        return described(("alice", 0, [(1, 8192), (2, 4096)]), ("bob", 0, [(3, 4096)]))

    net = ScriptedNetwork({"DescribeUserScramCredentials": handle})
    result = _scram.describe_user_scram_credentials(net, None, DEADLINE)
    assert seen == [[]]
    assert result.all() == {
        "alice": UserScramCredentialsDescription("alice", [
            ScramCredentialInfo(SHA256, 8192), ScramCredentialInfo(SHA512, 4096)]),
        "bob": UserScramCredentialsDescription("bob", [
            ScramCredentialInfo(ScramMechanism.UNKNOWN, 4096)])}


def test_describe_named_users() -> None:
    net = ScriptedNetwork({"DescribeUserScramCredentials": lambda r, v, n: described(
        ("alice", 0, [(1, 4096)]), ("zed", Errors.RESOURCE_NOT_FOUND, []))})
    result = _scram.describe_user_scram_credentials(net, ["alice", "zed", "ghost"], DEADLINE)
    assert list(result) == ["alice", "zed", "ghost"]
    assert result["alice"].result().credential_infos == [ScramCredentialInfo(SHA256, 4096)]
    errors = result.errors()
    assert isinstance(errors["zed"], ResourceNotFoundError)
    assert "did not contain a result" in str(errors["ghost"])
    with pytest.raises(ResourceNotFoundError):
        result.all()


def test_describe_top_level_error_fails_the_call() -> None:
    net = ScriptedNetwork({"DescribeUserScramCredentials": lambda r, v, n: described(
        error=Errors.CLUSTER_AUTHORIZATION_FAILED)})
    with pytest.raises(ClusterAuthorizationFailedError, match="denied"):
        _scram.describe_user_scram_credentials(net, None, DEADLINE)


def test_scram_mechanism_names() -> None:
    assert [m.mechanism_name for m in ScramMechanism] == [
        "UNKNOWN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert ScramMechanism.from_mechanism_name("scram-sha-512") is SHA512
    assert ScramMechanism.from_mechanism_name("UNKNOWN") is ScramMechanism.UNKNOWN
    assert ScramMechanism.from_mechanism_name("PLAIN") is ScramMechanism.UNKNOWN
    assert ScramMechanism.from_type(2) is SHA512 and ScramMechanism.from_type(9) is \
        ScramMechanism.UNKNOWN
