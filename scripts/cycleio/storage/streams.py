"""Parallel streams: work spread over threads, each with its reusable buffer."""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Callable


class _Buffers(threading.local):
    """One reusable buffer per thread (allocating per file costs more than copying a small file)."""

    def get(self, size: int) -> bytearray:
        buffer = getattr(self, "buffer", None)
        if buffer is None or len(buffer) != size:
            buffer = self.buffer = bytearray(size)
        return buffer


buffers = _Buffers()


def in_parallel(function: Callable[[int], None], count: int, streams: int) -> None:
    """Call ``function(0..count-1)`` on up to ``streams`` threads; after the first error start no new
    items, wait for the running ones and re-raise it (so nothing is still writing when we clean up)."""
    if streams <= 1 or count <= 1:
        for index in range(count):
            function(index)
        return
    with ThreadPoolExecutor(max_workers=min(streams, count), thread_name_prefix="cycleio-stream") as pool:
        futures = [pool.submit(function, index) for index in range(count)]
        wait(futures, return_when=FIRST_EXCEPTION)
        failed = next((f for f in futures if f.done() and not f.cancelled() and f.exception()), None)
        if failed is not None:
            for future in futures:
                future.cancel()
    if failed is not None:  # the pool has waited for the items that were running
        raise failed.exception()
