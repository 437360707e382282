"""fsutil: landing a file under its final name, temporaries, and removing a tree."""

from __future__ import annotations

from cycleio import fsutil


def test_removing_a_scratch_tree_counts_its_files(tmp_path):
    (tmp_path / "scratch" / "a" / "b").mkdir(parents=True)
    for name in ("x", "a/y", "a/b/z"):
        (tmp_path / "scratch" / name).write_bytes(b"1")
    assert fsutil.remove_tree(tmp_path / "scratch") == 3 and not (tmp_path / "scratch").exists()
    assert fsutil.remove_tree(tmp_path / "scratch") == 0  # already gone
