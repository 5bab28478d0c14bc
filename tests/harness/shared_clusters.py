"""Real Kafka clusters lent to many tests (the session's and a module's), checked after every test that used them.

Why: sharing a cluster is only safe while every test hands it back as it found it. A test that leaves a node down
or frozen, or a dynamic broker setting changed, would make the next tests fail for reasons of its own making, or
pass for the wrong ones. So after each test the clusters it could reach are compared with the state they were lent
in, and a difference fails that test at teardown, naming it and what it left; nodes are then brought back (started,
thawed), so the rest of the suite runs on what it expects.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource

from tests.harness.kafka_harness import client_config
from tests.harness.polling import poll_until
from tests.harness.real_kafka import KafkaCluster

_DYNAMIC = {ConfigSource.DYNAMIC_BROKER_CONFIG.value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value}


@dataclass(frozen=True)
class ClusterState:
    """What a test must leave as it found it: each node's process state, and the dynamic broker settings."""

    nodes: dict[int, str]
    dynamic_configs: dict[str, dict[str, str]]


def _process_state(cluster: KafkaCluster, node_id: int) -> str:
    """``running``, ``not running`` or ``stopped (SIGSTOP)``: any of the JVM's threads stopped counts, since a
    SIGSTOP just sent reaches the threads one by one."""
    node = cluster.node(node_id)
    if not node.running:
        return "not running"
    states = set()
    for thread in Path(f"/proc/{node.pid}/task").iterdir():
        try:
            states.add((thread / "stat").read_text().rsplit(")", 1)[1].split()[0])
        except OSError:  # a thread that ended meanwhile
            continue
    return "stopped (SIGSTOP)" if states & {"T", "t"} else "running"


def _dynamic_configs(cluster: KafkaCluster) -> dict[str, dict[str, str]]:
    """Dynamic settings per broker (``broker N``) and the cluster-wide defaults (``cluster-wide``), as
    DescribeConfigs of each broker lists them."""
    admin = AdminClient(client_config(cluster.bootstrap))
    found: dict[str, dict[str, str]] = {"cluster-wide": {}}
    for node in cluster.nodes:  # one broker per call, as the client requires
        resource = ConfigResource(ConfigResource.Type.BROKER, str(node.node_id))
        entries = admin.describe_configs([resource], request_timeout=10)[resource].result(timeout=15)
        found[f"broker {resource.name}"] = {
            name: str(e.value) for name, e in entries.items() if e.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        }
        found["cluster-wide"].update(
            (name, str(e.value))
            for name, e in entries.items()
            if e.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        )
    return found


# How long a running cluster may take to answer DescribeConfigs: a node restarted or thawed by the test may still
# be catching up, and on a loaded machine a SIGSTOP may reach the JVM's threads only after the first look.
_ANSWER_TIMEOUT_S = 60.0
# Asked again with a new client: no answer yet, or the connection it was sent on went away (librdkafka drops the
# handle of a bootstrap address once it learns the node's own, failing what waited on it: _DESTROY_BROKER).
_ASK_AGAIN = {KafkaError._TIMED_OUT, KafkaError._DESTROY_BROKER, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN}


def state_of(cluster: KafkaCluster) -> ClusterState:
    deadline = time.monotonic() + _ANSWER_TIMEOUT_S
    while True:  # the nodes' process states read again before each attempt
        nodes = {n.node_id: _process_state(cluster, n.node_id) for n in cluster.nodes}
        if not all(s == "running" for s in nodes.values()):
            return ClusterState(nodes, {})
        try:
            return ClusterState(nodes, _dynamic_configs(cluster))
        except KafkaException as exc:
            if exc.args[0].code() not in _ASK_AGAIN or time.monotonic() > deadline:
                raise


class SharedClusters:
    """The clusters of this worker that tests borrow, each with the state it was lent in."""

    def __init__(self) -> None:
        self._lent: dict[int, tuple[str, KafkaCluster, ClusterState]] = {}

    def lend(self, name: str, cluster: KafkaCluster) -> KafkaCluster:
        self._lent[id(cluster)] = (name, cluster, state_of(cluster))
        return cluster

    def take_back(self, cluster: KafkaCluster) -> None:
        self._lent.pop(id(cluster), None)

    def damage(self) -> list[str]:
        """What differs from the state each cluster was lent in. It is then undone (nodes started or thawed,
        settings put back), so only the test that did it is named."""
        found = []
        for name, cluster, lent in list(self._lent.values()):
            now = state_of(cluster)
            for node_id, state in now.nodes.items():
                if state != lent.nodes[node_id]:
                    exit_report = f" ({cluster.node(node_id).exit_report()})" if state == "not running" else ""
                    found.append(f"{name}: node {node_id} {state}{exit_report}")
                    _bring_back(cluster, node_id, state)
            if now.nodes != lent.nodes:
                now = state_of(cluster)
            for where in sorted(set(now.dynamic_configs) | set(lent.dynamic_configs)):
                before, after = lent.dynamic_configs.get(where, {}), now.dynamic_configs.get(where, {})
                if now.dynamic_configs and before != after:
                    found.append(f"{name}: dynamic {where} settings {before} became {after}")
                    if where.startswith("broker "):
                        _put_back(cluster, where.removeprefix("broker "), before, after)
            if found and now.dynamic_configs:
                # What could not be put back (cluster-wide defaults: this client cannot name the cluster's
                # resource) is the state the next test is lent, so only this test is named for it.
                self._lent[id(cluster)] = (name, cluster, state_of(cluster))
        return found


def _bring_back(cluster: KafkaCluster, node_id: int, state: str) -> None:
    if state.startswith("stopped"):
        cluster.node(node_id).send_signal(signal.SIGCONT)
    elif state == "not running":
        cluster.restart_node(node_id)


def _put_back(cluster: KafkaCluster, broker: str, before: dict[str, str], after: dict[str, str]) -> None:
    """Dynamic settings of ``broker`` (its id) from ``after`` back to ``before``."""
    entries = [
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
        for key, value in before.items()
        if after.get(key) != value
    ]
    entries += [ConfigEntry(key, "", incremental_operation=AlterConfigOpType.DELETE) for key in after.keys() - before]
    resource = ConfigResource(ConfigResource.Type.BROKER, broker, incremental_configs=entries)
    admin = AdminClient(client_config(cluster.bootstrap))
    for future in admin.incremental_alter_configs([resource], request_timeout=15).values():
        future.result(timeout=20)
    # The broker applies the change from the metadata log a moment after answering: the state the next test is
    # lent is read once it has (read at once, the next test's own teardown found it changed; CI of 3dd985b).
    poll_until(
        lambda: _dynamic_configs(cluster).get(f"broker {broker}") == before, 30, f"broker {broker}'s settings put back"
    )


SHARED = SharedClusters()  # this worker's (each pytest-xdist worker is a process of its own)
