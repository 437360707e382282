"""storage.streams: work spread over parallel streams, which stop at the first error."""

from __future__ import annotations

import pytest

from cycleio.storage.streams import in_parallel


def test_parallel_streams_stop_taking_work_after_the_first_error():
    import threading

    started: list[int] = []
    lock = threading.Lock()
    release = threading.Event()

    def work(index: int) -> None:
        with lock:
            started.append(index)
        if index == 0:
            raise OSError(28, "No space left on device")
        release.wait(0.3)  # the other stream is busy while the error is raised (10 items start only if the
        # error went unseen for over a second)

    with pytest.raises(OSError, match="No space left"):
        in_parallel(work, 100, 2)
    assert len(started) < 10  # the remaining items were never started
