"""``millrace acls`` (kafka-acls habits; Java ``kafka.admin.AclCommand``): add, list and
remove ACLs through a broker (CreateAcls, DescribeAcls, DeleteAcls).

    millrace acls --add --allow-principal User:alice --operation Read --topic orders
    millrace acls --add --producer --allow-principal User:app --topic orders --idempotent
    millrace acls --add --consumer --allow-principal User:app --topic orders --group billing
    millrace acls --list [--topic orders --resource-pattern-type match] [--principal User:alice]
    millrace acls --remove --force --topic orders [--allow-principal User:alice --operation Read]

Theory: the command line becomes resource pattern filters -- each ``--topic``, ``--group``,
``--transactional-id`` (``*``: all of them) taken with ``--resource-pattern-type`` (default
literal), and ``--cluster`` -- and, for each filter, the entries principal x operation x
host: ``--allow-principal``/``--deny-principal`` with their ``--allow-host``/``--deny-host``
(``*`` unless given) and ``--operation`` (default All), or the convenience sets.
``--producer``: Write, Describe, Create on the topics, Write, Describe on the transactional
ids, and with ``--idempotent`` IdempotentWrite on the cluster.  ``--consumer``: Read,
Describe on the topics, Read on the groups.  Both may be given together.

* ``--add`` creates every binding (pattern type literal or prefixed only) and prints them
  per resource as kafka-acls does.
* ``--remove`` deletes, per filter, the ACLs matching its entries -- every ACL of the filter
  when no principal is given -- after asking ``y/n`` per filter on a terminal; ``--force``
  does not ask, and without a terminal on stdin the command refuses rather than guess.
* ``--list`` describes each filter (every ACL without one) and prints the ACLs per resource
  pattern, sorted; ``--principal`` keeps those of the principals named.

Kafka 3.9's argument rules hold (exactly one action; ``--list`` takes no ``--allow-*``,
``--deny-*``, ``--producer``, ``--consumer``; the convenience sets take no ``--operation`` or
``--deny-*``; ``--producer`` needs ``--topic``, ``--consumer`` ``--topic`` and ``--group``;
an operation the resource type does not have is refused; ``--add`` needs a principal).
Where kafka-acls silently ignores an argument this command refuses it instead: a host
without a principal and ``--producer``/``--consumer`` without ``--allow-principal``
(``--remove`` would then delete every ACL of the resources, the cluster's too), ``--cluster``
with a prefixed pattern or next to ``--producer``/``--consumer``, ``--group`` with
``--producer`` alone, ``--operation`` with ``--list``.  ``--cluster`` with ``any``/``match``
keeps that pattern type (kafka-acls drops the cluster, and lists every ACL).  Added ACLs are
checked as the broker checks them (``validate_binding``): ``User:`` principals, hosts ``*``
or an IP address.

A refused command line is one line, exit status 2; a broker's error (SECURITY_DISABLED
without an authorizer, CLUSTER_AUTHORIZATION_FAILED) one ``Error:`` line, exit status 1.
``--output json`` prints the bindings added, removed or listed as a list of objects.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NoReturn

from millrace.cli.common import (
    CommandError,
    admin_client,
    connection_options,
    error_line,
    print_error,
    print_json,
)
from millrace.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    validate_binding,
)

if TYPE_CHECKING:
    from millrace.client.admin import KafkaAdminClient

ADD, REMOVE, LIST = "add", "remove", "list"
PATTERN_TYPES = ("literal", "prefixed", "match", "any")
RESOURCE_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                  ResourceType.TRANSACTIONAL_ID)
# All and the operations of the resource types above (not the tokens' of users)
OPERATIONS = tuple(op for op in AclOperation if op is AclOperation.ALL or any(
    op in SUPPORTED_OPERATIONS[t] for t in RESOURCE_TYPES))
PRODUCER_TOPIC_OPS = (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE)
PRODUCER_TRANSACTIONAL_ID_OPS = (AclOperation.WRITE, AclOperation.DESCRIBE)
CONSUMER_TOPIC_OPS = (AclOperation.READ, AclOperation.DESCRIBE)
CONSUMER_GROUP_OPS = (AclOperation.READ,)
RESOURCE_OPTIONS = "--topic, --group, --cluster or --transactional-id"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "acls", parents=[connection_options()], help="add, list and remove ACLs",
        description="Add, list and remove ACLs through a broker, as kafka-acls does: "
                    "exactly one of --add, --remove, --list.  The broker needs an "
                    "authorizer (authorizer.class.name) and the caller Alter (add, remove) "
                    "or Describe (list) on the cluster.")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true",
                        help="remove ACLs (asks first, unless --force)")
    action.add_argument("--list", action="store_true",
                        help="list ACLs (of the resources given, else all)")
    who = p.add_argument_group("who, from where, what")
    who.add_argument("--allow-principal", action="append", metavar="TYPE:NAME",
                     help="principal to allow, e.g. User:alice; User:* is everyone "
                          "(repeatable)")
    who.add_argument("--deny-principal", action="append", metavar="TYPE:NAME",
                     help="principal to deny; deny wins over allow (repeatable)")
    who.add_argument("--allow-host", action="append", metavar="HOST",
                     help="IP address the allowed principals may come from (repeatable; "
                          "default *: any)")
    who.add_argument("--deny-host", action="append", metavar="HOST",
                     help="IP address the denied principals are denied from (repeatable; "
                          "default *: any)")
    who.add_argument("--operation", action="append", metavar="OP",
                     help="operation to allow or deny, case-insensitive: "
                          f"{', '.join(op.kafka_name for op in OPERATIONS)} (repeatable; "
                          "default All)")
    who.add_argument("--principal", action="append", metavar="TYPE:NAME",
                     help="with --list: only the ACLs of this principal (repeatable)")
    on = p.add_argument_group("on which resources")
    on.add_argument("--topic", action="append", metavar="TOPIC",
                    help="a topic; * is every topic (repeatable)")
    on.add_argument("--group", action="append", metavar="GROUP",
                    help="a consumer group; * is every group (repeatable)")
    on.add_argument("--cluster", action="store_true", help="the cluster")
    on.add_argument("--transactional-id", action="append", metavar="ID",
                    help="a transactional id; * is every one (repeatable)")
    on.add_argument("--resource-pattern-type", type=str.lower, default="literal",
                    choices=PATTERN_TYPES, metavar="{literal,prefixed,match,any}",
                    help="how --topic/--group/--transactional-id names are taken "
                         "(default literal): prefixed = every name starting so; list and "
                         "remove also take any (this name, whatever the pattern type) and "
                         "match (every ACL that applies to this name -- remove with care)")
    sets = p.add_argument_group("convenience sets")
    sets.add_argument("--producer", action="store_true",
                      help="Write, Describe, Create on --topic; Write, Describe on "
                           "--transactional-id")
    sets.add_argument("--idempotent", action="store_true",
                      help="with --producer: IdempotentWrite on the cluster")
    sets.add_argument("--consumer", action="store_true",
                      help="Read, Describe on --topic; Read on --group (both required)")
    p.add_argument("--force", action="store_true", help="remove without asking")

    def run_acls(args: argparse.Namespace) -> int:
        return run(args, p)
    p.set_defaults(func=run_acls)


# ---------------------------------------------------------------------- the plan
@dataclass
class AclPlan:
    """What a command line asks for: per resource pattern filter (in order), its entries.
    ``--list`` plans have no entries; ``principals`` are ``--list --principal``."""

    action: str
    entries: dict[ResourcePatternFilter, list[AccessControlEntry]] = field(default_factory=dict)
    principals: list[str] = field(default_factory=list)

    def bindings(self) -> list[AclBinding]:
        """``--add``: every (pattern, entry) binding."""
        return [AclBinding(pattern_of(f), e) for f, entries in self.entries.items()
                for e in entries]

    def delete_filters(self) -> list[AclBindingFilter]:
        """``--remove``: per filter, one filter per entry, or every ACL when it has none."""
        return [flt for f in self.entries for flt in self.filters_of(f)]

    def filters_of(self, pattern: ResourcePatternFilter) -> list[AclBindingFilter]:
        entries = self.entries[pattern]
        if not entries:
            return [AclBindingFilter(pattern, AccessControlEntryFilter.ANY)]
        return [AclBindingFilter(pattern, e.to_filter()) for e in entries]

    def describe_filters(self) -> list[AclBindingFilter]:
        """``--list``: every ACL of each filter, or every ACL there is."""
        if not self.entries:
            return [AclBindingFilter.ANY]
        return [AclBindingFilter(f, AccessControlEntryFilter.ANY) for f in self.entries]


def pattern_of(flt: ResourcePatternFilter) -> ResourcePattern:
    assert flt.name is not None
    return ResourcePattern(flt.resource_type, flt.name, flt.pattern_type)


def build_plan(args: argparse.Namespace) -> AclPlan:
    """The plan of a parsed ``millrace acls`` command line; ``CommandError`` naming the
    argument for one kafka-acls (or this command, module docstring) refuses."""
    action = ADD if args.add else REMOVE if args.remove else LIST
    _check_combinations(args, action)
    pattern_type = PatternType.from_kafka_name(args.resource_pattern_type)
    if action == ADD and pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise CommandError(f"--resource-pattern-type {args.resource_pattern_type} is not valid "
                           "when adding ACLs (literal or prefixed)")
    filters = resource_filters(args, pattern_type)
    if action == LIST:
        principals = [parse_principal(p, "--principal") for p in args.principal or ()]
        return AclPlan(LIST, {f: [] for f in filters}, list(dict.fromkeys(principals)))
    if not filters:
        raise CommandError(f"give at least one resource: {RESOURCE_OPTIONS}")
    if args.producer or args.consumer:
        entries = _convenience_entries(args, filters)
    else:
        operations = [parse_operation(op) for op in args.operation or ["All"]]
        chosen = principal_entries(args, operations)
        entries = {f: list(chosen) for f in filters}
    _check_operations(entries)
    if action == ADD:
        if any(not e for e in entries.values()):
            raise CommandError("give --allow-principal or --deny-principal to add ACLs")
        for f, es in entries.items():
            for e in es:
                why = validate_binding(AclBinding(pattern_of(f), e))
                if why is not None:
                    raise CommandError(why)
    return AclPlan(action, entries)


def _check_combinations(args: argparse.Namespace, action: str) -> None:
    def given(*names: str) -> list[str]:
        return [f"--{n.replace('_', '-')}" for n in names if getattr(args, n)]

    if action == LIST:
        if bad := given("producer", "consumer", "allow_principal", "deny_principal",
                        "allow_host", "deny_host", "operation"):
            raise CommandError(f"--list cannot be used with {bad[0]}")
    elif args.principal:
        raise CommandError("--principal goes with --list only (to add or remove: "
                           "--allow-principal, --deny-principal)")
    if args.producer or args.consumer:
        which = "--producer" if args.producer else "--consumer"
        if bad := given("operation", "deny_principal", "deny_host", "cluster"):
            hint = " (--idempotent adds IdempotentWrite on it)" if bad[0] == "--cluster" else ""
            raise CommandError(f"{which} cannot be used with {bad[0]}{hint}")
        if not args.allow_principal:
            # kafka-acls' --remove would take every ACL of the resources (the cluster's too)
            raise CommandError(f"{which} needs --allow-principal")
    if args.idempotent and not args.producer:
        raise CommandError("--idempotent goes with --producer only")
    if args.producer and not args.topic:
        raise CommandError("--producer needs --topic")
    if args.consumer and not (args.topic and args.group):
        raise CommandError("--consumer needs --topic and --group")
    if args.consumer and not args.producer and args.transactional_id:
        raise CommandError("--consumer cannot be used with --transactional-id (with "
                           "--producer it can)")
    if args.producer and not args.consumer and args.group:
        raise CommandError("--producer cannot be used with --group (with --consumer it can)")
    for hosts, principals in (("allow_host", "allow_principal"),
                              ("deny_host", "deny_principal")):
        if getattr(args, hosts) and not getattr(args, principals):
            raise CommandError(f"--{hosts.replace('_', '-')} needs "
                               f"--{principals.replace('_', '-')}")


def resource_filters(args: argparse.Namespace, pattern_type: PatternType
                     ) -> list[ResourcePatternFilter]:
    """The resources named, in kafka-acls' order (topics, cluster, groups, transactional
    ids), each once."""
    out: list[ResourcePatternFilter] = []
    for option, resource_type, names in (("--topic", ResourceType.TOPIC, args.topic),
                                         ("--cluster", ResourceType.CLUSTER, None),
                                         ("--group", ResourceType.GROUP, args.group),
                                         ("--transactional-id", ResourceType.TRANSACTIONAL_ID,
                                          args.transactional_id)):
        if resource_type is ResourceType.CLUSTER:
            if args.cluster:
                if pattern_type is PatternType.PREFIXED:
                    raise CommandError("--cluster has no prefixed pattern: give "
                                       "--resource-pattern-type literal (the default)")
                out.append(ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME,
                                                 pattern_type))
            continue
        for raw in names or ():
            name = raw.strip()
            if not name:
                raise CommandError(f"{option} needs a name, got {raw!r}")
            out.append(ResourcePatternFilter(resource_type, name, pattern_type))
    return list(dict.fromkeys(out))


def parse_operation(name: str) -> AclOperation:
    try:
        op = AclOperation.from_kafka_name(name)
    except ValueError:
        op = AclOperation.UNKNOWN
    if op not in OPERATIONS:
        raise CommandError(f"--operation: unknown operation {name!r} (one of "
                           f"{', '.join(o.kafka_name for o in OPERATIONS)})")
    return op


def parse_principal(text: str, option: str) -> str:
    principal = text.strip()
    principal_type, _, name = principal.partition(":")
    if not principal_type or not name:
        raise CommandError(f"{option}: expected principalType:name (User:alice; User:* for "
                           f"everyone), got {text!r}")
    return principal


def _hosts(items: list[str] | None, option: str) -> list[str]:
    hosts = [h.strip() for h in items or ()]
    if any(not h for h in hosts):
        raise CommandError(f"{option} needs a host (an IP address or *)")
    return list(dict.fromkeys(hosts)) or [WILDCARD_HOST]


def principal_entries(args: argparse.Namespace, operations: Sequence[AclOperation]
                      ) -> list[AccessControlEntry]:
    """Each allowed principal x operation x allowed host, then the same for the denied."""
    out: list[AccessControlEntry] = []
    for permission, principals_option, hosts_option in (
            (AclPermissionType.ALLOW, "allow_principal", "allow_host"),
            (AclPermissionType.DENY, "deny_principal", "deny_host")):
        flag = f"--{principals_option.replace('_', '-')}"
        principals = [parse_principal(p, flag) for p in getattr(args, principals_option) or ()]
        if not principals:
            continue
        hosts = _hosts(getattr(args, hosts_option), f"--{hosts_option.replace('_', '-')}")
        out += [AccessControlEntry(p, h, op, permission)
                for p in dict.fromkeys(principals) for op in dict.fromkeys(operations)
                for h in hosts]
    return list(dict.fromkeys(out))


def _convenience_entries(args: argparse.Namespace, filters: list[ResourcePatternFilter]
                         ) -> dict[ResourcePatternFilter, list[AccessControlEntry]]:
    out: dict[ResourcePatternFilter, list[AccessControlEntry]] = {}

    def grant(resource_type: ResourceType, operations: Sequence[AclOperation]) -> None:
        for f in filters:
            if f.resource_type is resource_type:
                out[f] = list(dict.fromkeys([*out.get(f, []),
                                             *principal_entries(args, operations)]))

    if args.producer:
        grant(ResourceType.TOPIC, PRODUCER_TOPIC_OPS)
        grant(ResourceType.TRANSACTIONAL_ID, PRODUCER_TRANSACTIONAL_ID_OPS)
        if args.idempotent:
            # the cluster's one pattern is literal, whatever the topics' pattern type
            cluster = ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME,
                                            PatternType.LITERAL)
            out[cluster] = principal_entries(args, [AclOperation.IDEMPOTENT_WRITE])
    if args.consumer:
        grant(ResourceType.TOPIC, CONSUMER_TOPIC_OPS)
        grant(ResourceType.GROUP, CONSUMER_GROUP_OPS)
    return out


def _check_operations(entries: dict[ResourcePatternFilter, list[AccessControlEntry]]) -> None:
    for f, es in entries.items():
        supported = SUPPORTED_OPERATIONS[f.resource_type] | {AclOperation.ALL}
        wrong = list(dict.fromkeys(e.operation for e in es if e.operation not in supported))
        if wrong:
            names = ", ".join(op.kafka_name for op in wrong)
            valid = ", ".join(sorted(op.kafka_name for op in supported))
            raise CommandError(f"--operation {names}: not an operation of "
                               f"{f.resource_type.name} resources ({valid})")


# ---------------------------------------------------------------------- output
def pattern_text(p: ResourcePattern | ResourcePatternFilter) -> str:
    """Kafka's ``ResourcePattern.toString`` (a filter's too, ``<any>`` for no name)."""
    name = "<any>" if p.name is None else p.name
    return (f"ResourcePattern(resourceType={p.resource_type.name}, name={name}, "
            f"patternType={p.pattern_type.name})")


def entry_text(e: AccessControlEntry) -> str:
    """Kafka's ``AccessControlEntry.toString``."""
    return (f"(principal={e.principal}, host={e.host}, operation={e.operation.name}, "
            f"permissionType={e.permission_type.name})")


def acl_block(heading: str, pattern: ResourcePattern | ResourcePatternFilter,
              entries: Iterable[AccessControlEntry]) -> str:
    """kafka-acls' block, odd spaces and all: ``<heading> `<pattern>`: `` then a line per
    ACL (the first after a space), each tab-indented, and a blank line."""
    acls = "\n".join("\t" + entry_text(e) for e in entries)
    return f"{heading} `{pattern_text(pattern)}`: \n {acls} \n"


def binding_json(b: AclBinding) -> dict[str, str]:
    return {"resource_type": b.pattern.resource_type.name, "name": b.pattern.name,
            "pattern_type": b.pattern.pattern_type.name, "principal": b.entry.principal,
            "host": b.entry.host, "operation": b.entry.operation.name,
            "permission_type": b.entry.permission_type.name}


def _entry_key(e: AccessControlEntry) -> tuple[str, str, int, int]:
    return (e.principal, e.host, e.operation, e.permission_type)


def by_pattern(bindings: Iterable[AclBinding], *, sort: bool = False
               ) -> dict[ResourcePattern, list[AccessControlEntry]]:
    """Bindings grouped by resource pattern, each entry once; ``sort``: patterns by type,
    name and pattern type, entries by principal, host, operation and permission."""
    out: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in bindings:
        entries = out.setdefault(b.pattern, [])
        if b.entry not in entries:
            entries.append(b.entry)
    if sort:
        out = {p: sorted(out[p], key=_entry_key) for p in sorted(
            out, key=lambda p: (p.resource_type, p.name, p.pattern_type))}
    return out


def _print_blocks(heading: str, grouped: dict[ResourcePattern, list[AccessControlEntry]]
                  ) -> None:
    for pattern, entries in grouped.items():
        print(acl_block(heading, pattern, entries))


def _report_errors(failed: list[tuple[str, BaseException]], *, all_failed: bool) -> None:
    """An ``Error:`` line per failed item, naming it -- or, when every item failed with the
    same error, that error alone (no authorizer: SECURITY_DISABLED once, not per ACL)."""
    lines = list(dict.fromkeys(error_line(error) for _, error in failed))
    if all_failed and len(lines) == 1:
        print_error(lines[0])
        return
    for what, error in failed:
        print_error(f"{what}: {error_line(error)}")


# ---------------------------------------------------------------------- actions
def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    try:
        plan = build_plan(args)
    except CommandError as e:
        _refuse(parser, str(e))
    if plan.action == REMOVE and not args.force and not _stdin_is_terminal():
        raise CommandError("--remove asks before deleting ACLs and stdin is not a terminal: "
                           "give --force to remove without asking")
    with admin_client(args) as admin:
        if plan.action == ADD:
            return add(admin, plan, args)
        if plan.action == REMOVE:
            return remove(admin, plan, args)
        return list_(admin, plan, args)


def _refuse(parser: argparse.ArgumentParser, message: str) -> NoReturn:
    parser.error(message)
    raise AssertionError("unreachable")  # parser.error exits


def _stdin_is_terminal() -> bool:
    isatty = getattr(sys.stdin, "isatty", None)
    return bool(callable(isatty) and isatty())


def add(admin: KafkaAdminClient, plan: AclPlan, args: argparse.Namespace) -> int:
    bindings = plan.bindings()
    result = admin.create_acls(bindings)
    created = [b for b in bindings if result[b].exception() is None]
    failed = [(f"adding {entry_text(b.entry)} on `{pattern_text(b.pattern)}`", error)
              for b in bindings if (error := result[b].exception()) is not None]
    if args.output == "json":
        print_json([binding_json(b) for b in created])
    else:
        _print_blocks("Adding ACLs for resource", by_pattern(created))
    _report_errors(failed, all_failed=not created)
    return 1 if failed else 0


def _confirm(question: str) -> bool:
    """Ask on stderr (stdout stays the command's output), read one line of stdin."""
    print(question, file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower() == "y"


def remove(admin: KafkaAdminClient, plan: AclPlan, args: argparse.Namespace) -> int:
    filters: list[AclBindingFilter] = []
    for pattern, entries in plan.entries.items():
        if not args.force:
            if entries:
                acls = "\n".join("\t" + entry_text(e) for e in entries)
                question = (f"Are you sure you want to remove ACLs: \n {acls} \n from resource "
                            f"filter `{pattern_text(pattern)}`? (y/n)")
            else:
                question = (f"Are you sure you want to delete all ACLs for resource filter "
                            f"`{pattern_text(pattern)}`? (y/n)")
            if not _confirm(question):
                continue
        filters += plan.filters_of(pattern)
    if not filters:
        return 0
    result = admin.delete_acls(filters)
    removed: list[AclBinding] = []
    failed: list[tuple[str, BaseException]] = []
    for flt in filters:
        error = result[flt].exception()
        if error is not None:
            failed.append((f"removing ACLs matching `{pattern_text(flt.pattern_filter)}`", error))
            continue
        for matched in result[flt].result():
            if matched.error is None:
                removed.append(matched.binding)
            else:
                failed.append((f"removing {entry_text(matched.binding.entry)} on "
                               f"`{pattern_text(matched.binding.pattern)}`", matched.error))
    grouped = by_pattern(removed, sort=True)
    if args.output == "json":
        print_json([binding_json(AclBinding(p, e)) for p, es in grouped.items() for e in es])
    elif grouped:
        _print_blocks("Removed ACLs for resource", grouped)
    elif not failed:
        print("No ACLs matched.")
    _report_errors(failed, all_failed=not removed)
    return 1 if failed else 0


def list_(admin: KafkaAdminClient, plan: AclPlan, args: argparse.Namespace) -> int:
    found: list[AclBinding] = []
    for flt in plan.describe_filters():
        found += admin.describe_acls(flt)
    grouped = by_pattern(found, sort=True)
    if args.output == "json":
        bindings = [AclBinding(p, e) for p, es in grouped.items() for e in es]
        if plan.principals:
            bindings = [b for b in bindings if b.entry.principal in plan.principals]
        print_json([binding_json(b) for b in bindings])
        return 0
    if not plan.principals:
        _print_blocks("Current ACLs for resource", grouped)
        return 0
    for principal in plan.principals:
        print(f"ACLs for principal `{principal}`")
        _print_blocks("Current ACLs for resource", _of_principal(grouped, principal))
    return 0


def _of_principal(grouped: dict[ResourcePattern, list[AccessControlEntry]], principal: str
                  ) -> dict[ResourcePattern, list[AccessControlEntry]]:
    out = {p: [e for e in es if e.principal == principal] for p, es in grouped.items()}
    return {p: es for p, es in out.items() if es}

