"""``millrace configs`` (kafka-configs habits): topic and broker configs, SCRAM users,
client quotas.

    millrace configs describe --entity-type topics --entity-name events [--all]
    millrace configs alter --entity-type topics --entity-name events \\
        --add-config retention.ms=60000,cleanup.policy=[compact,delete] --delete-config segment.ms
    millrace configs --alter --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
    millrace configs --describe --entity-type users [--entity-name alice]
    millrace configs --alter --entity-type users --entity-name alice \\
        [--entity-type clients --entity-name app | --entity-default] \\
        --add-config producer_byte_rate=1048576 --delete-config consumer_byte_rate
    millrace configs --describe --entity-type clients [--entity-name app | --entity-default]

Both forms work: the subcommands (``configs describe|alter``) and Kafka's flags
(``configs --describe|--alter``), with the same options.  ``describe`` shows the
dynamic (overridden) configs unless ``--all`` is given; without ``--entity-name`` it
describes every topic, broker or SCRAM user.  ``alter`` is incremental: ``--add-config``
sets keys, ``--delete-config`` removes overrides.  Users' SCRAM credentials are handled
by ``scram_users``; only they can also be written straight into ZooKeeper
(``--zookeeper``).  Client quotas of users, client ids and both (``--entity-type`` given
twice, ``--entity-default`` for the default entity) are ``client_quotas``'s: a command
about clients, two types, a default, or quota keys goes there; describing users shows
their quotas and then their SCRAM credentials, as kafka-configs does.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from millrace.cli import client_quotas
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
from millrace.cli.scram_users import alter_users, describe_users

if TYPE_CHECKING:
    from millrace.client.admin import ConfigEntry, ConfigResource, KafkaAdminClient

ENTITY_TYPES = {"topics": "TOPIC", "topic": "TOPIC", "brokers": "BROKER", "broker": "BROKER",
                "users": "USER", "user": "USER", "clients": "CLIENT", "client": "CLIENT",
                "ips": "IP", "ip": "IP"}
QUOTA_TYPES = {"USER", "CLIENT", "IP"}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    configs = sub.add_parser(
        "configs", parents=[connection_options()],
        help="describe and alter topic, broker and user (SCRAM) configs and client quotas",
        description="Describe and alter topic and broker configs, users' SCRAM "
                    "credentials and client quotas: `millrace configs describe|alter ...` "
                    "or, as kafka-configs, `millrace configs --describe|--alter ...`.")
    mode = configs.add_mutually_exclusive_group()
    mode.add_argument("--describe", action="store_true", help="show configs (= describe)")
    mode.add_argument("--alter", action="store_true", help="set or delete configs (= alter)")
    _add_entity(configs, name_required=None)
    _add_alter_options(configs)
    configs.add_argument("--all", action="store_true",
                         help="with --describe: every config, defaults included")
    configs.set_defaults(func=by_flag)
    actions = configs.add_subparsers(dest="action", metavar="ACTION",
                                     action=_KeepOptionsGivenFirst)

    parent = connection_options()
    p = actions.add_parser("describe", parents=[parent], help="show configs")
    _add_entity(p, name_required=False)
    p.add_argument("--all", action="store_true", help="every config, defaults included")
    p.set_defaults(func=describe)

    p = actions.add_parser("alter", parents=[parent], help="set or delete configs")
    _add_entity(p, name_required=True)
    _add_alter_options(p)
    p.set_defaults(func=alter)


class _KeepOptionsGivenFirst(argparse._SubParsersAction):
    """``configs --zookeeper Z alter ...``: an option given before the subcommand keeps
    its value.  argparse copies the subcommand's whole namespace, defaults included, over
    the parent's, which would silently drop it (and e.g. talk to the default broker)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        before = dict(vars(namespace))
        super().__call__(parser, namespace, values, option_string)
        sub = self._name_parser_map[values[0]]
        for key, value in before.items():
            given_first = value != parser.get_default(key)
            if given_first and getattr(namespace, key, None) == sub.get_default(key):
                setattr(namespace, key, value)


class _AppendEntity(argparse.Action):
    """``--entity-type`` / ``--entity-name`` / ``--entity-default``, each repeatable
    (kafka-configs' users + clients form): the first value is kept under ``dest`` (what a
    topic, broker or SCRAM command reads), every value in order under ``dest + "s"``
    (``--entity-default`` adds "" there, the default entity's name)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        value = "" if self.const == "" else values
        setattr(namespace, f"{self.dest}s", [*(getattr(namespace, f"{self.dest}s", None)
                                               or []), value])
        if self.const != "" and getattr(namespace, self.dest, None) is None:
            setattr(namespace, self.dest, value)


def _add_entity(p: argparse.ArgumentParser, name_required: bool | None) -> None:
    """``name_required`` None: the flag form, which checks it once it knows the mode."""
    p.add_argument("--entity-type", required=name_required is not None,
                   choices=sorted(ENTITY_TYPES), metavar="{topics,brokers,users,clients,ips}",
                   action=_AppendEntity,
                   help="what to configure; users and clients may both be given (the "
                        "quotas of a user's client id)")
    names = p.add_mutually_exclusive_group(required=bool(name_required))
    names.add_argument("--entity-name", action=_AppendEntity,
                       help="the topic name, broker id, user name or client id" +
                            ("" if name_required else " (describe: default all of them)"))
    p.add_argument("--entity-default", dest="entity_name", nargs=0, const="",
                   action=_AppendEntity,
                   help="users/clients: the default entity (in place of --entity-name)")
    p.set_defaults(entity_types=None, entity_names=None)
    p.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]",
                   help="users only: read and write SCRAM credentials in this ZooKeeper "
                        "directly, not through a broker (e.g. before any broker runs)")


def _add_alter_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--add-config", action="append", metavar="K=V[,K2=V2]",
                   help="configs to set; list values in brackets: k=[a,b]; users: "
                        "SCRAM-SHA-256=[iterations=8192,password=SECRET] (repeatable)")
    p.add_argument("--delete-config", action="append", metavar="K[,K2]",
                   help="config overrides to remove; users: SCRAM-SHA-256 (repeatable)")
    p.add_argument("--validate-only", action="store_true", help="check, change nothing")


def by_flag(args: argparse.Namespace) -> int:
    """The kafka-configs form: ``millrace configs --describe|--alter ...``."""
    if not (args.describe or args.alter):
        raise CommandError("give --describe or --alter (or the subcommand: millrace configs "
                           "describe|alter ...)")
    if args.entity_type is None:
        raise CommandError("--entity-type is required")
    if args.alter:
        if not args.entity_names:
            raise CommandError("--entity-name is required with --alter")
        return alter(args)
    if args.add_config or args.delete_config:
        raise CommandError("--add-config and --delete-config go with --alter, not --describe")
    return describe(args)


def _is_quotas(args: argparse.Namespace, *, altering: bool) -> bool:
    """Whether the command is about client quotas (``client_quotas``)."""
    types = [ENTITY_TYPES[t] for t in args.entity_types or [args.entity_type]]
    if len(types) > 1 and not set(types) <= {"USER", "CLIENT"}:
        raise CommandError("only --entity-type users and clients can be given together")
    if not set(types) <= QUOTA_TYPES:
        if args.entity_names and "" in args.entity_names:
            raise CommandError("--entity-default is for users, clients and ips")
        return False
    if "IP" in types:
        return True
    if altering:
        return client_quotas.wants_quotas(args)
    return "CLIENT" in types or "" in (args.entity_names or [])


def _is_users(args: argparse.Namespace) -> bool:
    if ENTITY_TYPES[args.entity_type] == "USER":
        return True
    if args.zookeeper:
        raise CommandError("--zookeeper is supported for --entity-type users only (SCRAM "
                           "credentials); topics and brokers go through --bootstrap-server")
    return False


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
    if _is_quotas(args, altering=False):
        if args.zookeeper:
            raise CommandError("quotas are described through --bootstrap-server, not "
                               "--zookeeper")
        return client_quotas.describe(args, lambda a: admin_client(a))
    if _is_users(args):
        if args.zookeeper:
            return describe_users(args, lambda a: admin_client(a))
        with admin_client(args) as admin:  # the users' quotas first, as kafka-configs
            quotas = client_quotas.describe_quotas(admin, client_quotas.entity_pairs(args))
        if args.output == "table":
            for line in client_quotas.quota_lines(quotas):
                print(line)
        return describe_users(args, lambda a: admin_client(a),
                              json_first=client_quotas.quota_json(quotas),
                              missing_ok=bool(quotas))
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

    if _is_quotas(args, altering=True):
        return client_quotas.alter(args, lambda a: admin_client(a))
    if _is_users(args):
        if "" in (args.entity_names or []):
            raise CommandError("--entity-default is not allowed with SCRAM credentials")
        return alter_users(args, lambda a: admin_client(a))
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
