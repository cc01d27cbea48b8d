"""Authorizer benchmark: ingest with the ACL authorizer on (100 ACLs, 10 of them
PREFIXED) against the same broker build with it off, in one run.

    .venv/bin/python bench/authorizer.py [--quick] [--repeat N] [--json out.json]

Two ``millrace broker`` child processes on this machine, both PLAINTEXT (so the
principal is ``User:ANONYMOUS``): ``acl_off`` without ``authorizer.class.name`` and
``acl_on`` with ``kafka.security.authorizer.AclAuthorizer``.  ``acl_on`` first starts
with ``super.users=User:ANONYMOUS`` to have its 100 ACLs created through CreateAcls,
then restarts without super users (they are read back from its metadata), so every
request it serves goes through the ACL lookup:

* ANONYMOUS may Write (hence Describe) topics by the PREFIXED pattern ``bench-authz-``
  and Create on the cluster (the benchmark creates its topics);
* 98 more ACLs for other principals on other names, among them 9 more PREFIXED
  patterns, a LITERAL ``*`` and DENY entries, so each decision walks the prefix lengths,
  the wildcard and the literal name as a busy cluster's would.

The cases are broker_ingest's acks=1 ones (its ``ingest`` function, imported: 100 B and
1 KiB records, confluent-kafka Producer, one partition); targets alternate order between
repeats.  The ratio is acl_on rec/s over acl_off rec/s.  Goal (reported, never
asserted): >= 0.95 -- authorization is per request and per partition, never per record.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from _common import (
    CLIENT_QUIET,
    BenchFailure,
    Goal,
    MillraceTarget,
    Result,
    Target,
    main_guard,
    parse_args,
    print_table,
    write_json,
)
from broker_ingest import CASES as INGEST_CASES
from broker_ingest import ingest_on_off
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from millrace.testing.broker_process import BrokerProcess

ON, OFF = "acl_on", "acl_off"
AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
PREFIX = "bench-authz-"
ACL_COUNT, PREFIXED_COUNT = 100, 10
CASES = tuple(c for c in INGEST_CASES if c.acks == "1")


def goal(mine: Result | None, base: Result | None) -> str:
    if mine is None or base is None or not base.rec_s:
        return ""
    return ("met" if mine.rec_s / base.rec_s >= 0.95 else "NOT met") + " (>=0.95 of acl_off)"


def bench_acls() -> list[AclBinding]:
    """The 100 bindings (module docstring): 10 PREFIXED, the benchmark's own two first."""
    allow, deny = AclPermissionType.ALLOW, AclPermissionType.DENY
    lit, pre = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
    topic, group = ResourceType.TOPIC, ResourceType.GROUP
    acls = [
        AclBinding(topic, PREFIX, pre, "User:ANONYMOUS", "*", AclOperation.WRITE, allow),
        AclBinding(ResourceType.BROKER, "kafka-cluster", lit, "User:ANONYMOUS", "*",
                   AclOperation.CREATE, allow),
        AclBinding(topic, "*", lit, "User:auditor", "*", AclOperation.DESCRIBE, allow),
        AclBinding(topic, f"{PREFIX}secret", lit, "User:intern", "*", AclOperation.ALL, deny),
    ]
    for i in range(PREFIXED_COUNT - 1):
        acls.append(AclBinding(topic, f"team{i}-", pre, f"User:team{i}", "*",
                               AclOperation.WRITE, allow))
    i = 0
    while len(acls) < ACL_COUNT:
        kind = (topic, group)[i % 2]
        op = AclOperation.READ if kind is group else (AclOperation.WRITE, AclOperation.READ,
                                                      AclOperation.DESCRIBE)[i % 3]
        acls.append(AclBinding(kind, f"app{i}", lit, f"User:svc{i % 17}",
                               "*" if i % 5 else f"10.0.{i % 250}.{i % 200 + 1}", op,
                               deny if i % 11 == 0 else allow))
        i += 1
    assert sum(a.resource_pattern_type == pre for a in acls) == PREFIXED_COUNT
    return acls


class AclOnTarget(MillraceTarget):
    """The broker with the authorizer and the 100 ACLs (no super user when timed)."""

    name = ON

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="millrace-bench-acl-")
        self.broker = BrokerProcess(Path(self._tmp.name),
                                    overrides={**AUTHORIZER, "super.users": "User:ANONYMOUS"})
        try:
            self.broker.start()
            admin = AdminClient({"bootstrap.servers": self.broker.bootstrap, **CLIENT_QUIET})
            for future in admin.create_acls(bench_acls(), request_timeout=30).values():
                future.result(30)
            self.broker.stop()
            del self.broker.overrides["super.users"]
            self.broker.start()
        except BaseException:
            self.broker.kill()
            self._tmp.cleanup()
            raise
        self.bootstrap = self.broker.bootstrap
        self.broker_pid = self.broker.proc.pid if self.broker.proc else None
        if f"ACL authorizer started: {ACL_COUNT} resource patterns" not in self.broker.logs():
            raise BenchFailure(f"acl_on: the broker did not start its authorizer with "
                               f"{ACL_COUNT} ACLs")


class AclOffTarget(MillraceTarget):
    name = OFF


@contextmanager
def targets() -> Iterator[list[Target]]:
    with ExitStack() as stack:
        off = AclOffTarget({})
        stack.callback(off.close)
        on = AclOnTarget()
        stack.callback(on.close)
        yield [off, on]


def run() -> None:
    args = parse_args(__doc__ or "")
    with targets() as ts:
        results = ingest_on_off(ts, CASES, PREFIX, args)
    goals: dict[str, Goal] = {c.name: goal for c in CASES}
    rows: list[dict[str, Any]] = print_table(
        "ingest with the ACL authorizer on (100 ACLs, 10 prefixed) vs off "
        "(confluent-kafka Producer, as broker_ingest)", results, goals, ON, OFF)
    write_json(args.json, "authorizer", rows)


if __name__ == "__main__":
    main_guard(run)
