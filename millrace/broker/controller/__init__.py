"""The ZooKeeper-mode controller as pure code: events in, ZooKeeper writes and requests out.

- ``kafka_controller``: ``KafkaController``, one method per event;
- ``event_engine``: ``ControllerEventEngine``, steps, writes in flight, fencing on outcomes;
- ``controller_context``: ``ControllerContext`` (the cache) and ``LeaderIsrAndControllerEpoch``;
- ``election``: the leader election algorithms; ``replica_assignment``: AdminUtils' placement;
- ``zk_writes`` / ``broker_requests``: the writes and requests a result lists;
- ``topic_deletion``: ``TopicDeletionManager``; ``controller_result``: the in/out values;
- ``partition_reassignment``: KIP-455 reassignments (a base of ``KafkaController``).

Nothing here imports a ZooKeeper client, a socket or asyncio: the controller service that
owns a ``KafkaController`` reads the znodes, runs the writes and sends the requests.
"""
