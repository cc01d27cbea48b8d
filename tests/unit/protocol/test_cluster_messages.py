"""The cluster's inter-broker messages, byte for byte.

kafka-python ships no JSON for LeaderAndIsr, StopReplica, UpdateMetadata,
ControlledShutdown (ZooKeeper mode, gone in Kafka 4.0) or AlterPartition, so
``test_schemas`` cannot hold their declarations to Kafka's.  ``test_roundtrip`` proves
each encodes and decodes consistently at every version; these tests prove the layout
itself: every expected byte string below is written out by hand from Kafka 3.8's field
order, with ``struct.pack`` and the wire rules, never with our codec -- so a field out
of order, in the wrong version, of the wrong width or left out fails here.  Each API is
checked at a non-flexible version (classic int16/int32 lengths) and a flexible one
(compact lengths, tag sections); AlterPartition is flexible in every version, so two
flexible ones.

Wire rules used: int16-length strings and int32-count arrays before the flexible
versions; from then on unsigned-varint length + 1 / count + 1 (0 = null) and an empty
tag section (one zero byte) closing every struct, tagged fields written only when not
at their default, as (tag, size, value) after the count.
"""

from __future__ import annotations

import struct
import uuid

import pytest

from millrace.protocol import API, ApiKey
from millrace.protocol.struct import Struct
from millrace.protocol.types import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
)
from tests.unit.protocol.valuegen import all_messages

TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
NO_TAGS = b"\x00"


# ---------------------------------------------------------------- hand encoders
def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def boolean(v: bool) -> bytes:
    return b"\x01" if v else b"\x00"


def string(s: str) -> bytes:
    """Classic STRING: int16 length, UTF-8."""
    return i16(len(s.encode())) + s.encode()


def array(*elements: bytes) -> bytes:
    """Classic ARRAY: int32 count, elements."""
    return i32(len(elements)) + b"".join(elements)


def compact_string(s: str | None) -> bytes:
    """COMPACT_(NULLABLE_)STRING: length + 1 as one varint byte (short strings here)."""
    if s is None:
        return b"\x00"
    data = s.encode()
    assert len(data) < 127
    return bytes([len(data) + 1]) + data


def compact_array(*elements: bytes) -> bytes:
    assert len(elements) < 127
    return bytes([len(elements) + 1]) + b"".join(elements)


def ints(*values: int) -> tuple[bytes, ...]:
    return tuple(i32(v) for v in values)


def check(api_key: int, side: str, body: Struct, version: int, expected: bytes) -> None:
    codec = API[api_key].request if side == "request" else API[api_key].response
    assert codec.encode(body, version) == expected
    assert codec.decode(expected, version) == body


# ---------------------------------------------------------------- every version round-trips
CLUSTER_ONLY = {
    ApiKey.LEADER_AND_ISR: range(0, 8), ApiKey.STOP_REPLICA: range(0, 5),
    ApiKey.UPDATE_METADATA: range(0, 9), ApiKey.CONTROLLED_SHUTDOWN: range(0, 4),
    ApiKey.ALTER_PARTITION: range(0, 4),
}


@pytest.mark.parametrize("key", sorted(CLUSTER_ONLY))
def test_every_version_is_in_the_round_trip_suite(key: ApiKey) -> None:
    # test_roundtrip walks all_messages(): make sure nothing here falls out of it.
    covered = {(c.message.name, v) for c, v in all_messages()}
    api = API[key]
    for name in (api.request.message.name, api.response.message.name):
        assert {v for n, v in covered if n == name} == set(CLUSTER_ONLY[key])


# ---------------------------------------------------------------- LeaderAndIsr (4)
LAI = LeaderAndIsrRequest
PARTITION_STATE_V2 = LAI.LeaderAndIsrTopicState.LeaderAndIsrPartitionState


def leader_and_isr(version: int) -> LeaderAndIsrRequest:
    state = PARTITION_STATE_V2(
        partition_index=2, controller_epoch=5, leader=1, leader_epoch=7, isr=[1, 3],
        partition_epoch=11, replicas=[1, 3, 4], adding_replicas=[4], removing_replicas=[],
        is_new=True, leader_recovery_state=1)
    return LAI(
        controller_id=3, is_kraft_controller=version >= 7, controller_epoch=5,
        broker_epoch=0x100000002, type=2 if version >= 5 else 0,
        topic_states=[LAI.LeaderAndIsrTopicState(
            topic_name="t", topic_id=TOPIC_ID if version >= 5 else uuid.UUID(int=0),
            partition_states=[state])],
        live_leaders=[LAI.LeaderAndIsrLiveLeader(broker_id=1, host_name="h", port=9092)])


def test_leader_and_isr_v2_classic_layout() -> None:
    body = leader_and_isr(2)
    # v2: no adding/removing replicas (v3+), no leader recovery state (v6+): left out.
    body.topic_states[0].partition_states[0].adding_replicas = []
    body.topic_states[0].partition_states[0].leader_recovery_state = 0
    expected = (
        i32(3) + i32(5) + i64(0x100000002)  # controller id, controller epoch, broker epoch
        + array(  # topic states
            string("t")
            + array(
                i32(2) + i32(5) + i32(1) + i32(7)  # partition, ctrl epoch, leader, epoch
                + array(*ints(1, 3))  # isr
                + i32(11)  # partition epoch (zkVersion)
                + array(*ints(1, 3, 4))  # replicas
                + boolean(True)))  # is new
        + array(i32(1) + string("h") + i32(9092)))  # live leaders
    check(ApiKey.LEADER_AND_ISR, "request", body, 2, expected)


def test_leader_and_isr_v0_lists_partitions_ungrouped() -> None:
    body = LAI(controller_id=1, controller_epoch=2, ungrouped_partition_states=[
        LAI.LeaderAndIsrPartitionState(topic_name="t", partition_index=0, controller_epoch=2,
                                       leader=1, leader_epoch=0, isr=[1], partition_epoch=0,
                                       replicas=[1])])
    expected = (i32(1) + i32(2)
                + array(string("t") + i32(0) + i32(2) + i32(1) + i32(0) + array(i32(1))
                        + i32(0) + array(i32(1)))
                + array())
    check(ApiKey.LEADER_AND_ISR, "request", body, 0, expected)


def test_leader_and_isr_v1_adds_is_new_to_ungrouped_partitions() -> None:
    body = LAI(controller_id=1, controller_epoch=2, ungrouped_partition_states=[
        LAI.LeaderAndIsrPartitionState(topic_name="t", partition_index=0, controller_epoch=2,
                                       leader=1, leader_epoch=0, isr=[1], partition_epoch=0,
                                       replicas=[1], is_new=True)])
    expected = (i32(1) + i32(2)
                + array(string("t") + i32(0) + i32(2) + i32(1) + i32(0) + array(i32(1))
                        + i32(0) + array(i32(1)) + boolean(True))
                + array())
    check(ApiKey.LEADER_AND_ISR, "request", body, 1, expected)


def test_leader_and_isr_v7_compact_layout() -> None:
    expected = (
        i32(3) + boolean(True) + i32(5) + i64(0x100000002) + i8(2)  # ..., kraft, type
        + compact_array(
            compact_string("t") + TOPIC_ID.bytes
            + compact_array(
                i32(2) + i32(5) + i32(1) + i32(7)
                + compact_array(*ints(1, 3)) + i32(11) + compact_array(*ints(1, 3, 4))
                + compact_array(i32(4)) + compact_array()  # adding, removing
                + boolean(True) + i8(1)  # is new, leader recovery state
                + NO_TAGS)
            + NO_TAGS)
        + compact_array(i32(1) + compact_string("h") + i32(9092) + NO_TAGS)
        + NO_TAGS)
    check(ApiKey.LEADER_AND_ISR, "request", leader_and_isr(7), 7, expected)


def test_leader_and_isr_response_v1_and_v5() -> None:
    error = LeaderAndIsrResponse.LeaderAndIsrPartitionError
    v1 = LeaderAndIsrResponse(error_code=0, partition_errors=[
        error(topic_name="t", partition_index=4, error_code=11)])
    check(ApiKey.LEADER_AND_ISR, "response", v1, 1,
          i16(0) + array(string("t") + i32(4) + i16(11)))
    topic = LeaderAndIsrResponse.LeaderAndIsrTopicError
    v5 = LeaderAndIsrResponse(error_code=0, topics=[topic(topic_id=TOPIC_ID, partition_errors=[
        topic.LeaderAndIsrPartitionError(partition_index=4, error_code=11)])])
    check(ApiKey.LEADER_AND_ISR, "response", v5, 5,
          i16(0) + compact_array(TOPIC_ID.bytes
                                 + compact_array(i32(4) + i16(11) + NO_TAGS) + NO_TAGS)
          + NO_TAGS)


# ---------------------------------------------------------------- StopReplica (5)
def test_stop_replica_v0_and_v1_classic_layouts() -> None:
    v0 = StopReplicaRequest(controller_id=1, controller_epoch=4, delete_partitions=True,
                            ungrouped_partitions=[StopReplicaRequest.StopReplicaPartitionV0(
                                topic_name="t", partition_index=6)])
    check(ApiKey.STOP_REPLICA, "request", v0, 0,
          i32(1) + i32(4) + boolean(True) + array(string("t") + i32(6)))
    v1 = StopReplicaRequest(controller_id=1, controller_epoch=4, broker_epoch=9,
                            delete_partitions=False, topics=[
                                StopReplicaRequest.StopReplicaTopicV1(
                                    name="t", partition_indexes=[0, 6])])
    check(ApiKey.STOP_REPLICA, "request", v1, 1,
          i32(1) + i32(4) + i64(9) + boolean(False) + array(string("t") + array(*ints(0, 6))))


def test_stop_replica_v2_is_v1_in_the_compact_layout() -> None:
    body = StopReplicaRequest(controller_id=1, controller_epoch=4, broker_epoch=9,
                              delete_partitions=True, topics=[
                                  StopReplicaRequest.StopReplicaTopicV1(
                                      name="t", partition_indexes=[6])])
    check(ApiKey.STOP_REPLICA, "request", body, 2,
          i32(1) + i32(4) + i64(9) + boolean(True)
          + compact_array(compact_string("t") + compact_array(i32(6)) + NO_TAGS) + NO_TAGS)


def test_stop_replica_v3_compact_layout_with_partition_states() -> None:
    topic = StopReplicaRequest.StopReplicaTopicState
    body = StopReplicaRequest(controller_id=1, controller_epoch=4, broker_epoch=9, topic_states=[
        topic(topic_name="t", partition_states=[
            topic.StopReplicaPartitionState(partition_index=6, leader_epoch=-2,
                                            delete_partition=True)])])
    check(ApiKey.STOP_REPLICA, "request", body, 3,
          i32(1) + i32(4) + i64(9)
          + compact_array(compact_string("t")
                          + compact_array(i32(6) + i32(-2) + boolean(True) + NO_TAGS)
                          + NO_TAGS)
          + NO_TAGS)


def test_stop_replica_response_v0_and_v2() -> None:
    body = StopReplicaResponse(error_code=0, partition_errors=[
        StopReplicaResponse.StopReplicaPartitionError(topic_name="t", partition_index=6,
                                                      error_code=3)])
    check(ApiKey.STOP_REPLICA, "response", body, 0,
          i16(0) + array(string("t") + i32(6) + i16(3)))
    check(ApiKey.STOP_REPLICA, "response", body, 2,
          i16(0) + compact_array(compact_string("t") + i32(6) + i16(3) + NO_TAGS) + NO_TAGS)


# ---------------------------------------------------------------- UpdateMetadata (6)
UMR = UpdateMetadataRequest


def test_update_metadata_v0_has_one_host_and_port_per_broker() -> None:
    body = UMR(controller_id=2, controller_epoch=3, ungrouped_partition_states=[
        UMR.UpdateMetadataPartitionState(topic_name="t", partition_index=1, controller_epoch=3,
                                         leader=2, leader_epoch=4, isr=[2], zk_version=5,
                                         replicas=[2, 1])],
        live_brokers=[UMR.UpdateMetadataBroker(id=2, v0_host="h", v0_port=9093)])
    check(ApiKey.UPDATE_METADATA, "request", body, 0,
          i32(2) + i32(3)
          + array(string("t") + i32(1) + i32(3) + i32(2) + i32(4) + array(i32(2)) + i32(5)
                  + array(*ints(2, 1)))
          + array(i32(2) + string("h") + i32(9093)))


def update_metadata(version: int) -> UpdateMetadataRequest:
    topic = UMR.UpdateMetadataTopicState
    broker = UMR.UpdateMetadataBroker
    return UMR(
        controller_id=2, controller_epoch=3, broker_epoch=8, type=1 if version >= 8 else 0,
        topic_states=[topic(
            topic_name="t", topic_id=TOPIC_ID if version >= 7 else uuid.UUID(int=0),
            partition_states=[topic.UpdateMetadataPartitionState(
                partition_index=1, controller_epoch=3, leader=2, leader_epoch=4, isr=[2],
                zk_version=5, replicas=[2, 1], offline_replicas=[1])])],
        live_brokers=[broker(id=2, rack=None, endpoints=[broker.UpdateMetadataEndpoint(
            port=9093, host="h", listener="PLAINTEXT", security_protocol=0)])])


@pytest.mark.parametrize("version", [2, 3])
def test_update_metadata_v2_adds_racks_and_v3_listener_names(version: int) -> None:
    body = update_metadata(3)
    body.broker_epoch = -1  # v5+
    ungrouped = body.topic_states[0].partition_states[0]
    body.topic_states = []
    ungrouped.offline_replicas = []  # v4+
    body.ungrouped_partition_states = [UMR.UpdateMetadataPartitionState(
        topic_name="t", partition_index=1, controller_epoch=3, leader=2, leader_epoch=4,
        isr=[2], zk_version=5, replicas=[2, 1])]
    body.live_brokers[0].rack = "r1"
    listener = string("PLAINTEXT") if version == 3 else b""
    if version == 2:
        body.live_brokers[0].endpoints[0].listener = ""
    check(ApiKey.UPDATE_METADATA, "request", body, version,
          i32(2) + i32(3)
          + array(string("t") + i32(1) + i32(3) + i32(2) + i32(4) + array(i32(2)) + i32(5)
                  + array(*ints(2, 1)))
          + array(i32(2) + array(i32(9093) + string("h") + listener + i16(0))
                  + string("r1")))


def test_update_metadata_v5_classic_layout() -> None:
    check(ApiKey.UPDATE_METADATA, "request", update_metadata(5), 5,
          i32(2) + i32(3) + i64(8)
          + array(string("t")
                  + array(i32(1) + i32(3) + i32(2) + i32(4) + array(i32(2)) + i32(5)
                          + array(*ints(2, 1)) + array(i32(1))))
          + array(i32(2) + array(i32(9093) + string("h") + string("PLAINTEXT") + i16(0))
                  + b"\xff\xff"))  # null rack


def test_update_metadata_v8_compact_layout_with_tagged_type() -> None:
    expected = (
        i32(2) + boolean(False) + i32(3) + i64(8)  # type is tagged: not here
        + compact_array(
            compact_string("t") + TOPIC_ID.bytes
            + compact_array(i32(1) + i32(3) + i32(2) + i32(4) + compact_array(i32(2)) + i32(5)
                            + compact_array(*ints(2, 1)) + compact_array(i32(1)) + NO_TAGS)
            + NO_TAGS)
        + compact_array(i32(2)
                        + compact_array(i32(9093) + compact_string("h")
                                        + compact_string("PLAINTEXT") + i16(0) + NO_TAGS)
                        + compact_string(None) + NO_TAGS)
        + b"\x01" + b"\x00" + b"\x01" + i8(1))  # one tagged field: tag 0, 1 byte, type 1
    check(ApiKey.UPDATE_METADATA, "request", update_metadata(8), 8, expected)
    # At its default the type takes no space: an empty tag section.
    body = update_metadata(8)
    body.type = 0
    assert API[ApiKey.UPDATE_METADATA].request.encode(body, 8) == expected[:-4] + NO_TAGS


def test_update_metadata_response() -> None:
    body = API[ApiKey.UPDATE_METADATA].response.cls(error_code=15)
    check(ApiKey.UPDATE_METADATA, "response", body, 5, i16(15))
    check(ApiKey.UPDATE_METADATA, "response", body, 6, i16(15) + NO_TAGS)


# ---------------------------------------------------------------- ControlledShutdown (7)
def test_controlled_shutdown_request_layouts() -> None:
    body = ControlledShutdownRequest(broker_id=4, broker_epoch=0x7FFFFFFF01)
    for version in (0, 1):
        check(ApiKey.CONTROLLED_SHUTDOWN, "request", ControlledShutdownRequest(broker_id=4),
              version, i32(4))
    check(ApiKey.CONTROLLED_SHUTDOWN, "request", body, 2, i32(4) + i64(0x7FFFFFFF01))
    check(ApiKey.CONTROLLED_SHUTDOWN, "request", body, 3, i32(4) + i64(0x7FFFFFFF01) + NO_TAGS)


def test_controlled_shutdown_response_layouts() -> None:
    body = ControlledShutdownResponse(error_code=0, remaining_partitions=[
        ControlledShutdownResponse.RemainingPartition(topic_name="t", partition_index=2)])
    check(ApiKey.CONTROLLED_SHUTDOWN, "response", body, 0,
          i16(0) + array(string("t") + i32(2)))
    check(ApiKey.CONTROLLED_SHUTDOWN, "response", body, 3,
          i16(0) + compact_array(compact_string("t") + i32(2) + NO_TAGS) + NO_TAGS)


# ---------------------------------------------------------------- AlterPartition (56)
APR = AlterPartitionRequest


def test_alter_partition_v1_names_the_topic_and_sends_bare_broker_ids() -> None:
    body = APR(broker_id=1, broker_epoch=40, topics=[APR.TopicData(topic_name="t", partitions=[
        APR.TopicData.PartitionData(partition_index=0, leader_epoch=3, new_isr=[1, 2],
                                    leader_recovery_state=0, partition_epoch=9)])])
    check(ApiKey.ALTER_PARTITION, "request", body, 1,
          i32(1) + i64(40)
          + compact_array(compact_string("t")
                          + compact_array(i32(0) + i32(3) + compact_array(*ints(1, 2)) + i8(0)
                                          + i32(9) + NO_TAGS)
                          + NO_TAGS)
          + NO_TAGS)


def test_alter_partition_v3_uses_topic_ids_and_isr_members_with_epochs() -> None:
    data = APR.TopicData.PartitionData
    body = APR(broker_id=1, broker_epoch=40, topics=[APR.TopicData(topic_id=TOPIC_ID, partitions=[
        data(partition_index=0, leader_epoch=3, new_isr_with_epochs=[
            data.BrokerState(broker_id=1, broker_epoch=40),
            data.BrokerState(broker_id=2, broker_epoch=41)],
            leader_recovery_state=1, partition_epoch=9)])])
    check(ApiKey.ALTER_PARTITION, "request", body, 3,
          i32(1) + i64(40)
          + compact_array(TOPIC_ID.bytes
                          + compact_array(i32(0) + i32(3)
                                          + compact_array(i32(1) + i64(40) + NO_TAGS,
                                                          i32(2) + i64(41) + NO_TAGS)
                                          + i8(1) + i32(9) + NO_TAGS)
                          + NO_TAGS)
          + NO_TAGS)


def test_alter_partition_response_v0_and_v2() -> None:
    data = AlterPartitionResponse.TopicData.PartitionData
    partition = data(partition_index=0, error_code=0, leader_id=1, leader_epoch=3, isr=[1, 2],
                     partition_epoch=10)
    v0 = AlterPartitionResponse(throttle_time_ms=0, error_code=0, topics=[
        AlterPartitionResponse.TopicData(topic_name="t", partitions=[partition])])
    check(ApiKey.ALTER_PARTITION, "response", v0, 0,
          i32(0) + i16(0)
          + compact_array(compact_string("t")
                          + compact_array(i32(0) + i16(0) + i32(1) + i32(3)
                                          + compact_array(*ints(1, 2)) + i32(10) + NO_TAGS)
                          + NO_TAGS)
          + NO_TAGS)
    v2 = AlterPartitionResponse(throttle_time_ms=0, error_code=0, topics=[
        AlterPartitionResponse.TopicData(topic_id=TOPIC_ID, partitions=[partition])])
    check(ApiKey.ALTER_PARTITION, "response", v2, 2,
          i32(0) + i16(0)
          + compact_array(TOPIC_ID.bytes
                          + compact_array(i32(0) + i16(0) + i32(1) + i32(3)
                                          + compact_array(*ints(1, 2)) + i8(0) + i32(10)
                                          + NO_TAGS)
                          + NO_TAGS)
          + NO_TAGS)
