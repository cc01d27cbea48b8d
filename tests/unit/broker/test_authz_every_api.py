"""Every API the broker serves, with and without the permission reference security.md 5
names for it (issue 23: "an API added later without a check fails that test").

``TABLE`` holds, per API key, what 5 says: the operation and resource to grant, a minimal
request (``authz_requests``), where the refusal shows in the answer and with which code.
The walk goes over ``HANDLERS`` (every served key): a key without a row fails, naming the
API.  Each row runs at the oldest and the newest version the broker serves (within the
row's range), each run on a fresh in-process broker with the authorizer on:

- *refused*: ``User:bob`` without any ACL, naming resources that do not exist -- every
  error slot of the first permission holds its code (29/30/31/53), not "unknown": an
  unauthorized caller cannot probe names (a request naming its topic by id names the
  existing one: ids are not probed by name); then again naming existing resources;
  a refused request changes nothing (topics, their logs and configs, ACLs, SCRAM users,
  quotas, committed offsets, transactions);
- *without X* (APIs needing two or three permissions): everything granted but X, on
  resources that exist -- X's code in X's slots, nothing changed;
- *granted*: exactly the ACLs the row names (each alternative in turn) -- no
  authorization code anywhere in the answer (any other error is fine: not the
  controller, unknown member...);
- *super user*: ``User:admin`` (``super.users``) without ACLs -- none anywhere either.

APIs that filter instead of failing (all-topics Metadata, ListGroups, ListTransactions,
OffsetFetch of all topics, the authorized-operations fields) are checked by what they
omit: the resource is missing from the answer without the permission, there with it,
and the answer carries no authorization code.  ApiVersions and the SASL APIs need none.

``check_api`` is the checker.  Its negative controls: every row's handler run with
``services.acls`` None (as a handler without any check behaves), every two-permission
row's handler with one of its checks answered yes, and a served key without a row -- the
checker must report each.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from millrace.broker.api_version_manager import ApiVersionManager
from millrace.broker.context import RequestContext
from millrace.broker.handlers import HANDLERS, Handler, load_all
from millrace.broker.metadata import BrokerRegistration
from millrace.broker.security.authorizer import Action
from millrace.common.errors import Errors
from millrace.protocol import ApiKey
from millrace.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from millrace.security.kafka_principal import KafkaPrincipal
from tests.unit.broker import authz_requests as rq
from tests.unit.broker.authz_requests import Builder, Names, Reader, at, by_version, listing
from tests.unit.broker.brokergen import AUTHORIZER, Broker

load_all()

BOB = KafkaPrincipal.user("bob")
ADMIN = KafkaPrincipal.user("admin")
REAL = Names(topic="orders", group="orders-app", txn="orders-txn")
GHOST = Names(topic="ghost-orders", group="ghost-app", txn="ghost-txn")
"""Resources that never exist: what the refused run names."""
TIMEOUT_S = 5.0

TOPIC_AUTH = int(Errors.TOPIC_AUTHORIZATION_FAILED)                    # 29
GROUP_AUTH = int(Errors.GROUP_AUTHORIZATION_FAILED)                    # 30
CLUSTER_AUTH = int(Errors.CLUSTER_AUTHORIZATION_FAILED)                # 31
TXN_AUTH = int(Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)           # 53
AUTH_CODES = frozenset({TOPIC_AUTH, GROUP_AUTH, CLUSTER_AUTH, TXN_AUTH})
CODE_NAMES = {int(e): e.name for e in Errors}

Op, Res = AclOperation, ResourceType


@dataclass(frozen=True)
class Acl:
    """One ALLOW for the run's principal; ``name`` may say ``{topic}``, ``{group}`` or
    ``{txn}`` (the run's names)."""

    operation: AclOperation
    resource_type: ResourceType
    name: str = CLUSTER_NAME

    def binding(self, principal: KafkaPrincipal, names: Names) -> AclBinding:
        name = self.name.format(topic=names.topic, group=names.group, txn=names.txn)
        return AclBinding(ResourcePattern(self.resource_type, name, PatternType.LITERAL),
                          AccessControlEntry(str(principal), "*", self.operation,
                                             AclPermissionType.ALLOW))

    def __str__(self) -> str:
        return f"{self.operation.name} on {self.resource_type.name} {self.name}"


def topic(op: AclOperation) -> Acl:
    return Acl(op, Res.TOPIC, "{topic}")


def group(op: AclOperation) -> Acl:
    return Acl(op, Res.GROUP, "{group}")


def txn(op: AclOperation) -> Acl:
    return Acl(op, Res.TRANSACTIONAL_ID, "{txn}")


def cluster(op: AclOperation) -> Acl:
    return Acl(op, Res.CLUSTER)


@dataclass(frozen=True)
class Need:
    """One permission an API needs: any of ``grants`` gives it; without it every slot
    ``slots`` reads holds ``error`` and (``blocks``) nothing changes.  ``since``: the first
    version it applies to."""

    grants: tuple[Acl, ...]
    error: int
    slots: Reader
    since: int = 0
    blocks: bool = True

    def __str__(self) -> str:
        return " or ".join(map(str, self.grants))


Setup = Callable[[Broker], Awaitable[None]]


async def _topic_exists(b: Broker) -> None:
    b.create_topic(REAL.topic)


async def _nothing(b: Broker) -> None:
    return None


@dataclass(frozen=True)
class Row:
    """An API (or one form of it) and what 5 says it needs.

    ``needs`` in Kafka's checking order (empty: none needed).  ``shows`` (filtering APIs):
    any of these makes ``listed`` true -- the run's resource appears in the answer;
    ``base`` is granted in every run of a filtering row.  ``setup`` runs as the super
    user before each run (default: the topic exists).  ``versions``: the range this row
    covers, within what the broker serves."""

    key: ApiKey
    label: str
    build: Builder
    needs: tuple[Need, ...] = ()
    shows: tuple[Acl, ...] = ()
    listed: Callable[[Any, Names], bool] | None = None
    base: tuple[Acl, ...] = ()
    setup: Setup = _topic_exists
    versions: tuple[int, int] = (0, 0x7FFF)
    ids_since: int = 0x7FFF
    """From this version the request names its topic by id: an id cannot be probed by
    name, so the refused run names the existing topic (by its id)."""

    @property
    def filters(self) -> bool:
        return self.listed is not None


# ---------------------------------------------------------------------- slots
PRODUCE_SLOTS = at("responses.partition_responses.error_code")
PARTITION_SLOTS = at("topics.partitions.error_code")
OFFSET_FETCH_GROUP = by_version((0, PARTITION_SLOTS), (2, at("error_code")),
                                (8, at("groups.error_code")))
OFFSET_FETCH_TOPIC = by_version((0, PARTITION_SLOTS),
                                (8, at("groups.topics.partitions.error_code")))
FIND_COORDINATOR_SLOTS = by_version((0, at("error_code")), (4, at("coordinators.error_code")))
TOP = at("error_code")
ALONE = listing(TOP)
"""APIs whose answer has one error: it holds the code (and nothing else holds another)."""
APPEND_TXN_SLOTS = at("results_by_topic_v3_and_below.results_by_partition.partition_error_code")


def _topic_listed(resp: Any, n: Names) -> bool:
    return n.topic in [t.name for t in resp.topics]


def _cluster_describe_bit(resp: Any, n: Names) -> bool:
    return bool(resp.cluster_authorized_operations & (1 << AclOperation.DESCRIBE))


def _log_dirs_list_topic(resp: Any, n: Names) -> bool:
    return n.topic in [t.name for r in resp.results for t in r.topics]


def _group_listed(resp: Any, n: Names) -> bool:
    return n.group in [g.group_id for g in resp.groups]


def _offsets_listed(resp: Any, n: Names) -> bool:
    topics = [t for g in resp.groups for t in g.topics] if resp.groups else resp.topics
    return n.topic in [t.name for t in topics or ()]


def _txn_listed(resp: Any, n: Names) -> bool:
    return n.txn in [s.transactional_id for s in resp.transaction_states]


# ---------------------------------------------------------------------- setups (as admin)
async def _committed_offsets(b: Broker) -> None:
    """The topic exists and the group has committed an offset for it."""
    b.create_topic(REAL.topic)
    got = await b.call(ApiKey.OFFSET_COMMIT, 8, rq.offset_commit(REAL, 8), principal=ADMIN)
    assert PARTITION_SLOTS(got, 8) == [0], got


async def _transaction_exists(b: Broker) -> None:
    """The transactional id has a producer id (its transaction state exists)."""
    b.create_topic(REAL.topic)
    got = await b.call(ApiKey.INIT_PRODUCER_ID, 4, rq.init_producer_id_transactional(REAL, 4),
                       principal=ADMIN)
    assert got.error_code == 0, got


# ---------------------------------------------------------------------- the table
K = ApiKey
TABLE: tuple[Row, ...] = (
    # --- data plane
    Row(K.PRODUCE, "idempotent", rq.produce,
        (Need((topic(Op.WRITE),), TOPIC_AUTH, PRODUCE_SLOTS),)),
    Row(K.PRODUCE, "transactional", rq.produce_transactional, (
        Need((txn(Op.WRITE),), TXN_AUTH, PRODUCE_SLOTS),
        Need((topic(Op.WRITE),), TOPIC_AUTH, PRODUCE_SLOTS))),
    Row(K.FETCH, "consumer", rq.fetch,
        (Need((topic(Op.READ),), TOPIC_AUTH, at("responses.partitions.error_code")),),
        ids_since=13),
    Row(K.FETCH, "follower", rq.follower_fetch,
        (Need((cluster(Op.CLUSTER_ACTION),), TOPIC_AUTH,
              at("responses.partitions.error_code")),), ids_since=13),
    Row(K.LIST_OFFSETS, "", rq.list_offsets,
        (Need((topic(Op.DESCRIBE),), TOPIC_AUTH, PARTITION_SLOTS),)),
    Row(K.METADATA, "named topic", rq.metadata,
        (Need((topic(Op.DESCRIBE),), TOPIC_AUTH, at("topics.error_code")),)),
    Row(K.METADATA, "auto-create", rq.metadata_auto_create, (
        Need((topic(Op.DESCRIBE),), TOPIC_AUTH, at("topics.error_code")),
        Need((cluster(Op.CREATE), topic(Op.CREATE)), TOPIC_AUTH, at("topics.error_code"))),
        setup=_nothing),
    Row(K.METADATA, "all topics", rq.metadata_all_topics,
        shows=(topic(Op.DESCRIBE),), listed=_topic_listed),
    Row(K.METADATA, "cluster authorized operations", rq.metadata_cluster_operations,
        shows=(cluster(Op.DESCRIBE),), listed=_cluster_describe_bit, versions=(8, 10)),
    Row(K.OFFSET_FOR_LEADER_EPOCH, "", rq.offset_for_leader_epoch,
        (Need((cluster(Op.CLUSTER_ACTION), topic(Op.DESCRIBE)), TOPIC_AUTH,
              PARTITION_SLOTS),)),
    Row(K.DESCRIBE_PRODUCERS, "", rq.describe_producers,
        (Need((topic(Op.READ),), TOPIC_AUTH, PARTITION_SLOTS),)),
    Row(K.INIT_PRODUCER_ID, "transactional", rq.init_producer_id_transactional,
        (Need((txn(Op.WRITE),), TXN_AUTH, TOP),)),
    Row(K.INIT_PRODUCER_ID, "idempotent", rq.init_producer_id_idempotent,
        (Need((cluster(Op.IDEMPOTENT_WRITE), Acl(Op.WRITE, Res.TOPIC, "any-topic")),
              CLUSTER_AUTH, TOP),)),
    # --- inter-broker: ClusterAction on the Cluster, the code in every slot
    Row(K.LEADER_AND_ISR, "", rq.leader_and_isr,
        (Need((cluster(Op.CLUSTER_ACTION),), CLUSTER_AUTH, listing(TOP, by_version(
            (0, at("partition_errors.error_code")),
            (5, at("topics.partition_errors.error_code"))))),)),
    Row(K.STOP_REPLICA, "", rq.stop_replica,
        (Need((cluster(Op.CLUSTER_ACTION),), CLUSTER_AUTH,
              listing(TOP, at("partition_errors.error_code"))),)),
    Row(K.UPDATE_METADATA, "", rq.update_metadata,
        (Need((cluster(Op.CLUSTER_ACTION),), CLUSTER_AUTH, ALONE),)),
    Row(K.CONTROLLED_SHUTDOWN, "", rq.controlled_shutdown,
        (Need((cluster(Op.CLUSTER_ACTION),), CLUSTER_AUTH, ALONE),)),
    Row(K.WRITE_TXN_MARKERS, "", rq.write_txn_markers,
        (Need((cluster(Op.CLUSTER_ACTION), cluster(Op.ALTER)), CLUSTER_AUTH,
              listing(at("markers.topics.partitions.error_code"))),)),
    Row(K.ADD_PARTITIONS_TO_TXN, "broker-to-broker", rq.add_partitions_to_txn,
        (Need((cluster(Op.CLUSTER_ACTION),), CLUSTER_AUTH, ALONE),), versions=(4, 5)),
    # --- groups
    Row(K.OFFSET_COMMIT, "", rq.offset_commit, (
        Need((group(Op.READ),), GROUP_AUTH, PARTITION_SLOTS),
        Need((topic(Op.READ),), TOPIC_AUTH, PARTITION_SLOTS))),
    Row(K.OFFSET_FETCH, "named partitions", rq.offset_fetch, (
        Need((group(Op.DESCRIBE),), GROUP_AUTH, OFFSET_FETCH_GROUP),
        Need((topic(Op.DESCRIBE),), TOPIC_AUTH, OFFSET_FETCH_TOPIC))),
    Row(K.OFFSET_FETCH, "all partitions", rq.offset_fetch_all, base=(group(Op.DESCRIBE),),
        shows=(topic(Op.DESCRIBE),), listed=_offsets_listed, setup=_committed_offsets,
        versions=(2, 0x7FFF)),
    Row(K.FIND_COORDINATOR, "group", rq.find_coordinator,
        (Need((group(Op.DESCRIBE),), GROUP_AUTH, FIND_COORDINATOR_SLOTS),)),
    Row(K.FIND_COORDINATOR, "transaction", rq.find_txn_coordinator,
        (Need((txn(Op.DESCRIBE),), TXN_AUTH, FIND_COORDINATOR_SLOTS),), versions=(1, 0x7FFF)),
    Row(K.JOIN_GROUP, "", rq.join_group, (Need((group(Op.READ),), GROUP_AUTH, ALONE),)),
    Row(K.HEARTBEAT, "", rq.heartbeat, (Need((group(Op.READ),), GROUP_AUTH, ALONE),)),
    Row(K.LEAVE_GROUP, "", rq.leave_group, (Need((group(Op.READ),), GROUP_AUTH, ALONE),)),
    Row(K.SYNC_GROUP, "", rq.sync_group, (Need((group(Op.READ),), GROUP_AUTH, ALONE),)),
    Row(K.DESCRIBE_GROUPS, "", rq.describe_groups,
        (Need((group(Op.DESCRIBE),), GROUP_AUTH, at("groups.error_code")),)),
    Row(K.LIST_GROUPS, "", rq.list_groups, shows=(group(Op.DESCRIBE), cluster(Op.DESCRIBE)),
        listed=_group_listed, setup=_committed_offsets),
    Row(K.DELETE_GROUPS, "", rq.delete_groups,
        (Need((group(Op.DELETE),), GROUP_AUTH, at("results.error_code")),)),
    # --- transactions
    Row(K.ADD_PARTITIONS_TO_TXN, "producer", rq.add_partitions_to_txn, (
        Need((txn(Op.WRITE),), TXN_AUTH, APPEND_TXN_SLOTS),
        Need((topic(Op.WRITE),), TOPIC_AUTH, APPEND_TXN_SLOTS)), versions=(0, 3)),
    Row(K.ADD_OFFSETS_TO_TXN, "", rq.add_offsets_to_txn, (
        Need((txn(Op.WRITE),), TXN_AUTH, TOP),
        Need((group(Op.READ),), GROUP_AUTH, TOP))),
    Row(K.END_TXN, "", rq.end_txn, (Need((txn(Op.WRITE),), TXN_AUTH, TOP),)),
    Row(K.TXN_OFFSET_COMMIT, "", rq.txn_offset_commit, (
        Need((txn(Op.WRITE),), TXN_AUTH, PARTITION_SLOTS),
        Need((group(Op.READ),), GROUP_AUTH, PARTITION_SLOTS),
        Need((topic(Op.READ),), TOPIC_AUTH, PARTITION_SLOTS))),
    Row(K.DESCRIBE_TRANSACTIONS, "", rq.describe_transactions,
        (Need((txn(Op.DESCRIBE),), TXN_AUTH, at("transaction_states.error_code")),)),
    Row(K.LIST_TRANSACTIONS, "", rq.list_transactions, shows=(txn(Op.DESCRIBE),),
        listed=_txn_listed, setup=_transaction_exists),
    # --- admin
    Row(K.CREATE_TOPICS, "", rq.create_topics, (
        Need((cluster(Op.CREATE), topic(Op.CREATE)), TOPIC_AUTH, at("topics.error_code")),
        # without it the topic is created all the same, only its configs are not shown
        Need((topic(Op.DESCRIBE_CONFIGS),), TOPIC_AUTH, at("topics.topic_config_error_code"),
             since=5, blocks=False)), setup=_nothing),
    Row(K.DELETE_TOPICS, "by name", rq.delete_topics,
        (Need((topic(Op.DELETE),), TOPIC_AUTH, at("responses.error_code")),)),
    Row(K.DELETE_TOPICS, "by id", rq.delete_topics_by_id,
        (Need((topic(Op.DELETE),), TOPIC_AUTH, at("responses.error_code")),),
        versions=(6, 0x7FFF), ids_since=6),
    Row(K.DELETE_RECORDS, "", rq.delete_records,
        (Need((topic(Op.DELETE),), TOPIC_AUTH, PARTITION_SLOTS),)),
    Row(K.CREATE_PARTITIONS, "", rq.create_partitions,
        (Need((topic(Op.ALTER),), TOPIC_AUTH, at("results.error_code")),)),
    Row(K.DESCRIBE_CONFIGS, "topic", rq.describe_configs,
        (Need((topic(Op.DESCRIBE_CONFIGS),), TOPIC_AUTH, at("results.error_code")),)),
    Row(K.DESCRIBE_CONFIGS, "broker", rq.describe_broker_configs,
        (Need((cluster(Op.DESCRIBE_CONFIGS),), CLUSTER_AUTH, at("results.error_code")),)),
    Row(K.ALTER_CONFIGS, "topic", rq.alter_configs,
        (Need((topic(Op.ALTER_CONFIGS),), TOPIC_AUTH, at("responses.error_code")),)),
    Row(K.ALTER_CONFIGS, "broker", rq.alter_broker_configs,
        (Need((cluster(Op.ALTER_CONFIGS),), CLUSTER_AUTH, at("responses.error_code")),)),
    Row(K.INCREMENTAL_ALTER_CONFIGS, "topic", rq.incremental_alter_configs,
        (Need((topic(Op.ALTER_CONFIGS),), TOPIC_AUTH, at("responses.error_code")),)),
    Row(K.INCREMENTAL_ALTER_CONFIGS, "broker", rq.incremental_alter_broker_configs,
        (Need((cluster(Op.ALTER_CONFIGS),), CLUSTER_AUTH, at("responses.error_code")),)),
    Row(K.DESCRIBE_ACLS, "", rq.describe_acls,
        (Need((cluster(Op.DESCRIBE),), CLUSTER_AUTH, ALONE),)),
    Row(K.CREATE_ACLS, "", rq.create_acls,
        (Need((cluster(Op.ALTER),), CLUSTER_AUTH, listing(at("results.error_code"))),)),
    Row(K.DELETE_ACLS, "", rq.delete_acls,
        (Need((cluster(Op.ALTER),), CLUSTER_AUTH, listing(at("filter_results.error_code"))),)),
    Row(K.ELECT_LEADERS, "", rq.elect_leaders,
        (Need((cluster(Op.ALTER),), CLUSTER_AUTH,
              listing(at("replica_election_results.partition_result.error_code"))),)),
    Row(K.ALTER_PARTITION_REASSIGNMENTS, "", rq.alter_partition_reassignments,
        (Need((cluster(Op.ALTER),), CLUSTER_AUTH,
              listing(TOP, at("responses.partitions.error_code"))),)),
    Row(K.LIST_PARTITION_REASSIGNMENTS, "", rq.list_partition_reassignments,
        (Need((cluster(Op.DESCRIBE),), CLUSTER_AUTH, ALONE),)),
    Row(K.DESCRIBE_USER_SCRAM_CREDENTIALS, "", rq.describe_user_scram_credentials,
        (Need((cluster(Op.DESCRIBE),), CLUSTER_AUTH, listing(TOP, at("results.error_code"))),)),
    Row(K.ALTER_USER_SCRAM_CREDENTIALS, "", rq.alter_user_scram_credentials,
        (Need((cluster(Op.ALTER),), CLUSTER_AUTH, listing(at("results.error_code"))),)),
    Row(K.DESCRIBE_CLIENT_QUOTAS, "", rq.describe_client_quotas,
        (Need((cluster(Op.DESCRIBE_CONFIGS),), CLUSTER_AUTH, ALONE),)),
    Row(K.ALTER_CLIENT_QUOTAS, "", rq.alter_client_quotas,
        (Need((cluster(Op.ALTER_CONFIGS),), CLUSTER_AUTH, listing(at("entries.error_code"))),)),
    # denied: an empty answer, with 31 at the top from v3 (v0-2 have no field for it)
    Row(K.DESCRIBE_LOG_DIRS, "v3+", rq.describe_log_dirs,
        (Need((cluster(Op.DESCRIBE),), CLUSTER_AUTH, ALONE),), versions=(3, 0x7FFF)),
    Row(K.DESCRIBE_LOG_DIRS, "v0-2", rq.describe_log_dirs, shows=(cluster(Op.DESCRIBE),),
        listed=_log_dirs_list_topic, versions=(0, 2)),
    Row(K.DESCRIBE_CLUSTER, "", rq.describe_cluster, shows=(cluster(Op.DESCRIBE),),
        listed=_cluster_describe_bit),
    # --- none needed
    Row(K.SASL_HANDSHAKE, "", rq.sasl_handshake),
    Row(K.API_VERSIONS, "", rq.api_versions),
    Row(K.SASL_AUTHENTICATE, "", rq.sasl_authenticate),
)
ROWS: dict[int, list[Row]] = {}
for _row in TABLE:
    ROWS.setdefault(int(_row.key), []).append(_row)
SERVED = ApiVersionManager(HANDLERS).enabled


def api_name(key: int) -> str:
    try:
        return ApiKey(key).name
    except ValueError:
        return f"api key {key}"


def row_name(row: Row) -> str:
    return f"{api_name(row.key)}-{row.label}" if row.label else api_name(row.key)


# ---------------------------------------------------------------------- the checker
class Brokers:
    """A fresh broker (authorizer on, ``User:admin`` super) for each run."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.count = itertools.count()

    def new(self) -> Broker:
        b = Broker(str(self.root / f"b{next(self.count)}"), **AUTHORIZER,
                   **{"super.users": str(ADMIN)})
        # A transactional Produce asks the transaction coordinator (this node) over the
        # network: at a port nothing listens on, never at a real broker's 9092.
        b.services.metadata.register_broker(BrokerRegistration(rq.NODE, "127.0.0.1", 1))
        return b


@dataclass
class Run:
    """One call on a fresh broker: who, with which ACLs, naming what."""

    row: Row
    version: int
    what: str
    principal: KafkaPrincipal
    grants: tuple[Acl, ...]
    names: Names
    problems: list[str] = field(default_factory=list)

    def fail(self, message: str) -> None:
        granted = ", ".join(map(str, self.grants)) or "no ACL"
        label = f" ({self.row.label})" if self.row.label else ""
        self.problems.append(f"{api_name(self.row.key)}{label} v{self.version} {self.what} "
                             f"[{self.principal}, {granted}]: {message}")


def _state(b: Broker) -> dict[str, Any]:
    """What a request could change: the topics (partitions, configs, log offsets), ACLs,
    SCRAM users, client quotas, groups' committed offsets, transactions."""
    s = b.services
    topics = {}
    for name, info in s.metadata.topics.items():
        if info.internal:
            continue
        logs = [None if (p := s.replica_manager.get_partition(name, i)) is None
                else (p.log.log_start_offset, p.log.log_end_offset)
                for i in range(info.partitions)]
        topics[name] = (info.partitions, dict(info.configs), logs)
    assert s.acls is not None
    return {
        "topics": topics,
        "acls": sorted(map(str, s.acls.authorizer.acls())),
        "SCRAM users": sorted(s.credentials.store.users_with_configs()),
        "quotas": sorted(map(repr, s.quota_store.read_all().items())),
        "offsets": {gid: sorted((tp, o.offset) for tp, o in g.offsets.items())
                    for gid, g in s.group_coordinator.coordinator.groups.items()},
        "transactions": {tid: (t.producer_id, t.producer_epoch, t.state,
                               sorted(t.topic_partitions))
                         for tid, t in s.transaction_coordinator.coordinator
                         .transactions.items()},
    }


@dataclass
class Answer:
    response: Any
    changed: list[str]
    """What the call changed in ``_state`` (one line per kind)."""


async def _call(brokers: Brokers, run: Run) -> Answer | None:
    b = brokers.new()
    services = b.services
    try:
        await services.group_coordinator.start()
        await services.transaction_coordinator.start()
        await run.row.setup(b)
        assert services.acls is not None
        bindings = [acl.binding(run.principal, run.names) for acl in run.grants]
        if bindings:
            results = await services.acls.create_acls(bindings)
            assert all(r.error == 0 for r in results), results
        names = run.names
        if (info := services.metadata.topics.get(names.topic)) is not None:
            names = replace(names, topic_id=info.topic_id)
        body = run.row.build(names, run.version)
        before = _state(b)
        response = await asyncio.wait_for(
            b.call(run.row.key, run.version, body, principal=run.principal), TIMEOUT_S)
        after = _state(b)
        return Answer(response, [f"{k}: {before[k]} -> {after[k]}" for k in before
                                 if before[k] != after[k]])
    except TimeoutError:
        run.fail(f"no answer within {TIMEOUT_S}s")
    except Exception as e:  # a crash is a finding, reported with the rest
        run.fail(f"raised {type(e).__name__}: {e}")
    finally:
        await services.transaction_coordinator.stop()
        await services.group_coordinator.stop()
        b.close()
    return None


def _auth_slots(response: Any, version: int) -> list[str]:
    return [f"{where}={code}" for where, code in rq.error_slots(response, version)
            if code in AUTH_CODES]


@dataclass(frozen=True)
class Expect:
    """What a run must show: ``refused`` (``need``'s code in its slots), ``allowed`` (no
    authorization code anywhere), ``listed`` / ``omitted`` (a filtering API)."""

    kind: str
    need: Need | None = None


async def _check(brokers: Brokers, run: Run, expect: Expect) -> None:
    got = await _call(brokers, run)
    if got is None:
        return
    response = got.response
    auth = _auth_slots(response, run.version)
    if expect.kind == "refused":
        need = expect.need
        assert need is not None
        slots = need.slots(response, run.version)
        if not slots or any(code != need.error for code in slots):
            run.fail(f"expected {need.error} ({CODE_NAMES[need.error]}) in every slot for "
                     f"want of {need}, got {slots} in {response}")
        if got.changed and need.blocks:
            run.fail(f"the refused request changed {'; '.join(got.changed)}")
    elif expect.kind == "allowed":
        if auth:
            run.fail(f"authorization error(s) {auth} in {response}")
    else:
        assert run.row.listed is not None
        listed = expect.kind == "listed"
        if run.row.listed(response, run.names) != listed:
            run.fail(f"the resource should be {expect.kind}: {response}")
        if auth:
            run.fail(f"a filtering API answered authorization error(s) {auth}")


def versions(row: Row) -> list[int]:
    """The oldest and newest version the broker serves, within the row's range."""
    lo, hi = SERVED[row.key]
    lo, hi = max(lo, row.versions[0]), min(hi, row.versions[1])
    assert lo <= hi, f"{api_name(row.key)} ({row.label}): no served version in {row.versions}"
    return sorted({lo, hi})


def runs(row: Row, version: int) -> Iterator[tuple[Run, Expect]]:
    """Each run of one row at one version and what it must show (module docstring)."""
    def run(what: str, principal: KafkaPrincipal, grants: tuple[Acl, ...],
            names: Names = REAL) -> Run:
        return Run(row, version, what, principal, grants, names)

    if row.filters:
        yield run("without the permission", BOB, row.base), Expect("omitted")
        for acl in row.shows:
            yield run("granted", BOB, (*row.base, acl)), Expect("listed")
        yield run("as super user", ADMIN, ()), Expect("listed")
        return
    needs = [n for n in row.needs if version >= n.since]
    if not needs:
        yield run("needs none", BOB, ()), Expect("allowed")
        yield run("as super user", ADMIN, ()), Expect("allowed")
        return
    if version >= row.ids_since:
        yield run("refused, topic named by id", BOB, ()), Expect("refused", needs[0])
    else:
        yield run("refused, unknown names", BOB, (), GHOST), Expect("refused", needs[0])
        yield run("refused, existing names", BOB, ()), Expect("refused", needs[0])

    def first_choices_but(i: int) -> tuple[Acl, ...]:
        return tuple(n.grants[0] for j, n in enumerate(needs) if j != i)
    if len(needs) > 1:
        for i, missing in enumerate(needs):
            yield run(f"without {missing}", BOB, first_choices_but(i)), Expect("refused",
                                                                              missing)
    seen: set[frozenset[Acl]] = set()
    for i, need in enumerate(needs):
        for acl in need.grants:     # each alternative, with the first choice of the rest
            grants = (acl, *first_choices_but(i))
            if frozenset(grants) not in seen:
                seen.add(frozenset(grants))
                yield run("granted", BOB, grants), Expect("allowed")
    yield run("as super user", ADMIN, ()), Expect("allowed")


def check_row(row: Row, root: Path,
              only: Callable[[Run, Expect], bool] | None = None) -> list[str]:
    """Everything wrong with one row's API (empty: as 5 says); ``only``: just the runs it
    selects (the negative controls look at refusals)."""
    brokers = Brokers(root)
    problems: list[str] = []

    async def walk() -> None:
        for version in versions(row):
            for run, expect in runs(row, version):
                if only is None or only(run, expect):
                    await _check(brokers, run, expect)
                    problems.extend(run.problems)
    asyncio.run(walk())
    return problems


def check_api(key: int, root: Path) -> list[str]:
    """Everything wrong with one served API key's authorization."""
    rows = ROWS.get(key)
    if not rows:
        return [f"{api_name(key)} (key {key}) is served but has no row in the authorization "
                f"table of {__name__}: add its authorization check and a row here"]
    return [p for i, row in enumerate(rows) for p in check_row(row, root / f"row{i}")]


# ---------------------------------------------------------------------- the tests
@pytest.mark.parametrize("key", sorted(HANDLERS), ids=api_name)
def test_api_checks_what_the_reference_table_names(key: int, tmp_path: Path) -> None:
    problems = check_api(key, tmp_path)
    assert not problems, "\n".join(problems)


def test_the_table_covers_every_served_api() -> None:
    missing = [api_name(k) for k in sorted(HANDLERS) if k not in ROWS]
    assert not missing, (f"served without a row: {missing} -- add their authorization "
                         f"checks and rows to {__name__}.TABLE")


# ---------------------------------------------------------------------- negative controls
class _Lenient:
    """An authorizer that says yes to ``skipped`` (operation, resource type) questions and
    asks ``real`` the others: what a handler missing those checks does."""

    def __init__(self, real: Any, skipped: frozenset[tuple[AclOperation, ResourceType]]
                 ) -> None:
        self.real, self.skipped = real, skipped

    def authorize(self, principal: KafkaPrincipal, host: str, action: Action) -> bool:
        return ((action.operation, action.resource_type) in self.skipped
                or self.real.authorize(principal, host, action))

    def authorize_by_resource_type(self, principal: KafkaPrincipal, host: str,
                                   operation: AclOperation, resource_type: ResourceType
                                   ) -> bool:
        return ((operation, resource_type) in self.skipped
                or self.real.authorize_by_resource_type(principal, host, operation,
                                                        resource_type))

    def authorized_operations(self, *args: Any) -> int:
        return int(self.real.authorized_operations(*args))


class _LenientService:
    def __init__(self, real: Any, skipped: frozenset[tuple[AclOperation, ResourceType]]
                 ) -> None:
        self.real = real
        self.authorizer = _Lenient(real.authorizer, skipped)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def _skipping(handler: Handler, skipped: frozenset[tuple[AclOperation, ResourceType]] | None
              ) -> Handler:
    """``handler`` without some of its checks: all of them (``skipped`` None: run with no
    authorizer, every ``ctx.authorize*`` says yes) or those of ``skipped``."""
    async def run(ctx: RequestContext, body: Any) -> Any:
        acls: Any = None if skipped is None else _LenientService(ctx.services.acls, skipped)
        return await handler(replace(ctx, services=replace(ctx.services, acls=acls)), body)
    return run


FINDINGS = ("expected ", "should be ", "changed ")
"""What the checker says about a wrong answer (not a crash or a timeout of the run)."""


def _findings(problems: list[str], where: str) -> bool:
    """Problems found, each in a run ``where`` names, each about the answer."""
    return bool(problems) and all(where in p and any(f in p for f in FINDINGS)
                                  and "raised " not in p for p in problems)


CHECKED_ROWS = [row for row in TABLE if row.needs or row.filters]


@pytest.mark.parametrize("row", CHECKED_ROWS, ids=row_name)
def test_the_checker_reports_a_handler_that_skips_authorization(
        row: Row, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(HANDLERS, row.key, _skipping(HANDLERS[row.key], None))
    first = "without the permission" if row.filters else "refused,"
    problems = check_row(row, tmp_path, lambda run, _: run.what.startswith(first))
    assert _findings(problems, first), problems


WRITERS = [row for row in TABLE if row_name(row) in {
    "PRODUCE-idempotent", "DELETE_TOPICS-by name", "CREATE_PARTITIONS", "ALTER_CONFIGS-topic",
    "OFFSET_COMMIT", "ALTER_USER_SCRAM_CREDENTIALS", "ALTER_CLIENT_QUOTAS"}]
"""Rows whose request, let through, changes what ``_state`` sees (the ACL APIs cannot be
let through this way: without an authorizer they answer SECURITY_DISABLED)."""


@pytest.mark.parametrize("row", WRITERS, ids=row_name)
def test_the_checker_reports_what_an_unchecked_handler_changed(
        row: Row, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(HANDLERS, row.key, _skipping(HANDLERS[row.key], None))
    problems = check_row(row, tmp_path, lambda run, _: run.what == "refused, existing names")
    assert _findings(problems, "refused, existing names"), problems
    assert any("the refused request changed" in p for p in problems), problems


PARTIAL = [(row, need) for row in TABLE if len(row.needs) > 1 for need in row.needs]


@pytest.mark.parametrize(("row", "need"), PARTIAL,
                         ids=[f"{row_name(r)}-{n}" for r, n in PARTIAL])
def test_the_checker_reports_a_handler_that_skips_one_of_two_checks(
        row: Row, need: Need, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    skipped = frozenset((acl.operation, acl.resource_type) for acl in need.grants)
    monkeypatch.setitem(HANDLERS, row.key, _skipping(HANDLERS[row.key], skipped))
    problems = check_row(row, tmp_path, lambda run, _: run.what == f"without {need}")
    assert _findings(problems, f"without {need} "), problems


def test_the_checker_reports_a_served_key_without_a_row(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(HANDLERS, 9999, HANDLERS[ApiKey.API_VERSIONS])
    assert check_api(9999, tmp_path) == [
        f"api key 9999 (key 9999) is served but has no row in the authorization table of "
        f"{__name__}: add its authorization check and a row here"]


def test_a_transactional_batch_needs_the_transactional_id_it_names(tmp_path: Path) -> None:
    """CVE-2018-17196: a transactional batch in a Produce request without a transactional
    id is refused whole (53) -- whatever the topic ACLs, and for a super user too (Kafka
    asks about the request's transactional id, and there is none)."""
    row = Row(K.PRODUCE, "transactional batch, no transactional id",
              rq.produce_transactional_batch_without_id)
    need = Need((), TXN_AUTH, PRODUCE_SLOTS)
    brokers = Brokers(tmp_path)

    async def main() -> list[str]:
        problems = []
        for version in versions(row):
            for principal, grants in ((BOB, (topic(Op.WRITE),)), (ADMIN, ())):
                run = Run(row, version, "refused", principal, grants, REAL)
                await _check(brokers, run, Expect("refused", need))
                problems += run.problems
        return problems
    problems = asyncio.run(main())
    assert not problems, "\n".join(problems)
