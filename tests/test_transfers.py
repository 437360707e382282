"""surrogates.transfers: buffers go out in counted transfers, and the seconds that are not storage I/O add up."""

from __future__ import annotations

import os

from cycleio.surrogates.transfers import Overheads, write_groups


def test_buffers_go_out_in_transfers_of_at_most_the_buffer_size(tmp_path):
    buffers = [bytes([i]) * 1000 for i in range(10)] + [b"x" * 5000, memoryview(b"yz")]
    times = Overheads()
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    try:
        write_groups(fd, buffers, times, buffer_bytes=3000)
    finally:
        os.close(fd)
    assert (tmp_path / "f").read_bytes() == b"".join(bytes(b) for b in buffers)
    assert times.transfers == 6  # 3 + 3 + 3 + 1 buffers of 1000 bytes, then the 5000 alone, then "yz" (5002 > 3000)


def test_nothing_to_write_is_no_transfer(tmp_path):
    times = Overheads()
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    try:
        write_groups(fd, [], times, buffer_bytes=10)
    finally:
        os.close(fd)
    assert times.transfers == 0 and (tmp_path / "f").read_bytes() == b""


def test_overheads_add_up_and_are_taken_once():
    times = Overheads(generate=1.0, encode=0.5, rename=0.25, transfers=3)
    before = times.copy()
    times.decode += 2.0
    times.transfers += 2
    since = times.since(before)
    assert since.decode == 2.0 and since.generate == 0.0 and since.transfers == 2
    assert times.total == 3.75 and set(times.seconds()) == set(Overheads.SECONDS)
    taken = times.take()
    assert taken.total == 3.75 and taken.transfers == 5
    assert times.total == 0.0 and times.transfers == 0 and isinstance(times.transfers, int)
