"""The Kafka client layer: MM2's Java client settings turned into librdkafka settings, and the clients built
from them.

``settings`` is the only place that knows both vocabularies (Java client keys, librdkafka properties) and
reports what cannot be carried over; ``clients`` and ``admin`` create confluent-kafka clients lazily, never
pickle them, and wrap their errors with the cluster alias and the operation. Secrets are masked with
``mm2py.secrets`` wherever settings are printed.
"""
