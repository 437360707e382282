"""The surrogates write real CF netCDF4 files with the GDAS names; same seed, same data."""

import json
import subprocess

import numpy as np
import pytest
import xarray as xr
from conftest import require_tool

from cycleio.config.settings import ArmSettings
from cycleio.surrogates.grid import Grid
from cycleio.config.forecast import ForecastSettings
from cycleio.surrogates.inventory import FileSpec, step_io
from cycleio.surrogates.jobs import StepError, run_arrival, run_step
from cycleio.surrogates.context import WriteContext
from cycleio.surrogates.writers import write_file
from cycleio.config.tierspec import Tier


def arm(tmp_path, scratch="lustre", study="t") -> ArmSettings:
    lustre = Tier("lustre", "lustre", str(tmp_path / "lustre"))
    tiers = {"lustre": lustre, "shm": Tier("shm", "memory", str(tmp_path / "shm"), persistent=False, shared=False)}
    tiny = ForecastSettings(obs_scale=(12 / 768) ** 2, pgrb2_fields=6, sflux_fields=3, product_grids=("1p00",),
                            restart_hours=(6,))
    return ArmSettings(study=study, arm=scratch, start="2026010100", seed=7, resolution="C12", levels=4,
                       persistent=lustre, scratch=tiers[scratch], forecast=tiny,
                       write_component={"ranks": 1})  # one MPI rank: the decompositions are test_mpifcst's


def test_history_file_is_cf_netcdf4_on_the_gaussian_grid(tmp_path):
    spec = FileSpec("gdas.t00z.atmf003.nc", "atm_history", (("fhour", 3),))
    written = write_file(tmp_path / spec.path, spec, WriteContext(Grid("C12", 4), 1, "2026010100"))
    assert written.bytes > 48 * 24 * 4 * 4 * 14 and written.cpu.generate > 0 and written.io_s > 0
    with xr.open_dataset(tmp_path / spec.path) as ds:
        assert ds.attrs["Conventions"] == "CF-1.8"
        assert dict(ds["tmp"].sizes) == {"time": 1, "pfull": 4, "grid_yt": 24, "grid_xt": 48}
        assert ds["tmp"].attrs["units"] == "K" and ds["ugrd"].attrs["standard_name"] == "eastward_wind"
        assert str(ds["time"].values[0]).startswith("2026-01-01T03")  # decoded from CF time units
        assert 150 < float(ds["tmp"].mean()) < 300


def test_ncdump_prints_the_header(tmp_path):
    ncdump = require_tool("ncdump", "install Debian's netcdf-bin")
    spec = FileSpec("gdas.t00z.sfcf000.nc", "sfc_history", (("fhour", 0),))
    write_file(tmp_path / spec.path, spec, WriteContext(Grid("C12", 4), 1, "2026010100"))
    header = subprocess.run([ncdump, "-h", str(tmp_path / spec.path)], capture_output=True, text=True, check=True).stdout
    assert "float tmp2m(time, grid_yt, grid_xt)" in header and ':Conventions = "CF-1.8"' in header


def test_same_seed_gives_same_data_other_seed_differs(tmp_path):
    spec = FileSpec("gdas.t00z.atmf000.nc", "atm_history", (("fhour", 0),))
    paths = []
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        path = tmp_path / name / spec.path
        write_file(path, spec, WriteContext(Grid("C12", 3), seed, "2026010100"))
        paths.append(path)
    a, b, c = (xr.open_dataset(p) for p in paths)
    with a, b, c:
        xr.testing.assert_equal(a, b)
        assert not np.array_equal(a["tmp"].values, c["tmp"].values)


def test_step_inventories_use_gdas_names():
    settings = ForecastSettings()
    fcst = step_io("fcst", "2026010106", "2026010100", settings)
    names = [spec.path.rsplit("/", 1)[-1] for spec in fcst.writes]
    assert "gdas.t06z.atmf009.nc" in names and "gdas.t06z.sfcf000.nc" in names
    assert "20260101.120000.fv_core.res.tile6.nc" in names  # restart valid at +6 h
    anal = step_io("anal", "2026010106", "2026010100", settings)
    assert "gdas.20260101/00/model/atmos/history/gdas.t00z.atmf003.nc" in [s.path for s in anal.reads]


def test_anal_without_previous_forecast_names_the_missing_background_file(tmp_path, lay_cold_start):
    settings = arm(tmp_path)
    lay_cold_start(settings)
    run_arrival(settings, "2026010106", "dump", tmp_path / "d.jsonl", tmp_path / "d.json")
    run_step(settings, "2026010106", "prep", tmp_path / "p.jsonl", tmp_path / "p.json")
    with pytest.raises(StepError, match=r"anal\] missing input on the persistent tier: "
                       r".*/gdas\.20260101/00/model/atmos/history/gdas\.t00z\.atmf003\.nc \(and \d+ more\)"):
        run_step(settings, "2026010106", "anal", tmp_path / "r.jsonl", tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()


def test_staged_half_cycle_lands_verified_outputs_and_cleans_scratch(tmp_path, lay_cold_start):
    settings = arm(tmp_path, scratch="shm")
    lay_cold_start(settings)
    manifest = run_step(settings, "2026010100", "fcst", tmp_path / "r.jsonl", tmp_path / "m.json")
    root = tmp_path / "lustre" / "t" / "shm"
    assert manifest == json.loads((tmp_path / "m.json").read_text())
    for entry in manifest["outputs"]:
        assert (root / entry["path"]).stat().st_size == entry["bytes"]
    scratch_root = tmp_path / "shm" / "t" / "shm"
    assert list(scratch_root.iterdir()) == []  # the job folder was removed
    phases = {json.loads(line)["phase"] for line in (tmp_path / "r.jsonl").read_text().splitlines()}
    assert phases == {"stage_in", "run", "stage_out", "verify", "cleanup"}
    assert manifest["provenance"]["tiers"]["scratch"]["tier_kind"] == "memory"


@pytest.mark.parametrize("ny, splits", [(96, [0, 24, 48, 72, 96]), (37, [0, 5, 16, 17, 33, 37]), (8, [0, 3, 8])])
def test_any_rows_and_levels_of_a_field_are_the_same_numbers_made_alone(ny, splits):
    from cycleio.surrogates.fields import fill_block

    def block(key, levels, rows):
        out = np.empty((len(levels), rows[1] - rows[0], 50), np.float32)
        return fill_block(out, key, ny, 50, 280.0, 20.0, 0.05, levels, 6, rows)

    full = block((1234,), range(6), (0, ny))
    parts = [block((1234,), range(6), (a, b)) for a, b in zip(splits, splits[1:])]
    assert np.array_equal(np.concatenate(parts, axis=1), full)  # bit for bit: MPI ranks make only their rows
    assert np.array_equal(np.concatenate([block((1234,), range(0, 2), (0, ny)), block((1234,), range(2, 6), (0, ny))]),
                          full)  # and any blocks of levels
    assert not np.array_equal(full, block((1235,), range(6), (0, ny)))
    assert not np.array_equal(full[0], full[1])  # levels differ
    assert abs(float(full.mean()) - 280.0 * 0.8) < 20 and 0.5 < float(full[0].std()) < 20


def test_codec_time_is_kept_apart_from_storage_time_and_files_are_what_netcdf_c_writes(tmp_path):
    """Compressed history: BitRound, shuffle and zlib run in cycleio (``encode``), the chunks go to
    HDF5 as stored; netCDF-C writing the same values with the same settings stores the same numbers."""
    import netCDF4

    from cycleio.config.forecast import Compression
    from cycleio.surrogates.readers import read_file

    spec = FileSpec("gdas.t00z.atmf003.nc", "atm_history", (("fhour", 3),))
    ctx = WriteContext(Grid("C12", 4), 1, "2026010100", Compression(zlib_level=1, quantize_nsd=5))
    written = write_file(tmp_path / "ours.nc", spec, ctx)
    raw = write_file(tmp_path / "raw.nc", spec, WriteContext(Grid("C12", 4), 1, "2026010100"))
    assert written.cpu.encode > 0 and raw.cpu.encode == 0 and written.bytes < 0.5 * raw.bytes
    read = read_file(tmp_path / "ours.nc", "atm_history")
    assert read.bytes == written.bytes and read.cpu.decode > 0
    with netCDF4.Dataset(tmp_path / "raw.nc") as src, netCDF4.Dataset(tmp_path / "lib.nc", "w") as lib:
        for name, dim in src.dimensions.items():
            lib.createDimension(name, None if dim.isunlimited() else len(dim))
        for name in ("tmp", "pressfc"):
            var = src[name]
            settings = {"significant_digits": 5, "quantize_mode": "BitRound"} if var.ndim == 4 else {}
            out = lib.createVariable(name, var.dtype, var.dimensions, compression="zlib", complevel=1, shuffle=True,
                                     **settings)
            out[:] = var[:]
    with xr.open_dataset(tmp_path / "ours.nc") as ours, xr.open_dataset(tmp_path / "lib.nc") as lib:
        for name in ("tmp", "pressfc"):
            assert np.array_equal(ours[name].values.view(np.uint32), lib[name].values.view(np.uint32)), name
