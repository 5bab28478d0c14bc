"""The batch path's own Kafka client: the Kafka protocol spoken directly, so record batches stay bytes, and
kept going through whatever a Kafka cluster goes through in normal operation the way Kafka's Java clients are.

Why not a client library's producer and consumer: librdkafka (confluent-kafka) hands out records, never the
record batches a Fetch response carries, and cannot produce a batch as it is. Why not kafka-python's record
module (``kafka.record``) either: its batch reader decodes record by record and its builder encodes records
into a new batch, so forwarding through it would decode and re-encode every record, which is exactly the
per-record work the batch path exists to avoid. So this package keeps a batch as a view of the bytes a Fetch
response holds (``batches``), rewrites only its 61-byte header (the target producer's id, epoch and sequence, a
fresh CRC-32C) and sends the rest as received (``produce_request``); only batches a broker would refuse are
decoded and rebuilt (``forwarding``, ``batch_codec``, ``compression``). kafka-python 3.0.12 provides the
connections, TLS, SASL, version negotiation and the request classes other than Fetch and Produce, behind
``connection``.

The modules, from the cluster up:

- ``cluster``: the typed interface the fetcher and the sender use (a fake multi-broker cluster implements it in
  the unit tests); ``connection`` implements it over kafka-python (with ``library_patches`` and
  ``connection_settings``, a cluster's typed client settings as the library's, ``msk_iam``, AWS_MSK_IAM with the
  cluster's AWS profile, and ``login_failures``, a refused login or TLS handshake named at once); ``errors``:
  Kafka's errors by name;
- ``metadata``: which broker leads each partition, refreshed as the Java clients refresh it;
- ``fetcher``: every partition fetched from its leader, through leader moves and lost brokers (Java's consumer
  fetcher), with ``fetch_session`` (incremental fetch sessions, Java's FetchSessionHandler) and
  ``fetch_request`` (the Fetch request and its answer, encoded and decoded here with ``wire_types``, Kafka's
  primitive types and headers); ``read_committed``: control batches and aborted
  transactions dropped;
- ``sender`` and ``partition_queue``: the idempotent producer (Java's Sender, RecordAccumulator and
  TransactionManager): pipelined, resent in order with the same sequences, epochs bumped when a broker lost them;
  ``produce_failures``: the table from a failed batch's error to what the sender does next;
  ``transactions``: the transactional producer's coordinator calls (Java's TransactionManager), for exactly-once.

Nothing here raises for one partition's trouble: a partition that cannot go on says why, and the others go on.

May import: ``mm2py.errors``, ``mm2py.secrets``, ``mm2py.mirror``, ``mm2py.metrics.measurement`` and
``mm2py.client_settings`` (how to reach and log in to a cluster, read once with the configuration).
"""
