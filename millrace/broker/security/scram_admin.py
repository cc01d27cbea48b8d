"""The rules of the SCRAM credential admin APIs (KIP-554), over a ``UserConfigStore``
(Kafka's ``ZkAdminManager.describeUserScramCredentials`` / ``alterUserScramCredentials``).

Shared by the broker's handlers (DescribeUserScramCredentials 50,
AlterUserScramCredentials 51) and by ``millrace configs --zookeeper``, which writes
ZooKeeper directly.  Synchronous: the store may block (ZooKeeper), so the broker runs
these through ``CredentialCache.run_store``.

Describe: no users (null or empty) means every user holding a SCRAM credential, sorted;
named users come back once each, in request order: an empty name or a user without
credentials -> RESOURCE_NOT_FOUND, a name given twice -> DUPLICATE_RESOURCE.  Only the
mechanism and the iteration count are ever returned, never salt or keys.

Alter: one result per user named by a deletion or an upsertion, users judged in turn:

1. an empty name -> UNACCEPTABLE_CREDENTIAL; a mechanism other than 1 (SCRAM-SHA-256)
   or 2 (SCRAM-SHA-512) -> UNSUPPORTED_SASL_MECHANISM; fewer than the mechanism's 4096
   iterations or more than 16384 -> UNACCEPTABLE_CREDENTIAL;
2. the same (user, mechanism) twice in the request -> DUPLICATE_RESOURCE;
3. a deletion of a credential the user does not have -> RESOURCE_NOT_FOUND;
4. otherwise the user's deletions and upsertions are applied together and written as one
   entity-config write (StoredKey and ServerKey derived here from the client's salted
   password; the password itself never reaches the broker).

A user that fails any step changes nothing (its other alterations included).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from millrace.broker.security.credential_cache import UserConfigStore, scram_credentials_of
from millrace.common.errors import Errors
from millrace.security.sasl.scram import (
    MAX_ITERATIONS,
    ScramCredential,
    ScramFormatter,
    ScramMechanism,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ScramCredentialDeletion:
    user: str
    mechanism: int  # ScramMechanism.type_id: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512


@dataclass(frozen=True, slots=True)
class ScramCredentialUpsertion:
    user: str
    mechanism: int
    iterations: int
    salt: bytes = field(repr=False)
    salted_password: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class UserResult:
    """One user's outcome; ``credentials`` (describe only): (mechanism type, iterations)."""

    user: str
    error: Errors = Errors.NONE
    message: str | None = None
    credentials: tuple[tuple[int, int], ...] = ()


# ---------------------------------------------------------------------- describe
def describe_user_scram_credentials(store: UserConfigStore,
                                    users: Sequence[str] | None) -> list[UserResult]:
    """Kafka's rules (module docstring); ``users`` None or empty: every user."""
    if not users:
        found = []
        for user in store.users_with_configs():
            result = _described(user, store.user_configs(user))
            if result is not None:
                found.append(result)
        return sorted(found, key=lambda r: r.user)
    counts = Counter(users)
    results: list[UserResult] = []
    for user in dict.fromkeys(users):
        if not user:
            results.append(UserResult(user, Errors.RESOURCE_NOT_FOUND,
                                      "Cannot describe SCRAM credentials for empty username"))
        elif counts[user] > 1:
            results.append(UserResult(
                user, Errors.DUPLICATE_RESOURCE,
                "Cannot describe SCRAM credentials for the same user twice in a single "
                f"request: {user}"))
        else:
            results.append(_described(user, store.user_configs(user)) or UserResult(
                user, Errors.RESOURCE_NOT_FOUND,
                f"Attempt to describe a user credential that does not exist: {user}"))
    return results


def _described(user: str, configs: dict[str, str]) -> UserResult | None:
    """The user's credential infos, None if it holds no SCRAM credential."""
    scram = scram_credentials_of(configs)
    if not scram:
        return None
    infos = []
    for mechanism in ScramMechanism:
        text = scram.get(mechanism.mechanism_name)
        if text is None:
            continue
        try:
            infos.append((mechanism.type_id, ScramCredential.from_kafka_string(text).iterations))
        except ValueError as e:  # bad data written around us: say so for this user only
            return UserResult(user, Errors.UNKNOWN_SERVER_ERROR,
                              f"Error retrieving SCRAM credential: {e}")
    return UserResult(user, credentials=tuple(infos))


# ---------------------------------------------------------------------- alter
@dataclass
class AlterOutcome:
    """The results (one per user, in order of first mention) and the configs written."""

    results: list[UserResult]
    written: dict[str, dict[str, str]]


def _mechanism(type_id: int) -> ScramMechanism | None:
    return ScramMechanism.from_type(type_id)


def _invalid(user: str, mechanism: int, iterations: int | None) -> UserResult | None:
    if not user:
        return UserResult(user, Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    m = _mechanism(mechanism)
    if m is None:
        return UserResult(user, Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    if iterations is not None and iterations < m.min_iterations:
        return UserResult(user, Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
    if iterations is not None and iterations > MAX_ITERATIONS:
        return UserResult(user, Errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
    return None


def alter_user_scram_credentials(store: UserConfigStore,
                                 deletions: Iterable[ScramCredentialDeletion],
                                 upsertions: Iterable[ScramCredentialUpsertion]
                                 ) -> AlterOutcome:
    """Kafka's rules (module docstring): validate, then one config write per user."""
    deletions, upsertions = list(deletions), list(upsertions)
    order = list(dict.fromkeys([d.user for d in deletions] + [u.user for u in upsertions]))
    failed: dict[str, UserResult] = {}
    for u in upsertions:
        bad = _invalid(u.user, u.mechanism, u.iterations)
        if bad is not None:
            failed.setdefault(u.user, bad)
    for d in deletions:
        bad = _invalid(d.user, d.mechanism, None)
        if bad is not None:
            failed.setdefault(d.user, bad)
    pairs = Counter([(d.user, d.mechanism) for d in deletions]
                    + [(u.user, u.mechanism) for u in upsertions])
    for (user, _mech), n in pairs.items():
        if n > 1 and user not in failed:
            failed[user] = UserResult(user, Errors.DUPLICATE_RESOURCE,
                                      "A user credential cannot be altered twice in the same "
                                      "request")
    written: dict[str, dict[str, str]] = {}
    for user in order:
        if user in failed:
            continue
        try:
            configs = store.user_configs(user)
        except Exception as e:
            log.info("reading the configs of user %r failed", user, exc_info=True)
            failed[user] = UserResult(user, Errors.UNKNOWN_SERVER_ERROR, str(e) or None)
            continue
        missing = [d for d in deletions if d.user == user
                   and _name(d.mechanism) not in configs]
        if missing:
            failed[user] = UserResult(user, Errors.RESOURCE_NOT_FOUND,
                                      "Attempt to delete a user credential that does not "
                                      "exist")
            continue
        for d in deletions:
            if d.user == user:
                del configs[_name(d.mechanism)]
        for u in upsertions:
            if u.user == user:
                m = _mechanism(u.mechanism)
                assert m is not None  # validated above
                credential = ScramFormatter(m).credential_from_salted_password(
                    u.salt, u.salted_password, u.iterations)
                configs[m.mechanism_name] = credential.to_kafka_string()
        try:
            store.set_user_configs(user, configs)
        except Exception as e:
            log.info("writing the configs of user %r failed", user, exc_info=True)
            failed[user] = UserResult(user, Errors.UNKNOWN_SERVER_ERROR, str(e) or None)
            continue
        written[user] = configs
    return AlterOutcome([failed.get(user) or UserResult(user) for user in order], written)


def _name(type_id: int) -> str:
    m = _mechanism(type_id)
    assert m is not None
    return m.mechanism_name
