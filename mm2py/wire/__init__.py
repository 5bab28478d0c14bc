"""The batch path's own Kafka client: the Kafka protocol spoken directly, so record batches stay bytes.

Why not a client library's producer and consumer: librdkafka (confluent-kafka) hands out records, never the
record batches a Fetch response carries, and cannot produce a batch as it is. Why not kafka-python's record
module (``kafka.record``) either: its batch reader decodes record by record and its builder encodes records
into a new batch, so forwarding through it would decode and re-encode every record, which is exactly the
per-record work the batch path exists to avoid. So this package keeps a batch as a view of the bytes a
Fetch response holds (``batches``), rewrites only its 61-byte header (the target producer's id, epoch and
sequence, a fresh CRC-32C) and sends the rest as received (``produce_request``); only batches a broker would
refuse are decoded and rebuilt (``batch_codec``, ``compression``). kafka-python 3.0.12 provides the
connections, TLS, SASL, version negotiation and request classes, behind ``connection``; ``connection_settings``
turns a cluster's librdkafka settings into its settings. ``read_committed`` drops control batches and aborted
transactions as the Java consumer does; ``sender`` is the idempotent producer.

May import: ``mm2py.errors``, ``mm2py.secrets``, ``mm2py.mirror`` and ``mm2py.metrics.measurement``.
"""
