"""SCRAM credential management (KIP-554): the bodies of
``KafkaAdminClient.describe_user_scram_credentials`` and
``alter_user_scram_credentials`` (Java ``describeUserScramCredentials`` /
``alterUserScramCredentials``).

Describe goes to any broker (the least loaded).  No users (None or empty) asks for every
user holding a credential; the answer is keyed by user, in the broker's order.  A
top-level error fails the whole call; a user's own error (ResourceNotFoundError for a
user without credentials, DuplicateResourceError) fails only that user.

Alter goes to the controller: in a ZooKeeper cluster only the active controller answers,
any other broker says NOT_CONTROLLER for every user, and the call then fetches the
metadata again and resends to the controller it names now, until the deadline (Java's
``handleNotControllerError``).  An upsertion's salted password is computed here:
``SaltedPassword = PBKDF2-HMAC(password, salt, iterations)`` with the mechanism's hash,
the salt random unless given (Kafka's tools use the UTF-8 text of a random base-36
number), so the password never crosses the wire.  Alterations the client can judge
alone fail before anything is sent and are left out of the request, as in Java: an empty
user name (UnacceptableCredentialError), an UNKNOWN mechanism
(UnsupportedSaslMechanismError), an empty password (UnacceptableCredentialError).  The
broker judges the rest (iteration bounds, duplicates, deleting a missing credential).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable

from millrace.client.admin._admin_network import AdminNetwork, RetriableCallError
from millrace.client.admin.results import AdminResult, kafka_error
from millrace.client.admin.types import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)
from millrace.common.errors import (
    Errors,
    KafkaError,
    NotControllerError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
    for_code,
)
from millrace.protocol import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from millrace.security.sasl.scram import MAX_ITERATIONS, ScramFormatter
from millrace.security.sasl.scram import ScramMechanism as SaslScramMechanism

DESCRIBING = "describing SCRAM credentials"
ALTERING = "altering SCRAM credentials"
_SALT_BITS = 130  # Kafka's ScramFormatter.secureRandomString: 130 random bits, base 36


def random_salt() -> bytes:
    """A salt as Kafka's tools make one: the UTF-8 text of a random base-36 number."""
    n = secrets.randbits(_SALT_BITS)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        n, r = divmod(n, 36)
        text = digits[r] + text
        if n == 0:
            return text.encode()


# ---------------------------------------------------------------------- describe
def describe_user_scram_credentials(net: AdminNetwork, users: Iterable[str] | None,
                                    deadline_ms: int
                                    ) -> AdminResult[str, UserScramCredentialsDescription]:
    wanted = None if users is None else list(users)
    u_cls = DescribeUserScramCredentialsRequest.UserName
    body = DescribeUserScramCredentialsRequest(
        users=[u_cls(name=u) for u in wanted] if wanted else [])

    def attempt() -> DescribeUserScramCredentialsResponse:
        response, _version = net.send(body, deadline_ms)
        if response.error_code:
            error = for_code(response.error_code)(response.error_message or DESCRIBING)
            if error.retriable:
                raise RetriableCallError(error)
            raise error
        return response

    response = net.call(deadline_ms, attempt, DESCRIBING)
    result: AdminResult[str, UserScramCredentialsDescription] = AdminResult()
    for r in response.results:
        if r.error_code:
            result.set_error(r.user, kafka_error(r.error_code, r.error_message, "user",
                                                 r.user))
        else:
            result.set_value(r.user, UserScramCredentialsDescription(r.user, [
                ScramCredentialInfo(ScramMechanism.from_type(c.mechanism), c.iterations)
                for c in r.credential_infos]))
    for user in dict.fromkeys(wanted or ()):
        if user not in result:
            result.set_error(user, KafkaError(
                f"user '{user}': the broker's response did not contain a result for it"))
    return result


# ---------------------------------------------------------------------- alter
def alter_user_scram_credentials(net: AdminNetwork,
                                 alterations: Iterable[UserScramCredentialAlteration],
                                 deadline_ms: int) -> AdminResult[str, None]:
    alterations = list(alterations)
    order = list(dict.fromkeys(a.user for a in alterations))
    refused = _refused_locally(alterations)
    cls = AlterUserScramCredentialsRequest
    deletions = [cls.ScramCredentialDeletion(name=a.user, mechanism=int(a.mechanism))
                 for a in alterations
                 if isinstance(a, UserScramCredentialDeletion) and a.user not in refused]
    upsertions = [_upsertion(a) for a in alterations
                  if isinstance(a, UserScramCredentialUpsertion) and a.user not in refused]
    body = cls(deletions=deletions, upsertions=upsertions)

    def attempt() -> AlterUserScramCredentialsResponse:
        response, _version = net.send(body, deadline_ms, net.controller_or_any(deadline_ms))
        if any(r.error_code == Errors.NOT_CONTROLLER for r in response.results):
            net.refresh_metadata(deadline_ms)
            raise RetriableCallError(NotControllerError(ALTERING))
        return response

    answered: dict[str, KafkaError | None] = {}
    if deletions or upsertions:
        for r in net.call(deadline_ms, attempt, ALTERING).results:
            answered[r.user] = None if not r.error_code else kafka_error(
                r.error_code, r.error_message, "user", r.user)
    result: AdminResult[str, None] = AdminResult()
    for user in order:
        error: BaseException | None = refused.get(user)
        if error is None and user not in answered:
            error = KafkaError(f"user '{user}': the broker's response did not contain a "
                               "result for it")
        elif error is None:
            error = answered[user]
        if error is None:
            result.set_value(user, None)
        else:
            result.set_error(user, error)
    return result


def _refused_locally(alterations: list[UserScramCredentialAlteration]
                     ) -> dict[str, KafkaError]:
    refused: dict[str, KafkaError] = {}
    for a in alterations:
        if a.user in refused:
            continue
        if not a.user:
            refused[a.user] = UnacceptableCredentialError("Username must not be empty")
            continue
        mechanism = (a.credential_info.mechanism if isinstance(a, UserScramCredentialUpsertion)
                     else a.mechanism)
        if ScramMechanism.from_type(int(mechanism)) is ScramMechanism.UNKNOWN:
            refused[a.user] = UnsupportedSaslMechanismError(
                f"user '{a.user}': Unknown SCRAM mechanism")
        elif isinstance(a, UserScramCredentialUpsertion) and not a.password:
            refused[a.user] = UnacceptableCredentialError(
                f"user '{a.user}': Password must not be empty")
    return refused


def _upsertion(a: UserScramCredentialUpsertion
               ) -> AlterUserScramCredentialsRequest.ScramCredentialUpsertion:
    info = a.credential_info
    mechanism = SaslScramMechanism.from_type(int(info.mechanism))
    assert mechanism is not None  # refused locally otherwise
    salt = a.salt if a.salt is not None else random_salt()
    password = a.password.encode() if isinstance(a.password, str) else a.password
    # Outside the broker's bounds the broker refuses the count ("Too few/many
    # iterations"); nothing worth deriving (and no PBKDF2 of a billion rounds here).
    salted = (ScramFormatter(mechanism).salted_password(password, salt, info.iterations)
              if 1 <= info.iterations <= MAX_ITERATIONS else b"")
    return AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
        name=a.user, mechanism=mechanism.type_id, iterations=info.iterations, salt=salt,
        salted_password=salted)
