"""The console's security page: ACLs, SCRAM users and client quotas, read and changed with
the admin APIs (DescribeAcls, DescribeUserScramCredentials, AlterUserScramCredentials,
DescribeClientQuotas), so the cluster's authorizer decides what the console's credentials
may see and do.  Each part is read on its own: a part the authorizer refuses comes back as
``{"error": ..., "denied": true}`` beside the parts that could be read, and a cluster
without an authorizer says so (SECURITY_DISABLED) for its ACLs only.

A password travels only from the request body into ``UserScramCredentialUpsertion``,
which salts and hashes it before it leaves the process; it is never logged or returned.

Thread ownership: the console's worker threads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from millrace.client.admin import (
    KafkaAdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from millrace.common.errors import KafkaError, MillraceError
from millrace.console.messages import BadRequest

T = TypeVar("T")
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
TIMEOUT_MS = 10_000


def error_json(error: MillraceError) -> dict[str, Any]:
    if isinstance(error, KafkaError):
        text = error.name if error.message == error.name else f"{error.name}: {error.message}"
        return {"error": text, "denied": error.name.endswith("AUTHORIZATION_FAILED")}
    return {"error": str(error) or type(error).__name__, "denied": False}


def _part(read: Callable[[], T]) -> tuple[T | None, dict[str, Any] | None]:
    try:
        return read(), None
    except MillraceError as e:
        return None, error_json(e)


def security_view(admin: KafkaAdminClient) -> dict[str, Any]:
    acls, acls_error = _part(lambda: _acls(admin))
    users, users_error = _part(lambda: _users(admin))
    quotas, quotas_error = _part(lambda: _quotas(admin))
    return {"acls": acls, "acls_error": acls_error, "users": users,
            "users_error": users_error, "quotas": quotas, "quotas_error": quotas_error}


def _acls(admin: KafkaAdminClient) -> list[dict[str, Any]]:
    rows = [{"resource_type": b.pattern.resource_type.name, "resource_name": b.pattern.name,
             "pattern_type": b.pattern.pattern_type.name, "principal": b.entry.principal,
             "host": b.entry.host, "operation": b.entry.operation.name,
             "permission": b.entry.permission_type.name}
            for b in admin.describe_acls(timeout_ms=TIMEOUT_MS)]
    return sorted(rows, key=lambda r: (r["resource_type"], r["resource_name"], r["principal"],
                                       r["operation"]))


def _users(admin: KafkaAdminClient) -> list[dict[str, Any]]:
    users = []
    for name, future in sorted(admin.describe_user_scram_credentials(
            timeout_ms=TIMEOUT_MS).items()):
        try:
            description = future.result()
        except KafkaError as e:
            if e.name == "RESOURCE_NOT_FOUND":   # deleted since the listing
                continue
            raise
        users.append({"name": name, "mechanisms": [
            {"mechanism": info.mechanism.mechanism_name, "iterations": info.iterations}
            for info in description.credential_infos]})
    return users


def _quotas(admin: KafkaAdminClient) -> list[dict[str, Any]]:
    rows = [{"entity": sorted([entity_type, name] for entity_type, name in entity.items()),
             "values": dict(sorted(values.items()))}
            for entity, values in admin.describe_client_quotas(timeout_ms=TIMEOUT_MS).items()]
    return sorted(rows, key=lambda r: str(r["entity"]))


def _mechanism(raw: Any) -> ScramMechanism:
    if raw not in MECHANISMS:
        raise BadRequest(f"mechanism must be one of {', '.join(MECHANISMS)}, got {raw!r}")
    return ScramMechanism.from_mechanism_name(raw)


def create_user(admin: KafkaAdminClient, body: Mapping[str, Any]) -> None:
    name, password = body.get("name"), body.get("password")
    if not isinstance(name, str) or not name:
        raise BadRequest("name is required")
    if not isinstance(password, str) or not password:
        raise BadRequest("password is required")
    mechanism = _mechanism(body.get("mechanism", "SCRAM-SHA-256"))
    iterations = body.get("iterations", 4096)
    if isinstance(iterations, str) and iterations.strip().isdigit():
        iterations = int(iterations)
    if not isinstance(iterations, int) or isinstance(iterations, bool):
        raise BadRequest("iterations must be an integer")
    upsert = UserScramCredentialUpsertion(name, ScramCredentialInfo(mechanism, iterations),
                                          password)
    admin.alter_user_scram_credentials([upsert], timeout_ms=TIMEOUT_MS)[name].result()


def delete_user(admin: KafkaAdminClient, name: str, mechanism: str) -> None:
    deletion = UserScramCredentialDeletion(name, _mechanism(mechanism))
    admin.alter_user_scram_credentials([deletion], timeout_ms=TIMEOUT_MS)[name].result()
