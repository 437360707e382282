import os
import shutil
from pathlib import Path

import pytest

from cycleio.storage.pagecache import cached_fraction, evict
from cycleio.storage.tiers import probe_tier


@pytest.fixture
def shm_dir():
    path = Path("/dev/shm") / f"cycleio-test-pagecache-{os.getpid()}"
    path.mkdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_cached_fraction_follows_reads_and_eviction(tmp_path):
    path = tmp_path / "data.bin"
    path.write_bytes(os.urandom(4 * 2**20))
    assert cached_fraction(path) == 1.0  # just written
    evict(path)
    if probe_tier(tmp_path)["fs_type"] == "tmpfs":  # tmpfs pages are the file: nothing to drop
        assert cached_fraction(path) == 1.0
        return
    assert cached_fraction(path) == 0.0
    with open(path, "rb") as handle:
        handle.read(2**20)
    assert 0.0 < cached_fraction(path) < 1.0


def test_tmpfs_files_stay_cached_and_unknowns_are_none(tmp_path, shm_dir):
    memory = shm_dir / "data.bin"
    memory.write_bytes(b"x" * 100_000)
    evict(memory)
    assert cached_fraction(memory) == 1.0
    empty = tmp_path / "empty"
    empty.touch()
    assert cached_fraction(empty) is None and cached_fraction(tmp_path / "missing") is None
