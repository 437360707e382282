import os
import shutil
from pathlib import Path

import pytest

from cycleio.storage.pagecache import cache_risk, cached_fraction, evict, memory_backed


@pytest.fixture
def shm_dir():
    path = Path("/dev/shm") / f"cycleio-test-pagecache-{os.getpid()}"
    path.mkdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_cached_fraction_follows_reads_and_eviction(disk_dir):
    path = disk_dir / "data.bin"
    path.write_bytes(os.urandom(4 * 2**20))
    assert cached_fraction(path) == 1.0  # just written
    evict(path)
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


def test_one_rule_says_which_reads_the_page_cache_may_have_served():
    disk = memory_backed("posix", "ext4")
    assert cache_risk("read", memory=disk) and cache_risk("checksum", memory=disk)
    assert not cache_risk("write", memory=disk)
    assert not cache_risk("read", memory=disk, direct_io=True) and not cache_risk("read", memory=disk, dropped=True)
    # memory is the tier: a tmpfs path of a posix tier too
    assert memory_backed("memory", "ext4") and memory_backed("posix", "tmpfs")
    assert not cache_risk("read", memory=memory_backed("posix", "tmpfs"))
