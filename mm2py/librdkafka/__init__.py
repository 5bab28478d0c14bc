"""The librdkafka client stack (confluent-kafka): MM2's Java client settings turned into librdkafka settings, and the
clients built from them.

``settings`` translates the Java client keys that are not about connecting into librdkafka properties (the tables
are ``key_tables``) and reports what cannot be carried over; how a client connects is read once by
:mod:`mm2py.config.client_keys` into the library-neutral :class:`~mm2py.client_settings.ClientSettings`, which
``security_keys`` renders as librdkafka's protocol, login and TLS properties (``tls_versions``: what librdkafka can
do with a version pin; ``gssapi``: whether its build has Kerberos; ``tls_diagnosis``: why a certificate failed);
``defaults`` are mm2py's own
client defaults; ``clients`` and ``admin`` (with ``admin_acls``)
create clients lazily, never pickle them, and ``error_mapping`` words their errors with the cluster alias and the
operation; ``partition_reader`` reads MM2's internal topics. Secrets are masked with ``mm2py.secrets`` wherever settings
are printed. The batch path's own client is :mod:`mm2py.wire`.

May import: ``mm2py.errors``, ``mm2py.secrets``, ``mm2py.client_settings`` (the typed settings it reads) and
``mm2py.mirror.topic_partition`` (the name of a partition).
"""
