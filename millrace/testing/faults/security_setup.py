"""What the security scenario sets up as ``admin`` before the workload starts, and what
it looks at afterwards -- all through the brokers' own APIs, as an operator would:

- ``grant_workload_acls``: exactly the ACLs the workload needs, for ``User:client``:
  Write and Read on the topic (Describe is implied), Read on the consumer group,
  IdempotentWrite on the cluster (the idempotent producers' InitProducerId);
- ``create_scram_users``: the hostile users, with random passwords
  (AlterUserScramCredentials through confluent-kafka's admin client);
- ``wait_visible``: every broker has seen both -- its DescribeAcls lists the workload's
  ACLs and each hostile user can authenticate to it -- since ACLs and credentials reach
  the other brokers through ZooKeeper change notifications, a moment later;
- ``leftover_effects``: after the run, the decoy topic must still exist and no ACL may
  name a hostile principal.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from typing import Any

from millrace.launcher.dev_security import ITERATIONS
from millrace.protocol import DescribeAclsRequest
from millrace.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from millrace.testing.faults.hostile import Broker
from millrace.testing.faults.sasl_ssl_connection import AuthenticationRefused, SaslSslConnection

DESCRIBE_ACLS_V = 2


def workload_acls(topic: str, group: str) -> list[tuple[ResourceType, str, AclOperation]]:
    return [(ResourceType.TOPIC, topic, AclOperation.WRITE),
            (ResourceType.TOPIC, topic, AclOperation.READ),
            (ResourceType.GROUP, group, AclOperation.READ),
            (ResourceType.CLUSTER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE)]


def grant_workload_acls(admin: Any, principal: str, topic: str, group: str,
                        timeout: float = 30.0) -> None:
    import confluent_kafka.admin as ck

    # the wire values are Kafka's in both (confluent-kafka calls the Cluster "BROKER")
    bindings = [ck.AclBinding(ck.ResourceType(int(rt)), name, ck.ResourcePatternType.LITERAL,
                              principal, "*", ck.AclOperation(int(op)),
                              ck.AclPermissionType.ALLOW)
                for rt, name, op in workload_acls(topic, group)]
    for future in admin.create_acls(bindings, request_timeout=timeout).values():
        future.result(timeout)


def create_scram_users(admin: Any, users: Sequence[str], timeout: float = 30.0
                       ) -> dict[str, str]:
    """Create ``users`` (SCRAM-SHA-512); their passwords."""
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )
    passwords = {u: secrets.token_urlsafe(12) for u in users}
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(u, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512,
                                                            ITERATIONS), p.encode())
        for u, p in passwords.items()], request_timeout=timeout)
    for future in futures.values():
        future.result(timeout)
    return passwords


def describe_acls(broker: Broker, ca_path: str, admin_password: str,
                  principal: str | None) -> list[tuple[int, str, int, int]]:
    """(resource type, name, operation, permission) of every ACL naming ``principal``
    (None: any), as ``broker`` itself answers DescribeAcls; [] when the broker says
    SECURITY_DISABLED (no authorizer)."""
    request = DescribeAclsRequest(
        resource_type_filter=ResourceType.ANY, resource_name_filter=None,
        pattern_type_filter=PatternType.ANY, principal_filter=principal, host_filter=None,
        operation=AclOperation.ANY, permission_type=AclPermissionType.ANY)
    with SaslSslConnection(broker.host, broker.port, ca_path, "admin", admin_password,
                           client_id="faults-admin") as conn:
        r = conn.call(request, DESCRIBE_ACLS_V)
    if r.error_code:
        return []
    return [(res.resource_type, res.resource_name, acl.operation, acl.permission_type)
            for res in r.resources for acl in res.acls]


def wait_visible(brokers: Sequence[Broker], ca_path: str, admin_password: str,
                 principal: str | None, expected_acls: int, users: dict[str, str],
                 timeout: float = 30.0) -> None:
    """Until every broker lists ``expected_acls`` ACLs of ``principal`` (skipped when
    None) and lets every one of ``users`` authenticate; RuntimeError after ``timeout``."""
    deadline = time.monotonic() + timeout
    pending = {(b.id, what) for b in brokers
               for what in ([] if principal is None else ["acls"]) + list(users)}
    last: dict[tuple[int, str], str] = {}
    while pending:
        for broker in brokers:
            for what in sorted(w for b, w in pending if b == broker.id):
                try:
                    if what == "acls":
                        n = len(describe_acls(broker, ca_path, admin_password, principal))
                        done = n >= expected_acls
                        last[(broker.id, what)] = f"{n} ACLs"
                    else:
                        with SaslSslConnection(broker.host, broker.port, ca_path, what,
                                               users[what], client_id="faults-setup"):
                            done = True
                except (OSError, ConnectionError, AuthenticationRefused) as e:
                    done = False
                    last[(broker.id, what)] = str(e)
                if done:
                    pending.discard((broker.id, what))
        if not pending:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"not visible on every broker within {timeout:.0f}s: "
                               + ", ".join(f"broker {b} {w} ({last.get((b, w), '?')})"
                                           for b, w in sorted(pending)))
        time.sleep(0.3)


def leftover_effects(admin: Any, broker: Broker, ca_path: str, admin_password: str,
                     decoy: str, hostile_users: Sequence[str]) -> list[str]:
    """What a hostile client left behind: the decoy topic deleted, ACLs in its name."""
    effects = []
    topics = admin.list_topics(timeout=15).topics
    if decoy not in topics or topics[decoy].error is not None:
        effects.append(f"the decoy topic {decoy} was deleted")
    for user in hostile_users:
        acls = describe_acls(broker, ca_path, admin_password, f"User:{user}")
        if acls:
            effects.append(f"ACLs naming User:{user}: {acls}")
    return effects
