"""Fault injection and a history checker for a ``LocalCluster`` (Jepsen-style).

- ``history``: what the clients did and saw (every send and its outcome, every commit
  observed, every fault injected), kept in memory and written as JSON lines;
- ``workload``: idempotent ``acks=all`` producers (millrace's and confluent-kafka's)
  writing unique, self-describing values, and a consumer group committing offsets;
- ``nemesis``: faults scheduled from a seed (kill -9 of a leader, the controller or a
  follower, SIGSTOP pauses, ZooKeeper killed, rolling restarts; ``network`` and ``disk``
  add partitions and a full disk);
- ``replica_logs``: every replica's log read from the files the brokers left on disk;
- ``checker``: the verdict (lost, duplicated, misplaced, reordered, phantom records,
  divergent replicas, committed offsets going backwards, group ownership);
- ``hostile`` (with ``sasl_ssl_connection`` and ``security_setup``): the security
  scenario's clients without ACLs or with wrong passwords, every attempt's outcome, and
  the verdict on them (unauthorized successes, hostile records, broker RSS growth);
- ``runner`` and ``__main__``: scenarios, and ``python -m millrace.testing.faults``.
"""
