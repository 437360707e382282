"""`cycleio darshan replay` under real MPI (the mpich wheel's mpiexec): fidelity against the log and the kernel,
the timing answer and its provenance, and what is refused before any replay starts."""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path

import darshan
import pandas as pd
import pytest

from cycleio.cli import main
from cycleio.darshan.logs import DarshanLogError, read_log
from cycleio.darshan.replay import Target, fitting_scale, replay
from cycleio.darshan.report import CSV_COLUMNS, fidelity_rows, write_replay
from conftest import hanging_launchers, require_tool

LOGS = Path(darshan.__file__).parent / "examples" / "example_logs"
MACSIO = next(LOGS.glob("shane_macsio_*.darshan"))
SHM = Path("/dev/shm")


@pytest.fixture
def mpiexec():
    return require_tool("mpiexec", "the mpich wheel (pip install mpich) provides it")


def check_fidelity(table: pd.DataFrame, scale: float, exact_ops: bool = True) -> None:
    """The issue's fidelity: replayed bytes = logged (x scale, within 1%), calls alike, the kernel within 1%."""
    files = table[table["file"] != "TOTAL"]
    if scale == 1:
        assert (files["replayed_bytes"] == files["logged_bytes"]).all()
    if exact_ops:
        assert (files["replayed_ops"] == files["logged_ops"]).all()
    for _, row in table[table["file"] == "TOTAL"].iterrows():
        expected = row["logged_bytes"] * scale
        assert abs(row["replayed_bytes"] - expected) <= max(0.01 * expected, 16), row.to_dict()
        assert abs(row["replayed_ops"] - row["logged_ops"]) <= 0.01 * row["logged_ops"], row.to_dict()
        assert abs(row["kernel_bytes"] - row["replayed_bytes"]) <= max(0.01 * row["replayed_bytes"], 16), row.to_dict()
        assert abs(row["kernel_ops"] - row["replayed_ops"]) <= max(0.01 * row["replayed_ops"], 1), row.to_dict()


@pytest.mark.tool
@pytest.mark.parametrize("ranks", [1, 4])
def test_dxt_replay_at_scale_1_is_the_logged_job(mpiexec, tmp_path, ranks):
    job, plan, runs = replay(LOGS / "ior_hdf5_example.darshan", [Target("disk", tmp_path / "d")], nranks=ranks,
                             oversubscribe=True)
    table = fidelity_rows(plan, runs[0])
    check_fidelity(table, 1.0)
    assert set(table["source"].dropna()) - {""} == {"dxt"}
    assert not any((tmp_path / "d").iterdir())  # the replay's files are removed after it


@pytest.mark.tool
def test_scaled_replay_on_two_tiers_through_the_command(mpiexec, tmp_path, capsys):
    out = tmp_path / "replay.csv"
    shm = SHM / f"cycleio-test-darshan-{os.getpid()}" if SHM.is_dir() else tmp_path / "shm"
    try:
        code = main(["darshan", "replay", str(LOGS / "ior_hdf5_example.darshan"), "--dir", f"disk={tmp_path / 'disk'}",
                     "--dir", f"shm={shm}", "--ranks", "2", "--scale", "0.5", "--out", str(out)])
    finally:
        if shm.parent == SHM:
            for path in shm.glob("*"):
                path.unlink()
            shm.rmdir() if shm.exists() else None
    assert code == 0
    table = pd.read_csv(out)
    assert list(table.columns[:7]) == ["file", "direction", "logged_bytes", "logged_ops", "replayed_bytes",
                                       "replayed_ops", "replayed_s"]
    assert list(table.columns) == CSV_COLUMNS
    assert list(table["file"].iloc[-2:]) == ["TOTAL", "TOTAL"]
    for tier in ("disk", "shm"):
        check_fidelity(table[table["tier"] == tier], 0.5)
    meta = json.loads((tmp_path / "replay.csv.meta.json").read_text())
    assert meta["log"].endswith("ior_hdf5_example.darshan") and len(meta["log_sha256"]) == 64
    assert (meta["scale"], meta["ranks"], meta["timing"]) == (0.5, 2, "io")
    assert [t["tier"] for t in meta["tiers"]] == ["disk", "shm"]
    answer = meta["answer"]
    assert "where it was logged" in answer and "at scale 0.5 with 2 ranks" in answer
    assert "on tier disk" in answer and "on tier shm" in answer
    assert answer in capsys.readouterr().out


@pytest.mark.tool
def test_counter_synthesised_replay_of_a_2048_rank_job_scaled(mpiexec, tmp_path):
    """example.darshan: 2 TiB into one shared file from 2,048 ranks, no DXT: 1e-5 of it on 2 ranks."""
    job, plan, runs = replay(LOGS / "example.darshan", [Target("disk", tmp_path)], nranks=2, scale=1e-5)
    table = fidelity_rows(plan, runs[0])
    assert set(table["source"].dropna()) - {""} == {"counters"}
    check_fidelity(table, 1e-5)


@pytest.mark.tool
def test_many_files_dxt_and_stdio(mpiexec, tmp_path):
    """dxt.darshan: 214 POSIX records (DXT for 169 files) and an STDIO one, at scale 1."""
    job, plan, runs = replay(LOGS / "dxt.darshan", [Target("disk", tmp_path)], nranks=1)
    table = fidelity_rows(plan, runs[0])
    check_fidelity(table, 1.0)
    assert {"dxt", "counters"} <= set(table["source"])


@pytest.mark.tool
def test_a_truncated_trace_replays_from_the_counters_within_1_percent(mpiexec, tmp_path, caplog):
    job = copy.deepcopy(read_log(LOGS / "ior_hdf5_example.darshan"))
    job.modules["DXT_POSIX"]["partial"] = True
    _, plan, runs = replay(job, [Target("disk", tmp_path)], nranks=2)
    table = fidelity_rows(plan, runs[0])
    assert set(table["source"].dropna()) - {""} == {"counters, DXT truncated"}
    check_fidelity(table, 1.0)
    assert "DXT trace truncated" in caplog.text


@pytest.mark.tool
def test_logged_timing_keeps_the_scaled_gaps(mpiexec, tmp_path):
    _, plan, runs = replay(MACSIO, [Target("disk", tmp_path)], nranks=2, scale=0.01, timing="logged")
    table, meta = write_replay(tmp_path / "r.csv", read_log(MACSIO), plan, runs)
    check_fidelity(table, 0.01)
    slept = max(r["gap_s"] for r in runs[0].ranks)
    assert slept == pytest.approx(max(float(r["gap_s"].sum()) for r in plan.ranks))
    assert slept > 0.01 and runs[0].ranks[0]["wall_s"] >= runs[0].ranks[0]["gap_s"]
    assert "logged gaps" in meta["answer"]


@pytest.mark.tool
def test_the_mpiio_layer_replays_dxt_mpiio_through_mpi_io(mpiexec, tmp_path):
    """ior_hdf5_example.darshan's DXT_MPIIO trace (independent calls) through MPI-IO on 4 ranks: exact, kernel too."""
    _, plan, runs = replay(LOGS / "ior_hdf5_example.darshan", [Target("disk", tmp_path)], nranks=4,
                           oversubscribe=True, layer="mpiio")
    table = fidelity_rows(plan, runs[0])
    assert set(table["module"].dropna()) - {""} == {"MPI-IO"} and plan.mpiio
    check_fidelity(table, 1.0)


@pytest.mark.tool
@pytest.mark.parametrize("name, scale, exact_kernel_ops", [(MACSIO.name, 1.0, True), ("example.darshan", 1e-5, False)])
def test_the_mpiio_layer_replays_collective_calls_collectively(mpiexec, tmp_path, name, scale, exact_kernel_ops):
    """MACSio (64 collective and 7,695 independent MPI-IO writes, and POSIX-only files beside) and VPIC-IO (16,384
    collective writes of 128 MiB from 2,048 ranks): the MPI-IO calls as logged; the kernel's bytes the same (the
    file is written without holes), its calls fewer where MPI-IO aggregated the collective ones."""
    job, plan, runs = replay(LOGS / name, [Target("disk", tmp_path)], nranks=2, scale=scale, layer="mpiio")
    (index, how), = plan.mpiio.items()
    assert how["collective"]["write"] == int(job.counters["MPI-IO"]["MPIIO_COLL_WRITES"].sum())
    table = fidelity_rows(plan, runs[0])
    files = table[table["file"] != "TOTAL"]
    assert (files["replayed_ops"] == files["logged_ops"]).all()
    for _, row in table[table["file"] == "TOTAL"].iterrows():
        expected = row["logged_bytes"] * scale
        assert abs(row["replayed_bytes"] - expected) <= max(0.01 * expected, 16)
        assert abs(row["kernel_bytes"] - row["replayed_bytes"]) <= max(0.01 * row["replayed_bytes"], 16)
        if exact_kernel_ops:
            assert row["kernel_ops"] == row["replayed_ops"]
        else:
            assert row["kernel_ops"] <= row["replayed_ops"]


# ------------------------------------------------------------------ refused before anything starts

def test_files_larger_than_the_folders_room_are_refused_naming_the_scale_that_fits(tmp_path):
    target = tmp_path / "never"
    with pytest.raises(DarshanLogError, match=r"--dir .*never: the replay's files take 2.0 TiB at --scale 1, .* free "
                                              r".*; --scale [0-9.e-]+ would fit"):
        replay(LOGS / "example.darshan", [Target("t", target)], nranks=1)
    assert not target.exists()  # nothing was made
    assert fitting_scale(1.0, need=2 * 2**40, free=100 * 2**30) == pytest.approx(0.04)
    assert fitting_scale(0.5, need=1000, free=100) == pytest.approx(0.04)


def test_more_ranks_than_can_start_are_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_NTASKS", "2")
    with pytest.raises(DarshanLogError, match=r"--ranks 4: only 2 ranks can start here \(2 SLURM_NTASKS\)"):
        replay(LOGS / "ior_hdf5_example.darshan", [Target("t", tmp_path / "x")], nranks=4)
    with pytest.raises(DarshanLogError, match=r"--ranks 8: the log's job ran 4 ranks"):
        replay(LOGS / "ior_hdf5_example.darshan", [Target("t", tmp_path / "x")], nranks=8, oversubscribe=True)
    assert not (tmp_path / "x").exists()


@pytest.mark.tool
def test_the_venvs_mpiexec_starts_the_ranks_whatever_is_first_on_path(mpiexec, tmp_path, monkeypatch):
    """Run as `.venv/bin/python ...` (make bench) PATH may find the system's Open MPI first: not for the replay."""
    monkeypatch.setenv("PATH", "/usr/local/bin:/usr/bin:/bin")
    _, plan, runs = replay(LOGS / "ior_hdf5_example.darshan", [Target("disk", tmp_path)], nranks=2)
    assert Path(runs[0].launcher[0]).parent == Path(sys.executable).parent
    assert "--allow-run-as-root" not in runs[0].launcher
    check_fidelity(fidelity_rows(plan, runs[0]), 1.0)


def test_a_replay_whose_ranks_hang_in_mpi_start_up_is_launched_again(mpiexec, tmp_path, monkeypatch, caplog):
    from cycleio import process

    monkeypatch.setattr(process, "startup_timeout", lambda ntasks: 3.0)
    once, always = hanging_launchers(tmp_path, mpiexec)
    (tmp_path / "t").mkdir()
    with caplog.at_level("WARNING"):
        _, plan, runs = replay(LOGS / "ior_hdf5_example.darshan", [Target("t", tmp_path / "t")], launcher=once)
    assert "did not all start within 3 s: stopped and launched again" in caplog.text
    check_fidelity(fidelity_rows(plan, runs[0]), 1.0)
    # hung twice: an error naming it, not a wait for the replay's whole timeout
    with pytest.raises(RuntimeError, match="did not start twice: its ranks did not all pass MPI's start-up within 3 s"):
        replay(LOGS / "ior_hdf5_example.darshan", [Target("t", tmp_path / "t")], launcher=always)


def test_a_missing_launcher_is_named(tmp_path):
    with pytest.raises(DarshanLogError, match="no-such-mpiexec"):
        replay(LOGS / "ior_hdf5_example.darshan", [Target("t", tmp_path)], launcher="no-such-mpiexec -n {ntasks}")


def test_the_command_refuses_in_one_line(tmp_path, capsys):
    code = main(["darshan", "replay", str(LOGS / "example.darshan"), "--dir", str(tmp_path / "x"), "--out",
                 str(tmp_path / "r.csv")])
    assert code == 1
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and "would fit" in errors[0] and "Traceback" not in err
    assert not (tmp_path / "r.csv").exists()


def test_target_names():
    assert Target.parse("shm=/dev/shm/x") == Target("shm", Path("/dev/shm/x"))
    assert Target.parse("/scratch/me/replay") == Target("replay", Path("/scratch/me/replay"))
