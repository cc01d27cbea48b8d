"""The broker's side of security: who is on each connection.

``listener_security`` turns the listener-scoped settings into one ``ListenerSecurity``
per listener (its TLS context, its SASL mechanisms and their credentials: Kafka's
``ChannelBuilders``); ``sasl_server_authenticator`` is Kafka's
``SaslServerAuthenticator``, the state machine a SASL connection goes through before its
first ordinary request; ``credential_cache`` holds the SCRAM credentials the brokers
check.  The mechanisms themselves (PLAIN, SCRAM) and the TLS context factory live in
``millrace.security``, shared with the clients.
"""
