"""storage.copytools: cp and rsync copy into the temporary name; the source's checksum is a separate read."""

from __future__ import annotations

import os

import pytest

from conftest import require_tool
from cycleio import fsutil
from cycleio.storage import copytools
from cycleio.storage.checksums import checksum_file
from cycleio.storage.stagingtypes import StagingError, StagingOptions


def test_each_command_copies_into_the_temporary_never_the_final_name(tmp_path):
    source, tmp = tmp_path / "a b.nc", tmp_path / ".x.tmp-1"
    assert copytools.TOOL_COMMANDS["cp"]("/bin/cp", source, tmp) == ["/bin/cp", "--", str(source), str(tmp)]
    assert copytools.TOOL_COMMANDS["rsync"]("rsync", source, tmp)[1:] == ["--whole-file", "--", str(source), str(tmp)]
    assert copytools.METHODS == ("cycleio", "cp", "rsync")


def test_cp_stages_into_the_temporary_with_the_sources_checksum(tmp_path):
    require_tool("cp", "coreutils")
    source, dest = tmp_path / "src.nc", tmp_path / "dst" / "src.nc"
    source.write_bytes(os.urandom(100_000))
    dest.parent.mkdir()
    copied = copytools.stage_with_tool(source, dest, StagingOptions(method="cp"), streams=1, fsync=True)
    assert copied.temporary == fsutil.temp_name(dest) and copied.temporary.read_bytes() == source.read_bytes()
    assert not dest.exists() and copied.bytes == 100_000 and copied.checksum == checksum_file(source)


def test_a_failing_or_missing_command_is_named_and_leaves_no_temporary(tmp_path, monkeypatch):
    require_tool("cp", "coreutils")
    dest, folder = tmp_path / "dst.nc", tmp_path / "a-folder"
    folder.mkdir()  # cp without -r refuses a folder
    with pytest.raises(StagingError, match=r"cp .*a-folder -> .*\.dst\.nc\.tmp-\d+ failed: .*cp: .*omitting directory"):
        copytools.stage_with_tool(folder, dest, StagingOptions(method="cp"), streams=1, fsync=False)
    assert list(tmp_path.iterdir()) == [folder]
    (tmp_path / "src.nc").write_bytes(b"x")
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    with pytest.raises(StagingError, match="staging method 'rsync': the rsync command is not installed"):
        copytools.stage_with_tool(tmp_path / "src.nc", dest, StagingOptions(method="rsync"), streams=1, fsync=False)
    assert not fsutil.temp_name(dest).exists()
