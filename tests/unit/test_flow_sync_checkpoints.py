"""A continuous run's checkpoints keep one offset-sync store and one progress tail from one checkpoint to the next,
so each reads only what was written since the last (``TopicTail``); a fresh reader at every checkpoint would read
both topics whole again, more the longer the flow runs."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from mm2py.config import MirrorMakerConfig
from mm2py.config.flow import build_flow_config
from mm2py.config.mirror_maker import Flow
from mm2py.config.properties import parse_properties
from mm2py.engine import flow_sync
from mm2py.engine.flow_sync import FlowSync


class Translator:
    """FlowTranslator's stand-in: records what each checkpoint read from."""

    made: ClassVar[list[tuple[Any, Any]]] = []

    def __init__(self, flow: Any, plan: Any, admin: Any, store: Any = None, progress: Any = None) -> None:
        Translator.made.append((store, progress))

    def groups(self) -> list[str]:
        return []


class Readers:
    def __init__(self) -> None:
        self.made: list[str] = []
        self.reads: list[str] = []

    def _reader(self, name: str) -> SimpleNamespace:
        self.made.append(name)
        return SimpleNamespace(read_new=lambda: self.reads.append(name))

    def store(self, flow: Any) -> SimpleNamespace:
        return self._reader("syncs")

    def progress(self, target: str, settings: Any, source: str) -> SimpleNamespace:
        return self._reader(f"progress of {source} on {target}")


def flow_sync_with_readers(monkeypatch: pytest.MonkeyPatch, readers: Readers, extra: str = "") -> FlowSync:
    text = "clusters = dc1, tgt\ndc1.bootstrap.servers = localhost:1\ntgt.bootstrap.servers = localhost:2\n"
    flow = build_flow_config(
        MirrorMakerConfig(parse_properties(text + "dc1->tgt.enabled = true\n" + extra, "mm2.properties"), {}),
        Flow("dc1", "tgt"),
    )
    monkeypatch.setattr(flow_sync, "OffsetSyncStore", readers.store)
    monkeypatch.setattr(flow_sync, "ProgressTail", readers.progress)
    monkeypatch.setattr(flow_sync, "FlowTranslator", Translator)
    Translator.made = []
    rounds = SimpleNamespace(plan=None, save_tails=lambda: None)
    return FlowSync(flow, rounds, SimpleNamespace(admin=lambda alias, flow: None))  # type: ignore[arg-type]


def test_every_checkpoint_reads_on_through_the_same_store_and_progress_tail(monkeypatch: pytest.MonkeyPatch) -> None:
    readers = Readers()
    sync = flow_sync_with_readers(monkeypatch, readers)
    sync._checkpoints = SimpleNamespace(emit=lambda rows, listed_at: [])  # type: ignore[assignment]

    for _ in range(3):
        sync.checkpoint()

    assert readers.made == ["syncs", "progress of dc1 on tgt"]
    store, progress = Translator.made[0]
    assert store is not None and progress is not None
    assert Translator.made == [(store, progress)] * 3


@pytest.mark.parametrize(("interval", "read_on_every"), [("60", 5.0), ("2", 2.0)])
def test_between_checkpoints_the_run_reads_on_in_the_same_store_and_tail(
    monkeypatch: pytest.MonkeyPatch, interval: str, read_on_every: float
) -> None:
    """So that a checkpoint reads a few seconds of syncs and progress, not its whole interval's in one piece."""
    readers = Readers()
    sync = flow_sync_with_readers(monkeypatch, readers, f"emit.checkpoints.interval.seconds = {interval}\n")
    job = next(j for j in sync.schedule().jobs if j.name == "read offset syncs")
    assert job.interval_s == read_on_every
    job.action()
    assert readers.made == readers.reads == []  # no checkpoints written (yet): nothing to read for
    sync._checkpoints = SimpleNamespace(emit=lambda rows, listed_at: [])  # type: ignore[assignment]
    job.action()
    job.action()
    sync.checkpoint()
    assert readers.made == ["syncs", "progress of dc1 on tgt"]
    assert readers.reads == ["syncs", "progress of dc1 on tgt"] * 2
    assert len(Translator.made) == 1
