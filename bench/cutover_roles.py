"""The processes of the cut-over drill besides mm2py: the load generators and the applications' consumers on the
sources.

Why processes of their own: on a small machine a producer writing 5,000 records/s and consumers recording every
record they process would take CPU from the measured ``mm2py run`` if they shared its process, and from each other
and the drill's own bookkeeping if they shared the drill's. Each is ``python -m bench.cutover_roles ROLE ...``,
started by ``bench/cutover_drill.py`` through :class:`Roles`. A role is told to finish by a file
(``<out>.stop``, holding what it needs to finish) and leaves what it did in ``<out>`` (written whole, then
renamed, so the drill never reads half of it):

- ``produce``: ``tests/harness/record_check.PacedProducer`` (unique 100-byte values, round-robin over the
  partitions) for ``--seconds`` or until told to stop; leaves the counts of records sent and acknowledged;
- ``consume``: one member of a group recording every record it processes
  (``tests/harness/recording_consumer.RecordingConsumer``), either ``--records N`` and then stop, or following the
  topic's end until told the final end offsets and then reading up to them; leaves the records it processed.
"""

from __future__ import annotations

import argparse
import json
import pickle
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.harness.kafka_harness import end_offsets
from tests.harness.polling import poll_until
from tests.harness.record_check import PacedProducer
from tests.harness.recording_consumer import Processed, RecordingConsumer

REPO = Path(__file__).resolve().parents[1]
FOLLOW_INTERVAL_S = 0.2  # how often a follower that has caught up lists the end offsets again


def _write_whole(path: Path, data: bytes) -> None:
    partial = path.with_suffix(".partial")
    partial.write_bytes(data)
    partial.rename(path)


def _stop_file(out: Path) -> Path:
    return out.with_name(out.name + ".stop")


def produce(args: argparse.Namespace) -> None:
    out = Path(args.out)
    producer = PacedProducer(args.bootstrap, args.topic, args.rate, partitions=args.partitions, value_size=100)
    started = time.monotonic()
    producer.start()
    deadline = started + args.seconds if args.seconds else float("inf")
    stop = _stop_file(out)
    while time.monotonic() < deadline and not stop.exists():
        # The load's length (or the drill's word to stop), not a synchronisation: the producer paces itself.
        time.sleep(min(FOLLOW_INTERVAL_S, max(0.0, deadline - time.monotonic())))
    acknowledged = producer.stop()
    seconds = time.monotonic() - started
    result = {"sent": producer.sent, "acknowledged": acknowledged, "seconds": round(seconds, 2)}
    _write_whole(out, json.dumps(result).encode())


def consume(args: argparse.Namespace) -> None:
    out = Path(args.out)
    member = RecordingConsumer(args.cluster, args.bootstrap, args.group, args.topic, args.client_id)
    try:
        if args.records is not None:
            member.consume(until_records=args.records)
        else:
            stop = _stop_file(out)
            while not stop.exists():
                before = len(member.processed)
                member.consume(until_ends=end_offsets(args.bootstrap, args.topic))
                if len(member.processed) == before:
                    time.sleep(FOLLOW_INTERVAL_S)  # at the end: list it again shortly
            final = {int(p): end for p, end in json.loads(stop.read_text()).items()}
            member.consume(until_ends=final)
    finally:
        member.close()  # leaves the group: no member of it remains on this cluster
    _write_whole(out, pickle.dumps(member.processed))


class Roles:
    """The role processes of one drill run, their logs and results under ``work``; every one still running is
    SIGKILLed on exit (a drill that failed half way leaves no producer writing)."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.procs: dict[Path, subprocess.Popen[bytes]] = {}

    def _start(self, name: str, *argv: str) -> Path:
        out = self.work / name
        with (self.work / f"{name}.log").open("ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "bench.cutover_roles", *argv, "--out", str(out)],
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.procs[out] = proc
        return out

    def producer(
        self, bootstrap: str, topic: str, *, partitions: int, rate: float, seconds: float = 0.0, name: str = "producer"
    ) -> Path:
        """A load generator; ``name`` (starting ``producer``) tells several apart, one per source cluster."""
        return self._start(
            name,
            "produce",
            *("--bootstrap", bootstrap, "--topic", topic, "--partitions", str(partitions)),
            *("--rate", str(rate), "--seconds", str(seconds)),
        )

    def consumer(self, cluster: str, bootstrap: str, group: str, topic: str, records: int | None = None) -> Path:
        """A member of ``group`` on a source: stops after ``records``, or (None) follows the end until told to stop.
        Named by group and cluster: one group may consume on several sources (the merged scenario)."""
        counted = ("--records", str(records)) if records is not None else ()
        return self._start(
            f"consumer-{group}-{cluster}",
            "consume",
            *("--cluster", cluster, "--bootstrap", bootstrap, "--group", group, "--topic", topic),
            *("--client-id", f"{group}-app-on-{cluster}", *counted),
        )

    def tell_stop(self, out: Path, ends: dict[int, int] | None = None) -> None:
        _write_whole(_stop_file(out), json.dumps(ends or {}).encode())

    def result(self, out: Path, timeout: float) -> Any:
        """What the role left, once it exited 0 (its log's tail in the error otherwise)."""
        proc = self.procs[out]
        log = self.work / f"{out.name}.log"
        poll_until(lambda: proc.poll() is not None, timeout, f"{out.name} to finish", log=log)
        if proc.returncode != 0:
            raise RuntimeError(f"{out.name} exited {proc.returncode}: {log.read_text(errors='replace')[-3000:]}")
        data = out.read_bytes()
        return json.loads(data) if out.name.startswith("producer") else pickle.loads(data)

    def processed(self, out: Path, timeout: float) -> list[Processed]:
        records: list[Processed] = self.result(out, timeout)
        return records

    def __enter__(self) -> Roles:
        return self

    def __exit__(self, *_exc: object) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    roles = parser.add_subparsers(dest="role", required=True)
    load = roles.add_parser("produce")
    load.add_argument("--rate", type=float, required=True)
    load.add_argument("--partitions", type=int, required=True)
    load.add_argument("--seconds", type=float, default=0.0, help="0: until told to stop")
    member = roles.add_parser("consume")
    member.add_argument("--cluster", required=True)
    member.add_argument("--group", required=True)
    member.add_argument("--client-id", required=True)
    member.add_argument("--records", type=int, help="stop after this many (default: follow until told to stop)")
    for role in (load, member):
        role.add_argument("--bootstrap", required=True)
        role.add_argument("--topic", required=True)
        role.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    {"produce": produce, "consume": consume}[args.role](args)


if __name__ == "__main__":
    main()
