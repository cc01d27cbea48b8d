"""Kafka's Sanitizer: URL-encoding of entity names used as ZooKeeper path segments."""

from __future__ import annotations

import pytest

from millrace.security.sanitizer import desanitize, sanitize


@pytest.mark.parametrize(
    ("name", "sanitized"),
    [
        ("alice", "alice"),
        ("User-1_a.b", "User-1_a.b"),
        ("*", "%2A"),
        ("a b", "a%20b"),
        ("a+b", "a%2Bb"),
        ("CN=a/b,O=c", "CN%3Da%2Fb%2CO%3Dc"),
        ("user@example.com", "user%40example.com"),
        ("~%", "%7E%25"),
        ("caf\u00e9", "caf%C3%A9"),
        ("\u65e5\u672c", "%E6%97%A5%E6%9C%AC"),
        ("\U0001f600", "%F0%9F%98%80"),
        ("<default>", "%3Cdefault%3E"),
        ("", ""),
    ],
)
def test_sanitize_and_back(name: str, sanitized: str) -> None:
    assert sanitize(name) == sanitized
    assert desanitize(sanitized) == name


def test_sanitized_names_are_safe_path_segments() -> None:
    for name in ("a/b", "../x", "*", " ", "a\x00b", "\u00e9/\u00e9"):
        out = sanitize(name)
        assert "/" not in out and "*" not in out and " " not in out and "\x00" not in out
        assert out.isascii()
        assert desanitize(out) == name


def test_desanitize_is_url_decoding() -> None:
    assert desanitize("a+b") == "a b"  # URLDecoder: '+' is a space
    assert desanitize("%2a%c3%a9") == "*\u00e9"  # lower-case hex is accepted
    assert desanitize("\u00e9") == "\u00e9"


@pytest.mark.parametrize("bad", ["%", "%2", "%zz", "a%2", "%C3", "%FF"])
def test_desanitize_rejects_malformed_input(bad: str) -> None:
    with pytest.raises(ValueError):
        desanitize(bad)
