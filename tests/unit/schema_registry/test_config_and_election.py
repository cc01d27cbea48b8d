"""RegistryConfig's checks (one line naming the setting) and the leader choice of the
``sr`` group protocol, without sockets."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from millrace.common.errors import ConfigError
from millrace.schema_registry.leader import Identity, SchemaRegistryCoordinator
from millrace.schema_registry.server import RegistryConfig

BOOT = {"kafkastore.bootstrap.servers": "127.0.0.1:9092"}


def test_defaults_and_client_settings_pass_through() -> None:
    c = RegistryConfig({**BOOT, "kafkastore.security.protocol": "SASL_SSL",
                        "kafkastore.sasl.mechanism": "SCRAM-SHA-512"})
    assert (c.scheme, c.host, c.port, c.topic, c.group_id, c.level) == (
        "http", "127.0.0.1", 8081, "_schemas", "schema-registry", "BACKWARD")
    assert c.url == "http://127.0.0.1:8081"
    assert c.clients == {"bootstrap.servers": "127.0.0.1:9092",
                         "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"}
    assert c.replication_factor is None and c.eligible


@pytest.mark.parametrize("props, message", [
    ({}, "kafkastore.bootstrap.servers is required"),
    ({**BOOT, "listeners": "ftp://x:1"}, "listeners"),
    ({**BOOT, "listeners": "http://127.0.0.1"}, "listeners"),
    ({**BOOT, "schema.compatibility.level": "sideways"}, "schema.compatibility.level"),
    ({**BOOT, "kafkastore.timeout.ms": "soon"}, "kafkastore.timeout.ms"),
    ({**BOOT, "authentication.method": "DIGEST"}, "authentication.method"),
    ({**BOOT, "authentication.method": "BASIC"}, "authentication.jaas.config"),
    ({**BOOT, "schema.registry.gropu.id": "x"}, "schema.registry.gropu.id"),
])
def test_bad_settings_are_one_line_naming_the_setting(props: dict[str, str],
                                                      message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RegistryConfig(props)


def member(member_id: str, identity: Identity | None, raw: bytes | None = None
           ) -> SimpleNamespace:
    metadata = raw if raw is not None else json.dumps(identity.to_json()).encode()  # type: ignore[union-attr]
    return SimpleNamespace(member_id=member_id, metadata=metadata)


def coordinator(last: Identity | None = None) -> SchemaRegistryCoordinator:
    c = SchemaRegistryCoordinator.__new__(SchemaRegistryCoordinator)
    c.group_id, c.last_leader = "schema-registry", last
    return c


def decode(assignments: dict[str, bytes]) -> set[tuple[Any, int]]:
    return {(json.loads(v)["leader"], json.loads(v)["error"]) for v in assignments.values()}


def test_the_leader_is_the_first_eligible_url_and_stays_while_it_is_a_member() -> None:
    a, b = Identity("127.0.0.1", 8081), Identity("127.0.0.1", 8082)
    ineligible = Identity("127.0.0.1", 8080, leader_eligibility=False)
    members = [member("m-b", b), member("m-a", a), member("m-x", ineligible)]
    assert decode(coordinator().perform_assignment("m-b", "v0", members)) == {("m-a", 0)}
    # the current leader keeps the role although another URL sorts first
    assert decode(coordinator(last=b).perform_assignment("m-b", "v0", members)) == {("m-b", 0)}
    # a member whose metadata does not parse is never chosen, and fails nothing
    broken = [member("m-z", None, b"{not json"), member("m-b", b)]
    assert decode(coordinator().perform_assignment("m-b", "v0", broken)) == {("m-b", 0)}


def test_no_eligible_member_is_an_error_assignment_and_nobody_leads() -> None:
    told: list[tuple[Identity | None, bool]] = []
    c = coordinator()
    c.on_assignment = lambda leader, me: told.append((leader, me))
    members = [member("m-x", Identity("h", 1, leader_eligibility=False))]
    out = c.perform_assignment("m-x", "v0", members)
    assert decode(out) == {(None, 1)}
    c.on_join_complete(1, "m-x", "v0", out["m-x"])
    assert told == [(None, False)]
    c.on_join_complete(2, "m-x", "v0", b"garbage")
    assert told[-1] == (None, False)
