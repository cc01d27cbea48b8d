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
a header longer than ``MAX_HEADER`` is refused unread.  A SCRAM success is remembered for
``CACHE_S`` under a digest of the pair and the credential's stored key (never the
password itself), so a scraper every 15 s derives once a minute and a changed credential
takes effect at once; a user without SCRAM credentials costs a derivation against a
made-up credential, so response times do not tell which users exist.  The password is never logged.

Thread ownership: called on the event loop; the derivations run on executor threads.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import secrets
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
        # digest of (user, password, the credential's stored key) -> expiry: a changed
        # credential misses the cache, so an old password stops working at once
        self._cache: dict[bytes, float] = {}
        # a user without SCRAM credentials costs one derivation against this made-up
        # one, as a known user's wrong password does: timing does not tell who exists
        self._decoy = ScramFormatter(ScramMechanism.from_name(SCRAM_MECHANISMS[0])  # type: ignore[arg-type]
                                     ).generate_credential(secrets.token_hex(16), 4096)

    async def authenticate(self, header: str | None) -> str | None:
        """The authenticated user name, or None."""
        pair = parse_basic(header)
        if pair is None:
            return None
        user, password = pair
        given = password.encode()
        expected = self.plain_users.get(user)
        # an unknown PLAIN user is compared against itself: the same work either way
        if hmac.compare_digest(given, expected.encode() if expected is not None else given) \
                and expected is not None:
            return user
        credentials = [(m, c) for m in SCRAM_MECHANISMS
                       if (c := self.scram_lookup(m, user) if self.scram_lookup else None)]
        now = _time.monotonic()
        for mechanism, credential in credentials:
            expiry = self._cache.get(_cache_key(user, given, mechanism, credential))
            if expiry is not None and expiry > now:
                return user
        async with self._slots:
            loop = asyncio.get_running_loop()
            if not credentials:
                await loop.run_in_executor(None, _derives, SCRAM_MECHANISMS[0], given,
                                           self._decoy)
                return None
            for mechanism, credential in credentials:
                if await loop.run_in_executor(None, _derives, mechanism, given, credential):
                    if len(self._cache) >= CACHE_ENTRIES:
                        self._cache.clear()
                    self._cache[_cache_key(user, given, mechanism, credential)] = now + CACHE_S
                    return user
        return None


def _cache_key(user: str, password: bytes, mechanism: str,
               credential: ScramCredential) -> bytes:
    return hashlib.sha256(b"\0".join((user.encode(), password, mechanism.encode(),
                                      credential.stored_key))).digest()


def _derives(mechanism_name: str, password: bytes, credential: ScramCredential) -> bool:
    mechanism = ScramMechanism.from_name(mechanism_name)
    assert mechanism is not None
    f = ScramFormatter(mechanism)
    salted = f.salted_password(password, credential.salt, credential.iterations)
    return hmac.compare_digest(f.stored_key(f.client_key(salted)), credential.stored_key)
