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


@pytest.mark.parametrize("count, streams", [(5, 1), (1, 4), (7, 3), (0, 2)])
def test_every_item_is_done_once_however_many_streams(count, streams):
    import threading

    done: list[int] = []
    threads: set[str] = set()

    def work(index: int) -> None:
        done.append(index)
        threads.add(threading.current_thread().name)

    in_parallel(work, count, streams)
    assert sorted(done) == list(range(count))
    if streams <= 1 or count <= 1:
        assert threads <= {threading.current_thread().name}  # no pool for one stream or one item
    else:
        assert all(name.startswith("cycleio-stream") for name in threads)


def test_each_thread_reuses_its_buffer_until_the_size_changes():
    from cycleio.storage.streams import buffers

    first = buffers.get(1024)
    assert buffers.get(1024) is first and len(first) == 1024
    assert len(buffers.get(2048)) == 2048 and buffers.get(2048) is not first
