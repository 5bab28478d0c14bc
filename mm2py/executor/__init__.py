"""What runs inside Spark tasks on executors: the copy tasks and the contract they share with the driver.

``contract`` (CopySpec, PartitionRange, CopyResult, CopyPath: what crosses the Spark boundary),
``record_copy`` (the record path: confluent-kafka, record by record, with ``record_transactions`` for
exactly-once), ``batch_copy`` (the batch path: whole
record batches through :mod:`mm2py.wire`, with ``batch_fetching`` (the fetch thread), ``batch_producer`` (the
sender's settings and producer ids), ``batch_results`` (what was acknowledged, progress, results),
``control_writes`` (progress and offset syncs through the same client) and ``transactional_copy``
(exactly-once)), ``driver_link`` (a following task's reports to its driver), ``delivery`` (the record path's
waiting for acknowledgements and its offset syncs), ``sync_records`` (the offset-sync records a range makes, on
both paths), ``task_logging`` and ``allocator`` (the worker process's logging and malloc settings). A record's
bytes go from the source to the target inside one of these tasks and nowhere else.

May import: ``mm2py.wire``, ``mm2py.librdkafka`` (the record path's modules only), ``mm2py.mirror``,
``mm2py.metrics.measurement``, ``mm2py.client_settings``, ``mm2py.errors`` and ``mm2py.secrets``; never
pyspark, the driver's modules or an HTTP server.
"""
