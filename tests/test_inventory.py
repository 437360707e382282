"""The surrogates' inventory: GDAS names and counts, sizes against real files and grid arithmetic."""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path

import pytest

from cycleio.surrogates.grid import Grid
from cycleio.config.forecast import Compression, ForecastSettings
from cycleio.surrogates.inventory import history_files, product_files, restart_files, step_io
from cycleio.surrogates.kinds import ATM_2D, ATM_3D, expected_bytes
from cycleio.surrogates.context import WriteContext
from cycleio.surrogates.writers import write_file

START, CYCLE = "2026010100", "2026010106"


def names(specs) -> list[str]:
    return [spec.path.rsplit("/", 1)[-1] for spec in specs]


def test_restart_set_is_the_38_files_of_the_model():
    files = names(restart_files(CYCLE, 6))
    assert len(files) == 38
    kinds = Counter(re.sub(r"^\d{8}\.\d{6}\.", "", f).split(".tile")[0] for f in files)
    assert kinds == {"ca_data": 6, "fv_core.res": 6, "fv_srf_wnd.res": 6, "fv_tracer.res": 6, "phy_data": 6,
                     "sfc_data": 6, "coupler.res": 1, "fv_core.res.nc": 1}
    assert "20260101.120000.fv_core.res.tile3.nc" in files  # valid at +6 h


@pytest.mark.parametrize("resolution, grids", [("C12", ("1p00",)), ("C48", ("1p00",)), ("C768", ("0p25", "1p00"))])
def test_every_step_writes_the_gdas_files(resolution, grids):
    hourly = ForecastSettings(history_interval_hours=1, product_grids=grids)
    counts = {step: len(step_io(step, CYCLE, START, hourly).writes) for step in ("dump", "prep", "anal", "fcst", "post")}
    # 20 dumps; prepbufr, acft_profiles, nsstbufr; atminc + IAU atmi003/009, 4 abias, radstat, cnvstat,
    # oznstat, gsistat, dtfanl, 6 sfcanl tiles; 30 history files + 3 restart sets; 2 + 2 per grid per hour
    assert counts == {"dump": 20, "prep": 3, "anal": 18, "fcst": 30 + 3 * 38, "post": 10 * (2 + 2 * len(grids))}
    anal = names(step_io("anal", CYCLE, START, hourly).writes)
    for name in ("gdas.t06z.atminc.nc", "gdas.t06z.atmi003.nc", "gdas.t06z.abias_pc", "gdas.t06z.radstat",
                 "gdas.t06z.cnvstat", "gdas.t06z.gsistat", "gdas.t06z.dtfanl.nc", "20260101.060000.sfcanl_data.tile6.nc"):
        assert name in anal
    post = names(step_io("post", CYCLE, START, hourly).writes)
    assert {"gdas.t06z.master.grb2f003", "gdas.t06z.sfluxgrbf003.grib2", "gdas.t06z.pgrb2.1p00.f003",
            "gdas.t06z.pgrb2.1p00.f003.idx"} <= set(post)


def test_analysis_reads_the_previous_forecast_and_the_forecast_reads_the_analysis():
    settings = ForecastSettings()
    anal_reads = [s.path for s in step_io("anal", CYCLE, START, settings).reads]
    for hour in (3, 6, 9):
        assert f"gdas.20260101/00/model/atmos/history/gdas.t00z.atmf{hour:03d}.nc" in anal_reads
        assert f"gdas.20260101/00/model/atmos/history/gdas.t00z.sfcf{hour:03d}.nc" in anal_reads
    assert "gdas.20260101/00/analysis/atmos/gdas.t00z.abias" in anal_reads
    fcst_reads = [s.path for s in step_io("fcst", CYCLE, START, settings).reads]
    assert len(fcst_reads) == 38 + 3  # restart set (sfc_data from the surface analysis) + 3 increments
    assert "gdas.20260101/06/analysis/atmos/20260101.060000.sfcanl_data.tile1.nc" in fcst_reads
    assert "gdas.20260101/00/model/atmos/restart/20260101.060000.fv_tracer.res.tile1.nc" in fcst_reads


@pytest.mark.parametrize("resolution, levels", [("C48", 127), ("C96", 16)])
def test_raw_sizes_match_the_inventory_and_the_grid_arithmetic(tmp_path, resolution, levels):
    grid = Grid(resolution, levels)
    ctx = WriteContext(grid, 1, CYCLE)
    specs = history_files(CYCLE, 3)[:2] + [s for s in restart_files(CYCLE, 6) if "tile1" in s.path]
    for spec in specs:
        size = write_file(tmp_path / spec.path, spec, ctx).bytes
        expected = expected_bytes(spec, grid)
        assert abs(size / expected - 1) < (0.03 if expected > 5 * 2**20 else 0.10), (spec.kind, size, expected)
    atmf = (tmp_path / specs[0].path).stat().st_size
    arithmetic = (len(ATM_3D) * levels + len(ATM_2D)) * grid.nx * grid.ny * 4  # 4N x 2N float32 planes
    assert abs(atmf / arithmetic - 1) < 0.01
    fv_core = (tmp_path / next(s for s in specs if s.kind == "fv_core.res").path).stat().st_size
    assert abs(fv_core / ((8 * levels + 1) * grid.n * grid.n * 8) - 1) < 0.03  # about 8L+1 planes of N x N doubles


def test_compressed_history_lands_near_the_estimate(tmp_path):
    grid = Grid("C48", 127)
    compression = Compression(zlib_level=1, quantize_nsd=5)
    spec = history_files(CYCLE, 3)[0]
    size = write_file(tmp_path / "atmf.nc", spec, WriteContext(grid, 1, CYCLE, compression)).bytes
    assert abs(size / expected_bytes(spec, grid, compression) - 1) < 0.05


def test_c768_history_matches_the_operational_sizes():
    grid, compression = Grid("C768", 127), Compression(zlib_level=1, quantize_nsd=5)
    atmf, sfcf = history_files(CYCLE, 3)[:2]
    raw = (len(ATM_3D) * 127 + len(ATM_2D)) * 3072 * 1536 * 4
    assert 32e9 < raw < 35e9  # about 33 GB uncompressed
    assert 6.2e9 < expected_bytes(atmf, grid, compression) < 7.2e9  # operations: 6.68-6.78 GB
    assert 0.9e9 < expected_bytes(sfcf, grid, compression) < 1.2e9  # operations: 1.02-1.06 GB


def test_grib2_products_decode_and_their_index_points_at_each_message(tmp_path):
    import eccodes

    settings = ForecastSettings(pgrb2_fields=8, sflux_fields=3)
    grid = Grid("C12", 4)
    ctx = WriteContext(grid, 1, CYCLE)
    for spec in product_files(CYCLE, 3, settings):
        size = write_file(tmp_path / Path(spec.path).name, spec, ctx).bytes
        assert size == expected_bytes(spec, grid) or spec.kind == "grib_index"
    grib = tmp_path / "gdas.t06z.pgrb2.1p00.f003"
    index = (tmp_path / "gdas.t06z.pgrb2.1p00.f003.idx").read_text().splitlines()
    assert len(index) == 8 and index[0].startswith("1:0:d=2026010106:TMP:1000 mb:3 hour fcst:")
    with open(grib, "rb") as handle:
        for line in index:
            handle.seek(int(line.split(":")[1]))
            message = eccodes.codes_grib_new_from_file(handle)
            assert eccodes.codes_get(message, "Ni") == 360 and eccodes.codes_get(message, "forecastTime") == 3
            assert eccodes.codes_get(message, "dataDate") == 20260101
            eccodes.codes_release(message)


def test_inventory_command_prints_each_step_with_sizes(capsys):
    from cycleio.cli import main  # in this process: test_cli_bench runs `python -m cycleio` as a program

    assert main(["inventory", "--resolution", "C768"]) == 0
    text = capsys.readouterr().out
    assert "C768 L127" in text
    assert re.search(r"fcst: 126 files, 2\d\d\.\d GiB", text)
    assert re.search(r"4 x atm_history\s+6\d\d\d\.\d MiB\s+e\.g\. gdas\.t06z\.atmf000\.nc", text)
    assert re.search(r"18 x fv_core.res\s+45\d\d\.\d MiB", text)  # about 4.8 GB per tile


def runnable_seconds() -> float | None:
    """Seconds this thread has spent on a CPU or in a run queue waiting for one (Linux schedstat; None elsewhere).

    Unlike CPU time, this does not shrink when other processes share the cores: a busy thread is runnable all
    the time whether or not it gets a core, a sleeping one is not."""
    import threading

    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as handle:
            on_cpu, waiting = map(int, handle.read().split()[:2])
    except (OSError, ValueError):
        return None
    return (on_cpu + waiting) / 1e9


def test_compute_stand_in_burns_or_sleeps_for_the_seconds_it_is_given():
    """A step's compute stand-in lasts the seconds asked for, not more (a stand-in that overran would inflate the
    job's wall time and shrink its I/O share), and its record times it; burn keeps the CPU busy all that time while
    sleep leaves it idle, so each kind's check would fail for the other."""
    from cycleio.records import RecordLog
    from cycleio.surrogates.steps import compute

    class Scratch:  # the tier a record names
        @staticmethod
        def fields() -> dict:
            return {"tier": "shm", "tier_kind": "memory", "fs_type": "tmpfs"}

    seconds, busy = 0.3, {}
    for kind in ("sleep", "burn"):
        records = RecordLog(study="s", arm="shm", cycle=CYCLE)
        runnable0, cpu0, wall0 = runnable_seconds(), time.process_time(), time.perf_counter()
        compute(seconds, records, Scratch(), "prep", kind)
        wall = time.perf_counter() - wall0
        runnable = runnable_seconds()
        busy[kind] = (runnable - runnable0 if runnable is not None else time.process_time() - cpu0) / wall
        (record,) = records.records
        assert (record.step, record.phase, record.op, record.n_files) == ("prep", "run", "compute", 0)
        assert seconds <= record.seconds <= wall, (kind, record.seconds, wall)  # when it stops: the test below
    assert busy["burn"] > 0.9, busy  # runnable all the time: computing, or waiting for a core
    assert busy["sleep"] < 0.1, busy  # asleep
    compute(0.0, records, Scratch(), "prep", "burn")
    assert len(records.records) == 1  # no compute, no record


def test_burning_stops_at_the_first_look_at_the_clock_past_its_time(monkeypatch):
    """burn_cpu looks at the clock after each product and stops at the first look past its seconds: on a clock that
    moves 1 s a look, 2.5 s take the deadline's look, two products and the look that ends them, on any machine.
    Sleep is time.sleep itself."""
    from cycleio.surrogates import compute

    looks = []

    class Clock:
        @staticmethod
        def perf_counter() -> float:
            looks.append(None)
            return float(len(looks))

    monkeypatch.setattr(compute, "time", Clock)
    compute.burn_cpu(2.5)
    assert looks == [None] * 4  # 1 s: the deadline is 3.5 s; 2 s, 3 s: a product each; 4 s: done
    assert compute.COMPUTE_KINDS["sleep"] is time.sleep


def test_ensemble_jobs_write_every_members_history_with_data_of_its_own(tmp_path):
    import xarray as xr

    settings = ForecastSettings(members=10, members_per_job=4)
    assert settings.ensemble_jobs == ["efcs01", "efcs02", "efcs03"]
    jobs = {job: step_io(job, CYCLE, START, settings) for job in settings.ensemble_jobs}
    assert [len(io.writes) for io in jobs.values()] == [4 * 14, 4 * 14, 2 * 14]  # atmf + sfcf, f003-f009
    assert "enkfgdas.20260101/06/mem010/model/atmos/history/enkfgdas.t06z.atmf009.nc" in [
        s.path for s in jobs["efcs03"].writes]
    assert [s.path for s in jobs["efcs01"].reads] == ["gdas.20260101/06/analysis/atmos/gdas.t06z.atminc.nc"]
    ctx = WriteContext(Grid("C12", 2), 1, CYCLE)
    first, second = (next(s for s in jobs["efcs01"].writes if s.param("member") == m and s.kind == "atm_history")
                     for m in (1, 2))
    for spec in (first, second):
        write_file(tmp_path / spec.path, spec, ctx)
    with xr.open_dataset(tmp_path / first.path) as a, xr.open_dataset(tmp_path / second.path) as b:
        assert not a["tmp"].equals(b["tmp"])


def test_step_inventories_use_gdas_names():
    settings = ForecastSettings()
    fcst = step_io("fcst", "2026010106", "2026010100", settings)
    names = [spec.path.rsplit("/", 1)[-1] for spec in fcst.writes]
    assert "gdas.t06z.atmf009.nc" in names and "gdas.t06z.sfcf000.nc" in names
    assert "20260101.120000.fv_core.res.tile6.nc" in names  # restart valid at +6 h
    anal = step_io("anal", "2026010106", "2026010100", settings)
    assert "gdas.20260101/00/model/atmos/history/gdas.t00z.atmf003.nc" in [s.path for s in anal.reads]
