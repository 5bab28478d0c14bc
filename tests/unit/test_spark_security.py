"""The warning that Kafka credentials would cross an unprotected Spark cluster (no JVM, no broker): said once
for a cluster master while any of Spark's authentication, RPC encryption or disk encryption is off, never for a
local master; `plan` says it from the file's mm2py.spark.* keys before it connects anywhere."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from mm2py.config.spark_security import SPARK_SECURITY_KEYS, spark_exposure, warn_if_spark_unprotected
from tests.harness import in_process

ALL_ON = {key: "true" for key in SPARK_SECURITY_KEYS}


@pytest.mark.parametrize("master", ["local", "local[*]", "local[4,2]", " LOCAL[2] "])
def test_a_local_master_exposes_nothing(master: str) -> None:
    assert spark_exposure(master, {}) == []


@pytest.mark.parametrize("master", ["spark://host:7077", "yarn", "k8s://https://api:6443"])
def test_a_cluster_master_is_exposed_until_all_three_are_on(master: str) -> None:
    assert len(spark_exposure(master, {})) == 3
    assert spark_exposure(master, ALL_ON) == []
    for key in SPARK_SECURITY_KEYS:
        assert spark_exposure(master, {**ALL_ON, key: "false"}) == [SPARK_SECURITY_KEYS[key]]


def test_the_warning_names_what_is_off_and_how_to_turn_it_on(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert warn_if_spark_unprotected("yarn", {"spark.authenticate": "true"}) is True
        assert warn_if_spark_unprotected("yarn", ALL_ON) is False
        assert warn_if_spark_unprotected("local[2]", {}) is False
    [line] = [r.getMessage() for r in caplog.records]
    assert "Spark master yarn is a cluster and spark.network.crypto.enabled is off, spark.io.encryption" in line
    assert "travel unencrypted between Spark processes" in line and "spark.authenticate is off" not in line
    assert "mm2py.spark.conf.spark.network.crypto.enabled = true" in line and "docs/security.md" in line


def test_plan_warns_once_before_it_connects(tmp_path: Path) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text(
        "clusters = a, b\na.bootstrap.servers = 127.0.0.1:1\nb.bootstrap.servers = 127.0.0.1:1\n"
        "a->b.enabled = true\nmm2py.spark.master = spark://cluster:7077\n"
        "mm2py.spark.conf.spark.authenticate = true\nadmin.timeout.ms = 1000\n"
    )
    # Through the in-process harness, which captures what the command's own log handler writes however the
    # earlier tests in this worker set logging up (capsys missed it after them).
    result = in_process.run(["plan", str(config)], {})
    assert result.returncode == 3  # nothing listens on port 1: the plan itself fails
    err = result.stderr
    assert err.count("is a cluster and") == 1, err
    assert "spark.network.crypto.enabled is off, spark.io.encryption.enabled is off" in err
