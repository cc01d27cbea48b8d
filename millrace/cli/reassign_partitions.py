"""``millrace reassign-partitions``: move partitions to new replica sets
(``kafka-reassign-partitions`` habits; ``KafkaAdminClient.alter_partition_reassignments``).

The reassignment file is kafka-reassign-partitions' JSON:
``{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3]}, ...]}``
(the first replica is the preferred leader; ``log_dirs`` is accepted and ignored).

- ``--execute``: prints the current assignment of those partitions in the same format
  (keep it for a rollback), then submits the reassignments; they run on in the cluster.
- ``--verify``: per partition, whether its reassignment is complete, still in progress, or
  absent while the replicas differ from the file's.
- ``--cancel``: cancels the reassignments in progress of the file's partitions (the
  replica set goes back to the original replicas).
- ``--list``: every reassignment in progress, with its adding and removing replicas.

A partition the controller refuses ends the command with exit code 1; ``--output json``
prints the same facts as JSON.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from millrace.cli.common import (
    CommandError,
    admin_client,
    connection_options,
    error_line,
    print_json,
)

if TYPE_CHECKING:
    from millrace.client.admin import KafkaAdminClient, TopicPartition


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "reassign-partitions", parents=[connection_options()],
        help="move partitions to new replicas (kafka-reassign-partitions)",
        description="Move partitions to new replica sets: the controller adds the new "
                    "replicas, waits until they are in sync, then removes the old ones.")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--execute", action="store_true",
                        help="start the reassignments of --reassignment-json-file")
    action.add_argument("--verify", action="store_true",
                        help="show whether those reassignments are complete")
    action.add_argument("--cancel", action="store_true",
                        help="cancel those reassignments while in progress")
    action.add_argument("--list", action="store_true",
                        help="list every reassignment in progress")
    p.add_argument("--reassignment-json-file", metavar="FILE",
                   help='{"version":1,"partitions":[{"topic":"t","partition":0,'
                        '"replicas":[1,2]}]}')
    p.set_defaults(func=reassign_partitions)


def read_reassignment_file(path: str) -> dict[TopicPartition, list[int]]:
    """The target replicas of a kafka-reassign-partitions JSON file, in file order."""
    from millrace.client.admin import TopicPartition

    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise CommandError(f"cannot read --reassignment-json-file {path}: {e.strerror}"
                           ) from None
    except (ValueError, UnicodeDecodeError) as e:
        raise CommandError(f"--reassignment-json-file {path} is not JSON: {e}") from None
    entries = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise CommandError(f'--reassignment-json-file {path}: expected '
                           f'{{"version": 1, "partitions": [...]}}')
    out: dict[TopicPartition, list[int]] = {}
    for entry in entries:
        item = entry if isinstance(entry, dict) else {}
        topic, partition = item.get("topic"), item.get("partition")
        replicas = item.get("replicas")
        if (not isinstance(topic, str) or not topic or type(partition) is not int
                or not isinstance(replicas, list)
                or not all(type(r) is int for r in replicas)):
            raise CommandError(f"--reassignment-json-file {path}: each partition needs a "
                               f"\"topic\" string, a \"partition\" number and a \"replicas\" "
                               f"list of broker ids, got {json.dumps(entry)}")
        tp = TopicPartition(topic, partition)
        if tp in out:
            raise CommandError(f"--reassignment-json-file {path} names {tp} more than once")
        if len(set(replicas)) != len(replicas):
            raise CommandError(f"--reassignment-json-file {path}: {tp} has duplicate "
                               f"replicas {replicas}")
        out[tp] = list(replicas)
    if not out:
        raise CommandError(f"--reassignment-json-file {path} names no partitions")
    return out


def reassignment_json(assignment: dict[TopicPartition, list[int]]) -> str:
    """kafka-reassign-partitions' format, one line (as it prints it)."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "replicas": replicas,
         "log_dirs": ["any"] * len(replicas)} for tp, replicas in assignment.items()]},
        separators=(",", ":"))


def current_assignment(admin: KafkaAdminClient, partitions: list[TopicPartition]
                       ) -> dict[TopicPartition, list[int]]:
    """The replicas of ``partitions`` now, from the metadata (missing ones left out)."""
    described = admin.describe_topics(sorted({tp.topic for tp in partitions}))
    out: dict[TopicPartition, list[int]] = {}
    for tp in partitions:
        future = described.get(tp.topic)
        if future is None or future.exception() is not None:
            continue
        for info in future.result().partitions:
            if info.partition == tp.partition:
                out[tp] = [n.id for n in info.replicas]
    return out


def reassign_partitions(args: argparse.Namespace) -> int:
    if args.list:
        if args.reassignment_json_file is not None:
            raise CommandError("--list takes no --reassignment-json-file")
        with admin_client(args) as admin:
            return _list(args, admin)
    if args.reassignment_json_file is None:
        raise CommandError("--execute, --verify and --cancel need --reassignment-json-file")
    targets = read_reassignment_file(args.reassignment_json_file)
    with admin_client(args) as admin:
        if args.execute:
            return _execute(args, admin, targets)
        if args.verify:
            return _verify(args, admin, targets)
        return _cancel(args, admin, targets)


def _submit(admin: KafkaAdminClient, reassignments: dict[TopicPartition, list[int] | None]
            ) -> tuple[list[str], dict[str, str]]:
    result = admin.alter_partition_reassignments(reassignments)
    done = [str(tp) for tp, f in result.items() if f.exception() is None]
    failed = {str(tp): error_line(e) for tp, f in result.items()
              if (e := f.exception()) is not None}
    return done, failed


def _execute(args: argparse.Namespace, admin: KafkaAdminClient,
             targets: dict[TopicPartition, list[int]]) -> int:
    current = current_assignment(admin, list(targets))
    started, failed = _submit(admin, dict(targets))
    if args.output == "json":
        print_json({"current": json.loads(reassignment_json(current)), "started": started,
                    "failed": failed})
    else:
        print("Current partition replica assignment\n")
        print(reassignment_json(current))
        print("\nSave this to use as the --reassignment-json-file option during rollback")
        if started:
            print(f"Successfully started partition reassignment(s) for {','.join(started)}")
        for tp_text, message in failed.items():
            print(f"Error reassigning partition {tp_text}: {message}")
    if failed:
        raise CommandError(f"{len(failed)} partition reassignment(s) could not be started")
    return 0


def _verify(args: argparse.Namespace, admin: KafkaAdminClient,
            targets: dict[TopicPartition, list[int]]) -> int:
    ongoing = admin.list_partition_reassignments(list(targets))
    current = current_assignment(admin, list(targets))
    status: dict[str, str] = {}
    lines: list[str] = []
    for tp, replicas in targets.items():
        if tp in ongoing:
            status[str(tp)] = "in_progress"
            lines.append(f"Reassignment of partition {tp} is still in progress.")
        elif current.get(tp) == replicas:
            status[str(tp)] = "complete"
            lines.append(f"Reassignment of partition {tp} is completed.")
        else:
            status[str(tp)] = "absent"
            now = ",".join(str(r) for r in current.get(tp, []))
            lines.append(f"There is no active reassignment of partition {tp}, but replica "
                         f"set is {now} rather than {','.join(str(r) for r in replicas)}.")
    if args.output == "json":
        print_json({"partitions": status})
    else:
        print("Status of partition reassignment:")
        print("\n".join(lines))
    return 0


def _cancel(args: argparse.Namespace, admin: KafkaAdminClient,
            targets: dict[TopicPartition, list[int]]) -> int:
    cancelled, failed = _submit(admin, dict.fromkeys(targets))
    if args.output == "json":
        print_json({"cancelled": cancelled, "failed": failed})
    else:
        if cancelled:
            print(f"Successfully cancelled partition reassignment(s) for: "
                  f"{','.join(cancelled)}")
        for tp_text, message in failed.items():
            print(f"Error cancelling reassignment of partition {tp_text}: {message}")
    if failed:
        raise CommandError(f"{len(failed)} partition reassignment(s) could not be cancelled")
    return 0


def _list(args: argparse.Namespace, admin: KafkaAdminClient) -> int:
    ongoing = admin.list_partition_reassignments()
    if args.output == "json":
        doc: dict[str, Any] = {str(tp): {"replicas": list(r.replicas),
                                         "adding_replicas": list(r.adding_replicas),
                                         "removing_replicas": list(r.removing_replicas)}
                               for tp, r in sorted(ongoing.items())}
        print_json({"reassignments": doc})
    elif not ongoing:
        print("No partition reassignments found.")
    else:
        print("Current partition reassignments:")
        for tp, r in sorted(ongoing.items()):
            print(f"{tp}: replicas: {_ids(r.replicas)}. adding: {_ids(r.adding_replicas)}. "
                  f"removing: {_ids(r.removing_replicas)}.")
    return 0


def _ids(ids: tuple[int, ...]) -> str:
    return ",".join(str(i) for i in ids)
