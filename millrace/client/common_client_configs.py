"""The settings the clients share (Java ``CommonClientConfigs``).

Each key the producer, consumer and admin client read the same way is declared here once,
with Kafka's default; a client's ``ConfigDef`` ``include``-s these tables and adds its own
keys.  Where a client's default differs in Kafka, the client says so with
``override_default`` next to its own keys (today only the producer's smaller
``receive.buffer.bytes``).

* ``COMMON_CLIENT_CONFIGS``: every client -- where the cluster is, who we are, how long a
  request may take, how connections and metadata refreshes back off, socket buffers, and
  how connections are secured (``security.protocol``, ``ssl.*``, ``sasl.*``: librdkafka's
  names for the TLS files, as Kafka's own clients read keystores instead; checked and
  turned into a TLS context and SASL credentials by ``_client_security``);
* ``METRICS_CONFIGS``: the clients that keep metrics (producer, consumer);
* ``DEFAULT_API_TIMEOUT_CONFIGS``: the clients whose blocking calls take a default
  timeout (consumer, admin).
"""

from __future__ import annotations

from typing import Any

from millrace.common.config import ConfigDef, at_least
from millrace.common.errors import ConfigError
from millrace.security.kafka_principal import SecurityProtocol

ENDPOINT_IDENTIFICATION_ALGORITHMS = ("https", "none", "")


def _security_protocol(name: str, value: str) -> None:
    try:
        SecurityProtocol.parse(value)
    except ConfigError:
        raise ConfigError(f"Invalid value {value} for configuration {name}: String must be "
                          f"one of: {', '.join(p.name for p in SecurityProtocol)}") from None


def _endpoint_identification(name: str, value: str) -> None:
    if value.strip().lower() not in ENDPOINT_IDENTIFICATION_ALGORITHMS:
        raise ConfigError(f"Invalid value {value} for configuration {name}: String must be "
                          "one of: https, none (or empty)")


COMMON_CLIENT_CONFIGS = (
    ConfigDef()
    .define("bootstrap.servers", "list", doc="host:port pairs used to find the cluster")
    .define("client.id", "string", "", doc="an id sent with every request")
    .define("request.timeout.ms", "int", 30000, at_least(0),
            doc="how long one request may wait for its answer")
    .define("retry.backoff.ms", "long", 100, at_least(0),
            doc="pause before retrying a failed request (the start of an exponential "
                "backoff)")
    .define("retry.backoff.max.ms", "long", 1000, at_least(0),
            doc="the longest pause between retries")
    .define("metadata.max.age.ms", "long", 300000, at_least(0),
            doc="refresh the cluster metadata at least this often")
    .define("reconnect.backoff.ms", "long", 50, at_least(0),
            doc="pause before reconnecting to a node (the start of an exponential backoff)")
    .define("reconnect.backoff.max.ms", "long", 1000, at_least(0),
            doc="the longest pause before reconnecting to a node")
    .define("socket.connection.setup.timeout.ms", "long", 10000, at_least(0),
            doc="how long a connection may take to be established")
    .define("socket.connection.setup.timeout.max.ms", "long", 30000, at_least(0),
            doc="the bound of that timeout as it grows with consecutive failures")
    .define("send.buffer.bytes", "int", 131072, at_least(-1),
            doc="SO_SNDBUF of the sockets (-1: the operating system's default)")
    .define("receive.buffer.bytes", "int", 65536, at_least(-1),
            doc="SO_RCVBUF of the sockets (-1: the operating system's default)")
    # ---- security (Kafka's CommonClientConfigs/SslConfigs/SaslConfigs; files as librdkafka)
    .define("security.protocol", "string", "PLAINTEXT", _security_protocol,
            doc="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (case-insensitive)")
    .define("ssl.ca.location", "string", None, nullable=True,
            doc="PEM file (or directory) of the CAs that sign the brokers' certificates "
                "(default: the system's CAs)")
    .define("ssl.ca.pem", "string", None, nullable=True,
            doc="the same CAs as PEM text")
    .define("ssl.certificate.location", "string", None, nullable=True,
            doc="PEM file of this client's certificate chain (for brokers with "
                "ssl.client.auth)")
    .define("ssl.key.location", "string", None, nullable=True,
            doc="PEM file of that certificate's private key")
    .define("ssl.key.password", "password", None, nullable=True,
            doc="the password of an encrypted ssl.key.location")
    .define("ssl.endpoint.identification.algorithm", "string", "https",
            _endpoint_identification,
            doc="https: the broker's certificate must name the host connected to; "
                "none (or empty): do not check the name")
    .define("sasl.mechanism", "string", "GSSAPI",
            doc="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's default GSSAPI is not "
                "supported)")
    .define("sasl.mechanisms", "string", None, nullable=True,
            doc="librdkafka's name for sasl.mechanism")
    .define("sasl.username", "string", None, nullable=True,
            doc="the SASL user (librdkafka); or username in sasl.jaas.config")
    .define("sasl.password", "password", None, nullable=True,
            doc="the SASL password (librdkafka); or password in sasl.jaas.config")
    .define("sasl.jaas.config", "password", None, nullable=True,
            doc="Java style: org.apache.kafka.common.security.scram.ScramLoginModule "
                "required username=\"alice\" password=\"alice-secret\";")
)

METRICS_CONFIGS = (
    ConfigDef()
    .define("metrics.sample.window.ms", "long", 30000, at_least(0),
            doc="the window of one metrics sample")
    .define("metrics.num.samples", "int", 2, at_least(1),
            doc="how many samples a rate or average spans")
    .define("metric.reporters", "list", [],
            doc="MetricsReporter classes (names, classes or instances) told of every metric, "
                "e.g. millrace.client.prometheus.PrometheusReporter")
)

DEFAULT_API_TIMEOUT_CONFIGS = (
    ConfigDef()
    .define("default.api.timeout.ms", "int", 60000, at_least(0),
            doc="how long a blocking call may take when it is given no timeout")
)


def post_process_retry_backoff(values: dict[str, Any]) -> None:
    """A ``retry.backoff.max.ms`` below ``retry.backoff.ms`` is raised to it: the backoff
    then stays constant."""
    if values["retry.backoff.max.ms"] < values["retry.backoff.ms"]:
        values["retry.backoff.max.ms"] = values["retry.backoff.ms"]
