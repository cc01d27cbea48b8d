"""Our declarations against Kafka's own JSON message definitions, version by version.

The oracle is the set of upstream JSON schemas vendored in the installed kafka-python
(``kafka/protocol/schemas/resources/<Name>.json``), loaded with kafka-python's
``load_json`` (strips the comments, resolves ``commonStructs``).  For every request and
response we declare and every version in the JSON's ``validVersions`` we compare the
ordered list of fields present in that version, recursively: snake_case name, type
(struct names included), nullable-in-this-version, tagged-in-this-version + tag, and the
default a fresh value gets (the JSON ``default`` or Kafka's implicit one).
"""

from __future__ import annotations

import dataclasses
import re
import uuid
import warnings
from typing import Any

import pytest

from millrace.protocol import API, ApiKey
from millrace.protocol.consumer_protocol import (
    ASSIGNMENT,
    STICKY_ASSIGNOR_USER_DATA,
    SUBSCRIPTION,
)
from millrace.protocol.schema import Field, Message, Versions
from millrace.protocol.struct import Struct

ZERO_UUID = uuid.UUID(int=0)
INT_TYPES = {"int8", "int16", "int32", "int64", "uint16"}

# The 33 client APIs of the platform issue, by Kafka's names.
EXPECTED_APIS = {
    "ApiVersions", "Metadata", "Produce", "Fetch", "ListOffsets", "FindCoordinator",
    "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit", "OffsetFetch",
    "DescribeGroups", "ListGroups", "DeleteGroups", "CreateTopics", "DeleteTopics",
    "CreatePartitions", "DescribeConfigs", "AlterConfigs", "IncrementalAlterConfigs",
    "DeleteRecords", "DescribeCluster", "InitProducerId", "AddPartitionsToTxn",
    "AddOffsetsToTxn", "EndTxn", "TxnOffsetCommit", "WriteTxnMarkers", "OffsetForLeaderEpoch",
    "DescribeProducers", "SaslHandshake", "SaslAuthenticate",
    "DescribeTransactions", "ListTransactions",  # issue 15 (admin side of transactions)
    # security: SCRAM credential management (KIP-554)
    "DescribeUserScramCredentials", "AlterUserScramCredentials",
    # security: the ACL admin APIs (KIP-140, KIP-290)
    "DescribeAcls", "CreateAcls", "DeleteAcls",
    # quotas: the client quota admin APIs (KIP-546)
    "DescribeClientQuotas", "AlterClientQuotas",
    # storage: the size of each partition on disk, per log dir (KIP-113)
    "DescribeLogDirs",
}

# The cluster's APIs (issue 13): inter-broker and controller-admin, with their version and
# flexible ranges in Kafka 3.8 (reference cluster.md section 3 and the upstream JSON).
CLUSTER_APIS = {
    "LeaderAndIsr": ("0-7", "4+"), "StopReplica": ("0-4", "2+"), "UpdateMetadata": ("0-8", "6+"),
    "ControlledShutdown": ("0-3", "3+"), "AlterPartition": ("0-3", "0+"),
    "ElectLeaders": ("0-2", "2+"), "AlterPartitionReassignments": ("0-1", "0+"),
    "ListPartitionReassignments": ("0", "0+"),
}

# APIs whose JSON the installed kafka-python does not ship: the first four left Kafka with
# ZooKeeper (4.0), AlterPartition is spoken only to the controller.  Their layouts are held
# by round trips and hand-derived bytes in test_cluster_messages.py instead.
NO_UPSTREAM_JSON = {"LeaderAndIsr", "StopReplica", "UpdateMetadata", "ControlledShutdown",
                    "AlterPartition"}

# APIs whose oldest version Kafka 4.0 dropped (KIP-896) while Kafka 3.9, the broker we
# follow, still serves it: the installed JSON starts at 1, 3.9's at 0, with the same field
# list (every field of a later version absent from v0).  The comparison starts at the
# version given here, against the installed JSON's fields.
SERVED_BELOW_JSON = {"DescribeAcls": 0, "CreateAcls": 0, "DeleteAcls": 0,
                     "DescribeLogDirs": 0}

# APIs to which Kafka 4.x added a version Kafka 3.9 does not have: the comparison stops at
# 3.9's newest (DescribeLogDirs v5 adds IsCordoned, KIP-1066).
SERVED_UP_TO = {"DescribeLogDirs": 4}

# Version ranges the reference (kafka-protocol.md section 1) says brokers accept and
# clients send: Kafka 4.x broker ranges (later 4.x where they grew), librdkafka, Java,
# kafka-python, aiokafka and KafkaJS client versions.  Ours must contain each range.
REQUIRED_VERSIONS = {
    "ApiVersions": (0, 4), "Metadata": (0, 13), "Produce": (3, 13), "Fetch": (4, 18),
    "ListOffsets": (1, 11), "FindCoordinator": (0, 6), "JoinGroup": (0, 9),
    "SyncGroup": (0, 5), "Heartbeat": (0, 4), "LeaveGroup": (0, 5), "OffsetCommit": (2, 10),
    "OffsetFetch": (1, 10), "DescribeGroups": (0, 6), "ListGroups": (0, 5),
    "CreateTopics": (2, 7), "DeleteTopics": (1, 6), "CreatePartitions": (0, 3),
    "DescribeConfigs": (1, 4), "AlterConfigs": (0, 2), "IncrementalAlterConfigs": (0, 1),
    "DeleteRecords": (0, 2), "InitProducerId": (0, 5), "OffsetForLeaderEpoch": (2, 4),
    "AddPartitionsToTxn": (0, 5), "AddOffsetsToTxn": (0, 4), "EndTxn": (0, 5),
    "TxnOffsetCommit": (0, 5), "WriteTxnMarkers": (1, 2), "DescribeCluster": (0, 2),
    "SaslHandshake": (0, 1), "SaslAuthenticate": (0, 2), "DescribeProducers": (0, 0),
    "DescribeUserScramCredentials": (0, 0), "AlterUserScramCredentials": (0, 0),
    "DescribeAcls": (0, 3), "CreateAcls": (0, 3), "DeleteAcls": (0, 3),
    "DescribeClientQuotas": (0, 1), "AlterClientQuotas": (0, 1), "DescribeLogDirs": (0, 4),
}

# The first flexible version of each API (reference section 1, "1st flexible").
FIRST_FLEXIBLE = {
    "ApiVersions": 3, "Metadata": 9, "Produce": 9, "Fetch": 12, "ListOffsets": 6,
    "FindCoordinator": 3, "JoinGroup": 6, "SyncGroup": 4, "Heartbeat": 4, "LeaveGroup": 4,
    "OffsetCommit": 8, "OffsetFetch": 6, "DescribeGroups": 5, "ListGroups": 3,
    "CreateTopics": 5, "DeleteTopics": 4, "CreatePartitions": 2, "DescribeConfigs": 4,
    "AlterConfigs": 2, "IncrementalAlterConfigs": 1, "DeleteRecords": 2, "InitProducerId": 2,
    "OffsetForLeaderEpoch": 4, "AddPartitionsToTxn": 3, "AddOffsetsToTxn": 3, "EndTxn": 3,
    "TxnOffsetCommit": 3, "WriteTxnMarkers": 1, "DescribeCluster": 0,
    "SaslAuthenticate": 2, "DescribeProducers": 0,
    "DescribeUserScramCredentials": 0, "AlterUserScramCredentials": 0,
    "DescribeAcls": 2, "CreateAcls": 2, "DeleteAcls": 2,
    "DescribeClientQuotas": 1, "AlterClientQuotas": 1, "DescribeLogDirs": 2,
}



def load_json(name: str, package: str | None = None) -> dict[str, Any]:
    """kafka-python's loader; it calls the deprecated ``importlib.resources.read_text``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.protocol.schemas import load_json as kafka_load_json

        schema: dict[str, Any] = kafka_load_json(name, package)
    return schema


# ---------------------------------------------------------------- the comparison
def snake_case(name: str) -> str:
    """Kafka's CamelCase field name -> ours: "ThrottleTimeMs" -> "throttle_time_ms"."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def parse_versions(text: str | None) -> Versions:
    return Versions.parse(text.strip() if text else None)


def json_default(jf: dict[str, Any]) -> Any:
    """The value a fresh Kafka object has for this field (Java generator rules)."""
    t: str = jf["type"]
    raw = jf.get("default", "")
    # A few upstream files write the default as a JSON number or boolean, not a string.
    d = str(raw).lower() if isinstance(raw, bool) else str(raw)
    if d == "null":
        return None
    if t.startswith("[]"):
        return []
    if t in INT_TYPES:
        return int(d, 0) if d else 0
    if t == "float64":
        return float(d) if d else 0.0
    if t == "bool":
        return d == "true"
    if t == "string":
        return d
    if t == "bytes":
        return b""
    if t == "records":
        return None
    if t == "uuid":
        return ZERO_UUID
    return "<struct>"  # a struct-typed field defaults to a fresh instance


def our_default(cls: type[Struct], f: Field) -> Any:
    value = getattr(cls(), f.name)
    if f.is_struct and not f.is_array and value is not None:
        sub = getattr(cls, f.element_type)
        assert value == sub(), f"{f.name}: default struct is not a fresh {f.element_type}"
        return "<struct>"
    return value


def compare_fields(path: str, json_fields: list[dict[str, Any]], fields: tuple[Field, ...],
                   cls: type[Struct], version: int) -> list[str]:
    """Differences between the JSON fields and ours present at ``version``."""
    diffs: list[str] = []
    theirs = [jf for jf in json_fields if version in parse_versions(jf["versions"])]
    ours = [f for f in fields if f.present_in(version)]
    their_names = [snake_case(jf["name"]) for jf in theirs]
    our_names = [f.name for f in ours]
    if their_names != our_names:
        return [f"{path}: fields {our_names} != JSON {their_names}"]
    for jf, f in zip(theirs, ours):
        where = f"{path}.{f.name}"
        if f.type != jf["type"]:
            diffs.append(f"{where}: type {f.type!r} != JSON {jf['type']!r}")
            continue
        nullable = version in parse_versions(jf.get("nullableVersions"))
        if (version in f.nullable) != nullable:
            diffs.append(f"{where}: nullable={version in f.nullable}, JSON says {nullable}")
        tagged = version in parse_versions(jf.get("taggedVersions"))
        if f.tagged_in(version) != tagged:
            diffs.append(f"{where}: tagged={f.tagged_in(version)}, JSON says {tagged}")
        elif tagged and f.tag != jf["tag"]:
            diffs.append(f"{where}: tag {f.tag} != JSON {jf['tag']}")
        expected = json_default(jf)
        got = our_default(cls, f)
        if got != expected or type(got) is not type(expected):
            diffs.append(f"{where}: default {got!r} != JSON {expected!r}")
        if f.is_struct:
            if "fields" not in jf:
                diffs.append(f"{where}: JSON declares no fields for {jf['type']}")
                continue
            diffs += compare_fields(where, jf["fields"], f.fields,
                                    getattr(cls, f.element_type), version)
    return diffs


def compare_message(schema: dict[str, Any], msg: Message, cls: type[Struct],
                    versions: range | None = None) -> list[str]:
    """Every difference between a JSON message definition and our declaration."""
    diffs = []
    valid = parse_versions(schema["validVersions"])
    flexible = parse_versions(schema["flexibleVersions"])
    if schema["name"] != msg.name:
        diffs.append(f"name {msg.name} != JSON {schema['name']}")
    if schema.get("apiKey", -1) != msg.api_key:
        diffs.append(f"{msg.name}: api key {msg.api_key} != JSON {schema.get('apiKey')}")
    if schema["type"] != msg.kind:
        diffs.append(f"{msg.name}: kind {msg.kind} != JSON {schema['type']}")
    if msg.versions != valid:
        diffs.append(f"{msg.name}: versions {msg.versions} != JSON {valid}")
    # Flexible ranges compare by membership (the open end "9+" is 9..0x7fff on both sides).
    if msg.flexible != flexible:
        diffs.append(f"{msg.name}: flexible {msg.flexible} != JSON {flexible}")
    for v in versions if versions is not None else range(valid.low, valid.high + 1):
        diffs += compare_fields(f"{msg.name} v{v}", schema["fields"], msg.fields, cls, v)
    return diffs


# ---------------------------------------------------------------- the tests
def _codecs() -> list[Any]:
    return [c for api in API.values() if api.name not in NO_UPSTREAM_JSON
            for c in (api.request, api.response)]


# Payloads carried as bytes inside group messages: Kafka's "type": "data", no api key.
DATA_CODECS = {c.message.name: c for c in (SUBSCRIPTION, ASSIGNMENT, STICKY_ASSIGNOR_USER_DATA)}
SCHEMA_PACKAGES = {"StickyAssignorUserData": "kafka.coordinator.assignors.sticky"}

CODECS = {c.message.name: c for c in _codecs()} | DATA_CODECS
JSON = {name: load_json(name, SCHEMA_PACKAGES.get(name)) for name in CODECS}


def _with_kafka_3_9_range(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    api = name.removesuffix("Request").removesuffix("Response")
    valid = parse_versions(schema["validVersions"])
    low = SERVED_BELOW_JSON.get(api, valid.low)
    high = SERVED_UP_TO.get(api, valid.high)
    if (low, high) == (valid.low, valid.high):
        return schema
    return {**schema, "validVersions": f"{low}-{high}"}


SCHEMAS = {name: _with_kafka_3_9_range(name, schema) for name, schema in JSON.items()}


def _versioned() -> list[Any]:
    out = []
    for name, schema in SCHEMAS.items():
        valid = parse_versions(schema["validVersions"])
        out += [pytest.param(name, v, id=f"{name}-v{v}")
                for v in range(valid.low, valid.high + 1)]
    return out


@pytest.mark.parametrize("name", sorted(CODECS))
def test_version_ranges_match_json(name: str) -> None:
    schema, msg = SCHEMAS[name], CODECS[name].message
    assert schema.get("apiKey", -1) == msg.api_key
    assert schema["type"] == msg.kind
    assert msg.versions == parse_versions(schema["validVersions"])
    assert msg.flexible == parse_versions(schema["flexibleVersions"])


@pytest.mark.parametrize(("name", "version"), _versioned())
def test_fields_match_json(name: str, version: int) -> None:
    codec = CODECS[name]
    diffs = compare_message(SCHEMAS[name], codec.message, codec.cls, range(version, version + 1))
    assert diffs == []


def test_every_message_compared_at_every_version_without_difference() -> None:
    # The same check in one place, so a summary of all differences is one failure away.
    diffs = [d for name, c in CODECS.items()
             for d in compare_message(SCHEMAS[name], c.message, c.cls)]
    assert diffs == []


def test_the_consumer_protocol_payloads_are_compared() -> None:
    assert set(DATA_CODECS) == {"ConsumerProtocolSubscription", "ConsumerProtocolAssignment",
                                "StickyAssignorUserData"}
    for name in DATA_CODECS:
        assert SCHEMAS[name]["type"] == "data" and "apiKey" not in SCHEMAS[name]
        assert CODECS[name].message.kind == "data"


def test_the_cluster_apis_with_upstream_json_are_compared() -> None:
    compared = {name.removesuffix("Request").removesuffix("Response") for name in SCHEMAS}
    assert compared == (EXPECTED_APIS | set(CLUSTER_APIS)) - NO_UPSTREAM_JSON | {
        "ConsumerProtocolSubscription", "ConsumerProtocolAssignment", "StickyAssignorUserData"}
    assert {"ElectLeaders", "AlterPartitionReassignments", "ListPartitionReassignments"} <= compared


@pytest.mark.parametrize("name", sorted(SERVED_BELOW_JSON))
def test_versions_served_below_the_json_are_the_ones_kafka_4_dropped(name: str) -> None:
    # Should a later kafka-python ship JSON starting lower, the exception goes.
    for kind in ("Request", "Response"):
        assert parse_versions(JSON[f"{name}{kind}"]["validVersions"]).low == \
            SERVED_BELOW_JSON[name] + 1
        assert CODECS[f"{name}{kind}"].message.versions.low == SERVED_BELOW_JSON[name]


@pytest.mark.parametrize("name", sorted(SERVED_UP_TO))
def test_versions_left_out_above_kafka_3_9_are_newer_than_it(name: str) -> None:
    # Our declaration stops at 3.9's newest; the installed JSON goes further.
    for kind in ("Request", "Response"):
        assert parse_versions(JSON[f"{name}{kind}"]["validVersions"]).high > SERVED_UP_TO[name]
        assert CODECS[f"{name}{kind}"].message.versions.high == SERVED_UP_TO[name]


@pytest.mark.parametrize("name", sorted(NO_UPSTREAM_JSON))
def test_apis_left_out_of_the_comparison_really_have_no_json(name: str) -> None:
    # Should a later kafka-python ship one of them, it belongs in the comparison.
    for kind in ("Request", "Response"):
        with pytest.raises(FileNotFoundError):
            load_json(f"{name}{kind}")


@pytest.mark.parametrize("name", sorted(CLUSTER_APIS))
def test_cluster_api_ranges_match_kafka_3_8(name: str) -> None:
    api = next(a for a in API.values() if a.name == name)
    versions, flexible = CLUSTER_APIS[name]
    for msg in (api.request.message, api.response.message):
        assert (str(msg.versions), str(msg.flexible)) == (versions, flexible)


def test_exactly_the_apis_of_the_issues() -> None:
    names = {api.name for api in API.values()}
    assert names == EXPECTED_APIS | set(CLUSTER_APIS)
    assert len(API) == 33 + 10 + 2 + 3 + 2 + 1
    assert {k.name for k in ApiKey} == {
        re.sub(r"(?<!^)(?=[A-Z])", "_", n).upper() for n in names}
    assert [ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA,
            ApiKey.CONTROLLED_SHUTDOWN, ApiKey.ELECT_LEADERS,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS, ApiKey.LIST_PARTITION_REASSIGNMENTS,
            ApiKey.ALTER_PARTITION] == [4, 5, 6, 7, 43, 45, 46, 56]
    for key, api in API.items():
        assert api.key == key == api.request.message.api_key == api.response.message.api_key
        assert api.request.message.name == f"{api.name}Request"
        assert api.response.message.name == f"{api.name}Response"
        assert api.request.message.kind == "request"
        assert api.response.message.kind == "response"
        # Request and response always share version and flexible ranges.
        assert api.request.message.versions == api.response.message.versions
        assert api.request.message.flexible == api.response.message.flexible


@pytest.mark.parametrize("name", sorted(REQUIRED_VERSIONS))
def test_versions_cover_what_clients_send(name: str) -> None:
    api = next(a for a in API.values() if a.name == name)
    lo, hi = REQUIRED_VERSIONS[name]
    assert api.versions.low <= lo and hi <= api.versions.high, (
        f"{name}: we declare {api.versions}, clients/brokers use {lo}-{hi}")


@pytest.mark.parametrize("name", sorted(REQUIRED_VERSIONS))
def test_first_flexible_version_matches_reference(name: str) -> None:
    api = next(a for a in API.values() if a.name == name)
    if name == "SaslHandshake":
        assert api.flexible.empty
    else:
        assert api.flexible.low == FIRST_FLEXIBLE[name]
        assert api.flexible.high >= api.versions.high


@pytest.mark.parametrize(("camel", "snake"), [
    ("ThrottleTimeMs", "throttle_time_ms"), ("IsrNodes", "isr_nodes"), ("Acks", "acks"),
    ("ZkMigrationReady", "zk_migration_ready"), ("Enable2Pc", "enable2_pc"),
    ("ResultsByTopicV3AndBelow", "results_by_topic_v3_and_below"),
])
def test_snake_case(camel: str, snake: str) -> None:
    assert snake_case(camel) == snake


@pytest.mark.parametrize(("jf", "expected"), [
    ({"type": "int32", "default": "-1"}, -1),
    ({"type": "int32", "default": "0x7fffffff"}, 2**31 - 1),
    ({"type": "int64"}, 0),
    ({"type": "string", "default": "null"}, None),
    ({"type": "string"}, ""),
    ({"type": "bool", "default": "true"}, True),
    ({"type": "bool", "default": "false"}, False),
    ({"type": "[]int32"}, []),
    ({"type": "uuid"}, ZERO_UUID),
    ({"type": "int64", "default": -1}, -1),
    ({"type": "bool", "default": True}, True),
])
def test_json_default_parsing(jf: dict[str, Any], expected: Any) -> None:
    assert json_default(jf) == expected


# ---------------------------------------------------------------- the check can fail
def _replace_field(fields: tuple[Field, ...], path: list[str], **changes: Any
                   ) -> tuple[Field, ...]:
    out = []
    for f in fields:
        if f.name == path[0]:
            if len(path) == 1:
                f = dataclasses.replace(f, **changes)
            else:
                f = dataclasses.replace(f, fields=_replace_field(f.fields, path[1:], **changes))
        out.append(f)
    return tuple(out)


PRODUCE_RESPONSE = "ProduceResponse"


@pytest.mark.parametrize(("path", "changes", "expect"), [
    (["throttle_time_ms"], {"type": "int64"}, "type 'int64'"),
    (["throttle_time_ms"], {"versions": Versions.parse("4+")}, "fields"),
    (["responses", "partition_responses", "error_message"], {"nullable": Versions.parse("none")},
     "nullable=False"),
    (["responses", "partition_responses", "current_leader"], {"tag": 5}, "tag 5"),
    (["responses", "partition_responses", "current_leader"],
     {"tagged": Versions.parse("none")}, "tagged=False"),
    (["responses", "partition_responses", "log_start_offset"], {"default": 0}, "default 0"),
    (["responses", "partition_responses", "current_leader", "leader_epoch"], {"name": "epoch"},
     "fields"),
    (["responses", "partition_responses"], {"type": "[]PartitionResponse"}, "type"),
])
def test_comparison_reports_a_mutated_declaration(path: list[str], changes: dict[str, Any],
                                                  expect: str) -> None:
    from millrace.protocol.struct import build_message_class

    codec = CODECS[PRODUCE_RESPONSE]
    schema = SCHEMAS[PRODUCE_RESPONSE]
    assert compare_message(schema, codec.message, codec.cls) == []
    mutated = dataclasses.replace(codec.message,
                                  fields=_replace_field(codec.message.fields, path, **changes))
    assert mutated != codec.message
    diffs = compare_message(schema, mutated, build_message_class(mutated))
    assert diffs, f"mutation {path} {changes} went unnoticed"
    assert any(expect in d for d in diffs), diffs


def test_comparison_reports_mutated_version_ranges() -> None:
    codec = CODECS["FetchRequest"]
    schema = SCHEMAS["FetchRequest"]
    for changes in ({"versions": Versions(4, 17)}, {"flexible": Versions.parse("11+")},
                    {"api_key": 2}, {"kind": "response"}):
        mutated = dataclasses.replace(codec.message, **changes)
        assert compare_message(schema, mutated, codec.cls, range(4, 5)), changes


def test_comparison_reports_a_dropped_json_field() -> None:
    codec = CODECS["MetadataRequest"]
    schema = load_json("MetadataRequest")
    schema["fields"] = [jf for jf in schema["fields"] if jf["name"] != "AllowAutoTopicCreation"]
    diffs = compare_message(schema, codec.message, codec.cls)
    assert any("allow_auto_topic_creation" in d for d in diffs)
    assert not any(" v3:" in d for d in diffs)  # the field only exists from v4
