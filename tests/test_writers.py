"""surrogates.writers: real CF netCDF4 files; same seed, same data; compressed chunks as netCDF-C stores them."""

import subprocess

import numpy as np
import xarray as xr
from conftest import require_tool

from cycleio.surrogates.grid import Grid
from cycleio.surrogates.inventory import FileSpec
from cycleio.surrogates.context import WriteContext
from cycleio.surrogates.writers import write_file


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


def test_a_forecasts_history_files_open_as_one_time_series_with_dask(tmp_path):
    """As a downstream user opens a cycle's history: ``xr.open_mfdataset`` joins the forecast hours by their CF
    time coordinate into lazy dask arrays, a chunk per file, and computes from them."""
    import dask.array

    ctx = WriteContext(Grid("C12", 3), 1, "2026010106")
    paths = []
    for hour in (0, 3, 6, 9):
        spec = FileSpec(f"gdas.t06z.atmf{hour:03d}.nc", "atm_history", (("fhour", hour),))
        write_file(tmp_path / spec.path, spec, ctx)
        paths.append(tmp_path / spec.path)
    with xr.open_mfdataset(sorted(paths, reverse=True), chunks={}, combine="by_coords") as ds:
        assert [str(t)[:13] for t in ds["time"].values] == ["2026-01-01T06", "2026-01-01T09", "2026-01-01T12",
                                                           "2026-01-01T15"]
        tmp = ds["tmp"]
        assert isinstance(tmp.data, dask.array.Array) and tmp.data.numblocks[0] == 4
        assert 150 < float(tmp.mean(dim=("pfull", "grid_yt", "grid_xt")).max().compute()) < 300
        with xr.open_dataset(paths[2]) as one:
            xr.testing.assert_equal(ds["tmp"].isel(time=[2]).compute(), one["tmp"])


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


def test_codec_time_is_kept_apart_from_storage_time_and_files_are_what_netcdf_c_writes(tmp_path):
    """Compressed history: BitRound, shuffle and zlib run in cycleio (``encode``), the chunks go to
    HDF5 as stored; netCDF-C writing the same values with the same settings stores the same numbers."""
    import netCDF4

    from cycleio.config.forecast import Compression
    from cycleio.surrogates.readers import FileReader

    spec = FileSpec("gdas.t00z.atmf003.nc", "atm_history", (("fhour", 3),))
    ctx = WriteContext(Grid("C12", 4), 1, "2026010100", Compression(zlib_level=1, quantize_nsd=5))
    written = write_file(tmp_path / "ours.nc", spec, ctx)
    raw = write_file(tmp_path / "raw.nc", spec, WriteContext(Grid("C12", 4), 1, "2026010100"))
    assert written.cpu.encode > 0 and raw.cpu.encode == 0 and written.bytes < 0.5 * raw.bytes
    read = FileReader().read(tmp_path / "ours.nc", "atm_history")
    assert 0.9 * written.bytes < read.bytes <= written.bytes and read.cpu.decode > 0  # what was read: test_readers
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




def test_a_paired_step_s_page_probe_looks_once_per_file_after_its_data_are_made_and_outside_its_storage_time(
        tmp_path, monkeypatch):
    """hostmemory.FilePageProbe: a file built in memory takes fresh pages for its image before the page cache takes
    any, so the probe looks when the bytes are about to go out; its seconds are the instrument's (``probe``). The
    probe here takes an hour of the clock every timer reads, and no time of the machine's: whatever the machine's
    speed, an hour in the write's storage seconds would be the probe's."""
    import time

    from cycleio import hostmemory
    from cycleio.records import REPLAY, RecordLog
    from cycleio.surrogates import steps
    from cycleio.units import MiB

    made_before_look, hour, taken = [], 3600.0, [0.0]
    clock = time.perf_counter
    monkeypatch.setattr(time, "perf_counter", lambda: clock() + taken[0])

    def look(nbytes):
        made_before_look.append(ctx.times.generate > 0)
        taken[0] += hour
        return 7.0

    monkeypatch.setattr(hostmemory, "fresh_before_write", look)
    spec = FileSpec("gdas.t00z.atmf003.nc", "atm_history", (("fhour", 3),))
    ctx = WriteContext(Grid("C48", 8), 1, "2026010100")
    records = RecordLog(study="s", arm="a", cycle="2026010100", step="post", strategy="serial", attempt=1)
    tier = type("Tier", (), {"fields": lambda self: {"tier": "disk", "tier_kind": "node_local", "fs_type": "ext4"}})()
    steps.timed_write(tmp_path / "f.nc", spec, ctx, records, tier, "post", hostmemory.FilePageProbe())
    assert made_before_look == [True]  # one look, after the data were made
    write = next(r for r in records.records if r.op == "write")
    probe = next(r for r in records.records if r.op == "probe")
    assert write.fresh_MiB == 7.0 and write.bytes > 2 * MiB and write.seconds < hour
    assert probe.phase == REPLAY and probe.seconds >= hour and probe.fresh_MiB is None
    steps.timed_write(tmp_path / "g.nc", spec, ctx, records, tier, "post")  # not paired: no probe
    assert made_before_look == [True] and [r for r in records.records if r.op == "write"][-1].fresh_MiB is None


def root_group_stamps(image: bytes) -> set[int]:
    """Where a netCDF-4 file keeps its root group's time stamps and that header's checksum: HDF5 writes the clock's
    seconds there (superblock version 2: the root group's object header at byte 36; its flags say whether it holds
    times and phase-change values and how wide its size field is)."""
    assert image[8] == 2
    root = int.from_bytes(image[36:44], "little")
    assert image[root:root + 4] == b"OHDR"
    flags = image[root + 5]
    assert flags & 0x20  # times stored
    size_at = root + 6 + 16 + (4 if flags & 0x10 else 0)
    width = 1 << (flags & 0x03)
    end = size_at + width + int.from_bytes(image[size_at:size_at + width], "little")
    return set(range(root + 6, root + 22)) | set(range(end, end + 4))


def test_a_restart_tile_written_again_from_its_template_is_the_file_hdf5_writes(tmp_path):
    """A forecast writes six tiles of each restart kind, at every restart hour, with one structure: the second file
    of a structure is the first one's image with its chunks replaced, what netCDF-4 and HDF5 write from the same
    data but for the root group's time stamps (the first file's, seconds older), and holds its own data."""
    from cycleio.surrogates import h5chunks

    ctx = WriteContext(Grid("C12", 4), 1, "2026010100")
    for kind in ("fv_core.res", "sfc_data"):
        first, second = (FileSpec(f"RESTART/20260101.{hh}0000.{kind}.tile{tile}.nc", kind, (("tile", tile),))
                         for hh, tile in (("03", 1), ("06", 2)))
        h5chunks._templates.clear()
        write_file(tmp_path / "direct" / second.path, second, ctx)
        h5chunks._templates.clear()
        write_file(tmp_path / "first" / first.path, first, ctx)
        assert len(h5chunks._templates) == 1
        write_file(tmp_path / "again" / second.path, second, ctx)
        assert len(h5chunks._templates) == 1  # the template served it
        again = (tmp_path / "again" / second.path).read_bytes()
        direct = (tmp_path / "direct" / second.path).read_bytes()
        assert len(again) == len(direct)
        assert {i for i, (a, b) in enumerate(zip(again, direct)) if a != b} <= root_group_stamps(direct)
        with xr.open_dataset(tmp_path / "again" / second.path) as a, \
                xr.open_dataset(tmp_path / "first" / first.path) as b:
            assert set(a.data_vars) == set(b.data_vars)
            assert all(not np.array_equal(a[v].values, b[v].values) for v in a.data_vars)
