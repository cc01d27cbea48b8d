"""Kafka clients: the shared network layer and metadata, the producer (``producer/``);
the consumer and admin client follow.  Never imports ``millrace.broker``/``storage``."""
