"""Failures as data: retriability comes from the Kafka error code, travels across the Spark boundary as a
field, and the CLI shows one line (a traceback only with -v). No broker, no JVM."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException

import mm2py.cli.app as cli
from mm2py.client_settings import ClientSettings
from mm2py.engine.spark import JobsCancelled, SparkRunner, died_task_failure, raise_failure, task_attempts
from mm2py.errors import EXIT_RUNTIME, Failure, ReplicationError, is_retriable
from mm2py.executor import record_copy as copy_module
from mm2py.executor.contract import CopyResult, CopySpec, PartitionRange
from mm2py.executor.record_copy import copy_partitions

NOWHERE = ClientSettings(bootstrap_servers=())  # never connected to

SPEC = CopySpec(
    flow="dc1->target",
    source="dc1",
    target="target",
    consumer_settings={},
    producer_settings={},
    syncs_producer_settings=None,
    target_consumer_settings={},
    consumer_connection=NOWHERE,
    producer_connection=NOWHERE,
    syncs_producer_connection=None,
    target_consumer_connection=NOWHERE,
    syncs_topic=None,
    progress_topic="mm2-offsets.dc1.internal",
    offset_lag_max=100,
)
RANGE = PartitionRange("orders", 3, "dc1.orders", 40, 90)


@pytest.mark.parametrize(
    "code",
    [
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        KafkaError._AUTHENTICATION,  # librdkafka's refused login (a wrong password)
        KafkaError._SSL,  # a failed TLS handshake (a certificate for another host)
        KafkaError.TOPIC_EXCEPTION,  # Kafka's INVALID_TOPIC_EXCEPTION: an invalid name stays invalid
    ],
)
def test_errors_that_waiting_cannot_fix_are_permanent(code: int) -> None:
    assert not is_retriable(KafkaError(code))


@pytest.mark.parametrize(
    "code",
    [
        KafkaError._MSG_TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError._ALL_BROKERS_DOWN,
    ],
)
def test_errors_of_a_stalled_or_moving_broker_are_retried(code: int) -> None:
    assert is_retriable(KafkaError(code))


def test_a_fatal_producer_error_is_retried_with_a_new_producer_unless_it_is_a_denial_or_a_fencing() -> None:
    assert is_retriable(KafkaError(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, fatal=True))
    assert not is_retriable(KafkaError(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, fatal=True))
    # Another producer initialized the transactional.id: taking it back would copy beside that producer (Kafka's
    # Java TransactionManager treats it as fatal). librdkafka's own code for it gets Kafka's name.
    for code in (KafkaError.PRODUCER_FENCED, KafkaError._FENCED):
        failure = Failure.of_kafka("fenced", KafkaError(code, fatal=True))
        assert (failure.code, failure.retriable) == ("PRODUCER_FENCED", False), code


def test_the_clients_own_retriable_flag_wins() -> None:
    assert is_retriable(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART, retriable=True))


def test_a_failure_keeps_the_kafka_error_name_and_says_whether_to_retry() -> None:
    failure = Failure.of_kafka(
        "flow=dc1->target topic=orders partition=3: too large", KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)
    )
    # Kafka's name (librdkafka calls it MSG_SIZE_TOO_LARGE; the wire path, through kafka-python, the same code too).
    assert failure == Failure("flow=dc1->target topic=orders partition=3: too large", "MESSAGE_TOO_LARGE", False)


def test_replication_error_carries_its_failure_and_no_text_protocol() -> None:
    exc = ReplicationError.of_kafka(
        "partition 3 at offset 41: denied", KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    )
    assert (exc.retriable, exc.code) == (False, "TOPIC_AUTHORIZATION_FAILED")
    assert str(exc) == "partition 3 at offset 41: denied"
    assert not hasattr(ReplicationError, "PERMANENT_MARK")
    assert ReplicationError("stalled").retriable


def test_failures_survive_pickling_as_they_cross_the_spark_boundary() -> None:
    failure = Failure("flow=dc1->target topic=orders partition=3: gone", "UNKNOWN_TOPIC_OR_PARTITION", False)
    result = CopyResult("orders", 3, 40, 40, -1, 0, 0, 0, 0.0, failure)
    assert pickle.loads(pickle.dumps(result)) == result
    again = pickle.loads(pickle.dumps(ReplicationError.of_failure(failure)))
    assert (again.retriable, again.code) == (False, "UNKNOWN_TOPIC_OR_PARTITION")


def _copy_raising(monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
    def copy_range(_spec: CopySpec, _rng: PartitionRange, _throttle: object = None) -> CopyResult:
        raise exc

    monkeypatch.setattr(copy_module, "copy_range", copy_range)
    monkeypatch.setattr(copy_module, "executor_logging", lambda _spec: None)


def _results(last_attempt: bool) -> list[CopyResult]:
    ranges: Iterator[PartitionRange] = iter([RANGE])
    return list(copy_partitions(SPEC, ranges, last_attempt=last_attempt))


def test_a_permanent_failure_is_returned_as_data_at_the_first_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    _copy_raising(
        monkeypatch, ReplicationError("record at offset 41 too large", code="MESSAGE_TOO_LARGE", retriable=False)
    )
    [result] = _results(last_attempt=False)
    assert result.error == Failure("record at offset 41 too large", "MESSAGE_TOO_LARGE", False)
    assert (result.next_offset, result.records) == (RANGE.start, 0)  # nothing of the range counts as copied


def test_a_transient_failure_raises_while_spark_may_retry_and_is_data_on_the_last_attempt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _copy_raising(monkeypatch, ReplicationError("no records for 120 s"))
    with pytest.raises(ReplicationError):
        _results(last_attempt=False)
    [result] = _results(last_attempt=True)
    assert result.error == Failure("no records for 120 s", None, True)


def test_a_client_exception_outside_the_worded_paths_becomes_a_classified_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _copy_raising(monkeypatch, KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION)))
    [result] = _results(last_attempt=False)
    assert result.error is not None
    assert (result.error.code, result.error.retriable) == ("UNKNOWN_TOPIC_OR_PARTITION", False)
    assert "topic=orders partition=3" in result.error.message and "offset 40" in result.error.message


def test_the_driver_raises_the_permanent_failure_first() -> None:
    ok = CopyResult("orders", 0, 0, 10, 9, 10, 100, 2, 0.1)
    transient = CopyResult("orders", 1, 0, 0, -1, 0, 0, 0, 0.0, Failure("stalled"))
    permanent = CopyResult(
        "orders", 2, 5, 5, -1, 0, 0, 0, 0.0, Failure("offset 5 too large", "MESSAGE_TOO_LARGE", False)
    )
    raise_failure("dc1->target", [ok])  # nothing failed: no error
    with pytest.raises(ReplicationError) as caught:
        raise_failure("dc1->target", [ok, transient, permanent])
    assert (str(caught.value), caught.value.retriable) == ("flow dc1->target: offset 5 too large", False)
    with pytest.raises(ReplicationError) as caught:
        raise_failure("dc1->target", [transient, ok])
    assert caught.value.retriable


def test_a_task_that_died_is_read_from_the_python_error_line_and_retried() -> None:
    text = (
        "An error occurred while calling o45.collect.\n: org.apache.spark.SparkException: Job aborted\n"
        'Traceback (most recent call last):\n  File "copy.py", line 9, in copy_range\n'
        "MemoryError: cannot allocate\n\tat org.apache.spark.api.python.BasePythonRunner"
    )
    assert died_task_failure(RuntimeError(text)) == Failure("MemoryError: cannot allocate", None, True)


class _FailingContext:
    """A SparkContext whose every job fails as a cancelled one does (Py4J raises the JVM's SparkException)."""

    defaultParallelism = 2  # PySpark's names, as the runner calls them

    def __init__(self) -> None:
        self.cancelled_jobs = 0

    def setLocalProperty(self, _key: str, _value: str) -> None:
        pass

    def parallelize(self, _groups: object, _slices: int) -> _FailingContext:
        return self

    def mapPartitions(self, _task: object) -> _FailingContext:
        return self

    def collect(self) -> list[CopyResult]:
        raise RuntimeError(
            "An error occurred while calling o45.collect.\n: org.apache.spark.SparkException: Job 3 cancelled"
        )

    def cancelAllJobs(self) -> None:
        self.cancelled_jobs += 1


def test_a_job_that_fails_after_the_run_cancelled_its_jobs_is_a_stop_not_a_failure() -> None:
    sc = _FailingContext()
    runner = SparkRunner(sc, flows=1, task_attempts=1, owns_context=False)
    with pytest.raises(ReplicationError):  # not cancelled by the run: a task died, retried as such
        runner.copy(SPEC, [RANGE], 1)
    runner.cancel_jobs()
    assert sc.cancelled_jobs == 1
    with pytest.raises(JobsCancelled, match="dc1->target: copy job cancelled as the run stops"):
        runner.copy(SPEC, [RANGE], 1)


@pytest.mark.parametrize(
    ("master", "conf", "attempts"),
    [
        ("local[2,4]", {}, 4),
        ("local[*,3]", {}, 3),
        ("local[2]", {"spark.task.maxFailures": "9"}, 1),
        ("spark://host:7077", {"spark.task.maxFailures": "6"}, 6),
        ("yarn", {}, 4),
    ],
)
def test_the_copy_task_knows_how_often_spark_runs_it(master: str, conf: dict[str, str], attempts: int) -> None:
    assert task_attempts(master, conf) == attempts


PASSWORD = "Zq8-internal-error-pw"


def _internal_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *args: str) -> int:
    def broken(_mm: object) -> list[object]:
        raise RuntimeError(f"the validator broke on {PASSWORD}")

    monkeypatch.setattr(cli, "validate", broken)
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = a, b\na.bootstrap.servers = localhost:1\nb.bootstrap.servers = localhost:2\n"
        f"a.ssl.key.password = {PASSWORD}\n"
    )
    with pytest.raises(SystemExit) as exited:
        cli.main([*args, "validate", str(config)])
    return int(exited.value.code or 0)


def test_an_internal_error_is_one_line_without_v_and_a_redacted_traceback_with_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _internal_error(monkeypatch, tmp_path) == EXIT_RUNTIME
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "mm2py: error: internal error: RuntimeError: the validator broke on [hidden] (-v shows where)"
    ]
    assert _internal_error(monkeypatch, tmp_path, "-v") == EXIT_RUNTIME
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "in broken" in err
    assert err.strip().splitlines()[-1] == "mm2py: error: internal error: RuntimeError: the validator broke on [hidden]"
    assert PASSWORD not in err


def test_the_exit_line_ends_with_the_kafka_errors_name_the_same_on_both_copy_paths() -> None:
    """An oversized record: librdkafka says MSG_SIZE_TOO_LARGE, the wire client MESSAGE_TOO_LARGE; the line ends
    with Kafka's name for both, and a failure no Kafka error caused keeps its message as it is."""
    from mm2py.errors import KafkaOperationError
    from mm2py.wire.errors import MESSAGE_TOO_LARGE, WireError

    record_path = ReplicationError.of_kafka("too large", KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
    wire = WireError(MESSAGE_TOO_LARGE)
    batch_path = ReplicationError("too large", code=wire.name, retriable=wire.retriable)
    assert record_path.exit_line() == batch_path.exit_line() == "too large [MESSAGE_TOO_LARGE]"
    assert (
        ReplicationError("no records from the source for 120 s").exit_line() == "no records from the source for 120 s"
    )
    named = ReplicationError("producing failed: MESSAGE_TOO_LARGE (10)", code="MESSAGE_TOO_LARGE")
    assert named.exit_line() == "producing failed: MESSAGE_TOO_LARGE (10) [MESSAGE_TOO_LARGE]"  # always last
    refused = KafkaOperationError("dc1", "listing topics", "denied", code="TOPIC_AUTHORIZATION_FAILED")
    assert refused.exit_line().endswith("denied [TOPIC_AUTHORIZATION_FAILED]")
