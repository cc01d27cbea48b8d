"""Kafka clients: the shared network layer (``network_client``, ``metadata``, ``cluster``,
``serialization``) and the producer, consumer and admin client built on it.  Never
imports ``millrace.broker`` or ``millrace.storage``."""
