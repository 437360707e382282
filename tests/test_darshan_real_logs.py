"""Logs a real darshan-runtime wrote (3.4.7 and 3.5.0, tests/data/darshan/README.md says how): read as darshan-parser
reads them, what is not storage set apart, a log cut short still refused; and a job's I/O time the union of its
calls' intervals (the wheel's dxt.darshan, whose named pipes were held open for most of its run)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import darshan
import pandas as pd
import pytest

from conftest import REPO, require_tool
from cycleio.cli import main
from cycleio.darshan.logs import (DIRECTIONS, FILE_MODULES, DarshanLogError, bytes_of, file_table, not_storage,
                                  ops_of, rank_times, read_log, set_apart, slowest_rank)
from cycleio.darshan.plan import make_plan
from cycleio.darshan.replay import Target, replay
from cycleio.darshan.report import fidelity_rows, inspect_text

FIXTURES = REPO / "tests" / "data" / "darshan"
WHEEL_LOGS = Path(darshan.__file__).parent / "examples" / "example_logs"

# darshan-parser's sums over every record of each module (darshan-util of the runtime's source):
# (module, direction) -> (bytes, calls); then what is not storage, by name.
PARSER = {
    "tinyio-3.5.0.darshan": {("POSIX", "read"): (17812, 22), ("POSIX", "write"): (16384, 4),
                             ("STDIO", "write"): (1790, 100)},
    "tinyio-3.4.7.darshan": {("POSIX", "read"): (17813, 22), ("POSIX", "write"): (16384, 4),
                             ("STDIO", "write"): (1790, 100)},
    "tinyio-mpi-3.5.0.darshan": {("POSIX", "read"): (35621, 42), ("POSIX", "write"): (36884, 15),
                                 ("MPI-IO", "write"): (4096, 2), ("STDIO", "write"): (3580, 200)},
    "tinyio-mpi-3.4.7.darshan": {("POSIX", "read"): (35623, 42), ("POSIX", "write"): (36868, 14),
                                 ("MPI-IO", "write"): (4096, 2), ("STDIO", "write"): (3580, 200)},
    "python-c-3.5.0.darshan": {("POSIX", "read"): (6144, 2), ("POSIX", "write"): (6149, 4)},
    "python-name-3.5.0.darshan": {("POSIX", "read"): (3000, 2), ("POSIX", "write"): (3000, 1)},
}
NOT_STORAGE = {
    "tinyio-3.5.0.darshan": {"/proc/self/status", "/tmp/cycleio-fixture/run/pipe_fifo"},
    "tinyio-3.4.7.darshan": {"/proc/self/status", "/tmp/cycleio-fixture/run/pipe_fifo"},
    "tinyio-mpi-3.5.0.darshan": {"/proc/self/status", "/tmp/cycleio-fixture/run-mpi/pipe_fifo"},
    "tinyio-mpi-3.4.7.darshan": {"/proc/self/status", "/tmp/cycleio-fixture/run-mpi/pipe_fifo"},
    "python-c-3.5.0.darshan": {"<STDERR>", "<STDIN>", "<STDOUT>"},
    "python-name-3.5.0.darshan": {"<STDERR>", "<STDIN>", "<STDOUT>"},
}
NPROCS = {"tinyio-3.5.0.darshan": 1, "tinyio-3.4.7.darshan": 1, "tinyio-mpi-3.5.0.darshan": 2,
          "tinyio-mpi-3.4.7.darshan": 2, "python-c-3.5.0.darshan": 1, "python-name-3.5.0.darshan": 1}


def module_sums(job) -> dict[tuple[str, str], tuple[int, int]]:
    """(module, direction) -> (bytes, calls) over every record the log has, as darshan-parser sums them."""
    out = {}
    for module, table in job.counters.items():
        for direction in DIRECTIONS:
            nbytes, calls = int(bytes_of(table, module, direction).sum()), int(ops_of(table, module, direction).sum())
            if nbytes or calls:
                out[(module, direction)] = (nbytes, calls)
    return out


@pytest.mark.parametrize("name", sorted(PARSER))
def test_a_real_runtimes_log_is_read_as_darshan_parser_reads_it(name):
    job = read_log(FIXTURES / name)
    assert job.nprocs == NPROCS[name]
    assert "HEATMAP" in job.modules and job.modules["HEATMAP"]["records"] > 0
    assert not any("HEATMAP" in warning for warning in job.warnings)
    assert module_sums(job) == PARSER[name]
    apart = set_apart(job)
    assert set(apart["file"]) == NOT_STORAGE[name]
    # the files on storage: every byte and call darshan-parser counted, less what is set apart
    table = file_table(job)
    for (module, direction), (nbytes, calls) in PARSER[name].items():
        mine = apart[apart["module"] == module]
        kept = table[(table["module"] == module) & (table["direction"] == direction)]
        moved = mine["bytes_read" if direction == "read" else "bytes_written"].sum()
        assert kept["bytes"].sum() == nbytes - moved
    assert not set(table["file"]) & NOT_STORAGE[name]


def test_a_mount_table_entry_that_is_not_text_costs_a_warning_not_the_log():
    job = read_log(FIXTURES / "python-c-3.5.0.darshan")
    assert job.exe == "/usr/bin/python3 -c import sys"
    assert [w for w in job.warnings if w.startswith("mount table entry 2 is not text")], job.warnings
    table = file_table(job)
    assert set(table["file"]) == {"/tmp/cycleio-fixture/run-py/field.bin"}
    assert table.set_index("direction")["bytes"].to_dict() == {"read": 6144, "write": 6144}


def test_a_file_name_that_is_not_utf8_is_read_with_escapes_and_replayed():
    job = read_log(FIXTURES / "python-name-3.5.0.darshan")  # a file named b"caf\xe9.bin" (Latin-1)
    name = "/tmp/cycleio-fixture/run-name/caf\\xe9.bin"
    assert job.warnings == [f"1 file name is not UTF-8, shown with escapes: {name!r}"]
    plan = make_plan(job)
    assert [(f.name, f.logged_bytes) for f in plan.files] == [(name, {"read": 3000, "write": 3000})]
    assert plan.files[0].path.isascii()


def test_a_module_pydarshan_cannot_decode_costs_a_warning_and_its_counters_are_read():
    # darshan 3.5.0's DXT_POSIX format 2: the wheel's darshan-util reads format 1 only
    job = read_log(FIXTURES / "tinyio-3.5.0.darshan")
    assert [w for w in job.warnings if w.startswith("module DXT_POSIX:") and "version number (got 2)" in w], job.warnings
    assert not job.dxt.get("DXT_POSIX")
    plan = make_plan(job)
    assert {f.source for f in plan.files} == {"counters"}
    assert any(note.startswith("not read: module DXT_POSIX") for note in plan.notes)
    # 3.4.7's trace (format 1) is read, and replayed as traced
    traced = read_log(FIXTURES / "tinyio-3.4.7.darshan")
    assert not traced.warnings
    plan = make_plan(traced)
    assert {f.name: f.source for f in plan.files}["/tmp/cycleio-fixture/run/data.0.bin"] == "dxt"


@pytest.mark.parametrize("name", ["tinyio-mpi-3.4.7.darshan", "tinyio-mpi-3.5.0.darshan"])
def test_what_is_not_storage_is_not_replayed_and_the_plan_says_so(name):
    job = read_log(FIXTURES / name)
    plan = make_plan(job, nranks=2)
    names = {f.name for f in plan.files}
    assert not names & NOT_STORAGE[name]
    assert "/tmp/cycleio-fixture/run-mpi/shared.mpiio" in names
    assert sum(1 for n in names if n.startswith("/dev/shm/")) == 4  # memory-backed files are storage
    apart = [note for note in plan.notes if note.startswith("set apart as not storage")]
    assert len(apart) == 1 and "/proc/self/status" in apart[0] and "pipe_fifo" in apart[0]
    written = sum(f.logged_bytes["write"] for f in plan.files)
    assert written == 36868 + 2 * 1790  # POSIX on storage (the shared file's POSIX calls, not MPI-IO's) and STDIO


@pytest.mark.parametrize("name", sorted(PARSER))
def test_a_real_log_cut_short_is_refused_by_name(tmp_path, name):
    whole = (FIXTURES / name).read_bytes()
    for keep in (len(whole) - 1, len(whole) - 100, 1500, 1000, 16):
        cut = tmp_path / f"cut-{keep}.darshan"
        cut.write_bytes(whole[:keep])
        with pytest.raises(DarshanLogError, match=rf"cut-{keep}.darshan: (cut short|not a Darshan log)"):
            read_log(cut)
    with pytest.raises(DarshanLogError, match=r"cut-3100.darshan: cut short: its header announces .*HEATMAP \(to byte "
                                              r"3,196\) but the file ends at byte 3,100"):
        cut = tmp_path / "cut-3100.darshan"
        cut.write_bytes((FIXTURES / "tinyio-mpi-3.5.0.darshan").read_bytes()[:3100])
        read_log(cut)


def test_inspect_names_what_was_set_apart_and_what_could_not_be_read(capsys):
    assert main(["darshan", "inspect", str(FIXTURES / "python-c-3.5.0.darshan")]) == 0
    text = capsys.readouterr().out
    assert "Set apart as not storage (not replayed, not in the job's I/O time): 3 streams" in text
    assert "not read: mount table entry 2 is not text" in text


@pytest.mark.parametrize("name, kind", [
    ("<STDIN>", "stream"), ("pipe:[123456]", "pipe"), ("socket:[42]", "socket"), ("anon_inode:[eventfd]",
                                                                                      "anonymous inode"),
    ("/dev/null", "device"), ("/dev/pts/0", "device"), ("/proc/self/status", "/proc or /sys"),
    ("/sys/fs/cgroup/memory.max", "/proc or /sys"), ("/home/u/tmp/COMPSsWorker/x/localhost/pipe_-1638724884",
                                                     "named pipe"),
    ("/scratch/run/pipe_fifo", "named pipe"), ("/scratch/run/job.fifo", "named pipe"),
    ("/dev/shm/run/gdas.t00z.atmf006.nc", None), ("/lustre/run/pipeline.nc", None), ("/lustre/run/pipes/a.nc", None),
    ("/scratch/procedure/sys.log", None),
])
def test_what_is_not_storage_by_name(name, kind):
    assert not_storage(name) == kind


# ------------------------------------------------------------------ a job's I/O time

def test_a_jobs_io_time_is_the_union_of_its_intervals_not_its_pipes_held_open():
    job = read_log(WHEEL_LOGS / "dxt.darshan")  # 1 rank, 1,469 s; 128 COMPSs named pipes held open ~1,462 s each
    apart = set_apart(job)
    assert (apart["kind"] == "named pipe").sum() == 128 and apart["meta_s"].sum() > 11000
    slow = slowest_rank(rank_times(job))
    assert slow["io_s"] <= job.run_time_s
    assert slow["io_s"] == pytest.approx(slow["read_s"] + slow["write_s"] + slow["meta_s"])  # one thread: no overlap
    assert slow["io_s"] < 1.0 and slow["meta_s"] < 0.2
    assert "DXT trace: present for 41 files" in inspect_text(job)


def test_overlapping_calls_count_once():
    job = read_log(FIXTURES / "tinyio-3.4.7.darshan")
    table = job.counters["POSIX"].copy()
    storage = table["file"] == "/tmp/cycleio-fixture/run/data.0.bin"
    row = table[storage].iloc[0].copy()
    # two copies of the record's reads, as two threads reading at once over the same 2 s: 2 x 1.5 s inside 2 s
    for column in row.index:
        if column.endswith("_TIMESTAMP"):
            row[column] = 1.0 if "_START_" in column else 3.0
    row["POSIX_F_READ_TIME"], row["POSIX_F_WRITE_TIME"], row["POSIX_F_META_TIME"] = 1.5, 0.0, 0.0
    twin = row.copy()
    twin["file"], twin["id"] = "/tmp/cycleio-fixture/run/data.twin.bin", 1
    job.counters = {**job.counters, "POSIX": pd.concat([table[~storage], pd.DataFrame([row, twin])],
                                                       ignore_index=True)}
    job.run_time_s = 10.0
    slow = slowest_rank(rank_times(job))
    assert slow["read_s"] == pytest.approx(2.0)
    assert slow["io_s"] <= 10.0


def test_a_shared_records_time_is_dealt_over_the_ranks_within_its_window():
    job = read_log(WHEEL_LOGS / "example.darshan")  # one shared file, 2048 ranks
    times = rank_times(job)
    assert len(times) == 2048 and (times["io_s"] <= job.run_time_s).all()
    total = job.counters["POSIX"]["POSIX_F_WRITE_TIME"].sum()
    assert times["write_s"].sum() == pytest.approx(total)


# ------------------------------------------------------------------ against a live darshan-parser

def parser_bytes(parser: str, log: Path) -> dict[tuple[str, str, str], int]:
    """(module, file, counter) -> bytes summed over ranks, from darshan-parser's text (POSIX, MPI-IO and STDIO)."""
    # a module marked partial (Darshan ran out of records) is printed only with --show-incomplete; names that are
    # not UTF-8 decoded as the reader does (reader.py): \xNN escapes
    out = subprocess.run([parser, "--show-incomplete", str(log)], capture_output=True, check=True)
    out = out.stdout.decode(errors="backslashreplace")
    sums: dict[tuple[str, str, str], int] = {}
    for line in out.splitlines():
        fields = line.split("\t")
        if line.startswith("#") or len(fields) < 6 or fields[0] not in FILE_MODULES \
                or not re.search(r"_BYTES_(READ|WRITTEN)$", fields[3]):
            continue
        key = (fields[0], fields[5], fields[3])
        sums[key] = sums.get(key, 0) + int(fields[4])
    return sums


@pytest.mark.tool
@pytest.mark.darshan
def test_every_file_of_every_log_as_the_live_darshan_parser_counts_it(tmp_path):
    parser = require_tool("darshan-parser", "darshan-util is in no package registry: build it from "
                                            "github.com/darshan-hpc/darshan and put darshan-parser on PATH")
    logs = sorted(FIXTURES.glob("*.darshan")) + [WHEEL_LOGS / "dxt.darshan", WHEEL_LOGS / "ior_hdf5_example.darshan"]
    runtime = os.environ.get("CYCLEIO_LIBDARSHAN")  # a darshan-runtime built without MPI: one more log, made now
    if runtime:
        env = {**os.environ, "DARSHAN_ENABLE_NONMPI": "1", "LD_PRELOAD": runtime, "DARSHAN_LOGPATH": str(tmp_path)}
        script = ("import sys\nwith open(sys.argv[1], 'wb') as out:\n    out.write(bytes(4096))\n"
                  "open(sys.argv[1]).read()")
        subprocess.run([sys.executable, "-c", script, str(tmp_path / "made.bin")], env=env, check=True)
        logs += sorted(tmp_path.glob("*.darshan"))
    for log in logs:
        job = read_log(log)
        theirs = parser_bytes(parser, log)
        mine = {}
        for module in FILE_MODULES:
            table = job.counters.get(module)
            if table is None:
                continue
            for direction, counter in (("read", "BYTES_READ"), ("write", "BYTES_WRITTEN")):
                sums = bytes_of(table, module, direction).groupby(table["file"]).sum()
                prefix = {"MPI-IO": "MPIIO"}.get(module, module)
                mine.update({(module, str(file), f"{prefix}_{counter}"): int(v) for file, v in sums.items()})
        assert mine == theirs, log.name


# ------------------------------------------------------------------ replayed

@pytest.fixture
def mpiexec():
    return require_tool("mpiexec", "the mpich wheel (pip install mpich) provides it")


@pytest.mark.tool
@pytest.mark.parametrize("name, ranks", [("tinyio-mpi-3.4.7.darshan", 2), ("tinyio-mpi-3.5.0.darshan", 2),
                                         ("python-c-3.5.0.darshan", 1), ("tinyio-3.5.0.darshan", 1),
                                         ("tinyio-3.4.7.darshan", 1), ("python-name-3.5.0.darshan", 1)])
def test_a_real_runtimes_log_is_replayed_byte_for_byte(mpiexec, tmp_path, name, ranks):
    job, plan, runs = replay(FIXTURES / name, [Target("disk", tmp_path / "d")], nranks=ranks, oversubscribe=True)
    table = fidelity_rows(plan, runs[0])
    files = table[table["file"] != "TOTAL"]
    assert (files["replayed_bytes"] == files["logged_bytes"]).all()
    assert (files["replayed_ops"] == files["logged_ops"]).all()
    for _, total in table[table["file"] == "TOTAL"].iterrows():
        assert total["kernel_bytes"] == total["replayed_bytes"], total.to_dict()
    assert not set(files["file"]) & NOT_STORAGE[name]
    stored = {d: sum(v[0] for (m, dd), v in PARSER[name].items() if dd == d and m != "MPI-IO")
              - sum(set_apart(job)[f"bytes_{'read' if d == 'read' else 'written'}"]) for d in DIRECTIONS}
    assert {d: int(files[files["direction"] == d]["replayed_bytes"].sum()) for d in DIRECTIONS} == stored
