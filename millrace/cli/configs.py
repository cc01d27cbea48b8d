"""``millrace configs describe|alter`` (kafka-configs habits).

    millrace configs describe --entity-type topics --entity-name events [--all]
    millrace configs alter --entity-type topics --entity-name events \\
        --add-config retention.ms=60000,cleanup.policy=[compact,delete] --delete-config segment.ms

``describe`` shows the dynamic (overridden) configs unless ``--all`` is given; without
``--entity-name`` it describes every topic or every broker.  ``alter`` is incremental:
``--add-config`` sets keys, ``--delete-config`` removes overrides.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from millrace.cli.common import (
    CommandError,
    admin_client,
    connection_options,
    error_line,
    parse_configs,
    parse_names,
    print_error,
    print_json,
)

if TYPE_CHECKING:
    from millrace.client.admin import ConfigEntry, ConfigResource, KafkaAdminClient

ENTITY_TYPES = {"topics": "TOPIC", "topic": "TOPIC", "brokers": "BROKER", "broker": "BROKER"}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parent = connection_options()
    configs = sub.add_parser("configs", help="describe and alter topic and broker configs",
                             description="Describe and alter topic and broker configs.")
    actions = configs.add_subparsers(dest="action", required=True, metavar="ACTION")

    p = actions.add_parser("describe", parents=[parent], help="show configs")
    _add_entity(p, name_required=False)
    p.add_argument("--all", action="store_true", help="every config, defaults included")
    p.set_defaults(func=describe)

    p = actions.add_parser("alter", parents=[parent], help="set or delete configs")
    _add_entity(p, name_required=True)
    p.add_argument("--add-config", action="append", metavar="K=V[,K2=V2]",
                   help="configs to set; list values in brackets: k=[a,b] (repeatable)")
    p.add_argument("--delete-config", action="append", metavar="K[,K2]",
                   help="config overrides to remove (repeatable)")
    p.add_argument("--validate-only", action="store_true", help="check, change nothing")
    p.set_defaults(func=alter)


def _add_entity(p: argparse.ArgumentParser, name_required: bool) -> None:
    p.add_argument("--entity-type", required=True, choices=sorted(ENTITY_TYPES),
                   metavar="{topics,brokers}", help="what to configure")
    p.add_argument("--entity-name", required=name_required,
                   help="the topic name or broker id" +
                        ("" if name_required else " (default: all of them)"))


def _resources(admin: KafkaAdminClient, args: argparse.Namespace) -> list[ConfigResource]:
    from millrace.client.admin import ConfigResource, ConfigResourceType

    kind = ConfigResourceType[ENTITY_TYPES[args.entity_type]]
    if args.entity_name is not None:
        if kind is ConfigResourceType.BROKER and not args.entity_name.isdigit():
            raise CommandError(f"--entity-name: a broker is named by its id, got "
                               f"{args.entity_name!r}")
        return [ConfigResource(kind, args.entity_name)]
    if kind is ConfigResourceType.TOPIC:
        names = [t.name for t in admin.list_topics(list_internal=True)]
    else:
        names = [str(n.id) for n in admin.describe_cluster().nodes]
    return [ConfigResource(kind, n) for n in names]


def entry_line(e: ConfigEntry) -> str:
    """``key=value sensitive=false synonyms={SOURCE:key=value}`` as kafka-configs prints."""
    value = "" if e.is_sensitive else (e.value or "")
    synonyms = ", ".join(f"{s.source.name}:{s.name}={'' if e.is_sensitive else s.value or ''}"
                         for s in e.synonyms)
    return (f"  {e.name}={value} sensitive={str(e.is_sensitive).lower()} "
            f"synonyms={{{synonyms}}}")


def describe(args: argparse.Namespace) -> int:
    status = 0
    out: list[dict[str, Any]] = []
    with admin_client(args) as admin:
        resources = _resources(admin, args)
        result = admin.describe_configs(resources, include_synonyms=True)
    for resource, future in result.items():
        error = future.exception()
        if error is not None:
            print_error(error)
            status = 1
            continue
        entries = [e for e in future.result().entries() if args.all or e.source.is_dynamic]
        entries.sort(key=lambda e: e.name)
        kind = resource.type.name.lower()
        if args.output == "json":
            out.append({"entity_type": kind, "entity_name": resource.name, "configs": [
                {"name": e.name, "value": None if e.is_sensitive else e.value,
                 "source": e.source.name, "sensitive": e.is_sensitive,
                 "read_only": e.is_read_only} for e in entries]})
            continue
        scope = "All" if args.all else "Dynamic"
        print(f"{scope} configs for {kind} {resource.name} are:")
        for e in entries:
            print(entry_line(e))
    if args.output == "json":
        print_json(out)
    return status


def alter(args: argparse.Namespace) -> int:
    from millrace.client.admin import AlterConfigOp, AlterConfigOpType

    sets = parse_configs(args.add_config, "--add-config", split=True)
    deletes = parse_names(args.delete_config)
    both = sorted(set(sets) & set(deletes))
    if both:
        raise CommandError(f"{', '.join(both)}: both added and deleted")
    if not sets and not deletes:
        raise CommandError("nothing to alter: give --add-config and/or --delete-config")
    ops = ([AlterConfigOp(k, v, AlterConfigOpType.SET) for k, v in sets.items()]
           + [AlterConfigOp(k, None, AlterConfigOpType.DELETE) for k in deletes])
    with admin_client(args) as admin:
        resource = _resources(admin, args)[0]
        result = admin.incremental_alter_configs({resource: ops},
                                                 validate_only=args.validate_only)
    error = result[resource].exception()
    kind = resource.type.name.lower()
    if args.output == "json":
        print_json({"entity_type": kind, "entity_name": resource.name,
                    "updated": error is None, "error": error_line(error) if error else None})
    if error is not None:
        print_error(error)
        return 1
    if args.output == "table":
        verb = "Validated" if args.validate_only else "Completed updating"
        print(f"{verb} config for {kind} {resource.name}.")
    return 0
