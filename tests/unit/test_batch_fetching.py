"""The fetch thread's hand-over to the task's thread: when a batch's linger and delivery timeout start."""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

from mm2py.executor.batch_fetching import FetchThread
from mm2py.wire.batch_codec import Record, encode_batch
from mm2py.wire.batches import RecordBatch
from mm2py.wire.partition_queue import ProducerBatch


def test_a_hand_over_stamps_its_batches_so_linger_counts_from_the_fetch_not_from_the_sender() -> None:
    thread: Any = FetchThread.__new__(FetchThread)  # only the hand-over: no source, no spec
    thread.inbox, thread.stop = queue.Queue(2), threading.Event()
    batches = [
        ProducerBatch(RecordBatch(memoryview(encode_batch([Record(i, 1_000, b"k", b"v")], base_offset=i))), [i])
        for i in range(3)
    ]
    assert all(b.created < 0 for b in batches)
    before = time.monotonic()
    thread._put([("range", batches[:2], 2), ("other", batches[2:], 3)])
    assert all(before <= b.created <= time.monotonic() for b in batches)
    assert [b for _r, handed, _p in thread.inbox.get_nowait() for b in handed] == batches
    thread._put(None)  # the end: nothing to stamp
    assert thread.inbox.get_nowait() is None
