"""cli.bench: `cycleio parse` turns IOR, mdtest and fio outputs into tidy CSV rows; unreadable ones named."""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

from cycleio.benchmarks.benchparse import ROW_KEYS, parse_any
from cycleio.cli import main

DATA = Path(__file__).parent / "data"
GOOD = sorted(
    [p for p in (DATA / "ior").glob("*.json") if not p.name.startswith("error-")]
    + sorted((DATA / "ior").glob("*-text.stdout.txt"))
    + sorted((DATA / "ior").glob("mdtest-*.stdout.txt"))
    + sorted((DATA / "fio").glob("*.json"))
)


def parse(capsys, *args: str) -> tuple[int, list[dict], str]:
    code = main(["parse", *args])
    out, err = capsys.readouterr()
    return code, list(csv.DictReader(io.StringIO(out))), err


def test_every_readable_sample_becomes_rows(capsys):
    code, rows, err = parse(capsys, *map(str, GOOD))
    assert code == 0, err
    assert len(rows) == sum(len(parse_any(p)) for p in GOOD)
    assert list(rows[0]) == list(ROW_KEYS)
    assert {r["tool"] for r in rows} == {"ior", "mdtest", "fio"}
    assert {r["source"] for r in rows} == {p.name for p in GOOD}
    ior_write_max = next(r for r in rows if r["source"] == "posix-fpp-random4k-1rank-disk.json"
                         and r["operation"] == "write" and r["aggregate"] == "max")
    assert float(ior_write_max["bw_MiB_per_s"]) == 587.5079


def test_out_file_is_a_tidy_table(tmp_path, capsys):
    out = tmp_path / "rows.csv"
    code, rows, _ = parse(capsys, str(DATA / "fio" / "fio-seqwrite-1m-direct-2job-disk.json"), "--out", str(out))
    assert code == 0 and rows == []  # nothing on stdout
    table = pd.read_csv(out)
    assert list(table.columns) == list(ROW_KEYS)
    assert table["operation"].tolist() == ["write"] and table["tasks"].tolist() == [2]


def test_unreadable_outputs_are_named_with_the_reason_and_exit_non_zero(tmp_path, capsys):
    code, rows, err = parse(capsys, str(DATA / "ior"), str(DATA / "fio" / "dd-write-1m-x1024-fdatasync-disk.stdout.txt"))
    assert code == 1
    assert 'error-unwritable-dir-1rank.json' in err and 'ERROR: open64("/proc/nonexistent/testfile"' in err
    assert "error-invalid-blocksize-1rank.json" in err and "block size must be a multiple of transfer size" in err
    assert "dd-write-1m-x1024-fdatasync-disk.stdout.txt: dd output (not supported)" in err
    assert "3 of" in err and "outputs could not be read" in err
    # the readable outputs of the folder are still parsed (stdout beside a JSON is not parsed twice)
    sources = {r["source"] for r in rows}
    assert "posix-ssf-1rank-shm.json" in sources and "mdtest-1rank-disk.stdout.txt" in sources
    assert "posix-ssf-1rank-shm.stdout.txt" not in sources and "mdtest-1rank-disk.mdtest.csv" not in sources


def test_missing_file_is_reported(tmp_path, capsys):
    code, _, err = parse(capsys, str(tmp_path / "nope.json"))
    assert code == 1 and "nope.json" in err and "cannot read file" in err


def test_command_line_exit_code(tmp_path):
    bad = tmp_path / "truncated.json"
    bad.write_text('{"fio version" : "fio-3.33", "jobs" : [')
    good = tmp_path / "good.json"
    shutil.copy(DATA / "fio" / "fio-filestat-2000-2job-disk.json", good)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "scripts")}
    result = subprocess.run([sys.executable, "-m", "cycleio", "parse", str(good), str(bad)], capture_output=True,
                            text=True, env=env)
    assert result.returncode == 1
    assert f"cannot read {bad}" in result.stderr and "truncated JSON" in result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["operation"] for r in rows] == ["stat"]


