"""The driver's control plane: what MM2's connectors do besides copying records, run from the driver.

``plan`` (which topics a flow replicates, under which names, by which copy path: ``copy_path``; ``admin_pool``, the
admin clients it and everything after it share), ``topics`` (remote and internal topics), ``config_sync``
(topic-config sync, KIP-894), ``acls`` (topic ACL sync), ``heartbeats`` (MirrorHeartbeat), ``checkpoints`` and
``group_sync`` (MirrorCheckpoint: checkpoints and consumer-group offset sync, from the ``offset_sync_store``),
``progress_store`` (replication progress, and records lost, on the target), ``lease`` (one run per flow; ``handover``
lets a cut-over take a flow from the run that holds it), ``cutover_mark`` (a flow cut over) and ``fencing``
(exactly-once: no earlier producer of a flow's transactional ids can commit). Admin calls and reads of MM2's internal
topics only; records of the replicated topics never pass here.

May import: ``mm2py.config``, ``mm2py.client_settings``, ``mm2py.mirror``, ``mm2py.librdkafka``, ``mm2py.wire``
(``connection_settings``, to know whether the batch path can connect; ``fencing`` fences transactional ids with
the wire client's transaction manager) and ``mm2py.executor.contract`` (the copy path's type).
"""
