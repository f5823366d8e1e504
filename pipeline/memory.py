"""Giving the heap's free pages back to the operating system after a burst of work.

A long-lived process (the service, a watcher) runs the same large, short-lived work again
and again: a sync run builds the registry, the scan and the link index, then drops them.
glibc keeps the freed pages in its arenas (one per thread that allocated), so the resident
size climbs run after run although no Python object outlives its run. ``malloc_trim``
returns those pages; elsewhere (macOS, musl) this is a no-op. Figures in docs/watch.md.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import sys
from collections.abc import Callable

log = logging.getLogger(__name__)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the C library this process already runs on
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


def release_free_memory() -> bool:
    """Return the allocator's free pages to the system; True when the C library could
    (glibc), False when it cannot or held nothing to give back."""
    trim = _malloc_trim()
    if trim is None:
        return False
    return bool(trim(0))
