"""The Kafka producer (Java ``org.apache.kafka.clients.producer``).

    from millrace.client.producer import KafkaProducer, ProducerRecord

    with KafkaProducer({"bootstrap.servers": "127.0.0.1:9092"}) as producer:
        future = producer.send(ProducerRecord("events", b"value", key=b"key"))
        print(future.get(timeout=10))
"""

from millrace.client.errors import BufferExhaustedError, KafkaTimeoutError
from millrace.client.producer._internals.future_record_metadata import FutureRecordMetadata
from millrace.client.producer.config import PRODUCER_CONFIG, ProducerConfig
from millrace.client.producer.interceptor import ProducerInterceptor
from millrace.client.producer.kafka_producer import KafkaProducer
from millrace.client.producer.partitioner import Partitioner, RoundRobinPartitioner
from millrace.client.producer.producer_record import Callback, ProducerRecord, RecordMetadata

__all__ = [
    "PRODUCER_CONFIG",
    "BufferExhaustedError",
    "Callback",
    "FutureRecordMetadata",
    "KafkaProducer",
    "KafkaTimeoutError",
    "Partitioner",
    "ProducerConfig",
    "ProducerInterceptor",
    "ProducerRecord",
    "RecordMetadata",
    "RoundRobinPartitioner",
]
