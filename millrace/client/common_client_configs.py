"""The settings the clients share (Java ``CommonClientConfigs``).

Each key the producer, consumer and admin client read the same way is declared here once,
with Kafka's default; a client's ``ConfigDef`` ``include``-s these tables and adds its own
keys.  Where a client's default differs in Kafka, the client says so with
``override_default`` next to its own keys (today only the producer's smaller
``receive.buffer.bytes``).

* ``COMMON_CLIENT_CONFIGS``: every client -- where the cluster is, who we are, how long a
  request may take, how connections and metadata refreshes back off, socket buffers;
* ``METRICS_CONFIGS``: the clients that keep metrics (producer, consumer);
* ``DEFAULT_API_TIMEOUT_CONFIGS``: the clients whose blocking calls take a default
  timeout (consumer, admin).
"""

from __future__ import annotations

from typing import Any

from millrace.common.config import ConfigDef, at_least

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
)

METRICS_CONFIGS = (
    ConfigDef()
    .define("metrics.sample.window.ms", "long", 30000, at_least(0),
            doc="the window of one metrics sample")
    .define("metrics.num.samples", "int", 2, at_least(1),
            doc="how many samples a rate or average spans")
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
