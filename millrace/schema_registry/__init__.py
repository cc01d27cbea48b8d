"""The schema registry: Confluent's REST API (v1) over a compacted ``_schemas`` topic.

- ``store``: the registry's state (subjects, versions, ids, configs, modes) as a fold of the
  ``_schemas`` records, and those records' keys and values;
- ``kafka_store``: the topic itself -- a reader thread that applies every record, and the
  leader's transactional writer;
- ``leader``: several instances elect one writer through a Kafka group (protocol type
  ``sr``); the others forward writes to it;
- ``registry``: the operations (register, look up, delete, check compatibility, configure);
- ``compatibility``: the compatibility levels and each schema type's rules;
- ``rest``: the HTTP API (aiohttp): routes, Confluent's error bodies, basic auth, TLS,
  forwarding, ``/metrics``;
- ``server``: configuration, start and stop (``millrace schema-registry``).
"""
