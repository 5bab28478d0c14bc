"""The merged cut-over of issue 31 at full size: ``python -m bench.cutover_drill --scenario merged``.

Three one-node Kafka clusters A, C and D each hold topic ``orders`` (8 partitions); one continuous ``mm2py run``
copies all three into ``orders`` on T under IdentityReplicationPolicy (flows A->T, C->T, D->T in one properties
file), so every partition on T interleaves the three sources. Each source gets a third of ``--rate`` for
``--seconds`` from a producer process of its own (bench/cutover_roles.py). Group ``billing`` consumes on every
source, at a different place on each: on A it follows the end, on C and D it stops ``--c-behind`` and
``--d-behind`` records short of the source's end. Then the load and the consumers stop and ``mm2py cutover FILE
--flow A->T,C->T,D->T --groups billing --json`` runs with the run still going: the run must hand all three flows
over and exit by itself. ``billing`` then reads T to its end.

Why this shows the merged cut-over right: on each merged partition the group is committed at the smallest of the
three translations, so it reads again some records of the sources whose translation was larger. The report counts
those per source from the dense offset syncs; the bench counts them record by record (every record's value is
unique, so a record is known on any cluster by its value) and they must agree, with nothing of any source skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import subprocess
from pathlib import Path
from typing import Any

from bench.cutover_roles import Roles
from bench.cutover_steps import await_lease, command, read_on_target, values_per_partition
from tests.harness.faults import MirrorRun
from tests.harness.kafka_harness import end_offsets
from tests.harness.real_kafka import KafkaCluster, KafkaRuntime
from tests.harness.real_kafka_mm2 import IDENTITY, REAL_SMALL_CLUSTER, write_real_config
from tests.harness.recording_consumer import Processed, once_per_group

SOURCES = ("A", "C", "D")
TARGET = "T"
FLOWS = tuple(f"{source}->{TARGET}" for source in SOURCES)
TOPIC = "orders"
GROUP = "billing"
# As the scaled test (tests/realkafka/test_real_kafka_merged_cutover.py): the three flows, Identity, no heartbeats.
FLOWS_BODY = "".join(f"{flow}.enabled = true\n" for flow in FLOWS) + (
    f"topics = {TOPIC}\nreplication.policy.class = {IDENTITY}\nemit.heartbeats.enabled = false\n"
)
# A Spark task slot per flow: in its default mode (follow) a flow's tasks each hold a slot for as long as they
# follow; with fewer slots than flows (the one-node settings say local[2]) the run says so and copies every flow in
# rounds instead.
CLUSTER_SETTINGS = REAL_SMALL_CLUSTER.replace(
    "mm2py.spark.master = local[2]\n", f"mm2py.spark.master = local[{len(FLOWS)}]\n"
)
Values = dict[int, list[bytes]]  # partition -> record values in offset order


def stood_down(log: str, flow: str) -> bool:
    """Whether the run's log says it was asked for ``flow``, handed it over and copies nothing more for it."""
    name = re.escape(flow)
    asked = re.search(rf"flow={name}: .* asks for the flow; handing it over", log)
    done = re.search(rf"flow={name} was .*; this run copies nothing more for it", log)
    return bool(asked and done)


def copy_of_sources(sources: dict[str, Values], target: Values) -> tuple[dict[str, dict[str, int]], int]:
    """Per source, what T holds of it: records ``lost``, ``duplicated`` (copies beyond the first) and partitions
    ``reordered`` (its first copies in T's partition not in the source partition's order); and T's records that are
    no source's record of that partition (``unexpected``). Identity keeps partition numbers."""
    owner = {(p, v): name for name, values in sources.items() for p, vs in values.items() for v in vs}
    of_source: dict[str, Values] = {name: {} for name in sources}
    unexpected = 0
    for p, vs in target.items():
        for v in vs:
            if (name := owner.get((p, v))) is None:
                unexpected += 1
            else:
                of_source[name].setdefault(p, []).append(v)
    per_source = {}
    for name, values in sources.items():
        lost = duplicated = reordered = 0
        for p, expected in values.items():
            got = of_source[name].get(p, [])
            firsts = list(dict.fromkeys(got))
            copied = set(firsts)
            lost += len(set(expected) - copied)
            duplicated += len(got) - len(firsts)
            reordered += firsts != [v for v in expected if v in copied]
        per_source[name] = {"lost": lost, "duplicated": duplicated, "reordered_partitions": reordered}
    return per_source, unexpected


def read_again_reported(report: dict[str, Any], source: str) -> int | None:
    """The sum of the report's ``read_again`` over ``source``'s rows; None when a row does not know its count."""
    counts = [m["read_again"] for m in report.get("groups", []) if m["source"] == source]
    return None if not counts or None in counts else sum(counts)


def _group_on_sources(args: argparse.Namespace, clusters: dict[str, KafkaCluster], roles: Roles) -> dict[str, Any]:
    """The load on every source and ``billing``'s consumers there; returns once the load and the consumers stopped:
    {"produced", "ends", "processed"} per source."""
    per_source = args.rate / len(SOURCES)
    records = int(per_source * args.seconds)
    stops = {"A": None, "C": records - args.c_behind, "D": records - args.d_behind}
    loads = {
        s: roles.producer(
            clusters[s].bootstrap,
            TOPIC,
            partitions=args.partitions,
            rate=per_source,
            seconds=args.seconds,
            name=f"producer-{s}",
        )
        for s in SOURCES
    }
    members = {s: roles.consumer(s, clusters[s].bootstrap, GROUP, TOPIC, stops[s]) for s in SOURCES}
    produced = {s: roles.result(loads[s], args.seconds + 300) for s in SOURCES}
    ends = {s: end_offsets(clusters[s].bootstrap, TOPIC) for s in SOURCES}
    roles.tell_stop(members["A"], ends["A"])
    processed = {s: roles.processed(members[s], 300) for s in SOURCES}
    return {"produced": produced, "ends": ends, "processed": processed}


def _per_source(
    values: dict[str, Values], on_source: dict[str, list[Processed]], on_t: list[Processed], report: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    figures = {}
    for s in SOURCES:
        ids = [v for vs in values[s].values() for v in vs]
        mine = set(ids)
        on_t_of_source = [p for p in on_t if p.record_id in mine]
        twice, skipped = once_per_group(on_source[s] + on_t_of_source, ids)
        figures[s] = {
            "records": len(ids),
            "on_source": len(on_source[s]),
            "on_t": len(on_t_of_source),
            "read_twice": twice,
            "skipped": skipped,
            "read_again_reported": read_again_reported(report, s),
        }
    return figures


def merged(args: argparse.Namespace, runtime: KafkaRuntime, work: Path) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        clusters = {
            name: stack.enter_context(KafkaCluster(work / name.lower(), 1, runtime=runtime))
            for name in (*SOURCES, TARGET)
        }
        t = clusters[TARGET]
        for s in SOURCES:
            clusters[s].create_topic(TOPIC, partitions=args.partitions)
        bootstraps = {name: c.bootstrap for name, c in clusters.items()}
        config = write_real_config(work / "mm2.properties", bootstraps, FLOWS_BODY, CLUSTER_SETTINGS)
        with MirrorRun(config, work / "run.log") as run, Roles(work) as roles:
            for s in SOURCES:
                await_lease(run, t, s, TARGET, held=True)
            load = _group_on_sources(args, clusters, roles)
            source_records = sum(sum(ends.values()) for ends in load["ends"].values())
            lag_at_load_end = source_records - sum(end_offsets(t.bootstrap, TOPIC).values())
            flows = ",".join(FLOWS)
            cut, wall_s = command("cutover", str(config), "--flow", flows, "--groups", GROUP, "--json")
            with contextlib.suppress(subprocess.TimeoutExpired):  # a run left with no flow exits by itself
                run.proc.wait(120)
        log = run.log_text()
        report = json.loads(cut.stdout) if cut.returncode == 0 else {}
        t_ends = end_offsets(t.bootstrap, TOPIC)
        values = {s: values_per_partition(clusters[s].bootstrap, TOPIC) for s in SOURCES}
        held = values_per_partition(t.bootstrap, TOPIC)
        on_t = read_on_target(TARGET, t, GROUP, TOPIC, t_ends, f"{GROUP}-app-on-t") if cut.returncode == 0 else []
    copy, unexpected = copy_of_sources(values, held)
    return {
        "produced": load["produced"],
        "source_records": {s: sum(load["ends"][s].values()) for s in SOURCES},
        "t_records": sum(t_ends.values()),
        "lag_when_load_stopped": lag_at_load_end,
        "cutover_exit": cut.returncode,
        "cutover_stderr": cut.stderr[-2000:],
        "cutover_wall_s": wall_s,
        "handovers": report.get("handovers", []),
        "quiet_waited_s": report.get("quiet_waited_seconds"),
        "report_totals": report.get("totals"),
        "report_methods": sorted({g["method"] for g in report.get("groups", [])}),
        "committed": report.get("committed"),
        "run_exit": run.proc.returncode,
        "run_stood_down": {flow: stood_down(log, flow) for flow in FLOWS},
        "run_traceback": "Traceback" in log,
        "on_t": len(on_t),
        "sources": _per_source(values, load["processed"], on_t, report),
        "copy": copy,
        "t_unexpected": unexpected,
    }


def failed_checks(r: dict[str, Any]) -> list[str]:
    """What a merged run did not show: empty when it showed every must-show."""
    sources = r["sources"].values()
    handed = [flow for flow in FLOWS if any(f" handed {flow} over in " in line for line in r["handovers"])]
    checks = {
        "cutover exit 0": r["cutover_exit"] == 0,
        "the run handed all three flows over": len(r["handovers"]) == len(FLOWS) and handed == list(FLOWS),
        "the run stood down for every flow and exited 0": all(r["run_stood_down"].values())
        and r["run_exit"] == 0
        and not r["run_traceback"],
        "nothing of any source skipped": all(s["skipped"] == 0 for s in sources),
        "read twice as the report counts, per source": all(
            s["read_twice"] == s["read_again_reported"] for s in sources
        ),
        "every record processed across the source and T": all(
            s["on_source"] + s["on_t"] - s["read_twice"] == s["records"] for s in sources
        ),
        "T holds every record of each source once, in order": not r["t_unexpected"]
        and all(not any(c.values()) for c in r["copy"].values())
        and r["t_records"] == sum(s["records"] for s in sources),
    }
    return [name for name, ok in checks.items() if not ok]
