"""Handing the host memory that scored candidates freed back to the system.

Scoring a candidate allocates blocks of a few MB to hundreds of MB (weights, activations, the next-token
head's buffers) and frees them all. glibc's allocator raises its mmap threshold to the largest block
freed (up to 32 MB), so after the first candidates most blocks come from the heap, where freed pages stay
resident and the heap fragments: an lts-gpt2 search held 6 GiB after 120 trials
(``benchmarks/search_memory.py``). ``malloc_trim(0)`` returns the free pages, but the next candidate then
faults its pages in again: trimming after every candidate cut the peak to 1.6 GiB and cost 24% more time
per trial. So the trim runs only once the resident memory has grown by ``slack`` since the last one.
Elsewhere (macOS, Windows, musl) there is nothing to call and nothing is done.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from typing import Any, Callable

#: Growth of the resident memory since the last trim that triggers the next one.
DEFAULT_SLACK = 1 << 30

_lock = threading.Lock()
_trim: Callable[[int], Any] | None = None
_looked = False
_after_last_trim: int | None = None


def _malloc_trim() -> Callable[[int], Any] | None:
    global _trim, _looked
    if not _looked:
        _looked = True
        if sys.platform.startswith("linux"):
            try:
                _trim = getattr(ctypes.CDLL("libc.so.6"), "malloc_trim", None)
            except OSError:  # not glibc
                _trim = None
    return _trim


def resident_bytes() -> int | None:
    """This process's resident memory (Linux ``/proc/self/statm``), or None where it cannot be read."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def release_freed_memory(slack: int = DEFAULT_SLACK) -> bool:
    """Return freed heap pages to the system (glibc's ``malloc_trim``) when the resident memory has grown
    by ``slack`` bytes or more since the last trim (``slack=0``: always); whether it trimmed."""
    global _after_last_trim
    trim = _malloc_trim()
    if trim is None:
        return False
    with _lock:
        rss = resident_bytes()
        if slack > 0 and rss is not None and _after_last_trim is not None and rss - _after_last_trim < slack:
            return False
        trim(0)
        _after_last_trim = resident_bytes()
        return True
