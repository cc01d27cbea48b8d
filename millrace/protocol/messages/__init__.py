"""Every message millrace speaks, one module per API (request and response together).

``ALL`` maps api key -> (request declaration, response declaration), in api key order.
The value classes and codecs are built from these in ``millrace.protocol.api``.

Besides the client APIs, the cluster's own: the controller-to-broker APIs of ZooKeeper
mode (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown -- Kafka 3.x only),
AlterPartition (leader to controller) and the admin APIs the controller answers
(ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments,
AlterUserScramCredentials).  The ACL admin APIs (DescribeAcls, CreateAcls, DeleteAcls)
are declared from v0, which Kafka 3.9 serves and 4.0 dropped; the client quota APIs
(DescribeClientQuotas, AlterClientQuotas) are served by any broker.  Declaring a message
does not make the broker serve it: that takes a registered handler
(``millrace.broker.api_version_manager``).
"""

from __future__ import annotations

from millrace.protocol.messages import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_client_quotas,
    alter_configs,
    alter_partition,
    alter_partition_reassignments,
    alter_user_scram_credentials,
    api_versions,
    controlled_shutdown,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_transactions,
    describe_user_scram_credentials,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leader_and_isr,
    leave_group,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_commit,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    stop_replica,
    sync_group,
    txn_offset_commit,
    update_metadata,
    write_txn_markers,
)
from millrace.protocol.schema import Message

_MODULES = (
    produce, fetch, list_offsets, metadata, leader_and_isr, stop_replica, update_metadata,
    controlled_shutdown, offset_commit, offset_fetch, find_coordinator, join_group,
    heartbeat, leave_group, sync_group, describe_groups, list_groups, sasl_handshake,
    api_versions, create_topics, delete_topics, delete_records, init_producer_id,
    offset_for_leader_epoch, add_partitions_to_txn, add_offsets_to_txn, end_txn,
    write_txn_markers, txn_offset_commit, describe_acls, create_acls, delete_acls,
    describe_configs, alter_configs, describe_log_dirs,
    sasl_authenticate, create_partitions, delete_groups, elect_leaders,
    incremental_alter_configs, alter_partition_reassignments, list_partition_reassignments,
    describe_client_quotas, alter_client_quotas,
    describe_user_scram_credentials, alter_user_scram_credentials,
    alter_partition, describe_cluster, describe_producers, describe_transactions,
    list_transactions,
)

ALL: dict[int, tuple[Message, Message]] = {
    m.REQUEST.api_key: (m.REQUEST, m.RESPONSE) for m in _MODULES
}
