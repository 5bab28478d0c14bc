"""One backoff for every retry in mm2py: the wire client's resends, fetches and metadata refreshes, and the
driver's retries of a flow's steps.

The rule is Kafka's ``ExponentialBackoff`` (clients, ``org.apache.kafka.common.utils.ExponentialBackoff``, KIP-580),
which the Java producer (``RecordAccumulator.shouldBackoff``: ``backoff(batch.attempts() - 1)``), ``Metadata`` and the
admin client share: ``initial * 2 ** attempts``, times a random factor in ``[1 - jitter, 1 + jitter)``, never above
the maximum. Why the jitter: many tasks that failed on the same broker at the same moment would otherwise come
back at the same moment too, and meet it all at once again.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

# CommonClientConfigs.RETRY_BACKOFF_EXP_BASE and RETRY_BACKOFF_JITTER.
RETRY_BACKOFF_EXP_BASE = 2
RETRY_BACKOFF_JITTER = 0.2
# The defaults of the Java clients' retry.backoff.ms and retry.backoff.max.ms, in seconds.
RETRY_BACKOFF_S = 0.1
RETRY_BACKOFF_MAX_S = 1.0


@dataclass(frozen=True)
class ExponentialBackoff:
    """How long to wait before attempt ``attempts + 1``, given ``attempts`` failed ones (0 for the first retry).

    ``initial_s`` above ``max_s`` is lowered to it, and then every backoff is that constant, as in Kafka."""

    initial_s: float = RETRY_BACKOFF_S
    max_s: float = RETRY_BACKOFF_MAX_S
    multiplier: int = RETRY_BACKOFF_EXP_BASE
    jitter: float = RETRY_BACKOFF_JITTER
    # The random factor's source, replaceable where a test needs exact times.
    uniform: Callable[[float, float], float] = field(default=random.uniform, compare=False, repr=False)

    def backoff(self, attempts: int) -> float:
        initial = min(self.initial_s, self.max_s)
        if self.max_s <= initial:
            return initial
        # The exponent at which the maximum is reached (Kafka's expMax; its max(initial, 1 ms) guards a zero).
        exp_max = math.log(self.max_s / max(initial, 0.001)) / math.log(self.multiplier)
        term: float = initial * self.multiplier ** min(attempts, exp_max)
        factor = 1.0 if self.jitter <= 0 else self.uniform(1 - self.jitter, 1 + self.jitter)
        return min(factor * term, self.max_s)


def client_seconds(settings: Mapping[str, object], default_s: float, *keys: str) -> float:
    """A client's millisecond setting in seconds: the first of ``keys`` set to a whole number of milliseconds (a
    Java key and its librdkafka alias, say), else ``default_s``."""
    for key in keys:
        value = str(settings.get(key, "")).strip()
        if value.isdigit():
            return int(value) / 1000
    return default_s


def client_backoff(settings: Mapping[str, object]) -> ExponentialBackoff:
    """The backoff a client's own ``retry.backoff.ms`` and ``retry.backoff.max.ms`` ask for (the Java clients and
    librdkafka use the same two keys), each at its default when unset or not a whole number of milliseconds."""
    return ExponentialBackoff(
        client_seconds(settings, RETRY_BACKOFF_S, "retry.backoff.ms"),
        client_seconds(settings, RETRY_BACKOFF_MAX_S, "retry.backoff.max.ms"),
    )
