"""KafkaPrincipal and SecurityProtocol."""

from __future__ import annotations

import pytest

from millrace.common.errors import ConfigError
from millrace.security.kafka_principal import ANONYMOUS, KafkaPrincipal, SecurityProtocol


def test_principal_string_form_round_trips() -> None:
    alice = KafkaPrincipal("User", "alice")
    assert str(alice) == "User:alice"
    assert KafkaPrincipal.parse("User:alice") == alice
    assert KafkaPrincipal.user("alice") == alice
    assert str(ANONYMOUS) == "User:ANONYMOUS"
    assert KafkaPrincipal.parse(str(ANONYMOUS)) == ANONYMOUS


def test_name_keeps_everything_after_the_first_colon() -> None:
    p = KafkaPrincipal.parse("User:CN=a:b,O=c")
    assert (p.principal_type, p.name) == ("User", "CN=a:b,O=c")
    assert KafkaPrincipal.parse("Group:") == KafkaPrincipal("Group", "")


@pytest.mark.parametrize("text", ["alice", "", ":alice"])
def test_parse_rejects_text_without_a_type(text: str) -> None:
    with pytest.raises(ConfigError, match="principalType:principalName"):
        KafkaPrincipal.parse(text)
    with pytest.raises(ValueError):
        KafkaPrincipal.parse(text)


def test_principals_are_hashable_values() -> None:
    same = {KafkaPrincipal("User", "a"), KafkaPrincipal.parse("User:a")}
    assert same == {KafkaPrincipal.user("a")}
    with pytest.raises(AttributeError):
        ANONYMOUS.name = "x"  # type: ignore[misc]


def test_security_protocol_ids_and_flags() -> None:
    assert [(p.name, p.value) for p in SecurityProtocol] == [
        ("PLAINTEXT", 0),
        ("SSL", 1),
        ("SASL_PLAINTEXT", 2),
        ("SASL_SSL", 3),
    ]
    assert [p.uses_tls for p in SecurityProtocol] == [False, True, False, True]
    assert [p.uses_sasl for p in SecurityProtocol] == [False, False, True, True]


@pytest.mark.parametrize(
    ("name", "protocol"),
    [
        ("PLAINTEXT", SecurityProtocol.PLAINTEXT),
        ("sasl_ssl", SecurityProtocol.SASL_SSL),
        ("Sasl_Plaintext", SecurityProtocol.SASL_PLAINTEXT),
        (" SSL ", SecurityProtocol.SSL),
    ],
)
def test_security_protocol_parse(name: str, protocol: SecurityProtocol) -> None:
    assert SecurityProtocol.parse(name) is protocol


@pytest.mark.parametrize("name", ["TLS", "SASL-SSL", "", "plaintext2"])
def test_security_protocol_parse_names_the_bad_value(name: str) -> None:
    with pytest.raises(ConfigError) as info:
        SecurityProtocol.parse(name)
    assert repr(name) in str(info.value)
    assert "SASL_SSL" in str(info.value)
