"""Handing the allocator's free pages back: real on glibc, a no-op elsewhere."""

from __future__ import annotations

import platform
import sys

import pytest

from pipeline import memory


def _rss_kb() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="malloc_trim is glibc's",
)
def test_freed_small_objects_go_back_to_the_system_on_glibc() -> None:
    import threading

    survivors: list[bytearray] = []

    def churn() -> None:
        # A run's short-lived blocks, freed, with a few long-lived ones among them: glibc
        # keeps the freed pages between the survivors until it is asked to give them back.
        held = [bytearray(600) for _ in range(200_000)]
        survivors.extend(held[::50])
        del held

    thread = threading.Thread(target=churn)
    thread.start()
    thread.join()
    before = _rss_kb()
    assert memory.release_free_memory() is True
    assert _rss_kb() < before - 50_000  # about 120 MB were freed, 2.4 MB survive
    assert len(survivors) == 4_000


def test_without_malloc_trim_it_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    memory._malloc_trim.cache_clear()
    monkeypatch.setattr(memory.sys, "platform", "darwin")
    try:
        assert memory.release_free_memory() is False
    finally:
        memory._malloc_trim.cache_clear()
