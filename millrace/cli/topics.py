"""``millrace topics create|list|describe|delete|alter`` (kafka-topics habits).

``--topic`` names one topic; for list, describe, delete and alter it may also be a
regular expression matched against the whole name (as in kafka-topics), used only when
no topic has exactly that name.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from concurrent.futures import Future
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
    progress_bar,
)

if TYPE_CHECKING:
    from millrace.client.admin import Config, KafkaAdminClient, TopicDescription
    from millrace.client.admin.types import TopicPartitionInfo


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parent = connection_options()
    topics = sub.add_parser("topics", help="create, list, describe, alter and delete topics",
                            description="Create, list, describe, alter and delete topics.")
    actions = topics.add_subparsers(dest="action", required=True, metavar="ACTION")

    p = actions.add_parser("create", parents=[parent], help="create a topic")
    p.add_argument("--topic", "-t", required=True, help="the topic to create")
    p.add_argument("--partitions", type=int, default=-1,
                   help="number of partitions (default: the broker's num.partitions)")
    p.add_argument("--replication-factor", type=int, default=-1,
                   help="replicas per partition (default: the broker's setting)")
    p.add_argument("--config", action="append", metavar="KEY=VALUE",
                   help="a topic config override (repeatable)")
    p.add_argument("--if-not-exists", action="store_true",
                   help="succeed quietly if the topic exists")
    p.add_argument("--validate-only", action="store_true",
                   help="check the request without creating anything")
    p.set_defaults(func=create)

    p = actions.add_parser("list", parents=[parent], help="list topic names")
    p.add_argument("--topic", "-t", help="only topics matching this regular expression")
    p.add_argument("--exclude-internal", action="store_true", help="leave out __internal topics")
    p.set_defaults(func=list_)

    p = actions.add_parser("describe", parents=[parent],
                           help="partitions, leaders, replicas, ISR and configs")
    p.add_argument("--topic", "-t", help="a topic name or regular expression (default: all)")
    p.add_argument("--exclude-internal", action="store_true", help="leave out __internal topics")
    only = p.add_mutually_exclusive_group()
    only.add_argument("--under-replicated-partitions", action="store_true",
                      help="only partitions whose ISR is smaller than their replica set")
    only.add_argument("--unavailable-partitions", action="store_true",
                      help="only partitions without a leader")
    p.set_defaults(func=describe)

    p = actions.add_parser("delete", parents=[parent], help="delete topics")
    p.add_argument("--topic", "-t", required=True, help="a topic name or regular expression")
    p.add_argument("--if-exists", action="store_true",
                   help="succeed quietly if no topic matches")
    p.set_defaults(func=delete)

    p = actions.add_parser("alter", parents=[parent],
                           help="add partitions or change topic configs")
    p.add_argument("--topic", "-t", required=True, help="a topic name or regular expression")
    p.add_argument("--partitions", type=int, help="the new (larger) number of partitions")
    p.add_argument("--config", action="append", metavar="KEY=VALUE",
                   help="set a topic config (repeatable)")
    p.add_argument("--delete-config", action="append", metavar="KEY",
                   help="remove a topic config override (repeatable, or comma-separated)")
    p.set_defaults(func=alter)


# ---------------------------------------------------------------------- helpers
def select_topics(names: list[str], pattern: str | None) -> list[str]:
    """The topics ``pattern`` names: itself if it exists, else those it fully matches."""
    if pattern is None:
        return names
    if pattern in names:
        return [pattern]
    try:
        regex = re.compile(pattern)
    except re.error as e:
        raise CommandError(f"--topic {pattern!r} is neither a topic nor a regular "
                           f"expression: {e}") from None
    return [n for n in names if regex.fullmatch(n)]


def _matching(admin: KafkaAdminClient, pattern: str | None, exclude_internal: bool = False,
              must_exist: bool = True) -> list[str]:
    names = [t.name for t in admin.list_topics(list_internal=not exclude_internal)]
    chosen = select_topics(names, pattern)
    if not chosen and pattern is not None and must_exist:
        raise CommandError(f"Topic '{pattern}' does not exist as expected")
    return chosen


def _report(outcomes: Mapping[str, Future[Any]], done: str, args: argparse.Namespace) -> int:
    """One line per item: ``done`` for a success, an error line for a failure."""
    succeeded: list[str] = []
    failed: dict[str, str] = {}
    for name, future in outcomes.items():
        error = future.exception()
        if error is None:
            succeeded.append(name)
            if args.output == "table":
                print(done.format(name=name))
        else:
            failed[name] = error_line(error)
            print_error(error)
    if args.output == "json":
        print_json({"succeeded": succeeded, "failed": failed})
    return 1 if failed else 0


# ---------------------------------------------------------------------- actions
def create(args: argparse.Namespace) -> int:
    from millrace.client.admin import NewTopic
    from millrace.common.errors import TopicExistsError

    configs = parse_configs(args.config, "--config")
    with admin_client(args) as admin, progress_bar(f"creating topic {args.topic}"):
        result = admin.create_topics(
            [NewTopic(args.topic, args.partitions, args.replication_factor, configs)],
            validate_only=args.validate_only)
    error = result[args.topic].exception()
    if args.if_not_exists and isinstance(error, TopicExistsError):
        if args.output == "json":
            print_json({"succeeded": [], "failed": {}, "existing": [args.topic]})
        return 0
    verb = "Validated" if args.validate_only else "Created"
    return _report(result, verb + " topic {name}.", args)


def list_(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        listings = admin.list_topics(list_internal=not args.exclude_internal)
    chosen = set(select_topics([t.name for t in listings], args.topic))
    listings = [t for t in listings if t.name in chosen]
    if args.output == "json":
        print_json(listings)
    else:
        for t in listings:
            print(t.name)
    return 0


def _wanted(p: TopicPartitionInfo, args: argparse.Namespace) -> bool:
    """kafka-topics' partition filters: under-replicated (ISR smaller than the replica
    set) and unavailable (no leader)."""
    if args.under_replicated_partitions:
        return len(p.isr) < len(p.replicas)
    if args.unavailable_partitions:
        return p.leader is None
    return True


def _describe_line(d: TopicDescription, configs: Config | None,
                   partitions: list[TopicPartitionInfo], header: bool = True) -> list[str]:
    overrides = "" if configs is None else ",".join(
        f"{e.name}={'' if e.is_sensitive else e.value}" for e in configs.entries()
        if not e.is_default)
    rf = len(d.partitions[0].replicas) if d.partitions else 0
    lines = [f"Topic: {d.name}\tTopicId: {d.topic_id or '-'}\tPartitionCount: "
             f"{len(d.partitions)}\tReplicationFactor: {rf}\tConfigs: {overrides}"] if header \
        else []
    for p in partitions:
        leader = p.leader.id if p.leader is not None else "none"
        lines.append(f"\tTopic: {d.name}\tPartition: {p.partition}\tLeader: {leader}\t"
                     f"Replicas: {','.join(str(r.id) for r in p.replicas)}\t"
                     f"Isr: {','.join(str(r.id) for r in p.isr)}")
    return lines


def describe(args: argparse.Namespace) -> int:
    from millrace.client.admin import ConfigResource, ConfigResourceType

    with admin_client(args) as admin:
        names = _matching(admin, args.topic, args.exclude_internal)
        described = admin.describe_topics(names)
        resources = {n: ConfigResource(ConfigResourceType.TOPIC, n) for n in names}
        configs = admin.describe_configs(resources.values())
    status = 0
    out = []
    for name in names:
        error = described[name].exception()
        if error is not None:
            print_error(error)
            status = 1
            continue
        d = described[name].result()
        filtered = args.under_replicated_partitions or args.unavailable_partitions
        partitions = [p for p in d.partitions if _wanted(p, args)]
        if filtered and not partitions:
            continue
        config_future = configs[resources[name]]
        config = None if config_future.exception() else config_future.result()
        if args.output == "json":
            entry: dict[str, Any] = {
                "name": d.name, "topic_id": str(d.topic_id) if d.topic_id else None,
                "internal": d.is_internal,
                "configs": {} if config is None else {
                    e.name: e.value for e in config.entries() if not e.is_default},
                "partitions": [{"partition": p.partition,
                                "leader": p.leader.id if p.leader else None,
                                "replicas": [r.id for r in p.replicas],
                                "isr": [r.id for r in p.isr]} for p in partitions]}
            out.append(entry)
        else:
            print("\n".join(_describe_line(d, config, partitions, header=not filtered)))
    if args.output == "json":
        print_json(out)
    return status


def delete(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        names = _matching(admin, args.topic, must_exist=not args.if_exists)
        if not names:
            if args.output == "json":
                print_json({"succeeded": [], "failed": {}})
            return 0
        with progress_bar(f"deleting {len(names)} topic(s)"):
            result = admin.delete_topics(names)
        return _report(result, "Deleted topic {name}.", args)


def alter(args: argparse.Namespace) -> int:
    from millrace.client.admin import (
        AlterConfigOp,
        AlterConfigOpType,
        ConfigResource,
        ConfigResourceType,
        NewPartitions,
    )

    sets = parse_configs(args.config, "--config")
    deletes = parse_names(args.delete_config)
    if args.partitions is None and not sets and not deletes:
        raise CommandError("nothing to alter: give --partitions, --config or --delete-config")
    status = 0
    with admin_client(args) as admin:
        names = _matching(admin, args.topic)
        if args.partitions is not None:
            status |= _report(
                admin.create_partitions({n: NewPartitions(args.partitions) for n in names}),
                f"Increased the partition count of topic {{name}} to {args.partitions}.", args)
        if sets or deletes:
            ops = ([AlterConfigOp(k, v, AlterConfigOpType.SET) for k, v in sets.items()]
                   + [AlterConfigOp(k, None, AlterConfigOpType.DELETE) for k in deletes])
            result = admin.incremental_alter_configs(
                {ConfigResource(ConfigResourceType.TOPIC, n): ops for n in names})
            status |= _report({r.name: f for r, f in result.items()},
                              "Updated the configs of topic {name}.", args)
    return status

