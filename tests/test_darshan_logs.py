"""Reading Darshan logs (the pydarshan wheel's own example logs) and `cycleio darshan inspect`; the bad logs refused."""

from __future__ import annotations

import copy
from pathlib import Path

import darshan
import pandas as pd
import pytest

from cycleio.cli import main
from cycleio.darshan.logs import (DarshanLogError, check_file_records, file_table, rank_times, read_log, sha256_of,
                                  slowest_rank)

LOGS = Path(darshan.__file__).parent / "examples" / "example_logs"
MACSIO = next(LOGS.glob("shane_macsio_*.darshan"))


def log_path(name: str) -> Path:
    path = MACSIO if name == "macsio" else LOGS / name
    assert path.is_file(), f"the darshan wheel no longer ships {path.name}"
    return path


@pytest.mark.parametrize("name, nprocs, modules", [
    ("ior_hdf5_example.darshan", 4, {"POSIX", "MPI-IO", "STDIO", "DXT_POSIX", "DXT_MPIIO"}),
    ("dxt.darshan", 1, {"POSIX", "STDIO", "DXT_POSIX"}),
    ("example.darshan", 2048, {"POSIX", "MPI-IO", "LUSTRE", "STDIO"}),
    ("sample-badost.darshan", 2048, {"POSIX", "LUSTRE", "STDIO"}),
    ("noposix.darshan", 512, {"LUSTRE", "STDIO"}),
    ("macsio", 16, {"POSIX", "MPI-IO", "H5F", "H5D"}),
])
def test_the_wheels_logs_read(name, nprocs, modules):
    job = read_log(log_path(name))
    assert job.nprocs == nprocs
    assert modules <= set(job.modules)
    assert len(job.sha256) == 64


def test_file_table_adds_up_to_the_counters():
    job = read_log(log_path("ior_hdf5_example.darshan"))
    table = file_table(job)
    posix = table[table["module"] == "POSIX"].set_index("direction")
    assert posix.loc["read", "bytes"] == 4202504 and posix.loc["read", "ops"] == 36
    assert posix.loc["write", "bytes"] == 4195800 and posix.loc["write", "ops"] == 23
    assert bool(posix.loc["write", "shared"]) and posix.loc["write", "dxt"] == "yes"
    bins = [c for c in table.columns if c.startswith("size_")]
    assert (table[bins].sum(axis=1) == table["ops"]).all()  # the histogram holds every call
    assert "262144x32" in posix.loc["write", "common_sizes_bytes"]


def test_rank_times_deal_a_shared_files_time_over_the_ranks():
    job = read_log(log_path("example.darshan"))  # one shared file, 2048 ranks
    times = rank_times(job)
    assert len(times) == 2048
    total = job.counters["POSIX"]["POSIX_F_WRITE_TIME"].sum()
    assert times["write_s"].sum() == pytest.approx(total)
    slow = slowest_rank(times)
    assert slow["write_s"] == pytest.approx(total / 2048)


def test_inspect_prints_the_job_and_writes_one_row_per_file_and_direction(tmp_path, capsys):
    out = tmp_path / "inspect.csv"
    log = log_path("dxt.darshan")
    before = sha256_of(log)
    assert main(["darshan", "inspect", str(log), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "1 ranks" not in text and "1469 s run" in text
    assert "DXT trace: present for 41 files" in text  # and 128 named pipes set apart
    assert "Set apart as not storage (not replayed, not in the job's I/O time): 128 named pipes" in text
    assert "slowest rank 0" in text and "mean" in text
    table = pd.read_csv(out)
    assert not table.duplicated(["module", "file", "direction"]).any()
    wanted = {"module", "file", "direction", "bytes", "ops", "seconds", "shared", "dxt", "size_0_100"}
    assert wanted <= set(table.columns)
    assert (tmp_path / "inspect.csv.meta.json").is_file()
    assert sha256_of(log) == before  # the log is only read (its path is not the --log of the command)


# ------------------------------------------------------------------ refusals

def test_not_a_darshan_log(tmp_path):
    text = tmp_path / "notes.darshan"
    text.write_text("hello\n")
    with pytest.raises(DarshanLogError, match=r"notes.darshan: not a Darshan log \(expected a Darshan header"):
        read_log(text)
    with pytest.raises(DarshanLogError, match="no such file"):
        read_log(tmp_path / "missing.darshan")


def test_a_log_cut_short_cannot_be_parsed(tmp_path):
    cut = tmp_path / "cut.darshan"
    cut.write_bytes(log_path("ior_hdf5_example.darshan").read_bytes()[:3000])
    with pytest.raises(DarshanLogError, match=r"cut.darshan: cut short: its header announces module slot 9 \(to byte "
                                              r"3,114\), module slot 10 \(to byte 3,967\) but the file ends at byte "
                                              r"3,000"):
        read_log(cut)
    header = tmp_path / "header.darshan"
    header.write_bytes(log_path("ior_hdf5_example.darshan").read_bytes()[:20])
    with pytest.raises(DarshanLogError, match=r"header.darshan: cut short: 20 bytes, fewer than its header's 360"):
        read_log(header)


def test_a_log_without_file_records_is_refused():
    job = read_log(log_path("example.darshan"))
    bare = copy.copy(job)
    # only the standard streams left: what a heatmap- or APMPI-only log (or an empty one) gives the replay
    bare.counters = {"STDIO": job.counters["STDIO"][job.counters["STDIO"]["file"].str.startswith("<")]}
    with pytest.raises(DarshanLogError, match="no POSIX, MPI-IO or STDIO records of files"):
        check_file_records(bare)
    check_file_records(read_log(log_path("noposix.darshan")))  # STDIO records of real files: replayable


def test_the_command_says_what_is_wrong_in_one_line(tmp_path, capsys):
    text = tmp_path / "notes.darshan"
    text.write_text("hello\n")
    assert main(["darshan", "inspect", str(text)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cycleio darshan: error:" in err[0] and "not a Darshan log" in err[0]
