"""The kernel's count of a job's I/O (cycleio.kernelio) and the table that sets it against the records."""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import subprocess

import pandas as pd
import pytest
from conftest import cannot_run_here

from cycleio import kernelio
from cycleio.config.settings import ArmSettings, StagingSettings
from cycleio.kernelio import (CgroupIO, ProcIO, counted, job_cgroup, outside_work, parse_io_stat, read_proc_io,
                              work_event)
from cycleio.report.accounting import MIN_JUDGED_BYTES, accounting_table
from cycleio.report.aggregate import load_events, step_summary
from cycleio.records import RecordLog, cycle_records
from cycleio.config.tierspec import Tier
from cycleio.config.forecast import ForecastSettings
from cycleio.runner.job import run_step
from cycleio.runner.persistentjobs import run_arrival
from cycleio.units import MiB



@pytest.fixture
def proc_io() -> None:
    """The tests that read the kernel's counters: nothing skips in CI (conftest.cannot_run_here)."""
    if read_proc_io() is None:
        cannot_run_here("this kernel keeps no /proc/self/io (CONFIG_TASK_IO_ACCOUNTING) or does not let us read it")


# ------------------------------------------------------------------------------------------------ the counters


def test_snapshots_subtract_and_travel_as_dicts():
    counts = ProcIO(rchar=6976, wchar=12, syscr=10, syscw=1, read_bytes=4096, write_bytes=8192)
    later = ProcIO(rchar=7000, wchar=100, syscr=11, syscw=2, read_bytes=4096, write_bytes=12288)
    assert later - counts == ProcIO(rchar=24, wchar=88, syscr=1, syscw=1, write_bytes=4096)
    assert ProcIO.from_dict(counts.as_dict()) == counts


@pytest.mark.usefixtures("proc_io")
def test_a_snapshot_holds_this_processs_calls_and_bytes_and_a_gone_process_has_none(tmp_path):
    before = read_proc_io()
    with open(tmp_path / "f", "wb", buffering=0) as handle:
        for _ in range(4):
            handle.write(b"x" * 4096)
    moved = read_proc_io() - before
    assert moved.wchar >= 4 * 4096 and moved.syscw >= 4 and read_proc_io(os.getpid()) is not None
    assert read_proc_io(2**22 + 1) is None  # above the kernel's largest pid_max: no such process


def test_cgroup_io_stat_is_summed_over_devices_and_the_job_cgroup_found():
    text = ("8:0 rbytes=1000 wbytes=2000 rios=3 wios=4 dbytes=0 dios=0\n"
            "253:1 rbytes=10 wbytes=20 rios=1 wios=2 dbytes=0 dios=0\n")
    assert parse_io_stat(text) == CgroupIO(rbytes=1010, wbytes=2020, rios=4, wios=6)
    assert parse_io_stat("") == CgroupIO()
    slurm = "0::/system.slice/slurmstepd.scope/job_17/step_0/user/task_0\n"
    assert job_cgroup(slurm) == "/system.slice/slurmstepd.scope/job_17"
    assert job_cgroup("0::/user.slice/session-3.scope\n") == "/user.slice/session-3.scope"
    assert job_cgroup("4:memory:/x\n1:cpu:/\n") is None  # cgroup v1 only


def window_records(log: RecordLog, op: str) -> int:
    [record] = [r for r in log.records if r.op == op]
    return record.bytes


@pytest.mark.usefixtures("proc_io")
def test_counted_sees_this_process_and_the_children_it_reaps(tmp_path):
    """A block that writes 8 MiB itself and has a child (dd) read them back into /dev/null: the kernel saw it all."""
    path, data = tmp_path / "known.bin", os.urandom(8 * MiB)
    log = RecordLog(study="s", arm="a", cycle="2026010100", step="prep")
    dd = shutil.which("dd")
    with counted(log, phase="run", tier="t", tier_kind="posix", fs_type="ext4"):
        with open(path, "wb", buffering=0) as handle:
            handle.write(data)
        if dd:
            subprocess.run([dd, f"if={path}", "of=/dev/null", "bs=1M", "status=none"], check=True)
    ops = [r.op for r in log.records]
    assert ops == list(kernelio.KERNEL_OPS)
    assert all(r.tool == "kernel" and r.n_files == 0 and r.phase == "run" and r.tier == "t" for r in log.records)
    # the child's reads, and its writes to /dev/null, count once it is reaped (plus dd's start-up: a few KiB)
    written = len(data) * (2 if dd else 1)
    assert written <= window_records(log, "kernel_write") < written * 1.01
    if dd:
        assert len(data) <= window_records(log, "kernel_read") < len(data) * 1.01


@pytest.mark.usefixtures("proc_io")
def test_counted_leaves_out_what_the_block_excludes(tmp_path):
    log = RecordLog(study="s", arm="a", cycle="2026010100", step="fcst")
    with counted(log, phase="run", tier="t", tier_kind="posix", fs_type="ext4") as window:
        (tmp_path / "f").write_bytes(b"x" * MiB)
        window.exclude(ProcIO(wchar=MiB // 2, syscw=1))
    assert MiB // 2 <= window_records(log, "kernel_write") < MiB // 2 + 64 * 1024
    assert window_records(log, "kernel_excluded_write") == MiB // 2
    event = work_event(ProcIO(rchar=5, wchar=6), ProcIO(rchar=105, wchar=16, syscr=2), rank=3)
    assert event["op"] == kernelio.RANK_WORK_OP
    assert ProcIO.from_dict(event["counts"]) == ProcIO(rchar=100, wchar=10, syscr=2)
    # the program's counts less its ranks' work: the launcher's and the ranks' start-up, never below zero
    program = ProcIO(rchar=1000, wchar=50, syscr=40, syscw=3)
    assert outside_work(program, [ProcIO(rchar=100, wchar=10, syscr=2), ProcIO(rchar=200, wchar=60)]) == \
        ProcIO(rchar=700, wchar=0, syscr=38, syscw=3)


def test_without_proc_io_nothing_is_recorded_and_the_log_says_so_once(monkeypatch, caplog):
    monkeypatch.setattr(kernelio, "read_proc_io", lambda pid=None: None)
    monkeypatch.setattr(kernelio, "_said_unavailable", set())
    log = RecordLog(study="s", arm="a", cycle="c", step="prep")
    with caplog.at_level(logging.INFO, logger="cycleio"):
        for _ in range(2):
            with counted(log, phase="run", tier="t", tier_kind="posix", fs_type="ext4"):
                pass
    assert log.records == []
    assert sum("/proc/self/io" in message for message in caplog.messages) == 1


def test_a_block_that_raises_records_nothing():
    log = RecordLog(study="s", arm="a", cycle="c", step="prep")
    with pytest.raises(RuntimeError):
        with counted(log, phase="run", tier="t", tier_kind="posix", fs_type="ext4"):
            raise RuntimeError("the step failed")
    assert log.records == []


# ------------------------------------------------------------------------------------------------ a real job


TINY = ForecastSettings(obs_scale=1.0, pgrb2_fields=6, sflux_fields=3, product_grids=("1p00",), restart_hours=(6,))


@pytest.mark.usefixtures("proc_io")
@pytest.mark.job
def test_a_real_job_kernel_counts_match_its_records_and_leave_step_summary_alone(tmp_path):
    """prep at 0.5 of C48's observation volume (obs_scale 1): stage-in and run read MiBs, known bytes."""
    lustre = Tier("lustre", "lustre", str(tmp_path / "lustre"))
    scratch = Tier("local", "node_local", str(tmp_path / "scratch"), persistent=False, shared=False)
    settings = ArmSettings(study="t", arm="local", start="2026010100", seed=3, resolution="C12", levels=4,
                           persistent=lustre, scratch=scratch, staging=StagingSettings(),
                           forecast=dataclasses.replace(TINY, obs_scale=0.5), write_component={"ranks": 1})
    cycle = "2026010106"
    run_arrival(settings, cycle, "dump", tmp_path / "d.jsonl", tmp_path / "d.json")
    run_step(settings, cycle, "prep", tmp_path / "r.jsonl", tmp_path / "m.json")
    events = load_events([tmp_path / "d.jsonl", tmp_path / "r.jsonl"])
    table = accounting_table(events)
    assert list(table["phase"]) == ["stage_in", "run", "stage_out", "cleanup"]
    judged = table[~table["note"].str.contains("read: under", regex=False)]
    assert {"stage_in", "run"} <= set(judged["phase"])
    assert judged["records_over_kernel_read"].between(0.99, 1.01).all(), table.to_string()
    assert not table["flagged"].any(), table.to_string()
    stage_in = table.set_index("phase").loc["stage_in"]
    assert stage_in["records_read_bytes"] > MIN_JUDGED_BYTES  # copy and verify: each file read twice
    # the kernel's records change no table of the cycles' I/O
    without = events[events["tool"] != "kernel"]
    pd.testing.assert_frame_equal(step_summary(cycle_records(events)), step_summary(cycle_records(without)))
    assert not cycle_records(events)["op"].str.startswith("kernel").any()


@pytest.mark.integration
@pytest.mark.usefixtures("proc_io")
def test_the_forecast_run_leaves_out_its_ranks_start_up(tmp_path, lay_cold_start):
    """The ranks' imports and MPI start-up (several MB per rank) are counted in the job once mpiexec is reaped;
    each rank reports them and the run's window leaves them out, so what stays is the forecast's I/O."""
    lustre = Tier("lustre", "lustre", str(tmp_path / "lustre"))
    settings = ArmSettings(study="t", arm="lustre", start="2026010100", seed=3, resolution="C12", levels=4,
                           persistent=lustre, scratch=lustre, staging=StagingSettings(), forecast=TINY,
                           write_component={"ranks": 1})
    lay_cold_start(settings)
    run_step(settings, "2026010100", "fcst", tmp_path / "r.jsonl", tmp_path / "m.json")
    events = load_events([tmp_path / "r.jsonl"])
    run = events[(events["phase"] == "run") & (events["tool"] == "kernel")].set_index("op")["bytes"]
    assert run["kernel_excluded_read"] > MiB  # Python's start-up alone reads more
    written = events.loc[(events["phase"] == "run") & (events["op"] == "write"), "bytes"].sum()
    assert written <= run["kernel_write"] < written + 256 * 1024, run  # the records file and the like: KiB
