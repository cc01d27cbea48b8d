"""The broker's metrics under Kafka's names (``registry``, ``yammer``), their Prometheus
exposition (``prometheus``) and the HTTP listener that serves them (``http_server``)."""
