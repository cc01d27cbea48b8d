"""``ControllerState``: what the controller's event thread is doing (Kafka's
``ControllerState``), the value of ``kafka.controller:type=KafkaController,
name=ControllerState``, and the name of the timer each kind of event is timed into,
``kafka.controller:type=ControllerStats,name=<name>``.

The values are Kafka's, so a dashboard mapping them to names works unchanged.  The
broker-change event's timer keeps its historical name, ``LeaderElectionRateAndTimeMs``
(in Kafka too: a broker change is where leaders are elected after a failure), and a
reassignment's is ``PartitionReassignmentRateAndTimeMs``.  Idle has no timer.
"""

from __future__ import annotations

from enum import IntEnum


class ControllerState(IntEnum):
    IDLE = 0
    CONTROLLER_CHANGE = 1
    BROKER_CHANGE = 2
    TOPIC_CHANGE = 3
    TOPIC_DELETION = 4
    ALTER_PARTITION_REASSIGNMENT = 5
    AUTO_LEADER_BALANCE = 6
    MANUAL_LEADER_BALANCE = 7
    CONTROLLED_SHUTDOWN = 8
    ISR_CHANGE = 9
    LEADER_AND_ISR_RESPONSE_RECEIVED = 10
    LOG_DIR_CHANGE = 11
    CONTROLLER_SHUTDOWN = 12
    UNCLEAN_LEADER_ELECTION_ENABLE = 13
    TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE = 14
    LIST_PARTITION_REASSIGNMENT = 15
    UPDATE_METADATA_RESPONSE_RECEIVED = 16
    UPDATE_FEATURES = 17

    @property
    def timer_name(self) -> str | None:
        """The ``ControllerStats`` timer of this kind of event (None for Idle)."""
        if self is ControllerState.IDLE:
            return None
        if self is ControllerState.BROKER_CHANGE:
            return "LeaderElectionRateAndTimeMs"
        if self is ControllerState.ALTER_PARTITION_REASSIGNMENT:
            return "PartitionReassignmentRateAndTimeMs"
        camel = "".join(word.capitalize() for word in self.name.split("_"))
        return f"{camel}RateAndTimeMs"


# The controller's events in millrace, each timed into its state's timer.
TIMED_STATES = (ControllerState.CONTROLLER_CHANGE, ControllerState.BROKER_CHANGE,
                ControllerState.TOPIC_CHANGE, ControllerState.TOPIC_DELETION,
                ControllerState.ALTER_PARTITION_REASSIGNMENT,
                ControllerState.AUTO_LEADER_BALANCE, ControllerState.MANUAL_LEADER_BALANCE,
                ControllerState.CONTROLLED_SHUTDOWN, ControllerState.ISR_CHANGE,
                ControllerState.LIST_PARTITION_REASSIGNMENT)

# An API-driven event (``ControllerService.run_event``) by the controller method it calls.
STATE_OF_CALL = {
    "on_controlled_shutdown": ControllerState.CONTROLLED_SHUTDOWN,
    "on_elect_leaders": ControllerState.MANUAL_LEADER_BALANCE,
    "on_preferred_election": ControllerState.MANUAL_LEADER_BALANCE,
    "on_alter_partition": ControllerState.ISR_CHANGE,
    "on_alter_partition_reassignments": ControllerState.ALTER_PARTITION_REASSIGNMENT,
    "list_partition_reassignments": ControllerState.LIST_PARTITION_REASSIGNMENT,
    "check_auto_rebalance": ControllerState.AUTO_LEADER_BALANCE,
}
