"""The sasl.jaas.config parser: Kafka's syntax, escapes, and errors that name the key."""

from __future__ import annotations

import pytest

from millrace.common.errors import ConfigError
from millrace.security.jaas import (
    JaasConfig,
    login_credentials,
    parse_jaas_config,
    plain_users,
)

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
BROKER = (
    f'{PLAIN_MODULE} required username="admin" password="admin-secret" '
    'user_admin="admin-secret" user_alice="alice-secret";'
)


def test_broker_plain_config() -> None:
    jaas = parse_jaas_config(BROKER)
    assert jaas == JaasConfig(
        PLAIN_MODULE,
        "required",
        {
            "username": "admin",
            "password": "admin-secret",
            "user_admin": "admin-secret",
            "user_alice": "alice-secret",
        },
    )
    assert plain_users(jaas) == {"admin": "admin-secret", "alice": "alice-secret"}
    assert login_credentials(jaas) == ("admin", "admin-secret")


def test_single_option_like_the_test_config() -> None:
    jaas = parse_jaas_config(f'{PLAIN_MODULE} required user_alice="alice-secret";')
    assert jaas.login_module == PLAIN_MODULE
    assert plain_users(jaas) == {"alice": "alice-secret"}
    assert login_credentials(jaas) is None


def test_no_options() -> None:
    jaas = parse_jaas_config(f"{SCRAM_MODULE} optional;")
    assert jaas == JaasConfig(SCRAM_MODULE, "optional", {})


@pytest.mark.parametrize("flag", ["required", "REQUISITE", "Sufficient", "optional"])
def test_control_flags_are_case_insensitive(flag: str) -> None:
    assert parse_jaas_config(f"M {flag};").control_flag == flag.lower()


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        (r'"a\"b"', 'a"b'),
        (r'"back\\slash"', "back\\slash"),
        (r'"new\nline\ttab"', "new\nline\ttab"),
        (r'"\q"', "q"),
        (r'"semi;colon = and, comma"', "semi;colon = and, comma"),
        ('"sp ace"', "sp ace"),
        ('""', ""),
        ("'single \"quoted\"'", 'single "quoted"'),
        (r"'it\'s'", "it's"),
        ('"p\u00e4ss\u00f6rd"', "p\u00e4ss\u00f6rd"),
        ("bare-word_1.2$", "bare-word_1.2$"),
    ],
)
def test_option_values(literal: str, value: str) -> None:
    jaas = parse_jaas_config(f"{SCRAM_MODULE} required password={literal};")
    assert jaas.options == {"password": value}


def test_whitespace_newlines_and_comments() -> None:
    text = f"""
        // the client identity
        {SCRAM_MODULE}
            required   /* flag */
            username = "alice"
            password="alice-secret" ;   // done
    """
    jaas = parse_jaas_config(text)
    assert jaas.control_flag == "required"
    assert login_credentials(jaas) == ("alice", "alice-secret")


def test_plain_users_ignores_other_options() -> None:
    jaas = parse_jaas_config(
        'M required user_="x" username="u" password="p" user_bob="b" users="z";'
    )
    assert plain_users(jaas) == {"bob": "b"}


@pytest.mark.parametrize(
    ("text", "what"),
    [
        (f'{PLAIN_MODULE} required user_alice="alice-secret"', "missing ';'"),
        (f"{PLAIN_MODULE} required", "missing ';'"),
        (f'{PLAIN_MODULE} user_alice="alice-secret";', "control flag"),
        (f'{PLAIN_MODULE} mandatory user_alice="alice-secret";', "control flag"),
        (f"{PLAIN_MODULE};", "control flag"),
        (f"{PLAIN_MODULE} required; {SCRAM_MODULE} required;", "exactly one login module"),
        (f"{PLAIN_MODULE} required;;", "exactly one login module"),
        (f'{PLAIN_MODULE} required user_alice="alice-secret;', "unterminated quoted value"),
        (f"{PLAIN_MODULE} required user_alice;", "expected '='"),
        (f"{PLAIN_MODULE} required user_alice=;", "expected a value"),
        (f'{PLAIN_MODULE} required ="x";', "expected an option name"),
        (f'{PLAIN_MODULE} required a="1" a="2";', "duplicate option"),
        (f"{PLAIN_MODULE} required /* open", "unterminated /* comment"),
        ("", "no login module"),
        ("   // only a comment", "no login module"),
        ('"quoted" required;', "login module class name"),
    ],
)
def test_errors_name_the_key_and_the_position(text: str, what: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_jaas_config(text)
    message = str(info.value)
    assert "sasl.jaas.config" in message
    assert what in message
    assert " at position " in message


def test_error_names_the_given_key_and_position() -> None:
    key = "listener.name.sasl_ssl.plain.sasl.jaas.config"
    text = 'M required a="1" b'
    with pytest.raises(ConfigError) as info:
        parse_jaas_config(text, key=key)
    assert str(info.value).startswith(f"Invalid value for {key}: ")
    assert str(info.value).endswith(f"at position {len(text)}")


def test_errors_do_not_echo_passwords() -> None:
    for text in (
        'M required password="hunter2-secret"',
        'M required password="hunter2-secret" x',
        'M required password="hunter2-secret"; N required;',
    ):
        with pytest.raises(ConfigError) as info:
            parse_jaas_config(text)
        assert "hunter2" not in str(info.value)


def test_every_proper_prefix_and_trailing_garbage_fail() -> None:
    for end in range(len(BROKER)):
        with pytest.raises(ConfigError):
            parse_jaas_config(BROKER[:end])
    assert parse_jaas_config(BROKER + "  \n") == parse_jaas_config(BROKER)
    for garbage in ("x", ";", '"', "user_x=1;"):
        with pytest.raises(ConfigError):
            parse_jaas_config(BROKER + garbage)
