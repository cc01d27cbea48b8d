"""HTTP basic credentials against the broker's SASL users
(``millrace.broker.security.basic_auth``): the header parser on malformed input, PLAIN
users, SCRAM credentials made as the broker stores them (``ScramFormatter``), unknown
users, the success cache, and the password never reaching a log."""

from __future__ import annotations

import asyncio
import base64
import logging

import pytest

from millrace.broker.security import basic_auth
from millrace.broker.security.basic_auth import MAX_HEADER, HttpBasicAuthenticator, parse_basic
from millrace.security.sasl.scram import ScramCredential, ScramFormatter, ScramMechanism

PLAIN = {"admin": "admin-secret", "alice": "alice-secret"}


def basic(user: str, password: str, scheme: str = "Basic") -> str:
    return f"{scheme} " + base64.b64encode(f"{user}:{password}".encode()).decode()


def run(auth: HttpBasicAuthenticator, header: str | None) -> str | None:
    return asyncio.run(auth.authenticate(header))


# ------------------------------------------------------------------ parse_basic
def test_a_well_formed_header_gives_user_and_password() -> None:
    assert parse_basic(basic("alice", "alice-secret")) == ("alice", "alice-secret")
    assert parse_basic(basic("alice", "a:b:c")) == ("alice", "a:b:c")  # colons in it
    assert parse_basic(basic("alice", "")) == ("alice", "")
    assert parse_basic(basic("ålice", "pässword")) == ("ålice", "pässword")  # UTF-8
    assert parse_basic(basic("alice", "x", scheme="basic")) == ("alice", "x")
    assert parse_basic(basic("alice", "x", scheme="BASIC")) == ("alice", "x")


@pytest.mark.parametrize("header", [
    None,
    "",
    "Basic",
    "Basic ",
    "Basic !!!not-base64!!!",
    "Basic YWxpY2U",  # bad padding
    "Basic " + base64.b64encode(b"alice-no-colon").decode(),
    "Basic " + base64.b64encode(b":password-without-user").decode(),
    "Basic " + base64.b64encode(b"\xff\xfe:not-utf8").decode(),
    "Basic w6lsaWNlOng=é",  # a non-ASCII character in the token
    "Basic ÿÿÿÿ",
    "Bearer " + base64.b64encode(b"alice:alice-secret").decode(),
    "Digest username=\"alice\"",
    base64.b64encode(b"alice:alice-secret").decode(),  # no scheme
    "Basic " + base64.b64encode(b"alice:" + b"x" * MAX_HEADER).decode(),  # oversize
])
def test_a_malformed_header_is_none_never_an_exception(header: str | None) -> None:
    assert parse_basic(header) is None


def test_the_size_limit_is_on_the_whole_header() -> None:
    fits = basic("a", "p" * 700)
    assert len(fits) <= MAX_HEADER and parse_basic(fits) == ("a", "p" * 700)
    over = basic("a", "p" * 800)
    assert len(over) > MAX_HEADER and parse_basic(over) is None


# ------------------------------------------------------------------ PLAIN users
def test_plain_users_with_their_password_and_no_other() -> None:
    auth = HttpBasicAuthenticator(PLAIN, None)
    assert run(auth, basic("alice", "alice-secret")) == "alice"
    assert run(auth, basic("admin", "admin-secret")) == "admin"
    assert run(auth, basic("alice", "admin-secret")) is None  # another user's password
    assert run(auth, basic("alice", "alice-secre")) is None
    assert run(auth, basic("alice", "alice-secret ")) is None
    assert run(auth, basic("Alice", "alice-secret")) is None  # names are case-sensitive
    assert run(auth, basic("mallory", "alice-secret")) is None  # unknown user
    assert run(auth, basic("mallory", "")) is None
    assert run(auth, None) is None
    assert run(auth, "Basic %%%") is None


# ------------------------------------------------------------------ SCRAM users
def scram_store(users: dict[tuple[str, str], str], iterations: int = 4096
                ) -> dict[tuple[str, str], ScramCredential]:
    """(mechanism name, user) -> credential, generated as the broker stores one."""
    out = {}
    for (mechanism_name, user), password in users.items():
        mechanism = ScramMechanism.from_name(mechanism_name)
        assert mechanism is not None
        out[(mechanism_name, user)] = ScramFormatter(mechanism).generate_credential(
            password, iterations)
    return out


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_scram_credential_accepts_the_password_it_was_made_from(mechanism: str) -> None:
    store = scram_store({(mechanism, "carol"): "carol-secret"})
    asked: list[tuple[str, str]] = []

    def lookup(name: str, user: str) -> ScramCredential | None:
        asked.append((name, user))
        return store.get((name, user))

    auth = HttpBasicAuthenticator({}, lookup)
    assert run(auth, basic("carol", "wrong")) is None
    assert run(auth, basic("carol", "carol-secret")) == "carol"
    assert run(auth, basic("dave", "carol-secret")) is None  # no credential at all
    assert ("SCRAM-SHA-256", "carol") in asked and ("SCRAM-SHA-512", "carol") in asked


def test_either_scram_mechanism_will_do_and_plain_comes_first() -> None:
    store = scram_store({("SCRAM-SHA-256", "erin"): "old-password",
                         ("SCRAM-SHA-512", "erin"): "new-password",
                         ("SCRAM-SHA-512", "alice"): "alice-scram-password"})
    auth = HttpBasicAuthenticator(PLAIN, lambda m, u: store.get((m, u)))
    assert run(auth, basic("erin", "old-password")) == "erin"
    assert run(auth, basic("erin", "new-password")) == "erin"
    assert run(auth, basic("erin", "other")) is None
    # a user with both: either password
    assert run(auth, basic("alice", "alice-secret")) == "alice"
    assert run(auth, basic("alice", "alice-scram-password")) == "alice"


def test_scram_derivations_run_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    store = scram_store({("SCRAM-SHA-256", "carol"): "carol-secret"})
    threads: list[str] = []
    real = basic_auth._derives

    def spy(*args: object) -> bool:
        threads.append(threading.current_thread().name)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(basic_auth, "_derives", spy)
    auth = HttpBasicAuthenticator({}, lambda m, u: store.get((m, u)))
    assert run(auth, basic("carol", "carol-secret")) == "carol"
    assert threads and all(name != threading.main_thread().name for name in threads)


# ------------------------------------------------------------------ the cache
def test_a_success_is_cached_and_a_failure_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    store = scram_store({("SCRAM-SHA-256", "carol"): "carol-secret"})
    derivations = [0]
    real = basic_auth._derives

    def counting(*args: object) -> bool:
        derivations[0] += 1
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(basic_auth, "_derives", counting)
    now = [1000.0]
    monkeypatch.setattr(basic_auth._time, "monotonic", lambda: now[0])
    auth = HttpBasicAuthenticator({}, lambda m, u: store.get((m, u)))

    async def scenario() -> None:
        assert await auth.authenticate(basic("carol", "carol-secret")) == "carol"
        assert derivations[0] == 1
        assert await auth.authenticate(basic("carol", "carol-secret")) == "carol"
        assert derivations[0] == 1  # from the cache
        for _ in range(2):
            assert await auth.authenticate(basic("carol", "wrong")) is None
        assert derivations[0] == 3  # failures are derived every time
        now[0] += basic_auth.CACHE_S + 1
        assert await auth.authenticate(basic("carol", "carol-secret")) == "carol"
        assert derivations[0] == 4  # expired: derived again

    asyncio.run(scenario())
    # the cache holds a digest, never the password
    assert all(b"carol-secret" not in key for key in auth._cache)
    assert "carol-secret" not in repr(auth._cache)


def test_the_cache_is_bounded() -> None:
    n = basic_auth.CACHE_ENTRIES * 2
    store = scram_store({("SCRAM-SHA-256", f"u{i}"): "p" for i in range(n)}, iterations=1)
    auth = HttpBasicAuthenticator({}, lambda m, u: store.get((m, u)))

    async def scenario() -> None:
        for i in range(n):
            assert await auth.authenticate(basic(f"u{i}", "p")) == f"u{i}"

    asyncio.run(scenario())
    assert 0 < len(auth._cache) <= basic_auth.CACHE_ENTRIES


def test_a_changed_credential_refuses_the_old_password_at_once() -> None:
    store = scram_store({("SCRAM-SHA-256", "carol"): "old"})
    auth = HttpBasicAuthenticator({}, lambda m, u: store.get((m, u)))

    async def scenario() -> None:
        assert await auth.authenticate(basic("carol", "old")) == "carol"  # now cached
        store.update(scram_store({("SCRAM-SHA-256", "carol"): "new"}))
        assert await auth.authenticate(basic("carol", "old")) is None
        assert await auth.authenticate(basic("carol", "new")) == "carol"

    asyncio.run(scenario())


def test_an_unknown_user_costs_a_derivation_like_a_known_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """No timing oracle: a user without credentials is derived against a decoy."""
    store = scram_store({("SCRAM-SHA-256", "carol"): "carol-secret"})
    iterations: list[int] = []
    real = basic_auth._derives

    def spy(mechanism: str, password: bytes, credential: basic_auth.ScramCredential) -> bool:
        iterations.append(credential.iterations)
        return real(mechanism, password, credential)

    monkeypatch.setattr(basic_auth, "_derives", spy)
    auth = HttpBasicAuthenticator({}, lambda m, u: store.get((m, u)))
    assert run(auth, basic("nobody", "guess")) is None
    assert run(auth, basic("carol", "guess")) is None
    assert iterations == [4096, 4096]


# ------------------------------------------------------------------ logging
SECRETS = ("alice-secret", "carol-secret", "wrong-guess-1234")
HEADERS = (basic("alice", "alice-secret"), basic("alice", "wrong-guess-1234"),
           basic("carol", "carol-secret"), basic("carol", "wrong-guess-1234"),
           basic("nobody", "wrong-guess-1234"), "Basic wrong-guess-1234")


def assert_not_logged(caplog: pytest.LogCaptureFixture, forbidden: tuple[str, ...]) -> None:
    for record in caplog.records:
        text = record.getMessage() + repr(record.args) + str(record.exc_info or "")
        for secret in forbidden:
            assert secret not in text, f"{secret!r} logged: {text}"


def forbidden() -> tuple[str, ...]:
    """The passwords, and the headers' tokens (base64 of user:password)."""
    return SECRETS + tuple(h.split(" ", 1)[1] for h in HEADERS)


def test_the_password_is_never_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    store = scram_store({("SCRAM-SHA-256", "carol"): "carol-secret"})
    auth = HttpBasicAuthenticator(PLAIN, lambda m, u: store.get((m, u)))

    async def scenario() -> None:
        for header in HEADERS:
            await auth.authenticate(header)

    asyncio.run(scenario())
    assert_not_logged(caplog, forbidden())


@pytest.mark.parametrize("leak", ["password %s", "header %s"])
def test_the_log_check_catches_a_logged_password(caplog: pytest.LogCaptureFixture,
                                                 leak: str) -> None:
    """Negative control for ``assert_not_logged``: a password or a header logged."""
    caplog.set_level(logging.DEBUG)
    logging.getLogger("millrace.broker.security.basic_auth").debug(
        leak, "alice-secret" if leak.startswith("password") else HEADERS[0])
    with pytest.raises(AssertionError):
        assert_not_logged(caplog, forbidden())
