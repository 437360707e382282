"""fsutil: landing a file under its final name, temporaries, and removing a tree."""

from __future__ import annotations

import errno

import pytest

from cycleio import fsutil


def test_removing_a_scratch_tree_counts_its_files(tmp_path):
    (tmp_path / "scratch" / "a" / "b").mkdir(parents=True)
    for name in ("x", "a/y", "a/b/z"):
        (tmp_path / "scratch" / name).write_bytes(b"1")
    assert fsutil.remove_tree(tmp_path / "scratch") == 3 and not (tmp_path / "scratch").exists()
    assert fsutil.remove_tree(tmp_path / "scratch") == 0  # already gone


def test_a_landed_file_has_its_final_name_only_after_the_block_and_its_temporary_is_temp_names(tmp_path):
    final = tmp_path / "sub" / "out.nc"
    timing: dict = {}
    with fsutil.landing(final, timing) as tmp:
        assert tmp == fsutil.temp_name(final) and fsutil.is_temporary(tmp.name) and tmp.parent.is_dir()
        tmp.write_bytes(b"data")
        assert not final.exists()
    assert final.read_bytes() == b"data" and not tmp.exists() and timing["rename_s"] >= 0
    assert not fsutil.is_temporary(final.name) and not fsutil.is_temporary(".out.nc.tmp-") \
        and not fsutil.is_temporary("out.nc.tmp-12")


def test_a_failed_landing_leaves_neither_the_final_file_nor_its_temporary(tmp_path):
    final = tmp_path / "out.nc"
    final.write_bytes(b"old")
    with pytest.raises(ValueError, match="writer failed"):
        with fsutil.landing(final) as tmp:
            tmp.write_bytes(b"half")
            raise ValueError("writer failed")
    assert final.read_bytes() == b"old" and list(tmp_path.iterdir()) == [final]


def test_an_error_that_hid_its_errno_in_the_text_is_named_with_the_file(tmp_path):
    """HDF5 puts errno in its message and names no file: the landing's error names both."""
    with pytest.raises(OSError) as err:
        with fsutil.landing(tmp_path / "full.nc") as tmp:
            tmp.write_bytes(b"x")
            raise OSError("H5Fclose failed, errno = 28, error message = 'No space left on device'")
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(tmp_path / "full.nc")
    assert list(tmp_path.iterdir()) == []
    named = fsutil.naming(OSError("no errno here"), tmp_path / "f")
    assert named.errno is None and str(named) == f"no errno here (writing {tmp_path / 'f'})"


def test_json_lands_sorted_and_indented(tmp_path):
    fsutil.write_json_atomic(tmp_path / "m.json", {"b": 1, "a": [2]})
    assert (tmp_path / "m.json").read_text() == '{\n  "a": [\n    2\n  ],\n  "b": 1\n}\n'


def test_a_table_lands_as_csv_or_as_parquet_by_its_suffix_without_its_index(tmp_path):
    import pandas as pd

    frame = pd.DataFrame({"step": ["fcst", "post"], "seconds": [1.5, 0.25]}, index=[7, 9])
    fsutil.write_table(frame, tmp_path / "t.csv")
    fsutil.write_table(frame, tmp_path / "t.parquet")
    assert (tmp_path / "t.csv").read_text() == "step,seconds\nfcst,1.5\npost,0.25\n"
    assert pd.read_parquet(tmp_path / "t.parquet").equals(frame.reset_index(drop=True))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv", "t.parquet"]
