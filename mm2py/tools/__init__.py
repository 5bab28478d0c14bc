"""The commands that inspect replication without running it: ``lag`` (records and seconds behind, records lost; with
``liveness``, heartbeat and checkpoint ages), ``mirror_client`` (MM2's MirrorClient: upstream clusters, hops,
translated offsets) and ``verify`` (record-by-record comparison of source and target).

May import: ``mm2py.control``, ``mm2py.config``, ``mm2py.mirror``, ``mm2py.librdkafka`` and
``mm2py.client_settings``; never the engine, so these commands start without a JVM.
"""
