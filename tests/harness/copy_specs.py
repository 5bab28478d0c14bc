"""A CopySpec built by hand (unit, integration and real-Kafka tests of the batch path, ``bench/``), with each
client's ClientSettings read from the librdkafka settings beside it (spellings the configuration accepts too)."""

from __future__ import annotations

from typing import Any

from mm2py.executor.contract import CopySpec
from tests.harness.translation_helpers import client_settings


def copy_spec(**fields: Any) -> CopySpec:
    """``CopySpec(**fields)``, its four ``*_connection`` fields read from the matching ``*_settings`` fields."""
    syncs = fields.get("syncs_producer_settings")
    return CopySpec(
        consumer_connection=client_settings(fields["consumer_settings"]),
        producer_connection=client_settings(fields["producer_settings"], "producer"),
        syncs_producer_connection=None if syncs is None else client_settings(syncs, "producer"),
        target_consumer_connection=client_settings(fields["target_consumer_settings"]),
        **fields,
    )
