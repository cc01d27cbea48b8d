"""Client quotas (Kafka's KIP-13/KIP-55/KIP-124/KIP-546): who a quota applies to
(``entity``), where the configured values live and how every broker hears of a change
(``quota_store``), and the manager that enforces them.
"""
