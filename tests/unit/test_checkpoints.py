"""Checkpoint emission, merged group offsets and group offset sync: MM2's rules, without a broker."""

from __future__ import annotations

from collections.abc import Mapping

from mm2py.control.checkpoints import (
    Commit,
    GroupOffset,
    checkpoints_to_emit,
    merged_group_offsets,
    sync_group_offsets,
)
from mm2py.librdkafka.admin import ClusterAdmin
from mm2py.mirror.record_formats import Checkpoint
from mm2py.mirror.translation import Translation


def row(
    group: str, upstream: int, downstream: int | None, partition: int = 0, metadata: str = "", topic: str = "orders"
) -> GroupOffset:
    method = "exact" if downstream is not None else "unavailable"
    return GroupOffset(group, topic, topic, partition, upstream, Translation(upstream, downstream, method), metadata)


def test_first_checkpoint_is_written_with_the_source_commit_metadata() -> None:
    last: dict[tuple[str, str, int], Checkpoint] = {}
    written = checkpoints_to_emit([row("g", 100, 51, metadata="consumer-7|v2")], last)
    assert written == [Checkpoint("g", "orders", 0, 100, 51, "consumer-7|v2")]
    assert last[("g", "orders", 0)] == written[0]


def test_checkpoints_are_never_repeated_nor_moved_back_without_an_upstream_rewind() -> None:
    last = {("g", "orders", 0): Checkpoint("g", "orders", 0, 100, 51)}
    assert checkpoints_to_emit([row("g", 100, 51)], last) == []  # repeat
    assert checkpoints_to_emit([row("g", 120, 50)], last) == []  # downstream back, upstream forward
    assert checkpoints_to_emit([row("g", 150, 80)], last) == [Checkpoint("g", "orders", 0, 150, 80)]
    # The group was rewound on the source: the checkpoint may go back.
    assert checkpoints_to_emit([row("g", 10, 5)], last) == [Checkpoint("g", "orders", 0, 10, 5)]


def test_untranslatable_offsets_write_no_checkpoint() -> None:
    assert checkpoints_to_emit([row("g", 100, None)], {}) == []


def test_merged_topic_commits_the_smallest_translation_of_all_sources_with_its_metadata() -> None:
    rows = [
        row("g", 300, 900, metadata="from-dc1"),
        row("g", 40, 700, metadata="from-dc2"),
        row("g", 5, None),
        row("h", 1, 2, partition=1),
    ]
    assert merged_group_offsets(rows) == {
        "g": {("orders", 0): Commit(700, "from-dc2")},
        "h": {("orders", 1): Commit(2, "")},
    }


class FakeTarget:
    """The group calls of the target cluster; records what was committed."""

    alias = "target"

    def __init__(self, states: dict[str, str], committed: dict[str, dict[tuple[str, int], int]]) -> None:
        self.states = states
        self.current = committed
        self.commits: list[tuple[str, dict[tuple[str, int], int], dict[tuple[str, int], str]]] = []

    def group_state(self, group: str) -> str:
        return self.states.get(group, "DEAD")

    def committed_offsets(self, group: str) -> dict[tuple[str, int], int]:
        return dict(self.current.get(group, {}))

    def alter_group_offsets(
        self, group: str, offsets: Mapping[tuple[str, int], int], metadata: Mapping[tuple[str, int], str] | None = None
    ) -> None:
        self.commits.append((group, dict(offsets), dict(metadata or {})))


def test_group_sync_commits_only_forward_for_idle_groups_and_skips_active_ones() -> None:
    target = FakeTarget({"idle": "EMPTY", "busy": "STABLE"}, {"idle": {("orders", 0): 100, ("orders", 1): 60}})
    wanted = {
        "idle": {("orders", 0): Commit(101, "m0"), ("orders", 1): Commit(51, "m1"), ("orders", 2): Commit(7, "m2")},
        "busy": {("orders", 0): Commit(5)},
        "new": {("orders", 0): Commit(9, "m")},
    }
    outcome = sync_group_offsets(target, wanted)  # type: ignore[arg-type]
    assert outcome["busy"].startswith("skipped")
    assert target.commits == [
        ("idle", {("orders", 0): 101, ("orders", 2): 7}, {("orders", 0): "m0", ("orders", 2): "m2"}),  # 51 < 60
        ("new", {("orders", 0): 9}, {("orders", 0): "m"}),
    ]


def test_fake_target_has_the_admin_calls_group_sync_uses() -> None:
    for name in ("group_state", "committed_offsets", "alter_group_offsets"):
        assert callable(getattr(ClusterAdmin, name))
