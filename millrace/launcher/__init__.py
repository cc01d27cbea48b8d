"""Launching millrace's own servers as child processes of the calling Python process.

``broker_process.BrokerProcess`` runs ``millrace broker`` on a loopback port and waits for
it to start; the demo's embedded broker uses it.  ``zookeeper_process.ZooKeeperProcess``
runs Debian's ZooKeeper server the same way, for cluster mode; the coming ``millrace
cluster up`` (ZooKeeper and N brokers) belongs here too.  Starting a broker is a feature of the library,
not a test fixture, hence this package rather than ``millrace.testing`` (which re-exports
``BrokerProcess`` for tests and benchmarks and which nothing in ``millrace`` imports).

Layering: above ``broker`` and ``client``, below ``testing``, ``spark``, ``demo`` and
``cli``.  It starts the broker as ``python -m millrace.cli.main broker`` and imports none of
it: the child, not the caller, runs the server.
"""
