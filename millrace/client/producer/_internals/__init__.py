"""The producer's machinery (Java ``org.apache.kafka.clients.producer.internals``)."""
