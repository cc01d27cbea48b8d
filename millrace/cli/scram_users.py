"""``millrace configs ... --entity-type users``: SCRAM credentials (KIP-554), with
kafka-configs' habits.

    millrace configs --alter --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]'
    millrace configs --alter --entity-type users --entity-name alice --delete-config SCRAM-SHA-512
    millrace configs --describe --entity-type users [--entity-name alice]
    millrace configs --zookeeper 127.0.0.1:2181 --alter --entity-type users ...

With ``--bootstrap-server`` (the default) the admin client sends AlterUserScramCredentials
to the controller (the salt and salted password computed here, the password never on the
wire) and DescribeUserScramCredentials to any broker.  With ``--zookeeper`` the command
writes ZooKeeper itself: the salted credential into ``/config/users/<sanitized user>``
and a config change notification every broker acts on -- Kafka's documented way to
create the inter-broker SCRAM user before any broker runs.  Iterations default to 4096.
Only the two SCRAM mechanisms are credentials (users' quotas: ``client_quotas``).  Passwords
are never printed, not even in an error about the option that holds them.
"""

from __future__ import annotations

import argparse
import contextlib
import secrets
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from millrace.cli.common import (
    DEFAULT_TIMEOUT_MS,
    CommandError,
    configure_client_logging,
    error_line,
    parse_names,
    print_error,
    print_json,
    split_config_list,
)

if TYPE_CHECKING:
    from millrace.broker.security.credential_cache import UserConfigStore
    from millrace.broker.security.scram_admin import UserResult
    from millrace.client.admin import KafkaAdminClient

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_ITERATIONS = 4096
AdminFactory = Callable[[argparse.Namespace], "KafkaAdminClient"]


# ---------------------------------------------------------------------- parsing
def parse_scram_configs(items: list[str] | None) -> dict[str, tuple[int, str]]:
    """``--add-config`` of a user -> {mechanism: (iterations, password)}; every error
    names the mechanism and the key, never a value."""
    out: dict[str, tuple[int, str]] = {}
    for raw in items or ():
        for item in split_config_list(raw):
            name, sep, value = item.partition("=")
            name = name.strip()
            if name.upper() not in MECHANISMS:
                raise CommandError(
                    f"--add-config: {name!r} cannot be set on users: only "
                    f"{' and '.join(MECHANISMS)} credentials, or the quotas "
                    "producer_byte_rate, consumer_byte_rate, request_percentage, "
                    "controller_mutation_rate")
            if not sep:
                raise CommandError(f"--add-config: {name} expects "
                                   f"{name}=[iterations=N,password=SECRET]")
            out[name.upper()] = _credential_spec(name.upper(), value)
    return out


def _credential_spec(mechanism: str, text: str) -> tuple[int, str]:
    fields: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if not sep or key not in ("iterations", "password"):
            raise CommandError(
                f"--add-config: {mechanism} takes iterations=N and password=SECRET in "
                "brackets, comma-separated (a password cannot contain ',')")
        if key in fields:
            raise CommandError(f"--add-config: {mechanism}: {key} given twice")
        fields[key] = value
    if not fields.get("password"):
        raise CommandError(f"--add-config: {mechanism} needs a non-empty password")
    iterations = fields.get("iterations", str(DEFAULT_ITERATIONS)).strip()
    if not iterations.lstrip("-").isdigit():
        raise CommandError(f"--add-config: {mechanism}: iterations must be a number, got "
                           f"{iterations!r}")
    return int(iterations), fields["password"]


def parse_scram_deletions(items: list[str] | None) -> list[str]:
    names = [n.upper() for n in parse_names(items)]
    unknown = [n for n in names if n not in MECHANISMS]
    if unknown:
        raise CommandError(f"--delete-config: {', '.join(unknown)} cannot be deleted from "
                           f"users: only {' and '.join(MECHANISMS)} credentials")
    return names


# ---------------------------------------------------------------------- describe
def describe_users(args: argparse.Namespace, open_admin: AdminFactory,
                   json_first: list[dict[str, Any]] | None = None,
                   missing_ok: bool = False) -> int:
    """``json_first``: items put before the users' in ``-o json`` output (their quotas);
    ``missing_ok``: a named user without credentials is no error (it has quotas)."""
    users = None if args.entity_name is None else [args.entity_name]
    described: list[tuple[str, list[tuple[str, int]] | None, BaseException | None]] = []
    if args.zookeeper:
        from millrace.broker.security.scram_admin import describe_user_scram_credentials

        with zk_store(args) as store:
            for r in describe_user_scram_credentials(store, users):
                described.append(_from_user_result(r))
    else:
        with open_admin(args) as admin:
            result = admin.describe_user_scram_credentials(users)
        for user, future in result.items():
            error = future.exception()
            if error is not None:
                described.append((user, None, error))
            else:
                described.append((user, [(i.mechanism.mechanism_name, i.iterations)
                                         for i in future.result().credential_infos], None))
    if missing_ok:
        from millrace.common.errors import ResourceNotFoundError

        described = [d for d in described if not isinstance(d[2], ResourceNotFoundError)]
    return _print_described(args, described, json_first or [])


def _from_user_result(r: UserResult
                      ) -> tuple[str, list[tuple[str, int]] | None, BaseException | None]:
    from millrace.common.errors import for_code
    from millrace.security.sasl.scram import ScramMechanism

    if r.error:
        return r.user, None, for_code(r.error)(r.message or f"user '{r.user}'")
    names = []
    for type_id, iterations in r.credentials:
        m = ScramMechanism.from_type(type_id)
        names.append((m.mechanism_name if m else f"UNKNOWN({type_id})", iterations))
    return r.user, names, None


def _print_described(args: argparse.Namespace,
                     described: list[tuple[str, list[tuple[str, int]] | None,
                                           BaseException | None]],
                     json_first: list[dict[str, Any]]) -> int:
    status = 0
    out: list[dict[str, Any]] = list(json_first)
    for user, credentials, error in described:
        if error is not None:
            print_error(f"SCRAM credential configs of user-principal '{user}': "
                        f"{error_line(error)}")
            status = 1
            continue
        assert credentials is not None
        if args.output == "json":
            out.append({"entity_type": "users", "entity_name": user, "credentials": [
                {"mechanism": m, "iterations": i} for m, i in credentials]})
        else:
            text = ", ".join(f"{m}=iterations={i}" for m, i in credentials)
            print(f"SCRAM credential configs for user-principal '{user}' are {text}")
    if args.output == "json":
        print_json(out)
    return status


# ---------------------------------------------------------------------- alter
def alter_users(args: argparse.Namespace, open_admin: AdminFactory) -> int:
    upserts = parse_scram_configs(args.add_config)
    deletes = parse_scram_deletions(args.delete_config)
    both = sorted(set(upserts) & set(deletes))
    if both:
        raise CommandError(f"{', '.join(both)}: both added and deleted")
    if not upserts and not deletes:
        raise CommandError("nothing to alter: give --add-config and/or --delete-config")
    if getattr(args, "validate_only", False):
        raise CommandError("--validate-only is not supported for users")
    user = args.entity_name
    error: BaseException | None
    if args.zookeeper:
        error = _alter_in_zookeeper(args, user, upserts, deletes)
    else:
        error = _alter_with_admin(open_admin(args), user, upserts, deletes)
    if args.output == "json":
        print_json({"entity_type": "users", "entity_name": user, "updated": error is None,
                    "error": error_line(error) if error else None})
    if error is not None:
        print_error(error)
        return 1
    if args.output == "table":
        print(f"Completed updating config for user {user}.")
    return 0


def _alter_with_admin(admin: KafkaAdminClient, user: str,
                      upserts: dict[str, tuple[int, str]], deletes: list[str]
                      ) -> BaseException | None:
    from millrace.client.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialAlteration,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    alterations: list[UserScramCredentialAlteration] = [
        UserScramCredentialUpsertion(user, ScramCredentialInfo(
            ScramMechanism.from_mechanism_name(m), iterations), password)
        for m, (iterations, password) in upserts.items()]
    alterations += [UserScramCredentialDeletion(user, ScramMechanism.from_mechanism_name(m))
                    for m in deletes]
    with admin:
        result = admin.alter_user_scram_credentials(alterations)
    return result[user].exception()


def _alter_in_zookeeper(args: argparse.Namespace, user: str,
                        upserts: dict[str, tuple[int, str]], deletes: list[str]
                        ) -> BaseException | None:
    from millrace.broker.security.scram_admin import (
        ScramCredentialDeletion,
        ScramCredentialUpsertion,
        alter_user_scram_credentials,
    )
    from millrace.common.errors import for_code
    from millrace.security.sasl.scram import MAX_ITERATIONS, ScramFormatter, ScramMechanism

    upsertions = []
    for name, (iterations, password) in upserts.items():
        mechanism = ScramMechanism.from_name(name)
        assert mechanism is not None  # parse_scram_configs checked the name
        salt = secrets.token_bytes(32)
        salted = (ScramFormatter(mechanism).salted_password(password.encode(), salt, iterations)
                  if 1 <= iterations <= MAX_ITERATIONS else b"")
        upsertions.append(ScramCredentialUpsertion(user, mechanism.type_id, iterations, salt,
                                                   salted))
    deletions = []
    for name in deletes:
        mechanism = ScramMechanism.from_name(name)
        assert mechanism is not None
        deletions.append(ScramCredentialDeletion(user, mechanism.type_id))
    with zk_store(args) as store:
        outcome = alter_user_scram_credentials(store, deletions, upsertions)
    r = outcome.results[0]
    return for_code(r.error)(r.message or f"user '{user}'") if r.error else None


@contextlib.contextmanager
def zk_store(args: argparse.Namespace) -> Iterator[UserConfigStore]:
    """The users' configs in the ZooKeeper at ``--zookeeper`` (HOST:PORT[/chroot])."""
    from millrace.broker.security.credential_cache import ZkUserConfigStore
    from millrace.broker.zk import KafkaZkClient

    configure_client_logging()
    timeout = args.timeout or DEFAULT_TIMEOUT_MS
    zk = KafkaZkClient(args.zookeeper, connection_timeout_ms=timeout)
    try:
        zk.start()
    except Exception as e:
        zk.close()
        raise CommandError(f"cannot connect to ZooKeeper at {args.zookeeper}: "
                           f"{error_line(e)}") from None
    try:
        yield ZkUserConfigStore(zk)
    finally:
        zk.close()
