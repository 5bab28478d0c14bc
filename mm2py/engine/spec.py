"""The one picklable description of a flow that every copy task receives: librdkafka settings for its source
consumer and target producers (and how the batch path's client reaches the same clusters), the internal topics it
writes, and the copy path it takes."""

from __future__ import annotations

from mm2py.config.flow import FlowConfig
from mm2py.control.topics import dense_offset_syncs_topic, offset_syncs_topic
from mm2py.executor.contract import CopyPath, CopySpec
from mm2py.librdkafka.defaults import copy_consumer_settings, copy_producer_settings, syncs_producer_settings
from mm2py.mirror.progress import progress_topic

# A task records progress every offset.flush.interval.ms (MM2's key; 60 s by default) or this often, whichever is
# sooner, so that ``mm2py lag`` (which reads the recorded progress) moves within seconds of the copy.
PROGRESS_INTERVAL_S = 5.0


def copy_spec(f: FlowConfig, copy_path: CopyPath) -> CopySpec:
    """What every copy task of flow ``f`` needs (plain and picklable); ``copy_path`` as the plan decided it."""
    exactly_once = f.exactly_once
    producer_settings = copy_producer_settings(f.target_producer.settings(), exactly_once=exactly_once)
    return CopySpec(
        flow=f.name,
        source=f.source,
        target=f.target,
        consumer_settings=copy_consumer_settings(
            f.source_consumer.settings(), f"mm2py-{f.source}-{f.target}", exactly_once=exactly_once
        ),
        producer_settings=producer_settings,
        syncs_producer_settings=(
            syncs_producer_settings(f.offset_syncs_producer.settings()) if f.emit_offset_syncs_enabled else None
        ),
        target_consumer_settings=dict(f.target_consumer.settings()),
        consumer_connection=f.source_consumer.connection,
        producer_connection=f.target_producer.connection,
        syncs_producer_connection=f.offset_syncs_producer.connection if f.emit_offset_syncs_enabled else None,
        target_consumer_connection=f.target_consumer.connection,
        syncs_topic=offset_syncs_topic(f) if f.emit_offset_syncs_enabled else None,
        dense_syncs_topic=(
            dense_offset_syncs_topic(f) if f.emit_offset_syncs_enabled and f.dense_offset_syncs else None
        ),
        progress_topic=progress_topic(f.source),
        offset_lag_max=f.offset_lag_max,
        dense_offset_syncs=f.dense_offset_syncs,
        provenance=f.provenance_header_enabled,
        exactly_once=exactly_once,
        copy_path=copy_path,
        poll_timeout_s=max(f.consumer_poll_timeout_ms / 1000, 0.1),
        transaction_timeout_ms=int(producer_settings.get("transaction.timeout.ms", "60000")),
        syncs_on_target=f.offset_syncs_cluster == f.target,
        progress_interval_s=min(max(f.offset_flush_interval_ms, 100) / 1000, PROGRESS_INTERVAL_S),
        offset_flush_interval_s=f.offset_flush_interval_ms / 1000,
        throughput_bytes_per_s=f.throughput_max_bytes_per_second,
        follow_fetch_min_interval_s=f.continuous_fetch_min_interval_ms / 1000,
    )
