"""benchmarks.tools.fio: fio's command lines standing for IOR's patterns, mdtest, and the paired replay."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cycleio.benchmarks.specs import IOPattern, MetadataPattern
from cycleio.benchmarks.tools import fio

OUT = Path("/tmp/o.json")


def pattern(**changes) -> IOPattern:
    base = dict(name="x", api="POSIX", file_per_proc=True, transfer_size_bytes=2**20, block_size_bytes=4 * 2**20,
                segments=2, fsync=True, direct_io=False, reorder="none", stonewall_s=0, random=False)
    return IOPattern(**{**base, **changes})


def value(argv: list[str], option: str) -> str:
    [found] = [word.split("=", 1)[1] for word in argv if word.startswith(f"--{option}=")]
    return found


def test_file_per_process_writes_then_reads_back_each_tasks_own_file(tmp_path):
    argv = fio.io_command("/usr/bin/fio", pattern(), 3, tmp_path, OUT)
    assert argv[0] == "/usr/bin/fio" and value(argv, "ioengine") == "psync" and value(argv, "numjobs") == "3"
    assert value(argv, "size") == str(8 * 2**20) and value(argv, "filename_format") == "cycleio.$jobnum"
    write, read = argv.index("--name=write"), argv.index("--name=read")
    assert argv[write:read] == ["--name=write", "--rw=write", "--invalidate=0", "--end_fsync=1"]
    assert argv[read:] == ["--name=read", "--stonewall", "--rw=read", "--invalidate=0"]
    assert "--direct=1" not in argv and not any(word.startswith("--runtime") for word in argv)


@pytest.mark.parametrize("changes, expected", [
    ({"reorder": "constant"}, True), ({"reorder": "random"}, True), ({"direct_io": True}, True), ({}, False)])
def test_reads_come_from_storage_where_ior_reorders_or_bypasses_the_cache(changes, expected):
    assert fio.reads_from_storage(pattern(**changes)) is expected
    argv = fio.io_command("fio", pattern(**changes), 2, Path("/d"), OUT)
    assert argv[-1] == f"--invalidate={int(expected)}"


def test_random_mmap_with_a_stonewall_and_direct_io(tmp_path):
    argv = fio.io_command("fio", pattern(api="MMAP", random=True, stonewall_s=2.5, direct_io=True, fsync=False), 1,
                          tmp_path, OUT)
    assert value(argv, "ioengine") == "mmap" and "--direct=1" in argv and value(argv, "runtime") == "2500ms"
    assert "--rw=randwrite" in argv and "--rw=randread" in argv and "--end_fsync=1" not in argv
    with pytest.raises(KeyError):
        fio.io_command("fio", pattern(api="HDF5"), 1, tmp_path, OUT)  # fio stands for POSIX and MMAP only


def test_one_task_on_a_shared_file_writes_all_its_segments_and_one_segment_needs_no_zones(tmp_path):
    one = fio.io_command("fio", pattern(file_per_proc=False), 1, tmp_path, OUT)
    assert value(one, "filename") == "shared.dat" and value(one, "size") == str(8 * 2**20)
    single = fio.io_command("fio", pattern(file_per_proc=False, segments=1), 4, tmp_path, OUT)
    assert value(single, "size") == value(single, "offset_increment") == str(4 * 2**20)
    assert not any(word.startswith("--zonemode") for word in single)


def test_a_pattern_bounded_by_time_writes_until_its_time_is_up_each_job_reporting_on_its_own(tmp_path):
    bounded = pattern(stonewall_s=0.3, segments=600)
    argv = fio.io_write_command("fio", bounded, 3, tmp_path, OUT)
    assert value(argv, "runtime") == "300ms" and value(argv, "size") == str(600 * 4 * 2**20)
    assert "--group_reporting" not in argv and "--end_fsync=1" in argv and "--name=read" not in argv
    assert value(argv, "clocksource") == "clock_gettime"


@pytest.mark.integration
@pytest.mark.tool
def test_every_writer_of_a_shared_file_writes_in_a_phase_bounded_by_time(tmp_path):
    """With fio's default invalidate=1 the job that opened the shared file second dropped the file's pages while
    the first wrote, and wrote one block in about half the runs (ext4, 2 jobs, 0.3 s): the phase timed one writer."""
    from conftest import require_tool

    path = require_tool("fio", "the write phase runs fio")
    hard = pattern(file_per_proc=False, transfer_size_bytes=47008, block_size_bytes=47008, segments=20000,
                   stonewall_s=0.3)
    for run in range(4):
        out = tmp_path / f"w{run}.json"
        subprocess.run(fio.io_write_command(path, hard, 2, tmp_path, out), check=True, capture_output=True)
        written = fio.written_per_job(out)
        assert len(written) == 2 and min(written) > max(written) / 4, f"run {run}: the jobs wrote {written} bytes"
        (tmp_path / "shared.dat").unlink()


def test_the_read_phase_reads_what_each_job_wrote_pass_after_pass_until_its_time_is_up(tmp_path):
    mib = 2**20
    fpp = fio.io_read_command("fio", pattern(stonewall_s=0.3, reorder="constant"), tmp_path, OUT,
                              [5 * mib + 100, 3 * mib, 100])
    assert value(fpp, "runtime") == "300ms" and int(value(fpp, "loops")) >= 1000 and value(fpp, "invalidate") == "1"
    assert "--group_reporting" in fpp and not any(word.startswith("--numjobs") for word in fpp)
    jobs = " ".join(fpp[fpp.index("--name=read"):]).split("--name=read")[1:]
    # whole transfers of each job's own file; a job that wrote less than a transfer has nothing to read
    assert [job.split() for job in jobs] == [["--filename=cycleio.0", f"--size={5 * mib}"],
                                             ["--filename=cycleio.1", f"--size={3 * mib}"]]
    shared = fio.io_read_command("fio", pattern(file_per_proc=False, stonewall_s=0.3), tmp_path, OUT,
                                 [9 * mib, 4 * mib + mib])
    jobs = [job.split() for job in " ".join(shared[shared.index("--name=read"):]).split("--name=read")[1:]]
    # its whole blocks of IOR's segments in the shared file: block k of each segment, the other task's skipped
    assert jobs[0][:5] == ["--filename=shared.dat", "--offset=0", f"--size={4 * mib + 4 * mib + 4 * mib}",
                           f"--io_size={8 * mib}", "--zonemode=strided"]
    assert f"--offset={4 * mib}" in jobs[1] and f"--io_size={4 * mib}" in jobs[1] and f"--zoneskip={4 * mib}" in jobs[1]


def test_jobs_that_reported_one_by_one_add_up_as_fios_group_report():
    rows = [{"job": "write", "aggregate": "job", "tasks": 1, "bytes": 300 * 2**20, "seconds": 0.3,
             "ops_per_s": 500.0, "latency_s": 0.002, "bw_MiB_per_s": 1000.0},
            {"job": "write", "aggregate": "job", "tasks": 1, "bytes": 100 * 2**20, "seconds": 0.4,
             "ops_per_s": 125.0, "latency_s": 0.008, "bw_MiB_per_s": 250.0}]
    group = fio.group_jobs(rows)
    assert (group["aggregate"], group["tasks"], group["bytes"], group["seconds"]) == ("group", 2, 400 * 2**20, 0.4)
    assert group["bw_MiB_per_s"] == pytest.approx(1000.0) and group["ops_per_s"] == pytest.approx(200 / 0.4)
    assert group["latency_s"] == pytest.approx((150 * 0.002 + 50 * 0.008) / 200)


def test_metadata_creates_stats_and_removes_every_file_in_turn(tmp_path):
    argv = fio.metadata_command("fio", MetadataPattern(name="m", files_per_task=100, unique_dir=True), 2, tmp_path,
                                OUT)
    assert value(argv, "nrfiles") == "100" and value(argv, "filename_format") == "d$jobnum/f.$filenum"
    names = [word for word in argv if word.startswith("--name=")]
    assert names == ["--name=create", "--name=stat", "--name=remove"] and argv.count("--stonewall") == 2
    shared = fio.metadata_command("fio", MetadataPattern(name="m", unique_dir=False), 2, tmp_path, OUT)
    assert value(shared, "filename_format") == "f.$jobnum.$filenum"


CLASSES = [{"files": 3, "file_bytes": 2**20, "transfer_bytes": 2**16},
           {"files": 2, "file_bytes": 8 * 2**20, "transfer_bytes": 2**20, "cold": True}]


def iolog_lines(replay) -> list[list[str]]:
    lines = replay.iolog.read_text().splitlines()
    assert lines[0] == "fio version 2 iolog"
    return [line.split() for line in lines[1:]]


def test_the_replay_writes_each_size_class_in_turn_fsyncing_each_file_and_keeping_the_pages(tmp_path):
    """One fio job from an iolog, run in the replay's folder: every file added, then each opened, written whole in
    its class's transfers, fsynced and closed, class after class; fio leaves the pages (invalidate=0)."""
    replay = fio.replay_command("fio", CLASSES, tmp_path, tmp_path / "o.json")
    assert replay.cwd == tmp_path and value(replay.argv, "read_iolog") == str(replay.iolog)
    assert value(replay.argv, "invalidate") == "0" and value(replay.argv, "replay_no_stall") == "1"
    assert value(replay.argv, "ioengine") == "psync" and "--allow_file_create=0" not in replay.argv
    lines = iolog_lines(replay)
    names = [f"replay.0.{n}" for n in range(3)] + [f"replay.1.{n}" for n in range(2)]
    assert [line for line in lines if line[1] == "add"] == [[name, "add"] for name in names]
    first = lines[5:5 + 19]  # replay.0.0: open, 16 writes of 64 KiB, sync, close
    assert first[0] == ["replay.0.0", "open"]
    assert first[-2:] == [["replay.0.0", "sync", "0", "0"], ["replay.0.0", "close"]]
    assert first[1:17] == [["replay.0.0", "write", str(offset), str(2**16)] for offset in range(0, 2**20, 2**16)]
    assert [line[0] for line in lines if line[1] == "open"] == names
    reads = iolog_lines(fio.replay_command("fio", CLASSES, tmp_path, tmp_path / "r.json", op="read", loops=2))
    assert [line[0] for line in reads if line[1] == "open"] == names * 2
    assert not any(line[1] in ("sync", "write") for line in reads)


def test_a_replay_reads_the_steps_own_files_whole_relative_to_their_common_folder(tmp_path):
    """Each file read to its last byte, a short last call included; names the iolog cannot hold are refused."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one.nc").write_bytes(b"x" * (2**16 + 10))
    (tmp_path / "b.grb").write_bytes(b"y" * 100)
    classes = [{"paths": [tmp_path / "a" / "one.nc", tmp_path / "b.grb"], "transfer_bytes": 2**15}]
    replay = fio.replay_own_read_command("fio", classes, tmp_path / "o.json")
    assert replay.cwd == tmp_path and "--allow_file_create=0" in replay.argv
    reads = [line for line in iolog_lines(replay) if line[1] == "read"]
    assert reads == [["a/one.nc", "read", "0", str(2**15)], ["a/one.nc", "read", str(2**15), str(2**15)],
                     ["a/one.nc", "read", str(2**16), "10"], ["b.grb", "read", "0", "100"]]
    (tmp_path / "with space").mkdir()
    (tmp_path / "with space" / "c").write_bytes(b"z")
    with pytest.raises(fio.IologNameError, match="with space/c"):
        fio.replay_own_read_command("fio", [{"paths": [tmp_path / "with space" / "c", tmp_path / "b.grb"],
                                             "transfer_bytes": 8}], tmp_path / "o.json")


def test_the_layout_for_a_read_replay_writes_every_class_then_reads_only_the_warm_ones(tmp_path):
    lines = iolog_lines(fio.replay_layout_command("fio", CLASSES, tmp_path, tmp_path / "o.json"))
    writes = [line[0] for line in lines if line[1] == "sync"]
    assert writes == [f"replay.0.{n}" for n in range(3)] + [f"replay.1.{n}" for n in range(2)]
    last_sync = max(i for i, line in enumerate(lines) if line[1] == "sync")
    assert {line[0] for line in lines if line[1] == "read"} == {f"replay.0.{n}" for n in range(3)}  # class 1 is cold
    assert min(i for i, line in enumerate(lines) if line[1] == "read") > last_sync  # after every write


def test_jobs_crowded_out_of_a_write_phase_fill_up_to_the_busiest_before_the_reads(tmp_path):
    mib = 2**20
    # jobs that wrote about as much read alike: a read phase reads each region pass after pass until its time is up
    assert fio.io_fill_command("fio", pattern(stonewall_s=0.3), tmp_path, OUT, [3 * mib, 2 * mib]) is None
    fpp = fio.io_fill_command("fio", pattern(stonewall_s=0.3), tmp_path, OUT, [5 * mib + 100, 3 * mib, 0])
    jobs = [job.split() for job in " ".join(fpp[fpp.index("--name=fill"):]).split("--name=fill")[1:]]
    # each short job from where it stopped to the busiest job's whole transfers, in its own file
    assert jobs == [["--filename=cycleio.1", f"--offset={3 * mib}", f"--size={2 * mib}"],
                    ["--filename=cycleio.2", "--offset=0", f"--size={5 * mib}"]]
    assert value(fpp, "rw") == "write" and "--end_fsync=1" in fpp and not any(w.startswith("--runtime") for w in fpp)
    assert fio.filled(pattern(stonewall_s=0.3), [5 * mib + 100, 3 * mib, 0]) == [5 * mib + 100, 5 * mib, 5 * mib]
    shared = fio.io_fill_command("fio", pattern(file_per_proc=False, stonewall_s=0.3), tmp_path, OUT,
                                 [12 * mib, 4 * mib + mib])
    [job] = [j.split() for j in " ".join(shared[shared.index("--name=fill"):]).split("--name=fill")[1:]]
    # job 1 wrote its first block whole: from its second block of IOR's segments (offset block + 1 x 2 blocks)
    assert job[:5] == ["--filename=shared.dat", f"--offset={4 * mib + 8 * mib}", f"--size={8 * mib + 4 * mib}",
                       f"--io_size={8 * mib}", "--zonemode=strided"]
    # in a shared file the jobs fill to the busiest job's whole blocks: a job with as many has nothing to fill
    blocks = pattern(file_per_proc=False, stonewall_s=0.3)
    assert fio.filled(blocks, [13 * mib, 4 * mib, mib]) == [13 * mib, 12 * mib, 12 * mib]
    argv = fio.io_fill_command("fio", blocks, tmp_path, OUT, [13 * mib, 12 * mib, mib])
    assert argv.count("--name=fill") == 1 and f"--offset={2 * 4 * mib}" in argv


@pytest.mark.tool
def test_the_fill_writes_every_block_a_crowded_out_job_left_in_the_shared_file(tmp_path):
    """Real fio: after a write phase in which job 0 wrote 6 blocks of IOR's layout and jobs 1 and 2 one and none,
    the fill leaves every job's 6 blocks written (no hole reads as zeros), so the read phase reads 6 from each."""
    from conftest import require_tool

    require_tool("fio", "fio stands for IOR where IOR is absent (apt-get install fio)")
    block, n = 4096, 3
    shared = pattern(file_per_proc=False, transfer_size_bytes=block, block_size_bytes=block, segments=6,
                     stonewall_s=0.3)
    with open(tmp_path / "shared.dat", "wb") as handle:  # what the crowded write phase left
        for segment in range(6):
            handle.seek(segment * n * block)
            handle.write(b"\x01" * block)
        handle.seek(1 * block)
        handle.write(b"\x01" * block)
    argv = fio.io_fill_command("fio", shared, tmp_path, tmp_path / "fill.json", [6 * block, block, 0])
    subprocess.run(argv, check=True, capture_output=True)
    data = (tmp_path / "shared.dat").read_bytes()
    assert len(data) == 6 * n * block
    empty = [i for i in range(6 * n) if data[i * block:(i + 1) * block] == bytes(block)]
    assert not empty, f"blocks left unwritten: {empty}"
