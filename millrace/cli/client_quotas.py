"""``millrace configs ... --entity-type users|clients|ips``: client quotas (KIP-546) and IP
connection rate quotas (KIP-612), with kafka-configs' habits.

    millrace configs --alter --entity-type users --entity-name alice \\
        --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
    millrace configs --alter --entity-type clients --entity-default --add-config request_percentage=50
    millrace configs --alter --entity-type users --entity-name alice \\
        --entity-type clients --entity-name app --delete-config producer_byte_rate
    millrace configs --describe --entity-type users [--entity-name alice | --entity-default] \\
        [--entity-type clients [--entity-name app | --entity-default]]
    millrace configs --alter --entity-type ips --entity-name 10.0.0.1 \\
        --add-config connection_creation_rate=10
    millrace configs --describe --entity-type ips [--entity-name 10.0.0.1 | --entity-default]

An entity is one or two (type, name) pairs, names paired with types in the order given;
``--entity-default`` stands for a name and means the default entity of its type.  Alter
needs a name (or the default) for every type; describe takes fewer -- a type without a
name matches any name of that type, the default included -- and shows only entities of
exactly the types given (DescribeClientQuotas with a strict filter), one line each:
``Quota configs for user-principal 'alice', the default client-id are
producer_byte_rate=1024.0``.  ``--delete-config`` of a quota the entity does not have is
refused before anything is sent ("Invalid config(s)"), as kafka-configs does.  The quota
keys of users and clients are ``producer_byte_rate``, ``consumer_byte_rate``,
``request_percentage`` and ``controller_mutation_rate``; an ip entity (an IP address,
alone: never with users or clients) has ``connection_creation_rate`` only; the broker
judges the values.  SCRAM credentials and
quotas cannot be altered in one command.  JSON output (``-o json``): describe lists
``{"entity": {"user": "alice", "client-id": null}, "quotas": {...}}`` (null: the default),
alter answers ``{"entity": ..., "updated": bool, "error": ...}``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from millrace.cli.common import (
    CommandError,
    error_line,
    parse_configs,
    parse_names,
    print_error,
    print_json,
)

if TYPE_CHECKING:
    from millrace.client.admin import ClientQuotaEntity, KafkaAdminClient

QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage",
              "controller_mutation_rate")
IP_QUOTA_KEYS = ("connection_creation_rate",)
QUOTA_ENTITY_TYPES = {"users": "user", "user": "user", "clients": "client-id",
                      "client": "client-id", "ips": "ip", "ip": "ip"}
WORDS = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
AdminFactory = Callable[[argparse.Namespace], "KafkaAdminClient"]


def entity_pairs(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """(wire entity type, name) in the order given; name "" = the default entity, None =
    no name given for that type."""
    types = list(args.entity_types or [args.entity_type])
    names = list(args.entity_names or [])
    if len(names) > len(types):
        raise CommandError("more entity names (--entity-name / --entity-default) than "
                           "entity types")
    wire = []
    for t in types:
        if t not in QUOTA_ENTITY_TYPES:
            raise CommandError(f"--entity-type {t} cannot be combined with other entity "
                               "types: only users and clients can")
        wire.append(QUOTA_ENTITY_TYPES[t])
    if len(set(wire)) != len(wire):
        raise CommandError("each --entity-type may be given once")
    if "ip" in wire and len(wire) > 1:
        raise CommandError("--entity-type ips cannot be combined with other entity types")
    return [(t, names[i] if i < len(names) else None) for i, t in enumerate(wire)]


def entity_text(entity: ClientQuotaEntity) -> str:
    """kafka-configs' words: ``user-principal 'alice', the default client-id``."""
    parts = []
    for entity_type in ("user", "client-id", "ip"):
        if entity_type in entity:
            name = entity[entity_type]
            word = WORDS[entity_type]
            parts.append(f"the default {word}" if name is None else f"{word} '{name}'")
    return ", ".join(parts)


def _json_entity(entity: ClientQuotaEntity) -> dict[str, str | None]:
    return {t: entity[t] for t in ("user", "client-id", "ip") if t in entity}


# ---------------------------------------------------------------------- describe
def describe_quotas(admin: KafkaAdminClient, pairs: list[tuple[str, str | None]]
                    ) -> dict[ClientQuotaEntity, dict[str, float]]:
    from millrace.client.admin import ClientQuotaFilter, ClientQuotaFilterComponent

    components = [ClientQuotaFilterComponent.of_entity_type(t) if name is None
                  else ClientQuotaFilterComponent.of_default_entity(t) if name == ""
                  else ClientQuotaFilterComponent.of_entity(t, name) for t, name in pairs]
    return admin.describe_client_quotas(ClientQuotaFilter.contains_only(components))


def quota_lines(quotas: dict[ClientQuotaEntity, dict[str, float]]) -> list[str]:
    return [f"Quota configs for {entity_text(entity)} are "
            + ", ".join(f"{k}={v}" for k, v in sorted(values.items()))
            for entity, values in sorted(quotas.items(), key=lambda ev: entity_text(ev[0]))]


def quota_json(quotas: dict[ClientQuotaEntity, dict[str, float]]) -> list[dict[str, Any]]:
    return [{"entity": _json_entity(entity), "quotas": dict(sorted(values.items()))}
            for entity, values in sorted(quotas.items(), key=lambda ev: entity_text(ev[0]))]


def describe(args: argparse.Namespace, open_admin: AdminFactory) -> int:
    """Quotas only (a clients type or a default in the entity)."""
    pairs = entity_pairs(args)
    with open_admin(args) as admin:
        quotas = describe_quotas(admin, pairs)
    if args.output == "json":
        print_json(quota_json(quotas))
    else:
        for line in quota_lines(quotas):
            print(line)
    return 0


# ---------------------------------------------------------------------- alter
def keys_for(pairs: list[tuple[str, str | None]]) -> tuple[str, ...]:
    """The quota keys the entity of ``pairs`` may carry."""
    return IP_QUOTA_KEYS if any(t == "ip" for t, _ in pairs) else QUOTA_KEYS


def wants_quotas(args: argparse.Namespace) -> bool:
    """Whether this ``configs`` command is about quotas rather than SCRAM credentials:
    a clients or ips type, two types, a default entity, or quota keys to add or delete."""
    types = args.entity_types or [args.entity_type]
    if any(QUOTA_ENTITY_TYPES.get(t) in ("client-id", "ip") for t in types) or len(types) > 1:
        return True
    if "" in (args.entity_names or []):
        return True
    keys = set(parse_configs(getattr(args, "add_config", None), "--add-config",
                             split=True)) if getattr(args, "add_config", None) else set()
    keys |= set(parse_names(getattr(args, "delete_config", None)))
    return bool(keys & set(QUOTA_KEYS))


def alter(args: argparse.Namespace, open_admin: AdminFactory) -> int:
    from millrace.client.admin import ClientQuotaAlteration, ClientQuotaEntity, ClientQuotaOp

    pairs = entity_pairs(args)
    if any(name is None for _, name in pairs):
        raise CommandError("--alter needs --entity-name or --entity-default for every "
                           "--entity-type")
    if args.zookeeper:
        raise CommandError("quotas are altered through --bootstrap-server, not --zookeeper")
    sets = parse_configs(args.add_config, "--add-config", split=True)
    deletes = parse_names(args.delete_config)
    keys = keys_for(pairs)
    wrong = [k for k in [*sets, *deletes] if k not in keys]
    if wrong:
        what = ("SCRAM credentials and quotas cannot be altered in one command"
                if any(k.upper().startswith("SCRAM-") for k in wrong) else
                f"only quota configs ({', '.join(keys)}) can be set on this entity")
        raise CommandError(f"{', '.join(wrong)}: {what}")
    both = sorted(set(sets) & set(deletes))
    if both:
        raise CommandError(f"{', '.join(both)}: both added and deleted")
    if not sets and not deletes:
        raise CommandError("nothing to alter: give --add-config and/or --delete-config")
    values: dict[str, float] = {}
    for key, text in sets.items():
        try:
            values[key] = float(text)
        except ValueError:
            raise CommandError(f"Cannot parse quota configuration value for {key}: "
                               f"{text}") from None
    entity = ClientQuotaEntity({t: (name or None) for t, name in pairs})
    with open_admin(args) as admin:
        if deletes:
            current = describe_quotas(admin, pairs).get(entity, {})
            missing = [k for k in deletes if k not in current]
            if missing:
                raise CommandError(f"Invalid config(s): {','.join(missing)}")
        ops = ([ClientQuotaOp(k, v) for k, v in values.items()]
               + [ClientQuotaOp(k, None) for k in deletes])
        result = admin.alter_client_quotas([ClientQuotaAlteration(entity, ops)],
                                           validate_only=args.validate_only)
    error = result[entity].exception()
    if args.output == "json":
        print_json({"entity": _json_entity(entity), "updated": error is None,
                    "error": error_line(error) if error else None})
    if error is not None:
        print_error(error)
        return 1
    if args.output == "table":
        verb = "Validated" if args.validate_only else "Completed updating"
        head_type, head_name = args.entity_types[0] if args.entity_types else "", pairs[0][1]
        head_type = head_type if head_type.endswith("s") else head_type + "s"
        if head_name:
            print(f"{verb} config for {head_type[:-1]} {head_name}.")
        else:
            print(f"{verb} default config for {head_type} in the cluster.")
    return 0
