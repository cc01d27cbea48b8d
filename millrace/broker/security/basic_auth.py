"""``HttpBasicAuthenticator``: HTTP basic credentials checked against the broker's own
SASL users, so the HTTP listener (``http.authentication.method=BASIC``) needs no user
store of its own.

A ``user:password`` pair is accepted when the user is a PLAIN user of one of the
broker's SASL listeners (JAAS ``user_<name>``) with that password, or holds a SCRAM
credential (SHA-256 or SHA-512) that the password derives: ``H(HMAC(Hi(password, salt,
i), "Client Key")) == stored_key``, the check a SCRAM exchange makes.  Comparisons are
constant-time; an unknown user costs the same comparison as a known one.

Bounded work before authentication: a SCRAM derivation (PBKDF2, thousands of rounds) runs
on the default executor, never on the event loop, at most ``MAX_CONCURRENT`` at a time;
a header longer than ``MAX_HEADER`` is refused unread.  A success is remembered for
``CACHE_S`` under a digest of the pair (never the password itself), so a scraper every
15 s derives once a minute.  The password is never logged.

Thread ownership: called on the event loop; the derivations run on executor threads.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import time as _time
from collections.abc import Callable, Mapping

from millrace.security.sasl.scram import ScramCredential, ScramFormatter, ScramMechanism

MAX_HEADER = 1024
MAX_CONCURRENT = 2
CACHE_S = 60.0
CACHE_ENTRIES = 256
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")

ScramLookup = Callable[[str, str], ScramCredential | None]


def parse_basic(header: str | None) -> tuple[str, str] | None:
    """``Basic <base64(user:password)>`` → (user, password); None if malformed."""
    if not header or len(header) > MAX_HEADER:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "basic" or not token:
        return None
    try:
        text = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except ValueError:  # binascii.Error, UnicodeDecodeError, a non-ASCII token
        return None
    user, sep, password = text.partition(":")
    if not sep or not user:
        return None
    return user, password


class HttpBasicAuthenticator:
    def __init__(self, plain_users: Mapping[str, str], scram_lookup: ScramLookup | None) -> None:
        self.plain_users = dict(plain_users)
        self.scram_lookup = scram_lookup
        self._slots = asyncio.Semaphore(MAX_CONCURRENT)
        self._cache: dict[bytes, tuple[str, float]] = {}

    async def authenticate(self, header: str | None) -> str | None:
        """The authenticated user name, or None."""
        pair = parse_basic(header)
        if pair is None:
            return None
        user, password = pair
        key = hashlib.sha256(f"{user}\0{password}".encode()).digest()
        now = _time.monotonic()
        hit = self._cache.get(key)
        if hit is not None and hit[1] > now:
            return hit[0]
        if await self._check(user, password):
            if len(self._cache) >= CACHE_ENTRIES:
                self._cache.clear()
            self._cache[key] = (user, now + CACHE_S)
            return user
        return None

    async def _check(self, user: str, password: str) -> bool:
        expected = self.plain_users.get(user)
        given = password.encode()
        # an unknown PLAIN user is compared against itself: the same work either way
        plain_ok = hmac.compare_digest(given, expected.encode() if expected is not None
                                       else given) and expected is not None
        if plain_ok:
            return True
        credentials = [(m, c) for m in SCRAM_MECHANISMS
                       if (c := self.scram_lookup(m, user) if self.scram_lookup else None)]
        if not credentials:
            return False
        async with self._slots:
            loop = asyncio.get_running_loop()
            for mechanism, credential in credentials:
                if await loop.run_in_executor(None, _derives, mechanism, given, credential):
                    return True
        return False


def _derives(mechanism_name: str, password: bytes, credential: ScramCredential) -> bool:
    mechanism = ScramMechanism.from_name(mechanism_name)
    assert mechanism is not None
    f = ScramFormatter(mechanism)
    salted = f.salted_password(password, credential.salt, credential.iterations)
    return hmac.compare_digest(f.stored_key(f.client_key(salted)), credential.stored_key)
