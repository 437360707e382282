"""Benchmarks on the tiers: the plan from config, the commands, and real fio runs on two tiers."""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from conftest import REPO, assert_axes_carry_data, assert_png_drawn, point_settings, require_tool, with_changes
from cycleio.benchmarks import common, pairedspecs, tools
from cycleio.benchmarks.rows import MiB
from cycleio.benchmarks.specs import ReplaySpec
from cycleio.benchmarks.threshold import TimedThreshold
from cycleio.benchmarks import tierbench as tb
from cycleio.benchmarks.tools import fio, ior, mdtest
from cycleio.cli import main
from cycleio.config.settings import ConfigError, validate_config
from cycleio.config.tierspec import Tier
from cycleio.storage.tiers import OWNER_FILE, filesystem_type

DATA = Path(__file__).parent / "data"
MIB = 2**20


@pytest.fixture
def shm_dir():
    path = Path("/dev/shm") / f"cycleio-test-bench-{os.getpid()}"
    yield path
    shutil.rmtree(path, ignore_errors=True)


# ------------------------------------------------------------------------- config and plan


def test_ior_size_spelling():
    assert [ior.spell_size(n) for n in (MIB, 256 * MIB, 4096, 47008, 2**30)] == ["1m", "256m", "4k", "47008", "1g"]


def test_default_plan_covers_every_study_tier_pattern_and_task_count(default_config):
    plan = tb.BenchmarkPlan.from_config(validate_config(default_config))
    assert list(plan.tiers) == ["lustre", "node_local", "shm"]
    assert len(plan.point_list("io")) == 3 * 2 * 3  # tiers x (easy, hard) x tasks 1, 2, 4: three for the fits
    # the metadata and field-I/O benchmarks: config/studies/benchmarks.yaml, at 1, 2 and 4 tasks and at 2
    assert not plan.point_list("metadata") and not plan.point_list("fieldio")
    import yaml
    from snakemake.utils import update_config

    update_config(default_config, yaml.safe_load((REPO / "config" / "studies" / "benchmarks.yaml").read_text()))
    tiers = tb.BenchmarkPlan.from_config(validate_config(default_config))
    assert len(tiers.point_list("metadata")) == 3 * 2 * 3 and sorted({t for _, _, t in tiers.point_list("fieldio")}) == [2]
    easy = plan.settings("io", "shm", "easy", 2)
    # bounded by 0.3 s, with the bytes a task moving 4096 MiB/s would move in it behind the bound: 20 blocks of 64 MiB
    assert easy.io_pattern() == tb.IOPattern(name="easy", transfer_size_bytes=2 * MIB, block_size_bytes=64 * MIB,
                                             segments=20, stonewall_s=0.3)
    hard = plan.settings("io", "lustre", "hard", 1).io_pattern()
    assert (hard.file_per_proc, hard.transfer_size_bytes, hard.block_size_bytes) == (False, 47008, 47008)
    assert hard.segments == math.ceil(0.3 * 4096 * MIB / 47008)
    again = tb.PointSettings.from_json(plan.point_json("io", "shm", "easy", "2"))
    assert again == easy
    files = plan.point_files(lambda *parts: "/".join(parts))
    assert "bench/shm/io/easy.n2.csv" in files and not any("replay" in f for f in files)  # the replay runs in the jobs
    assert "bench/node_local/fieldio/n2.csv" in tiers.point_files(lambda *parts: "/".join(parts))


def test_custom_pattern_merges_with_schema_defaults(default_config):
    config = with_changes(default_config, benchmarks__io_patterns=["mine"],
                     benchmarks__patterns={"mine": {"transfer_size": "4k", "block_size": "1m", "tasks": [3],
                                                    "repetitions": 5, "direct_io": True, "stonewall_s": 2}},
                     benchmarks__tiers=["shm"])
    plan = tb.BenchmarkPlan.from_config(validate_config(config))
    assert plan.point_list("io") == [("shm", "mine", 3)]
    point = plan.settings("io", "shm", "mine", 3)
    assert point.repetitions == 5
    # its 2 s bound gets the bytes behind it (2 s at benchmarks.stonewall_max_MiB_per_s_per_task), in its 1 MiB blocks
    assert point.io_pattern() == tb.IOPattern(name="mine", transfer_size_bytes=4096, block_size_bytes=MIB,
                                              direct_io=True, stonewall_s=2.0, segments=2 * 4096)
    bytes_bound = with_changes(config, benchmarks__patterns={"mine": {"transfer_size": "1m", "block_size": "1m",
                                                                      "segments": 3, "tasks": [3]}})
    mine = tb.BenchmarkPlan.from_config(validate_config(bytes_bound)).settings("io", "shm", "mine", 3).io_pattern()
    assert (mine.stonewall_s, mine.segments) == (0.0, 3)  # a pattern without a time bound keeps its bytes


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"benchmarks__io_patterns": ["easy", "hrad"]},
         r"config key 'benchmarks.io_patterns\[1\]': 'hrad' is not a pattern in benchmarks.patterns \(did you mean 'hard'\?\)"),
        ({"benchmarks__tiers": ["shm", "nvme"]},
         r"config key 'benchmarks.tiers\[1\]': 'nvme' is not a tier; expected one of: lustre, node_local, shm"),
        ({"benchmarks__patterns__easy__block_size": 1000},
         r"config key 'benchmarks.patterns.easy.block_size': 1000 bytes is not a multiple of transfer_size \(2097152 bytes\)"),
        ({"benchmarks__patterns__easy__api": "MPIIO", "benchmarks__patterns__easy__direct_io": True},
         r"config key 'benchmarks.patterns.easy.direct_io': direct I/O is an IOR POSIX option"),
        ({"benchmarks__tool": "fio", "benchmarks__patterns__hard__api": "HDF5"},
         r"config key 'benchmarks.patterns.hard.api': HDF5 needs IOR, but benchmarks.tool is fio"),
        ({"benchmarks__fieldio__tasks": [1, 2], "benchmarks__fieldio__enabled": True},
         r"config key 'benchmarks.fieldio.tasks\[0\]': 1 task cannot run access pattern 2B"),
        ({"benchmarks__metadata_patterns": ["easy", "nope"]},
         r"config key 'benchmarks.metadata_patterns\[1\]': 'nope' is not a pattern in benchmarks.metadata"),
        ({"launcher": "srun -n {tasks}"}, r"config key 'launcher': 'srun -n \{tasks\}' is not a valid template"),
    ],
)
def test_bad_benchmark_config_names_the_key(default_config, changes, message):
    with pytest.raises(ConfigError, match=message):
        tb.BenchmarkPlan.from_config(validate_config(with_changes(default_config, **changes)))


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"benchmarks__patterns__easy__trasfer_size": "1m"},
         r"unknown key 'trasfer_size' \(did you mean 'transfer_size'\?\) in 'benchmarks.patterns.easy'"),
        ({"benchmarks__tool": "dd"}, r"config key 'benchmarks.tool': 'dd' is not allowed; expected one of: auto, ior, fio"),
        ({"benchmarks__patterns__easy__transfer_size": "lots"},
         r"config key 'benchmarks.patterns.easy.transfer_size': 'lots' does not match the expected form"),
        ({"benchmarks__fieldio__patterns": ["0A", "3"]},
         r"config key 'benchmarks.fieldio.patterns\[1\]': '3' is not allowed"),
        ({"benchmarks__repetitions": 0}, r"config key 'benchmarks.repetitions'"),
    ],
)
def test_schema_errors_in_benchmarks_name_the_key(default_config, changes, message):
    with pytest.raises(ConfigError, match=message):
        validate_config(with_changes(default_config, **changes))


# ------------------------------------------------------------------------- commands


IOR_SAMPLES = sorted(p for p in (DATA / "ior").glob("posix-*.json")) + [DATA / "fio" / "limit-ior-posix-fpp-1g-odirect-1rank-disk.json"]


@pytest.mark.parametrize("sample", IOR_SAMPLES, ids=[p.name for p in IOR_SAMPLES])
def test_ior_command_reproduces_the_real_runs(sample):
    """The builder gives the exact command lines of the real IOR 4.0.0 runs in tests/data."""
    command = json.loads(sample.read_text())["Command line"]
    argv = shlex.split(command)
    opts = dict(zip(argv, argv[1:]))
    summary = argv[-1].split("=", 1)[1]
    pattern = tb.IOPattern(
        name="x", api=opts["-a"], file_per_proc="-F" in argv, transfer_size_bytes=tb.parse_size(opts["-t"], "t"),
        block_size_bytes=tb.parse_size(opts["-b"], "b"), fsync="-e" in argv,
        reorder="constant" if "-C" in argv else "none", random="-z" in argv, direct_io="--posix.odirect" in argv)
    built = ior.command("ior", pattern, 1, int(opts["-i"]), Path(opts["-o"]), Path(summary), "mpiexec -n {ntasks}")
    assert Path(built[0]).name == "mpiexec" and built[1:3] == ["-n", "1"]
    assert shlex.join(built[3:]) == command


def test_ior_command_for_hard_pattern_with_segments_and_stonewall():
    pattern = tb.IOPattern(name="hard", file_per_proc=False, transfer_size_bytes=47008, block_size_bytes=47008,
                           segments=1000, stonewall_s=30, reorder="random")
    argv = ior.command("/opt/ior", pattern, 8, 3, Path("/lus/t/f"), Path("/r/s.json"), "srun -n {ntasks}")
    text = shlex.join(argv)
    assert text.startswith("srun -n 8 /opt/ior -a POSIX -w -r -t 47008 -b 47008 -s 1000 -e -Z -D 30 "
                           "-O stoneWallingWearOut=1 -i 3 -o /lus/t/f")
    # IOR reads -D as whole seconds: a bound under a second is one second, not none
    short = ior.command("ior", tb.IOPattern(name="easy", stonewall_s=0.3), 1, 1, Path("f"), Path("s"),
                        "srun -n {ntasks}")
    assert short[short.index("-D") + 1] == "1"
    assert ior.stonewall_seconds(1.0) == 1 and ior.stonewall_seconds(1.2) == 2


def test_fio_shared_file_follows_ior_segment_layout(tmp_path):
    pattern = tb.IOPattern(name="hard", file_per_proc=False, transfer_size_bytes=47008, block_size_bytes=47008,
                           segments=10)
    argv = fio.io_command("fio", pattern, 4, tmp_path, tmp_path / "o.json")
    assert "--filename=shared.dat" in argv and "--offset_increment=47008" in argv
    assert "--zoneskip=141024" in argv  # the 3 other tasks' blocks of each segment
    assert f"--size={9 * 4 * 47008 + 47008}" in argv and f"--io_size={10 * 47008}" in argv


def test_mdtest_command():
    hard = tb.MetadataPattern(name="hard", files_per_task=500, file_size_bytes=3901, unique_dir=False)
    argv = mdtest.command("mdtest", hard, 4, Path("/x/md"), "mpiexec -n {ntasks}")
    assert shlex.join(argv[3:]) == "mdtest -n 500 -i 1 -d /x/md -F -P -N 1 -w 3901 -e 3901"
    easy = tb.MetadataPattern(name="easy", files_per_task=10)
    assert "-u" in mdtest.command("mdtest", easy, 1, Path("/x"), "mpiexec -n {ntasks}")


def test_tool_choice(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no ior, mdtest nor fio here
    with pytest.raises(common.BenchmarkError, match="benchmarks.tool is 'ior' but ior was not found.*set benchmarks.ior_path"):
        tools.choose_tool("ior", "io", {"ior": ""})
    with pytest.raises(common.BenchmarkError, match=r"config key 'benchmarks.ior_path': '/no/ior' is not an executable file"):
        tools.choose_tool("auto", "io", {"ior": "/no/ior"})
    fio = shutil.which("fio", path="/usr/bin:/usr/local/bin")
    if fio:
        assert tools.choose_tool("auto", "io", {"fio": fio}) == tools.Tool("fio", fio)
        assert tools.choose_tool("fio", "metadata", {"fio": fio}).name == "fio"


def test_failed_ior_run_reports_iors_own_error(tmp_path):
    """IOR's real failure: truncated JSON, the error on stdout, exit code 255."""
    stdout = tmp_path / "error-unwritable-dir-1rank.stdout.txt"
    shutil.copy(DATA / "ior" / "error-unwritable-dir-1rank.stdout.txt", stdout)
    stderr = tmp_path / "e.stderr.txt"
    stderr.write_text("")
    shutil.copy(DATA / "ior" / "error-unwritable-dir-1rank.json", tmp_path / "error-unwritable-dir-1rank.json")
    run = common.Run(["mpiexec", "-n", "1", "ior"], 255, 0.1, stdout, stderr)
    from cycleio.benchmarks import benchparse

    with pytest.raises(common.BenchmarkError) as err:
        common.parse_run(benchparse.parse_ior_json, tmp_path / "error-unwritable-dir-1rank.json", "IOR", run,
                  stdout_path=stdout)
    assert 'IOR failed (exit code 255): ERROR: open64("/proc/nonexistent/testfile", 66, 0664) failed' in str(err.value)
    assert "JSONDecodeError" not in str(err.value)


# ------------------------------------------------------------------------- real fio runs


@pytest.mark.integration
@pytest.mark.tool
@pytest.mark.parametrize("where", ["disk", "shm"])
def test_fio_easy_pattern_on_two_tiers(where, tmp_path, shm_dir):
    require_tool("fio", "fio stands for IOR where IOR is absent (apt-get install fio)")
    path = tmp_path / "tier" if where == "disk" else shm_dir
    tier = Tier(name=where, kind="posix" if where == "disk" else "memory", path=str(path))
    pattern = tb.IOPattern(name="easy", transfer_size_bytes=MIB, block_size_bytes=4 * MIB)
    raw = tmp_path / "raw"
    rows = tb.run_point(point_settings("io", tier, pattern, tasks=2, repetitions=2), raw)
    frame = pd.DataFrame(rows)
    assert list(frame.columns) == list(common.COLUMNS)
    reps = frame[frame["aggregate"] == "rep"]
    assert len(reps) == 2 * 2 and set(reps["operation"]) == {"write", "read"}
    assert (reps["bytes"] == 2 * 4 * MIB).all() and (reps["bw_MiB_per_s"] > 0).all()
    assert set(frame["tool"]) == {"fio"} and set(frame["tool_version"]) == {fio.version(shutil.which("fio"))}
    assert set(frame["tier"]) == {where} and set(frame["tasks"]) == {2}
    # the pattern reorders tasks (the default): fio drops the pages before reading, so no read is the cache's
    assert not frame.loc[frame["operation"] == "read", "cache_risk"].any()
    assert set(frame["reorder"]) == {"constant"}
    assert not frame.loc[frame["operation"] == "write", "cache_risk"].any()
    assert frame["fs_type"].iloc[0] == ("tmpfs" if where == "shm" else filesystem_type(tmp_path))
    summary = frame[frame["aggregate"] != "rep"]
    assert sorted(summary["aggregate"]) == ["max", "max", "mean", "mean", "min", "min"]
    for op in ("write", "read"):
        values = reps.loc[reps["operation"] == op, "bw_MiB_per_s"]
        by = summary[summary["operation"] == op].set_index("aggregate")["bw_MiB_per_s"]
        assert by["max"] == values.max() and by["min"] == values.min() and by["mean"] == pytest.approx(values.mean())
    # raw outputs beside the rows, with the exact command line; no data left on the tier
    meta = json.loads((raw / "easy.n2.rep0.meta.json").read_text())
    assert meta["exit_code"] == 0 and "--numjobs=2" in meta["argv"]
    assert (raw / "easy.n2.rep1.json").stat().st_size > 0
    assert not any(p.is_file() and p.name != OWNER_FILE for p in (path / "t").rglob("*"))  # the claim stays


@pytest.mark.integration
@pytest.mark.tool
@pytest.mark.parametrize("where", ["disk", "shm"])
def test_fio_phases_bounded_by_time_last_their_time_and_read_what_was_written(where, tmp_path, shm_dir):
    """The default points: each phase lasts its bound, whatever the tier, so every repetition can be timed; the read
    phase reads each task's own bytes (never more than were written: no file laid out first), pass after pass."""
    require_tool("fio", "fio stands for IOR where IOR is absent (apt-get install fio)")
    path = tmp_path / "tier" if where == "disk" else shm_dir
    tier = Tier(name=where, kind="posix" if where == "disk" else "memory", path=str(path))
    timing = TimedThreshold()
    for pattern in (tb.IOPattern(name="easy", stonewall_s=0.2, segments=40),
                    tb.IOPattern(name="hard", file_per_proc=False, transfer_size_bytes=47008, block_size_bytes=47008,
                                 segments=40_000, stonewall_s=0.2)):
        raw = tmp_path / f"raw-{pattern.name}"
        frame = pd.DataFrame(tb.run_point(point_settings("io", tier, pattern, tasks=2, repetitions=1), raw))
        reps = frame[frame["aggregate"] == "rep"].set_index("operation")
        assert sorted(reps.index) == ["read", "write"] and (reps["tasks"] == 2).all()
        assert (reps["seconds"] >= 0.2 * 0.95).all()
        assert timing.enough(reps["bytes"], reps["seconds"], bounded_by_time=reps["stonewall_s"] > 0).all()
        assert (reps["stonewall_s"] == 0.2).all() and (reps["host_cores"] >= 1).all()
        assert reps.loc["write", "bytes"] < pattern.bytes_per_task * 2  # the time ended it, not the bytes
        written = fio.written_per_job(raw / f"{pattern.name}.n2.rep0.write.json")
        assert len(written) == 2 and sum(written) == reps.loc["write", "bytes"]
        read = json.loads((raw / f"{pattern.name}.n2.rep0.read.meta.json").read_text())["argv"]
        sizes = [int(word.split("=")[1]) for word in read if word.startswith(("--size=", "--io_size="))]
        # each job's region of what it wrote (in a shared file: its blocks between the other task's)
        assert sizes and max(sizes) <= max(written) * 2
        assert not (raw / f"{pattern.name}.n2.rep0.read.stdout.txt").read_text().count("Laying out")


@pytest.mark.integration
@pytest.mark.tool
def test_fio_hard_pattern_shared_file_and_metadata(tmp_path):
    require_tool("fio", "fio stands for IOR and mdtest where they are absent (apt-get install fio)")
    tier = Tier(name="disk", kind="posix", path=str(tmp_path / "tier"))
    hard = tb.IOPattern(name="hard", file_per_proc=False, transfer_size_bytes=47008, block_size_bytes=47008,
                        segments=20)
    rows = pd.DataFrame(tb.run_point(point_settings("io", tier, hard, tasks=2, repetitions=1), tmp_path / "raw"))
    reps = rows[rows["aggregate"] == "rep"]
    assert (reps["bytes"] == 2 * 20 * 47008).all()
    assert set(reps["file_per_proc"]) == {False} and set(reps["transfer_size_bytes"]) == {47008}
    md = tb.MetadataPattern(name="easy", files_per_task=50)
    rows = pd.DataFrame(tb.run_point(point_settings("metadata", tier, md, tasks=2, repetitions=1), tmp_path / "raw-md"))
    reps = rows[rows["aggregate"] == "rep"]
    assert list(reps["operation"]) == ["create", "stat", "remove"]
    assert (reps["ops_per_s"] > 0).all() and reps["bw_MiB_per_s"].isna().all()
    # stat and remove meet the files create made (fio lays out none of its own): every file once each, none left
    [raw] = [path for path in (tmp_path / "raw-md").rglob("*.json") if not path.name.endswith(".meta.json")
             and path.name != "settings.json"]
    ios = {job["jobname"]: job["read"]["total_ios"] + job["write"]["total_ios"] for job in json.loads(raw.read_text())["jobs"]}
    assert ios == {"create": 100, "stat": 100, "remove": 100}
    assert not [path for path in (tmp_path / "tier").rglob("*") if path.is_file() and path.name != ".cycleio-owner"]


@pytest.mark.tool
def test_failed_fio_run_fails_with_fios_message(tmp_path):
    require_tool("fio", "the test runs fio")
    tier = Tier(name="disk", kind="posix", path=str(tmp_path / "tier"))
    broken = tb.IOPattern(name="bad", transfer_size_bytes=4096, block_size_bytes=1024)  # config would refuse it
    # fio writes this error into its JSON output file and exits 0
    with pytest.raises(common.BenchmarkError, match=r"fio failed \(exit code 0\): fio: size too small, must not be less"):
        tb.run_point(point_settings("io", tier, broken, tasks=1, repetitions=1), tmp_path / "raw")


def test_replay_plans_each_steps_files_in_size_classes():
    events = pd.DataFrame({
        "arm": ["a"] * 5, "cycle": ["2026010100"] * 5, "tier": ["disk"] * 4 + ["other"],
        "step": ["fcst", "fcst", "fcst", "post", "fcst"], "phase": ["run"] * 5,
        "op": ["write", "write", "read", "write", "write"],
        "bytes": [300_000, 100_000, 50_000, 1_000_000, 9], "seconds": [0.1] * 5,
    })
    specs = pairedspecs.replay_specs(events, "disk", ReplaySpec(transfer_size_bytes=65536, max_files=10))
    assert [(s["step"], s["op"], s["files"], s["bytes"]) for s in specs] == [
        ("fcst", "read", 1, 50_000), ("fcst", "write", 2, 2 * 196608), ("post", "write", 1, 983040)]
    # a file smaller than the transfer size is one transfer; files of a small step form one class of their
    # mean size, rounded down to whole transfers
    assert [(c["files"], c["file_bytes"], c["transfer_bytes"]) for c in specs[0]["classes"] + specs[1]["classes"]] == [
        (1, 50_000, 50_000), (2, 196608, 65536)]


def test_kept_replay_files_give_way_oldest_first_when_the_tier_has_no_room(tmp_path, monkeypatch):
    kept = [tmp_path / f"rep{i}" for i in range(3)]
    for folder in kept:
        folder.mkdir()
        (folder / "f").write_bytes(b"x")
    assert pairedspecs.room(tmp_path, memory=True) > 0
    free = iter([100 * MiB, 300 * MiB, 10**12])  # room before and after each removal
    monkeypatch.setattr(pairedspecs, "room", lambda path, memory: next(free))
    pairedspecs.make_room(kept, 50 * MiB, tmp_path, memory=True)  # needs 1.1 x 50 MiB + the 512 MiB margin
    assert [f.name for f in kept] == ["rep2"] and not (tmp_path / "rep0").exists() and not (tmp_path / "rep1").exists()


def test_replay_reads_from_storage_when_the_steps_reads_did():
    events = pd.DataFrame({
        "arm": ["a"] * 4, "cycle": ["2026010100"] * 4, "tier": ["disk"] * 4, "phase": ["run"] * 4,
        "step": ["anal", "anal", "post", "fcst"], "op": ["read", "read", "read", "write"],
        "bytes": [3_000_000, 1_000_000, 1_000_000, 1_000_000], "seconds": [0.1] * 4,
        "cached_fraction": [0.0, 1.0, 0.9, None],
    })
    plans = {(p["step"], p["op"]): p for p in pairedspecs.replay_specs(events, "disk", ReplaySpec())}
    assert plans[("anal", "read")]["cached_fraction"] == pytest.approx(0.25)  # byte-weighted
    assert plans[("anal", "read")]["cold"] and not plans[("post", "read")]["cold"]
    assert plans[("fcst", "write")]["cached_fraction"] is None and not plans[("fcst", "write")]["cold"]
    unmeasured = pairedspecs.replay_specs(events.drop(columns="cached_fraction"), "disk", ReplaySpec())
    assert not any(p["cold"] for p in unmeasured)  # records of older studies: the page cache, as before


def test_fio_reads_an_io_pattern_as_ior_does(tmp_path):
    """IOR reads back what a task wrote (from the page cache) unless tasks are reordered (-C, -Z), so
    reads miss the writer's cache; fio cannot reorder and drops the files' pages instead."""
    def read_job(**fields):
        pattern = tb.IOPattern(name="p", transfer_size_bytes=2**20, block_size_bytes=2**22, **fields)
        return " ".join(fio.io_command("fio", pattern, 2, tmp_path, tmp_path / "o.json")).split("--name=read")[1]

    assert "--invalidate=0" in read_job(reorder="none")
    assert "--invalidate=1" in read_job(reorder="constant") and "--invalidate=1" in read_job(reorder="random")
    assert "--invalidate=1" in read_job(reorder="none", direct_io=True)


def test_replay_keeps_the_steps_file_sizes_and_cache_states_apart():
    """Four big files and twenty small ones are not 24 files of the mean size; cached and uncached reads
    of one step are replayed each as they were."""
    big, small = 300 * 2**20, 4 * 2**20
    sizes = [big] * 4 + [small] * 20
    events = pd.DataFrame({
        "arm": "a", "cycle": "2026010100", "tier": "disk", "phase": "run", "step": "post",
        "op": ["write"] * 24 + ["read"] * 24, "bytes": sizes * 2, "seconds": 0.1, "transfers": [10] * 4 + [1] * 20 + [1] * 24,
        "cached_fraction": [None] * 24 + [0.0] * 4 + [1.0] * 20,
    })
    plans = {p["op"]: p for p in pairedspecs.replay_specs(events, "disk", ReplaySpec(max_files=100))}
    write = plans["write"]["classes"]
    assert [(c["files"], c["file_bytes"], c["transfer_bytes"], c["cold"]) for c in write] == [
        (20, small, small, False), (4, big, big // 10 // 8 * 8, False)]
    read = plans["read"]["classes"]
    assert [(c["files"], c["file_bytes"], c["cold"]) for c in read] == [(20, small, False), (4, big, True)]
    assert plans["read"]["cold"] and plans["read"]["cached_fraction"] == pytest.approx(20 * small / sum(sizes))
    capped = pairedspecs.replay_specs(events, "disk", ReplaySpec(max_files=12))
    assert [c["files"] for c in capped[1]["classes"]] == [10, 2]  # in proportion, at least one each


def test_replay_merges_size_classes_that_hold_little_of_a_steps_bytes():
    """Eight size classes, two of them most of the bytes: the small files are gathered in size order
    into groups of at least a tenth of the bytes, keeping their count and bytes."""
    sizes = [2**10] * 3 + [2**14] * 2 + [2**17] * 10 + [2**20] * 10 + [2**22] * 6 + [2**26] * 2 + [2**25] * 8
    events = pd.DataFrame({"arm": "a", "cycle": "2026010100", "tier": "disk", "phase": "run", "step": "fcst",
                           "op": "write", "bytes": sizes, "seconds": 0.1, "transfers": 1})
    [plan] = pairedspecs.replay_specs(events, "disk", ReplaySpec(max_files=100))
    assert [c["files"] for c in plan["classes"]] == [31, 8, 2]
    assert plan["files"] == len(sizes)
    assert plan["bytes"] == pytest.approx(sum(sizes), rel=1e-3)  # rounded down to whole transfers
    tiny = events.assign(bytes=events["bytes"] // 64)  # a step of 8 MiB: one class, whatever its spread
    assert [c["files"] for c in pairedspecs.replay_specs(tiny, "disk", ReplaySpec(max_files=100))[0]["classes"]] == [41]


@pytest.mark.integration
@pytest.mark.tool
def test_fio_replay_of_size_classes_adds_up_to_the_steps_bytes(tmp_path):
    require_tool("fio", "the test runs fio")
    classes = [{"files": 3, "file_bytes": 2**16, "transfer_bytes": 2**14, "cold": False},
               {"files": 2, "file_bytes": 2**20, "transfer_bytes": 2**18, "cold": True}]
    plan = {"files": 5, "bytes": 3 * 2**16 + 2 * 2**20, "classes": classes}
    fio_path = shutil.which("fio")
    for op in ("write", "read"):
        replay = fio.replay_command(fio_path, classes, tmp_path, tmp_path / f"{op[0]}.json", op)
        subprocess.run(replay.argv, cwd=replay.cwd, check=True, capture_output=True)
    for op in ("write", "read"):
        [total] = [r for r in pairedspecs.replay_totals(fio.parse(tmp_path / f"{op[0]}.json"), plan) if r["operation"] == op]
        assert total["bytes"] == plan["bytes"] and total["seconds"] > 0
        assert total["bw_MiB_per_s"] == pytest.approx(plan["bytes"] / 2**20 / total["seconds"])
        assert total["transfer_size_bytes"] == plan["bytes"] // (3 * 4 + 2 * 4)


# ------------------------------------------------------------------------- CLI, tables and figures


@pytest.mark.integration
@pytest.mark.tool
def test_bench_cli_tables_and_figures(tmp_path, shm_dir, default_config, drawn_figures):
    require_tool("fio", "the benchmark runs fio where IOR is absent")
    require_tool("mpiexec", "field I/O runs under the MPI launcher (pip install mpich)")
    config = with_changes(default_config, study="t",
                     tiers={"disk": {"kind": "posix", "path": str(tmp_path / "disk")},
                            "shm": {"kind": "memory", "path": str(shm_dir)}},
                     persistent_tier="disk", scratch_tiers=["disk", "shm"],
                     benchmarks__tasks=[1], benchmarks__repetitions=1, benchmarks__io_patterns=["easy"],
                     benchmarks__metadata_patterns=["easy"],
                     benchmarks__patterns__easy={"transfer_size": "1m", "block_size": "2m"},
                     benchmarks__metadata__easy={"files_per_task": 20, "tasks": [1]},
                     benchmarks__fieldio={"enabled": True, "tasks": [2], "fields_per_task": 4, "field_size": "16k",
                                          "patterns": ["1"], "layouts": ["appended"]})
    plan = tb.BenchmarkPlan.from_config(validate_config(config))
    points = []
    for kind, tier, pattern, tasks in plan.points:
        out = tmp_path / "bench" / f"{tier}-{kind}-{pattern}-{tasks}.csv"
        assert main(["bench", "--settings", plan.point_json(kind, tier, pattern, tasks), "--out", str(out),
                     "--raw", str(out.with_suffix(".raw"))]) == 0
        points.append(str(out))
    events = pd.DataFrame({
        "study": ["t"] * 3, "arm": ["shm"] * 3, "cycle": ["2026010100"] * 3, "step": ["fcst", "fcst", "post"],
        "phase": ["run", "run", "stage_out"], "op": ["write", "read", "copy"], "tier": ["shm", "shm", "disk"],
        "bytes": [4 * MIB, 2 * MIB, 8 * MIB], "seconds": [0.5, 0.25, 0.1], "cached_fraction": [None, 0.5, None],
        "t_start": [1_800_000_000.0, 1_800_000_001.0, 1_800_000_002.0],
    })
    events.to_parquet(tmp_path / "io_events.parquet")
    tables = tmp_path / "tables"
    assert main(["bench-tables", "--events", str(tmp_path / "io_events.parquet"),
                 "--benchmarks", str(tables / "benchmarks.csv"),
                 "--benchmarks-parquet", str(tables / "benchmarks.parquet"),
                 "--efficiency", str(tables / "efficiency.csv"), "--io-gap", str(tables / "io_gap.csv"), *points]) == 0
    bench = pd.read_parquet(tables / "benchmarks.parquet")
    assert len(bench) == len(pd.read_csv(tables / "benchmarks.csv"))
    assert set(bench["benchmark"]) == {"io", "metadata", "fieldio"} and set(bench["tier"]) == {"disk", "shm"}
    assert {"bw_MiB_per_s", "ops_per_s", "latency_s", "seconds", "bytes", "tool_version"} <= set(bench.columns)
    efficiency = pd.read_csv(tables / "efficiency.csv")
    fcst = efficiency[(efficiency["activity"] == "run:write") & (efficiency["reference"] == "easy, 1 task")]
    assert len(fcst) == 1
    reference = bench[(bench["tier"] == "shm") & (bench["pattern"] == "easy") & (bench["tasks"] == 1)
                      & (bench["operation"] == "write") & (bench["aggregate"] == "mean")]["bw_MiB_per_s"].item()
    assert fcst["efficiency"].item() == pytest.approx(8.0 / reference)
    assert fcst["surrogate_cached_fraction"].isna().all()
    reads = efficiency[efficiency["activity"] == "run:read"]
    # on /dev/shm memory is the tier: its benchmark reads are the tier's, not the page cache's
    assert (reads["surrogate_cached_fraction"] == 0.5).all() and not reads["reference_from_cache"].any()
    copy_rows = efficiency[efficiency["activity"] == "stage_out:copy"]
    assert set(copy_rows["tier"]) == {"disk"} and set(copy_rows["reference_operation"]) == {"write"}
    figures = tmp_path / "figures"
    assert main(["bench-figures", "--table", str(tables / "benchmarks.csv"), "--scaling", str(figures / "s.png"),
                 "--fieldio", str(figures / "f.png")]) == 0
    scaling, fieldio = drawn_figures
    assert_png_drawn(figures / "s.png", (17, 5.2))
    assert_png_drawn(figures / "f.png", (15, 4.3 * 1 + 1))  # one field layout: one row of panels
    for fig in drawn_figures:
        assert_axes_carry_data(fig)
    # the write panel draws the mean write MiB/s of every tier and task count (easy pattern only)
    means = bench[(bench["benchmark"] == "io") & (bench["aggregate"] == "mean") & (bench["operation"] == "write")]
    drawn = [y for c in scaling.axes[0].containers for y in c.lines[0].get_ydata()]
    assert sorted(drawn) == pytest.approx(sorted(means["bw_MiB_per_s"]))
