"""The one backoff every retry uses (``mm2py.backoff``): Kafka's ``ExponentialBackoff``, checked against the
values its rule gives, with and without the jitter."""

from __future__ import annotations

import pytest

from mm2py.backoff import ExponentialBackoff, client_backoff, client_seconds


def exact(initial_s: float, max_s: float) -> ExponentialBackoff:
    return ExponentialBackoff(initial_s, max_s, jitter=0.0)


def test_the_backoff_doubles_from_the_initial_value_and_stops_at_the_maximum() -> None:
    b = exact(0.1, 1.0)  # the Java clients' retry.backoff.ms and retry.backoff.max.ms defaults
    assert [round(b.backoff(n), 6) for n in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]


def test_a_maximum_below_the_initial_value_makes_the_backoff_that_constant() -> None:
    """Kafka lowers the initial interval to the maximum, and with nothing to grow towards returns it as is."""
    assert [exact(2.0, 0.5).backoff(n) for n in range(4)] == [0.5] * 4
    assert [exact(0.3, 0.3).backoff(n) for n in range(4)] == [0.3] * 4


def test_the_jitter_spreads_each_backoff_by_a_fifth_either_way_and_never_past_the_maximum() -> None:
    draws: list[tuple[float, float]] = []

    def lowest(low: float, high: float) -> float:
        draws.append((low, high))
        return low

    def highest(low: float, high: float) -> float:
        return high

    low = ExponentialBackoff(1.0, 30.0, uniform=lowest)
    high = ExponentialBackoff(1.0, 30.0, uniform=highest)
    assert [round(low.backoff(n), 6) for n in range(6)] == [0.8, 1.6, 3.2, 6.4, 12.8, 24.0]
    assert [round(high.backoff(n), 6) for n in range(6)] == [1.2, 2.4, 4.8, 9.6, 19.2, 30.0]
    assert set(draws) == {(0.8, 1.2)}


@pytest.mark.parametrize("attempts", [0, 3, 10, 1000])
def test_random_jitter_stays_in_its_band(attempts: int) -> None:
    b = ExponentialBackoff(0.1, 1.0)
    nominal = min(0.1 * 2**attempts, 1.0)
    values = [b.backoff(attempts) for _ in range(200)]
    assert all(0.8 * nominal <= v <= min(1.2 * nominal, 1.0) for v in values)
    assert len(set(values)) > 1  # the factor is drawn each time: tasks failing together come back apart


def test_a_clients_own_retry_backoff_keys_set_its_backoff_and_unset_ones_keep_the_defaults() -> None:
    """Both copy paths read the same two keys, as the Java clients and librdkafka name them (the batch path's
    fetcher from the source consumer's settings, its sender from the target producer's)."""
    assert client_backoff({"retry.backoff.ms": "250", "retry.backoff.max.ms": "5000"}) == ExponentialBackoff(0.25, 5.0)
    assert client_backoff({"retry.backoff.ms": "250"}) == ExponentialBackoff(0.25, 1.0)
    assert client_backoff({"retry.backoff.max.ms": "not a number"}) == ExponentialBackoff(0.1, 1.0)


def test_a_client_setting_in_milliseconds_is_read_from_the_first_of_its_keys_that_is_set() -> None:
    settings = {"socket.timeout.ms": "7000", "message.timeout.ms": "soon"}
    assert client_seconds(settings, 30.0, "request.timeout.ms", "socket.timeout.ms") == 7.0
    assert client_seconds(settings, 120.0, "delivery.timeout.ms", "message.timeout.ms") == 120.0
