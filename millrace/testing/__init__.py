"""Support for tests and benchmarks: ``postgres.PostgresServer`` (a throw-away PostgreSQL
server) and ``broker_process`` (a re-export of ``millrace.launcher``'s ``BrokerProcess``).

Nothing in ``millrace`` imports this package (an import-linter contract); only tests and
benchmarks do.
"""
