"""glibc malloc settings for a batch-copying Python worker (runs on executors).

Why: the batch path moves data through buffers of megabytes (Fetch responses, forwarded batches, Produce
requests), each allocated, filled and freed within a few milliseconds, with several alive at once. glibc
serves allocations above ``M_MMAP_THRESHOLD`` (128 KiB at start, moved up only when such a block is freed)
with a fresh ``mmap`` and returns the top of its heap above ``M_TRIM_THRESHOLD``, so most of these buffers
came as new pages: the kernel zeroes and maps each on first touch. Measured in one process copying 500k
records of 1 KB between two local brokers: 124k–251k minor page faults and 1.77–2.10 CPU-seconds untuned,
21k–38k faults and 1.37–1.46 CPU-seconds with the settings below, at 10–30% more records/s.

The cost: freed memory up to ``TRIM_THRESHOLD`` stays with the worker (Spark reuses Python workers), and a
block below ``MMAP_THRESHOLD`` goes back to the heap instead of to the system.
"""

from __future__ import annotations

import ctypes
import logging
import platform

log = logging.getLogger(__name__)

# glibc's malloc.h parameter numbers.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# 32 MiB is the most glibc accepts for the mmap threshold on 64-bit (it refuses more); the trim threshold is
# twice it, as glibc itself sets it when it moves the mmap threshold.
MMAP_THRESHOLD = 32 * 1024 * 1024
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD

_tuned: bool | None = None


def tune_for_large_buffers() -> bool:
    """Set the thresholds once per process; False where the C library is not glibc (nothing is changed)."""
    global _tuned
    if _tuned is None:
        _tuned = _set_thresholds()
    return _tuned


def _set_thresholds() -> bool:
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    done = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1)
    if not done:
        log.warning("could not set glibc malloc thresholds; the batch path copies with more page faults")
    return done
