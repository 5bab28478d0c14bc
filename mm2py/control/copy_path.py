"""Which copy path a flow takes: forward whole record batches, or re-produce record by record.

Why a decision of its own: the batch path (``mm2py.executor.batch_copy``) is several times faster, but it
moves a source batch's bytes unchanged, so it cannot do anything that touches single records. ``plan``
shows the choice and ``run`` prints it, both from here, so what a user is told and what runs agree.

``mm2py.copy.mode``: ``record`` always re-produces; ``batch`` forwards batches and is a configuration
error when the flow needs per-record work; ``auto`` (the default) forwards batches unless the flow needs
per-record work, and then says why it did not.
"""

from __future__ import annotations

from mm2py.client_settings import AwsMskIamLogin
from mm2py.config.flow import FlowConfig
from mm2py.errors import ConfigError
from mm2py.executor.contract import CopyPath
from mm2py.wire.connection_settings import refusal


def record_only_reasons(flow: FlowConfig) -> list[tuple[str, str]]:
    """What in ``flow`` needs per-record work, as (key, reason) pairs; empty when batches can be forwarded."""
    reasons: list[tuple[str, str]] = []
    if flow.provenance_header_enabled:
        reasons.append(("mm2py.provenance.header.enabled", "a provenance header is added to every record"))
    # The Java producer (and so MM2) re-compresses with the producer's compression.type; forwarding keeps
    # the source batches' codec, which is only the same when the user did not ask for a codec.
    codec = dict(flow.target_producer.java).get("compression.type")
    if codec is not None:
        reasons.append(
            (f"{flow.target}.producer.compression.type", f"compression.type={codec} re-compresses every record")
        )
    # The batch path writes as an idempotent producer only: its sequence numbers are what keep a batch it sends
    # again (after a timeout, a leader change) from being written twice. The record path honours the key.
    idempotence = dict(flow.target_producer.java).get("enable.idempotence")
    if idempotence is not None and idempotence.strip().lower() == "false":
        reasons.append(
            (
                f"{flow.target}.producer.enable.idempotence",
                "enable.idempotence=false asks for a producer without sequence numbers, which the batch path never is",
            )
        )
    for alias, client in ((flow.source, flow.source_consumer), (flow.target, flow.target_producer)):
        exc = refusal(alias, client.connection)
        if exc is not None:
            reasons.append(
                (
                    f"{alias}.{exc.key}" if exc.key else alias,
                    f"the batch path cannot connect to {alias} with {exc.key or 'these settings'}",
                )
            )
    return reasons


def batch_only_cluster(flow: FlowConfig) -> str | None:
    """The cluster of ``flow`` that logs in with AWS_MSK_IAM, which the record path's librdkafka cannot."""
    for alias, client in ((flow.source, flow.source_consumer), (flow.target, flow.target_producer)):
        if isinstance(client.connection.login, AwsMskIamLogin):
            return alias
    return None


def choose_copy_path(flow: FlowConfig) -> CopyPath:
    """The path ``run`` takes for ``flow``; raises ConfigError for ``batch`` on a flow that cannot use it, and
    for the record path on a flow whose clusters pin a TLS version (librdkafka cannot: tls_versions).

    A flow with an AWS_MSK_IAM cluster has the batch path or none: whatever would send it to the record path
    (the mode, or a setting that needs per-record work) is refused, naming that key.
    """
    iam = batch_only_cluster(flow)
    if flow.copy_mode == "record" and iam is None:
        _refuse_version_pin(flow, "mm2py.copy.mode=record")
        return CopyPath("record", "mm2py.copy.mode=record")
    asked = flow.copy_mode == "record"  # with AWS_MSK_IAM, an asked-for record path is refused below
    reasons = [("mm2py.copy.mode", "mm2py.copy.mode=record asks for the record path")] if asked else []
    reasons += record_only_reasons(flow)
    if not reasons:
        return CopyPath("batch")
    key, reason = reasons[0]
    if iam is not None:
        raise ConfigError(
            f"{flow.name}: {iam} logs in with AWS_MSK_IAM, which the record path (librdkafka) cannot, "
            f"but {reason} ({key})",
            source=flow.source_file,
            key=key,
            value="record" if key == "mm2py.copy.mode" else None,
            allowed="settings the batch path can copy with: mm2py.copy.mode=auto or batch",
        )
    _refuse_version_pin(flow, f"{reason} ({key})")
    if flow.copy_mode == "batch":
        raise ConfigError(
            f"{flow.name}: mm2py.copy.mode=batch, but {reason} ({key})",
            source=flow.source_file,
            key="mm2py.copy.mode",
            value="batch",
            allowed="auto, record",
        )
    return CopyPath("record", reason)


def _refuse_version_pin(flow: FlowConfig, why_record: str) -> None:
    for alias, client in ((flow.source, flow.source_consumer), (flow.target, flow.target_producer)):
        tls = client.connection.tls
        if tls is not None and tls.minimum_version != "TLSv1.2":  # Java's default, TLS 1.2 and 1.3, is no pin
            pinned = tls.minimum_version
            raise ConfigError(
                f"{flow.name}: the record path is needed ({why_record}), but {alias} pins {pinned}, "
                "which librdkafka has no setting for",
                source=flow.source_file,
                key=f"{alias}.ssl.enabled.protocols",
                value=pinned,
                allowed="no pin (TLSv1.2,TLSv1.3) on the record path, or a flow the batch path can copy",
            )
