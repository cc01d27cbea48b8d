"""``millrace groups list|describe|delete|reset-offsets`` (kafka-consumer-groups habits).

``describe`` prints, per partition, CURRENT-OFFSET, LOG-END-OFFSET, LAG, the member
that owns it and STATUS, Burrow's status of the partition, with the group's own status
on a line before the table (``--members`` and ``--state`` give the other two views).
``reset-offsets`` is a dry run unless ``--execute`` is given, and like Kafka's tool it
refuses a group that still has members.

Burrow's status is what the group's coordinator evaluates over the group's recent
commits (``millrace.broker.metrics.burrow``); the command finds the coordinator
(FindCoordinator, part of describing the group), reads its ``http.listeners`` with
DescribeConfigs on the broker and GETs ``/v1/consumer-groups/<group>`` there (with the
client's SASL user name and password as HTTP basic credentials when it has them, and
its CA for an ``https://`` listener).  A coordinator without an HTTP listener, or one
that cannot be reached, leaves STATUS ``-``: the reason is said once on stderr, and the
command does not fail for it.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from millrace.cli.common import (
    CommandError,
    admin_client,
    client_configs,
    connection_options,
    error_line,
    format_table,
    parse_names,
    print_error,
    print_json,
    progress_bar,
)
from millrace.client.admin.broker_http import BrokerHttp, BrokerHttpUnavailable
from millrace.common.errors import MillraceError

if TYPE_CHECKING:
    from millrace.client.admin import (
        ConsumerGroupDescription,
        KafkaAdminClient,
        OffsetResetSpec,
        TopicPartition,
    )

OFFSET_HEADERS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                  "CONSUMER-ID", "HOST", "CLIENT-ID", "STATUS")
MEMBER_HEADERS = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
STATE_HEADERS = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
RESET_HEADERS = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parent = connection_options()
    groups = sub.add_parser("groups", help="list, describe, delete consumer groups; reset offsets",
                            description="Consumer groups: list, describe (with lag), delete, "
                                        "reset offsets.")
    actions = groups.add_subparsers(dest="action", required=True, metavar="ACTION")

    p = actions.add_parser("list", parents=[parent], help="list consumer groups")
    p.add_argument("--state", nargs="?", const="", metavar="STATES",
                   help="show states; with a comma-separated list, only groups in those")
    p.set_defaults(func=list_)

    p = actions.add_parser("describe", parents=[parent],
                           help="offsets and lag per partition, members, or state")
    _add_group_selection(p)
    view = p.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help="offsets and lag (the default)")
    view.add_argument("--members", action="store_true", help="one line per member")
    view.add_argument("--state", action="store_true", help="one line per group")
    p.add_argument("--verbose", action="store_true", help="with --members: the assignments")
    p.set_defaults(func=describe)

    p = actions.add_parser("delete", parents=[parent], help="delete empty consumer groups")
    _add_group_selection(p)
    p.set_defaults(func=delete)

    p = actions.add_parser("reset-offsets", parents=[parent],
                           help="move a group's committed offsets (dry run by default)")
    p.add_argument("--group", "-g", required=True, help="the group")
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", "-t", action="append", metavar="TOPIC[:P,...]",
                       help="a topic, optionally with partitions (repeatable)")
    scope.add_argument("--all-topics", action="store_true",
                       help="every partition the group has an offset for")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--to-earliest", action="store_true", help="the log start offset")
    how.add_argument("--to-latest", action="store_true", help="the log end offset")
    how.add_argument("--to-current", action="store_true", help="the committed offset")
    how.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped)")
    how.add_argument("--shift-by", type=int, metavar="N",
                     help="the committed offset plus N (may be negative)")
    how.add_argument("--to-datetime", metavar="DATETIME",
                     help="the first offset at or after an ISO time, e.g. "
                          "2024-05-01T12:00:00.000 (local) or ...+00:00")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    mode.add_argument("--dry-run", action="store_true", help="only show them (the default)")
    p.set_defaults(func=reset_offsets)


def _add_group_selection(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--group", "-g", action="append",
                       help="a group id (repeatable, or comma-separated)")
    which.add_argument("--all-groups", action="store_true", help="every group")


def _group_ids(admin: KafkaAdminClient, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [g.group_id for g in admin.list_groups()]
    return parse_names(args.group)


# ---------------------------------------------------------------------- list
def list_(args: argparse.Namespace) -> int:
    states = parse_names([args.state]) if args.state else None
    with admin_client(args) as admin:
        listings = admin.list_groups(states=states)
    if args.output == "json":
        print_json(listings)
    elif args.state is not None:
        print(format_table(("GROUP", "STATE"), ((g.group_id, g.state) for g in listings)))
    else:
        for g in listings:
            print(g.group_id)
    return 0


# ---------------------------------------------------------------------- describe
def _missing(group: ConsumerGroupDescription) -> str | None:
    from millrace.client.admin import ConsumerGroupState

    if group.state is ConsumerGroupState.DEAD:
        return f"Consumer group '{group.group_id}' does not exist."
    return None


def _describe_note(group: ConsumerGroupDescription) -> str | None:
    from millrace.client.admin import ConsumerGroupState

    if group.state is ConsumerGroupState.EMPTY:
        return f"Consumer group '{group.group_id}' has no active members."
    if group.state in (ConsumerGroupState.PREPARING_REBALANCE,
                       ConsumerGroupState.COMPLETING_REBALANCE):
        return f"Warning: Consumer group '{group.group_id}' is rebalancing."
    return None


def describe(args: argparse.Namespace) -> int:
    status = 0
    out: list[Any] = []
    with admin_client(args) as admin:
        lag = LagStatuses(admin, client_configs(args), getattr(args, "timeout", None),
                          quiet=args.output == "json")
        for group_id in _group_ids(admin, args):
            try:
                if args.members or args.state:
                    group = admin.describe_groups([group_id])[group_id].result()
                    rows = None
                else:
                    offsets = admin.describe_group_offsets(group_id)
                    group, rows = offsets.group, offsets.partitions
            except MillraceError as e:
                print_error(e)
                status = 1
                continue
            missing = _missing(group)
            if missing:
                print_error(missing)
                status = 1
                continue
            view = lag.fetch(group) if rows is not None else None
            if args.output == "json":
                out.append(_describe_json(group, rows, view, lag.reason_for(group_id)))
                continue
            note = _describe_note(group)
            if note and not args.state:
                print(f"\n{note}", file=sys.stderr if note.startswith("Warning") else sys.stdout)
            if view is not None:
                print(f"\n{_status_line(view)}")
            print()
            print(_describe_table(args, group, rows, view))
    if args.output == "json":
        print_json(out)
    return status


def _describe_table(args: argparse.Namespace, group: ConsumerGroupDescription,
                    rows: Any, view: Mapping[str, Any] | None = None) -> str:
    if args.state:
        coordinator = group.coordinator
        where = (f"{coordinator.host}:{coordinator.port} ({coordinator.id})"
                 if coordinator is not None else None)
        return format_table(STATE_HEADERS, [(group.group_id, where, group.partition_assignor,
                                             group.state, len(group.members))])
    if args.members:
        headers = MEMBER_HEADERS + (("ASSIGNMENT",) if args.verbose else ())
        table = []
        for m in group.members:
            row: list[Any] = [group.group_id, m.member_id, m.host, m.client_id,
                              len(m.assignment.topic_partitions)]
            if args.verbose:
                row.append(_assignment_text(m.assignment.topic_partitions))
            table.append(row)
        return format_table(headers, table)
    statuses = _partition_statuses(view)
    return format_table(OFFSET_HEADERS, [
        (r.group, r.topic, r.partition, r.offset, r.log_end_offset, r.lag, r.consumer_id,
         r.host, r.client_id, statuses.get((r.topic, r.partition)))
        for r in rows])


def _assignment_text(partitions: frozenset[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ",".join(f"{t}({','.join(map(str, ps))})" for t, ps in by_topic.items()) or "-"


def _describe_json(group: ConsumerGroupDescription, rows: Any,
                   view: Mapping[str, Any] | None = None,
                   reason: str | None = None) -> dict[str, Any]:
    from millrace.cli.common import jsonable

    entry: dict[str, Any] = jsonable(group)
    if rows is not None:
        statuses = _partition_statuses(view)
        entry["offsets"] = [dict(jsonable(r), lag=r.lag,
                                 status=statuses.get((r.topic, r.partition)))
                            for r in rows]
        entry["lag_status"] = ({k: view.get(k) for k in LAG_SUMMARY_KEYS} if view is not None
                               else {"status": None, "reason": reason})
    return entry


# ---------------------------------------------------------------------- lag status
LAG_SUMMARY_KEYS = ("status", "status_code", "complete", "totallag", "maxlag", "coordinator",
                    "isolation")
HTTP_TIMEOUT_S = 5.0


class LagStatuses:
    """Burrow's status of groups, from their coordinators' HTTP listeners (module
    docstring, ``BrokerHttp``).  Each reason for having no status is printed once (unless
    ``quiet``, for JSON output, which carries it)."""

    def __init__(self, admin: KafkaAdminClient, configs: Mapping[str, Any],
                 timeout_ms: int | None, *, quiet: bool = False) -> None:
        timeout_s = min(HTTP_TIMEOUT_S, timeout_ms / 1000) if timeout_ms else HTTP_TIMEOUT_S
        self._http = BrokerHttp(admin, configs, timeout_s)
        self._quiet = quiet
        self._reasons: dict[str, str] = {}            # group id -> why it has no status
        self._said: set[str] = set()

    def reason_for(self, group_id: str) -> str | None:
        return self._reasons.get(group_id)

    def fetch(self, group: ConsumerGroupDescription) -> dict[str, Any] | None:
        """The coordinator's ``/v1/consumer-groups/<group>`` view, or None (and why)."""
        try:
            return self._http.group_view(group)
        except BrokerHttpUnavailable as e:
            self._none(group.group_id, str(e))
            return None

    def _none(self, group_id: str, reason: str) -> None:
        self._reasons[group_id] = reason
        if not self._quiet and reason not in self._said:
            self._said.add(reason)
            print(f"No lag status (STATUS -): {reason}", file=sys.stderr)


def _partition_statuses(view: Mapping[str, Any] | None) -> dict[tuple[str, int], str]:
    if view is None:
        return {}
    return {(p["topic"], p["partition"]): p["status"] for p in view.get("partitions", ())}


def _status_line(view: Mapping[str, Any]) -> str:
    text = (f"Consumer group '{view['group']}' lag status: {view['status']} "
            f"(total lag {view['totallag']}")
    maxlag = view.get("maxlag")
    if maxlag:
        text += (f", max lag {maxlag['lag']} on {maxlag['topic']}-{maxlag['partition']} "
                 f"({maxlag['status']})")
    return text + f", window {view['complete']:.0%} complete)."


# ---------------------------------------------------------------------- delete
def delete(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        ids = _group_ids(admin, args)
        if not ids:
            raise CommandError("no consumer groups to delete")
        result = admin.delete_groups(ids)
    deleted = [g for g, f in result.items() if f.exception() is None]
    failed = {g: error_line(e) for g, e in result.errors().items()}
    if args.output == "json":
        print_json({"deleted": deleted, "failed": failed})
    else:
        if deleted:
            names = ", ".join(f"'{g}'" for g in deleted)
            print(f"Deletion of requested consumer groups ({names}) was successful.")
        for group_id, text in failed.items():
            print_error(f"Group '{group_id}' could not be deleted due to: {text}")
    return 1 if failed else 0


# ---------------------------------------------------------------------- reset-offsets
def reset_spec(args: argparse.Namespace) -> OffsetResetSpec:
    from millrace.client.admin import OffsetResetSpec

    if args.to_earliest:
        return OffsetResetSpec.to_earliest()
    if args.to_latest:
        return OffsetResetSpec.to_latest()
    if args.to_current:
        return OffsetResetSpec.to_current()
    if args.to_offset is not None:
        return OffsetResetSpec.to_offset(args.to_offset)
    if args.shift_by is not None:
        return OffsetResetSpec.shift_by(args.shift_by)
    return OffsetResetSpec.to_datetime(parse_datetime(args.to_datetime))


def parse_datetime(text: str) -> _dt.datetime:
    """ISO-8601 as kafka-consumer-groups takes it; without a zone it is local time."""
    try:
        return _dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise CommandError(f"--to-datetime: cannot parse {text!r}; expected e.g. "
                           "2024-05-01T12:00:00.000 or 2024-05-01T12:00:00+02:00") from None


def parse_topic_partitions(items: list[str]) -> tuple[list[str], list[TopicPartition]]:
    """``["a", "b:0,2"]`` -> topics ``["a"]`` (all partitions) and partitions b-0, b-2."""
    from millrace.client.admin import TopicPartition

    topics: list[str] = []
    partitions: list[TopicPartition] = []
    for item in items:
        topic, sep, numbers = item.partition(":")
        if not topic:
            raise CommandError(f"--topic: no topic name in {item!r}")
        if not sep:
            topics.append(topic)
            continue
        try:
            partitions += [TopicPartition(topic, int(n)) for n in numbers.split(",") if n]
        except ValueError:
            raise CommandError(f"--topic: bad partition list in {item!r}") from None
    return topics, partitions


def reset_offsets(args: argparse.Namespace) -> int:
    spec = reset_spec(args)
    topics: list[str] | None = None
    partitions: list[TopicPartition] | None = None
    if not args.all_topics:
        topics, partitions = parse_topic_partitions(args.topic)
    verb = "resetting" if args.execute else "computing new"
    with admin_client(args) as admin, progress_bar(f"{verb} offsets of group {args.group}"):
        new_offsets = admin.reset_group_offsets(args.group, spec, topics=topics,
                                                partitions=partitions, execute=args.execute)
    if args.output == "json":
        print_json({"group": args.group, "executed": args.execute,
                    "offsets": [{"topic": tp.topic, "partition": tp.partition, "offset": o}
                                for tp, o in new_offsets.items()]})
    else:
        print()
        print(format_table(RESET_HEADERS, [(args.group, tp.topic, tp.partition, offset)
                                           for tp, offset in new_offsets.items()]))
    if not args.execute:
        print("Dry run: no offsets were changed; add --execute to apply them.", file=sys.stderr)
    return 0

