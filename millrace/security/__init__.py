"""Security for millrace: principals, SASL mechanisms, TLS and credential formats.

This package sits below both ``millrace.broker`` and ``millrace.client`` and is shared by them:
the broker's authenticator drives the SASL *server* mechanisms and maps TLS peer DNs to
principals; the client's network layer drives the SASL *client* mechanisms and builds its TLS
context.  It imports ``millrace.common`` and never the broker or the client.

Java counterparts live under ``org.apache.kafka.common.security`` (``auth``, ``plain``, ``scram``,
``ssl``) and ``org.apache.kafka.common.utils.Sanitizer``.

Everything here is sans-I/O in the h11 style -- bytes in, bytes out, no sockets, no files, no
clocks -- with two exceptions that do file I/O on purpose: ``ssl_factory`` (builds
``ssl.SSLContext`` objects from Kafka ``ssl.*`` settings) and ``certs`` (generates and writes test
certificates).  An import-linter contract keeps the rest free of I/O modules.

Modules:
``kafka_principal``       ``KafkaPrincipal``, ``ANONYMOUS``, ``SecurityProtocol``
``errors``                the authentication exception hierarchy and the client-visible message rule
``jaas``                  the ``sasl.jaas.config`` value parser and PLAIN user table
``sasl``                  ``SaslServer``/``SaslClient`` protocols, PLAIN and SCRAM mechanisms
``ssl_principal_mapper``  ``ssl.principal.mapping.rules``: cert DN -> principal name
``sanitizer``             Kafka's ``Sanitizer`` for ZooKeeper entity names (``/config/users/..``)
``acl``                   the ACL model (operations, permissions, resource patterns, bindings,
                          filters with Kafka's ANY/MATCH semantics) and its ZooKeeper JSON
``ssl_factory``, ``certs`` TLS contexts and certificates (the only I/O)
"""
