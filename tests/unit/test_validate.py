"""`mm2py validate`: every problem of a file at once, each as file:line key = value: reason (allowed: ...)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mm2py.config import MirrorMakerConfig, build_flow_config, validate
from mm2py.config.mirror_maker import Flow
from mm2py.config.problems import Problem
from mm2py.config.properties import parse_properties
from tests.harness.keystore_files import identity, jks_truststore

DATA = Path(__file__).resolve().parent.parent / "data"
GUIDE_EXAMPLE = DATA / "aggregation-guide-full-example.properties"
GUIDE_PASSWORDS = ["dc1-password", "dc2-password", "dc3-password", "target-password", "truststore-password"]


def problems_of(text: str, environ: dict[str, str] | None = None) -> list[Problem]:
    return validate(MirrorMakerConfig(parse_properties(text, "mm2.properties"), environ or {}))


def lines(problems: list[Problem]) -> list[str]:
    return [f"{p.severity}: {p.render()}" for p in problems]


def find(problems: list[Problem], key: str | None, fragment: str) -> Problem:
    matches = [p for p in problems if p.key == key and fragment in p.reason]
    assert matches, f"no problem for {key!r} containing {fragment!r} in:\n" + "\n".join(lines(problems))
    return matches[0]


GOOD = """\
clusters = dc1, target
dc1.bootstrap.servers = localhost:9092
target.bootstrap.servers = localhost:9093
dc1->target.enabled = true
topics = orders
"""


def test_a_clean_file_has_no_problems() -> None:
    assert problems_of(GOOD) == []


@pytest.fixture(scope="module")
def problems() -> list[Problem]:
    return validate(MirrorMakerConfig.from_file(GUIDE_EXAMPLE, environ={}))


class TestGuideFullConfigurationExample:
    """The aggregation guide's example as written: what is wrong with it, in words, without its passwords."""

    def test_target_is_configured_but_not_in_clusters(self, problems: list[Problem]) -> None:
        p = find(problems, "target.bootstrap.servers", "not in clusters")
        assert "'target' has settings" in p.reason and p.severity == "warning"
        assert p.allowed == "add target to clusters"

    def test_no_flow_is_enabled(self, problems: list[Problem]) -> None:
        find(problems, None, "no flow is enabled")

    def test_the_inline_comment_is_part_of_the_topics_regex(self, problems: list[Problem]) -> None:
        p = find(problems, "topics", "no inline comments")
        assert p.value == '".*" # Match all topics'
        assert p.line == 34
        assert p.render().startswith(f'{GUIDE_EXAMPLE}:34 topics = ".*" # Match all topics: ')

    def test_emit_checkpoints_interval_is_not_an_mm2_key(self, problems: list[Problem]) -> None:
        p = find(problems, "emit.checkpoints.interval", "not an MM2 key")
        assert p.allowed == "did you mean emit.checkpoints.interval.seconds?"

    def test_keys_the_guide_invents_are_flagged(self, problems: list[Problem]) -> None:
        for key in ("sync.topic.configs.strategy", "sync.acls.enabled", "offsets.topic.replication.factor"):
            find(problems, key, "not an MM2 key")
        find(problems, "emit.heartbeats.interval", "is set again on line")

    def test_jks_truststores_are_read_so_only_a_missing_file_is_an_error(self, problems: list[Problem]) -> None:
        p = find(problems, "dc1.ssl.truststore.location", "no such file")
        assert p.severity == "error" and p.line == 10
        assert p.render().endswith(
            "dc1.ssl.truststore.location = /etc/kafka/dc1-truststore.jks: "
            "no such file (a JKS truststore, Java's default type)"
        )
        assert not [q for q in problems if q.key == "dc1.ssl.truststore.password"]  # a missing file is one line

    def test_no_password_appears_in_any_line(self, problems: list[Problem]) -> None:
        text = "\n".join(lines(problems))
        for secret in GUIDE_PASSWORDS:
            assert secret not in text


def test_unknown_alias_in_a_flow_is_an_error_with_a_suggestion() -> None:
    p = find(problems_of(GOOD + "dc2->targt.enabled = true\n"), "dc2->targt.enabled", "not in clusters")
    assert p.severity == "error" and p.line == 6


def test_missing_bootstrap_servers_for_a_cluster_used_by_a_flow_is_an_error() -> None:
    text = GOOD.replace("target.bootstrap.servers = localhost:9093\n", "")
    p = find(problems_of(text), "target.bootstrap.servers", "is missing")
    assert p.severity == "error" and p.line == 3  # the line that enables the flow


def test_bad_regex_is_an_error_naming_the_line() -> None:
    p = find(problems_of(GOOD + "topics.exclude = orders[\n"), "topics.exclude", "not a valid regular expression")
    assert p.severity == "error" and p.line == 6


def test_bad_number_is_an_error_that_explains_units() -> None:
    p = find(
        problems_of(GOOD + "emit.checkpoints.interval.seconds = 1m\n"),
        "emit.checkpoints.interval.seconds",
        "not a whole number",
    )
    assert p.severity == "error" and "units" in p.reason


def test_bad_boolean_at_flow_level_is_an_error() -> None:
    p = find(
        problems_of(GOOD + "dc1->target.sync.group.offsets.enabled = yes\n"),
        "dc1->target.sync.group.offsets.enabled",
        "not a boolean",
    )
    assert p.allowed == "true or false"


def test_cluster_level_behaviour_keys_are_ignored_by_mm2_and_said_so() -> None:
    p = find(problems_of(GOOD + "dc1.topics = payments\n"), "dc1.topics", "ignores cluster-level")
    assert p.severity == "warning" and "dc1->B.topics" in (p.allowed or "")


def test_top_level_producer_keys_are_ignored_by_mm2_and_said_so() -> None:
    p = find(problems_of(GOOD + "producer.linger.ms = 5\n"), "producer.linger.ms", "ignores producer.*")
    assert "producer.override" in (p.allowed or "")


def test_unresolvable_env_variable_is_an_error_without_the_secret() -> None:
    text = GOOD + (
        "config.providers = env\n"
        "config.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
        "dc1.sasl.jaas.config = ${env:NOPE}\n"
    )
    p = find(problems_of(text), "dc1.sasl.jaas.config", "NOPE is not set")
    assert p.severity == "error"


def test_variables_of_an_undeclared_provider_are_errors() -> None:
    p = find(
        problems_of(GOOD + "dc1.ssl.keystore.password = ${file:/x:y}\n"),
        "dc1.ssl.keystore.password",
        "does not declare",
    )
    assert p.severity == "error"


def test_warnings_only_do_not_make_errors() -> None:
    problems = problems_of(GOOD + "emit.heartbeats = false\n")
    assert [p.severity for p in problems] == ["warning"]
    assert problems[0].allowed == "did you mean emit.heartbeats.enabled?"


def test_secret_values_are_masked_even_in_value_problems() -> None:
    text = GOOD + (
        "dc1.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="u" password="s3cr3t-pw" # comment\n'
    )
    out = "\n".join(lines(problems_of(text)))
    assert "s3cr3t-pw" not in out
    assert "dc1.sasl.jaas.config = [hidden]" in out


def test_keys_mm2py_accepts_but_does_not_act_on_are_named_with_what_it_does_instead() -> None:
    problems = problems_of(
        GOOD + "tasks.max.enforce = false\ntransforms = drop\ntransforms.drop.type = x.Drop\n"
        "dc1->target.refresh.groups.interval.seconds = 60\noffset.flush.interval.ms = 500\n"
    )
    enforce = find(problems, "tasks.max.enforce", "has no effect in mm2py")
    assert enforce.severity == "warning" and "never runs more than tasks.max" in (enforce.allowed or "")
    assert not [p for p in problems_of(GOOD + "tasks.max = 8\n") if p.key == "tasks.max"]  # acted on
    assert "unchanged" in (find(problems, "transforms", "has no effect").allowed or "")
    find(problems, "transforms.drop.type", "has no effect")
    assert "checkpoint" in (
        find(problems, "dc1->target.refresh.groups.interval.seconds", "has no effect").allowed or ""
    )
    flush = find(problems, "offset.flush.interval.ms", "worker key MM2 reads from the target cluster's settings")
    assert flush.allowed == "<target alias>.offset.flush.interval.ms"
    assert not [p for p in problems if p.severity == "error"]


SASL_SSL_WITH_JKS = (
    GOOD
    + """\
dc1.security.protocol = SASL_SSL
dc1.sasl.mechanism = SCRAM-SHA-512
dc1.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required username="m" password="dc1-pw";
dc1.ssl.truststore.location = {store}
dc1.ssl.truststore.password = {password}
"""
)


def test_a_jks_truststore_that_opens_passes_validation(tmp_path: Path) -> None:
    store = jks_truststore(tmp_path / "dc1-truststore.jks", "truststore-password", identity("dc1-ca"))
    assert problems_of(SASL_SSL_WITH_JKS.format(store=store, password="truststore-password")) == []


def test_a_wrong_truststore_password_is_one_line_without_the_password(tmp_path: Path) -> None:
    store = jks_truststore(tmp_path / "dc1-truststore.jks", "truststore-password", identity("dc1-ca"))
    found = problems_of(SASL_SSL_WITH_JKS.format(store=store, password="not-the-password"))
    assert [(p.severity, p.key, p.line) for p in found] == [("error", "dc1.ssl.truststore.password", 10)]
    text = "\n".join(lines(found))
    assert "wrong password" in text and "not-the-password" not in text and "dc1-pw" not in text


def test_connect_worker_settings_are_named_as_such_not_as_unknown_keys() -> None:
    problems = problems_of(GOOD + "plugin.discovery = service_load\ntarget.session.timeout.ms = 6000\n")
    for key in ("plugin.discovery", "target.session.timeout.ms"):
        found = find(problems, key, "Kafka Connect worker setting")
        assert found.severity == "warning"
    assert not [p for p in problems if "is not an MM2 key" in p.reason]


def test_the_keys_of_kafka_4_3_and_of_loss_accounting_are_known_and_checked() -> None:
    good = GOOD + (
        "metric.names.formats = legacy,new\nuse.incremental.alter.configs = never\nmm2py.source.loss = fail\n"
        "dc1->target.mm2py.start.timestamp = 2026-11-25T06:00:00Z\ndc1->target.mm2py.source.loss = warn\n"
    )
    assert problems_of(good) == []
    bad = problems_of(
        GOOD
        + "metric.names.formats = new,newest\nuse.incremental.alter.configs = sometimes\n"
        + "mm2py.source.loss = ignore\nmm2py.start.timestamp = last tuesday\nmetric.names.formats.x = 1\n"
    )
    assert find(bad, "metric.names.formats", "'newest'").allowed == "a comma-separated list of legacy, new"
    assert find(bad, "use.incremental.alter.configs", "not one of").allowed == "requested, required, never"
    assert find(bad, "mm2py.source.loss", "not one of").allowed == "warn, fail"
    assert find(bad, "mm2py.start.timestamp", "is not a time").line == 9
    assert all(p.severity == "error" for p in bad if p.key != "metric.names.formats.x")


def test_an_empty_metric_names_formats_is_an_error_as_kafkas_validlist_makes_it() -> None:
    assert find(problems_of(GOOD + "metric.names.formats =\n"), "metric.names.formats", "names no value")


def test_run_wide_mm2py_keys_given_per_flow_are_said_to_be_read_at_the_top_level() -> None:
    problem = find(
        problems_of(GOOD + "dc1->target.mm2py.range.max.records = 5\n"),
        "dc1->target.mm2py.range.max.records",
        "top level only",
    )
    assert problem.severity == "warning" and "mm2py.start.timestamp" in (problem.allowed or "")


def test_mm2pys_earlier_name_for_the_range_cap_is_read_as_the_new_one_with_a_warning() -> None:
    old = find(problems_of(GOOD + "mm2py.batch.max.records = 100\n"), "mm2py.batch.max.records", "earlier name")
    assert (old.severity, old.allowed) == ("warning", "mm2py.range.max.records")
    bad = [p for p in problems_of(GOOD + "mm2py.batch.max.records = none\n") if p.severity == "error"]
    assert [(p.key, p.line, p.value) for p in bad] == [("mm2py.batch.max.records", 6, "none")]
    mm = MirrorMakerConfig(parse_properties(GOOD + "mm2py.batch.max.records = 100\n", "mm2.properties"), {})
    both = GOOD + "mm2py.batch.max.records = 100\nmm2py.range.max.records = 7\n"
    newer = MirrorMakerConfig(parse_properties(both, "mm2.properties"), {})
    flow = Flow("dc1", "target")
    assert (build_flow_config(mm, flow).range_max_records, build_flow_config(newer, flow).range_max_records) == (100, 7)
