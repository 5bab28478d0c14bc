"""The librdkafka client stack (confluent-kafka): MM2's Java client settings turned into librdkafka settings, and the
clients built from them.

``settings`` is the only place that knows both vocabularies (Java client keys, librdkafka properties; the tables are
``key_tables``, with ``jaas`` and ``keystores`` for what Java expresses as JAAS lines and key stores) and reports what
cannot be carried over; ``tls_details`` reads the TLS details (``cipher_names``: Java's cipher names as OpenSSL's;
``tls_versions``: version pins, which librdkafka has no setting for; ``tls_diagnosis``: why a certificate failed);
``typed_settings`` reads what a translation says about connecting into the library-neutral
:class:`~mm2py.client_settings.ClientSettings` that the batch path's client adapts; ``defaults`` are mm2py's own
client defaults; ``clients`` and ``admin`` (with ``admin_acls``)
create clients lazily, never pickle them, and ``error_mapping`` words their errors with the cluster alias and the
operation; ``partition_reader`` reads MM2's internal topics. Secrets are masked with ``mm2py.secrets`` wherever settings
are printed. The batch path's own client is :mod:`mm2py.wire`.

May import: ``mm2py.errors``, ``mm2py.secrets``, ``mm2py.client_settings`` (the typed settings it reads) and
``mm2py.mirror.topic_partition`` (the name of a partition).
"""
