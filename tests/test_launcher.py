"""The forecast's writes as an MPI program (cycleio.surrogates.forecast) under real mpiexec, 1 to 4 ranks.

Every strategy writes the same data as the in-process writer (compared with xarray), records the
effective and actual write times, and a failing rank fails the step with its own error.
Runs on /dev/shm where it exists, so fsync does not dominate the tiny C12 files.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from dataclasses import replace

import numpy as np
import pytest

from conftest import (FCST_CYCLE, FCST_TIMEOUT_S, assert_same_files, fcst_writes, forecast_arm, forecast_context,
                      hanging_launchers, require_tool, run_forecast, sampled_writes)
from cycleio.surrogates.forecast.launcher import launch_provenance, program_stack, run_forecast_mpi
from cycleio.surrogates.forecast.layout import ForecastError, RankLayout
from cycleio.surrogates.forecast.plan import hour_groups
from cycleio.surrogates.transfers import Overheads
from cycleio.surrogates.writers import write_file

# The short forecast, its arms, the reference files (fixture forecast_reference) and the folder the ranks write to
# (fixture forecast_dir) are conftest's: test_parallel_io runs the other strategies on them.


@pytest.fixture(scope="module")
def mpiexec():
    return require_tool("mpiexec", "the mpich wheel (pip install mpich) provides it")


def test_a_missing_launcher_is_named(forecast_dir):
    arm = forecast_arm("serial")
    arm.launcher = "no-such-mpiexec -n {ntasks}"
    with pytest.raises(ForecastError, match="no-such-mpiexec"):
        run_forecast(arm, forecast_dir)


@pytest.mark.tool
@pytest.mark.timeout(120)
@pytest.mark.parametrize("strategy, ranks, extra", [
    ("serial", 2, {}),
    ("diskless", 2, {}),
    ("per_rank", 4, {}),  # 4 ranks on 2 cores: every tile in 4 pieces, combined after each hour
    ("per_rank", 2, {"combine_per_rank": True}),
    ("per_rank", 1, {}),  # one rank: files written whole, no pieces
    ("quilt", 2, {"write_groups": 2}),  # 4 ranks
    ("quilt", 1, {"write_tasks_per_group": 2}),
])
def test_every_strategy_writes_the_same_data_and_its_records(mpiexec, forecast_reference, forecast_dir, strategy, ranks,
                                                             extra):
    arm = forecast_arm(strategy, ranks, **extra)
    records = run_forecast(arm, forecast_dir, sampled_writes())
    assert_same_files(forecast_reference, forecast_dir)  # no pieces, temporaries or spec files left behind either

    layout = RankLayout.from_settings(strategy, arm.write_component)
    assert {r["nranks"] for r in records} == {layout.ntasks}
    by_op = defaultdict(list)
    for r in records:
        by_op[r["op"]].append(r)
    hours = ["f000", "f003", "f006"]
    effective = {(r["file"], r["rank"]) for r in by_op["write_effective"]}
    assert effective == {(h, rank) for h in hours for rank in range(ranks)}
    assert all(r["bytes"] > 0 for r in by_op["write_effective"]), "every compute rank holds data of every hour"
    assert len(by_op["write_final"]) == 1 and by_op["write_final"][0]["file"] == "f006"
    assert {r["rank"] for r in by_op["generate"]} == set(range(ranks))

    written = {r["file"] for r in by_op["write"] + by_op["combine"]}
    assert written >= {spec.path for spec in sampled_writes()}
    writers = {r["rank"] for r in by_op["write"]}
    if strategy == "quilt":
        assert writers == set(range(ranks, layout.ntasks)), "only the write-group ranks write"
    elif strategy == "per_rank" and ranks > 1:
        assert writers == set(range(ranks)) and by_op["combine"]
        assert any(r["file"].endswith(".nc.0001") for r in by_op["write"])
    else:
        assert writers == {0}
    for r in by_op["write"] + by_op["combine"]:
        if (forecast_dir / r["file"]).exists():  # pieces are gone once combined
            assert r["bytes"] == (forecast_dir / r["file"]).stat().st_size


@pytest.mark.tool
@pytest.mark.timeout(120)
@pytest.mark.parametrize("strategy, extra", [
    ("per_rank", {"combine_per_rank": True}),  # every split file combined at the end of the forecast
    ("per_rank", {}),  # after each hour
    ("serial", {}),
])
def test_each_files_record_counts_its_own_bytes_and_transfers(mpiexec, forecast_dir, tmp_path, strategy, extra):
    """A file's write or combine record has the bytes on storage and the transfers writing that file takes in
    process. Small transfers (16 KiB) make every netCDF file several: a count left from an earlier file (the
    hour's pieces before the first combine at the end) cannot hide behind the floor of one transfer."""
    arm = forecast_arm(strategy, ranks=2, **extra)
    ctx = replace(forecast_context(arm), buffer_bytes=16 * 2**10)
    transfers = {}  # what each file takes when written whole in process, in the same transfers
    for spec in fcst_writes():
        written = write_file(tmp_path / spec.path, spec, replace(ctx, times=Overheads()))
        transfers[spec.path] = written.cpu.transfers
    records = run_forecast_mpi(arm, FCST_CYCLE, forecast_dir, fcst_writes(), ctx, timeout=FCST_TIMEOUT_S,
                               label="[test]")
    landed = [r for r in records if r["op"] in ("write", "combine") and r["file"] in transfers]
    assert sorted(r["file"] for r in landed) == sorted(transfers)  # each file once, whole or combined
    assert max(transfers.values()) > 1
    for r in landed:
        assert (r["bytes"], r["transfers"]) == ((forecast_dir / r["file"]).stat().st_size, transfers[r["file"]]), r
    if strategy == "per_rank":
        assert {r["op"] for r in landed} == {"write", "combine"}


@pytest.mark.tool
@pytest.mark.timeout(120)
@pytest.mark.parametrize("strategy, probed", [("serial", True), ("per_rank", False)])
def test_a_paired_forecast_tells_the_fresh_pages_each_file_met_where_one_rank_writes(mpiexec, forecast_dir, strategy,
                                                                                      probed):
    """A paired job's forecast (``probe_pages``): the writing rank probes the free pages before each file of 2 MiB
    or more (hostmemory.FilePageProbe), on a machine where they can be told, and its seconds apart (``probe``).
    Ranks writing at once would share what they probe: not probed."""
    from cycleio.config.forecast import Compression
    from cycleio.hostmemory import fresh_pages_measurable

    arm = replace(forecast_arm(strategy, ranks=2, levels=127), compression=Compression())  # history files of 6 MiB
    records = run_forecast_mpi(arm, FCST_CYCLE, forecast_dir, fcst_writes(), forecast_context(arm),
                               timeout=FCST_TIMEOUT_S, label="[test]", probe_pages=True)
    large = [r for r in records if r["op"] == "write" and r["bytes"] >= 2 << 20]
    small = [r for r in records if r["op"] == "write" and r["bytes"] < 1 << 20]
    assert large and small
    told = probed and fresh_pages_measurable()
    assert all(("fresh_MiB" in r) == told for r in large) and not any("fresh_MiB" in r for r in small)
    assert any(r["op"] == "probe" for r in records) == told  # the probe's seconds (phase replay in the job's records)


@pytest.mark.tool
@pytest.mark.timeout(120)
def test_quilt_hides_the_writes_and_serial_waits_for_them(mpiexec, forecast_dir):
    """Quilt's compute ranks go on computing while the writer writes the hour they handed over; serial's wait.

    Told by the order of events, not by comparing durations (on oversubscribed cores, 3 ranks on 2 here, a
    rank kept off a core for tenths of a second upsets any tight bound on seconds). For each output hour
    followed by compute: quilt's writer is still writing the hour (its last file's storage I/O ends) after
    every compute rank has begun the next hour's compute; serial's rank 0 has written the hour before any
    compute rank begins it. The serial order is causal (the compute ranks pass a barrier after the writes).
    A quilt whose hand-off waited for the writes would break its order causally too; a correct one keeps it
    by the time the writer takes for an hour's files (about a tenth of a second at 32 levels, here), while
    a compute rank begins computing as soon as its hand-off returns.
    """
    history = [spec for spec in fcst_writes() if spec.kind in ("atm_history", "sfc_history")]
    files_per_hour = [len(specs) for _, specs in hour_groups(history)]
    assert files_per_hour == [2, 2, 2]
    for strategy, writer in (("quilt", 2), ("serial", 0)):
        arm = forecast_arm(strategy, ranks=2, levels=32, compute_s=0.1)
        records = run_forecast(arm, forecast_dir / strategy, history)
        writes = sorted((r for r in records if r["op"] == "write"), key=lambda r: r["t_start"])
        assert {r["rank"] for r in writes} == {writer} and len(writes) == sum(files_per_hour)
        hour_written = []  # when the writer's writes of each output hour ended (at least)
        for first, count in zip(np.cumsum([0, *files_per_hour[:-1]]), files_per_hour):
            hour_written.append(max(r["t_start"] + r["seconds"] for r in writes[first:first + count]))
        compute_begins = defaultdict(list)  # per compute rank, when each hour's compute began
        for r in sorted(records, key=lambda r: r["t_start"]):
            if r["op"] == "compute":
                compute_begins[r["rank"]].append(r["t_start"])
        assert sorted(compute_begins) == [0, 1] and all(len(b) == 2 for b in compute_begins.values())
        for hour in range(2):  # f000 and f003: each followed by the compute towards the next output hour
            begins = [b[hour] for b in compute_begins.values()]
            if strategy == "quilt":
                assert hour_written[hour] > max(begins), (hour, hour_written, compute_begins)
            else:
                assert hour_written[hour] <= min(begins), (hour, hour_written, compute_begins)
        assert sum(r["seconds"] for r in records if r["op"] == "write_final") > 0


@pytest.mark.tool
@pytest.mark.timeout(120)
@pytest.mark.parametrize("strategy, fail_rank, where", [
    ("quilt", 2, "as it lands"),  # the write group's only rank
    ("quilt", 0, "at its first output hour"),  # a compute rank handing over to the writers
    ("per_rank", 1, "at its first output hour"),
    ("serial", 0, "at its first output hour"),  # the rank that gathers and writes
    ("serial", 1, "at its first output hour"),  # a rank that never writes: it fails before it hands over
])
def test_a_failing_rank_fails_the_step_with_its_error(mpiexec, forecast_dir, strategy, fail_rank, where):
    """faults.fail_rank under every strategy, writer or not."""
    with pytest.raises(ForecastError) as failure:
        run_forecast(forecast_arm(strategy, ranks=2), forecast_dir, fail_rank=fail_rank)
    message = str(failure.value)
    assert f"rank {fail_rank} of" in message, message
    assert f"injected fault (config faults.fail_rank): rank {fail_rank} fails {where}" in message, message
    assert "did not finish" not in message  # failed fast, not by the timeout
    assert not list(forecast_dir.glob(".mpifcst.*"))


@pytest.mark.tool
@pytest.mark.timeout(60)
def test_a_forecast_past_its_timeout_is_stopped_with_its_ranks(mpiexec, forecast_dir):
    import psutil

    arm = forecast_arm("quilt", ranks=2, compute_s=10.0)  # 30 s of compute before the second output hour
    with pytest.raises(ForecastError, match="did not finish within 3 s"):
        run_forecast_mpi(arm, FCST_CYCLE, forecast_dir, fcst_writes(), forecast_context(arm), timeout=3, label="[test]")
    left = [p for p in psutil.process_iter(["cmdline"]) if str(forecast_dir) in " ".join(p.info["cmdline"] or [])]
    # killed, they are gone once reaped: waited for, however busy the machine (the bound only ends a hung test)
    _, alive = psutil.wait_procs(left, timeout=30)
    assert not alive, f"ranks left running: {alive}"


def test_a_forecast_whose_ranks_hang_in_mpi_start_up_is_launched_again(mpiexec, forecast_dir, tmp_path, monkeypatch,
                                                                        caplog):
    """A fault that cannot be caused at will, by the stand-in launchers of conftest.hanging_launchers."""
    from cycleio import process

    once, always = hanging_launchers(tmp_path, mpiexec)
    monkeypatch.setattr(process, "startup_timeout", lambda ntasks: 5.0)
    arm = forecast_arm("serial", 2)
    arm.launcher = once
    with caplog.at_level("WARNING"):
        records = run_forecast_mpi(arm, FCST_CYCLE, forecast_dir, fcst_writes(), forecast_context(arm), label="[t]")
    assert records and "did not all start within 5 s: stopped and launched again" in caplog.text
    # hung twice: an error naming it, not a wait for the forecast's whole timeout
    arm.launcher = always
    with pytest.raises(ForecastError, match="did not start twice: its ranks did not all pass MPI's start-up within 5 s"):
        run_forecast_mpi(arm, FCST_CYCLE, forecast_dir, fcst_writes(), forecast_context(arm), label="[t]")


def test_shared_file_strategies_run_on_the_parallel_stack_and_the_others_do_not(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where Snakemake runs the jobs (the checkout, with make study)
    key, template, python = program_stack(forecast_arm("parallel", 2))
    assert key == "parallel_stack.launcher" and template.startswith("mpirun.openmpi")
    assert python == str(tmp_path / ".venv-parallel" / "bin" / "python")  # relative: from the working folder
    assert program_stack(forecast_arm("serial", 2)) == ("launcher", "mpiexec -n {ntasks}", sys.executable)
    layout = RankLayout.from_settings("quilt_parallel", {"ranks": 3, "write_tasks_per_group": 2, "mpiio": "independent"})
    assert layout.ntasks == 5 and layout.describe().endswith("MPI-IO independent")


def test_every_manifest_names_the_launcher_and_python_of_the_arms_forecast():
    serial = launch_provenance(forecast_arm("serial", 2))
    assert serial["config_key"] == "launcher" and serial["python"] == sys.executable
    shared = launch_provenance(forecast_arm("parallel", 2))
    assert shared["config_key"] == "parallel_stack.launcher" and shared["python"].endswith(".venv-parallel/bin/python")
    assert shared["argv"][0] == "mpirun.openmpi" and shared["argv"][-2:] == ["-n", "2"]
