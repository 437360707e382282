"""The staging engine on real directories and real filesystems (tmpfs mounts, file-size limits)."""

from __future__ import annotations

import errno
import os
import re
import resource
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import cannot_run_here, make_files, no_temporaries, require_tool, tmpfs

from cycleio import fsutil
from cycleio.storage import copyengine, staging
from cycleio.config.forecast import ForecastSettings
from cycleio.config.settings import ArmSettings, ConfigError, StagingSettings, build_study, validate_config
from cycleio.storage.checksums import checksum_file
from cycleio.runner.job import run_step
from cycleio.runner.persistentjobs import run_arrival, run_coldstart
from cycleio.workflow.preflight import check_study
from cycleio.records import read_records
from cycleio.faults import InjectedFault
from cycleio.storage.staging import copy_and_verify
from cycleio.storage.stagingtypes import StagingError, StagingFaults, StagingOptions
from cycleio.config.tierspec import Tier, TierError


# Observations and products scaled down to the C12 grid, as the smoke study does, and one restart set: the one
# the next cycle's forecast reads.
TINY = ForecastSettings(obs_scale=(12 / 768) ** 2, pgrb2_fields=6, sflux_fields=3, product_grids=("1p00",),
                        restart_hours=(6,))
# The forecast's MPI program on one rank: staging does not depend on how the forecast is decomposed
# (tests/test_launcher.py runs the decompositions).
ONE_RANK = {"ranks": 1}


@pytest.mark.parametrize("method, streams", [("cycleio", 1), ("cycleio", 4), ("cp", 2)])
def test_copies_are_verified_and_checksums_do_not_depend_on_streams(tmp_path, small_blocks, method, streams):
    contents = make_files(tmp_path / "src")
    pairs = [(tmp_path / "src" / n, tmp_path / "dst" / "sub" / n) for n in contents]
    results, land = copy_and_verify(pairs, StagingOptions(method=method, streams=streams))
    assert land.files == len(pairs) and land.bytes == sum(len(data) for data in contents.values())
    for (source, dest), (copied, verified) in zip(pairs, results):
        assert dest.read_bytes() == contents[source.name]
        assert copied.bytes == verified.bytes == len(contents[source.name])
        assert copied.checksum == checksum_file(source)  # the block tree, however it was copied
    assert no_temporaries(tmp_path / "dst")


def test_rsync_method_copies_and_verifies(tmp_path):
    require_tool("rsync", "install Debian's rsync (make test does, as root)")
    contents = make_files(tmp_path / "src")
    pairs = [(tmp_path / "src" / n, tmp_path / "dst" / n) for n in contents]
    copy_and_verify(pairs, StagingOptions(method="rsync"))
    assert all((tmp_path / "dst" / n).read_bytes() == data for n, data in contents.items())


@pytest.mark.parametrize("options", [StagingOptions(streams=4), StagingOptions(streams=4, direct_io_verify=True),
                                     StagingOptions(method="cp", streams=2)], ids=["inline", "direct", "cp"])
def test_a_corrupted_copy_is_caught_and_removed(tmp_path, small_blocks, options):
    """faults.corrupt_staged_file: a byte of a landed copy flipped before its verification, however it is verified."""
    contents = make_files(tmp_path / "src")
    pairs = [(tmp_path / "src" / n, tmp_path / "dst" / n) for n in contents]
    options = replace(options, faults=StagingFaults(corrupt=tmp_path / "dst" / "big.nc"))
    with pytest.raises(StagingError, match=r"dst/big\.nc: checksum .* does not match the source's .* \(corrupt copy\)"):
        copy_and_verify(pairs, options)
    assert not list((tmp_path / "dst").iterdir())  # nothing of the failed batch has a final name, no temporaries


def test_a_stage_out_failing_after_k_files_lands_nothing(tmp_path, small_blocks):
    """faults.fail_stage_out: the batch stops taking work after K files; not one file gets its final name."""
    contents = make_files(tmp_path / "src")
    pairs = [(tmp_path / "src" / n, tmp_path / "dst" / n) for n in contents]
    copied: list[int] = []
    options = StagingOptions(streams=4, faults=StagingFaults(fail_after_files=5))
    with pytest.raises(InjectedFault, match=rf"injected fault \(config faults.fail_stage_out\): the copy of .*dst/.* "
                                            rf"fails after 5 of {len(pairs)} files"):
        copy_and_verify(pairs, options, progress=lambda done, total, nbytes: copied.append(done))
    assert max(copied) == 5
    assert not list((tmp_path / "dst").iterdir())


def test_direct_io_verification_reads_storage_on_disk_and_still_verifies_on_tmpfs(tmp_path):
    make_files(tmp_path / "src")
    options = StagingOptions(direct_io_verify=True)
    ((_, on_disk),), _ = copy_and_verify([(tmp_path / "src" / "big.nc", tmp_path / "disk" / "big.nc")], options)
    assert on_disk.direct_io  # ext4 (and most disk filesystems) allow O_DIRECT
    shm = Path("/dev/shm") / f"cycleio-test-direct-{os.getpid()}"
    try:  # tmpfs allows O_DIRECT only on recent kernels; either way the copy is verified
        ((copied, verified),), _ = copy_and_verify([(tmp_path / "src" / "big.nc", shm / "big.nc")], options)
        assert verified.bytes == copied.bytes
    finally:
        fsutil.remove_tree(shm)


def _copy_under_file_size_limit(source: str, dest: str, limit: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG instead of being killed
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        copy_and_verify([(Path(source), Path(dest))], StagingOptions())
    except StagingError as err:
        print(err)
        sys.exit(3)


def test_file_size_limit_fails_cleanly_without_a_partial_final_file(tmp_path):
    make_files(tmp_path / "src")
    code = (
        "import sys; sys.path[:0] = sys.argv[4:];"
        "from test_staging import _copy_under_file_size_limit as f; f(sys.argv[1], sys.argv[2], int(sys.argv[3]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "src" / "big.nc"), str(tmp_path / "dst" / "big.nc"), str(2**20),
         str(Path(__file__).parent), *sys.path],
        capture_output=True, text=True,
    )
    assert result.returncode == 3, result.stderr
    assert "File too large" in result.stdout and "big.nc" in result.stdout
    assert not (tmp_path / "dst" / "big.nc").exists() and no_temporaries(tmp_path / "dst")


def arm_on(persistent: Path, scratch: Path | None, study="t", **staging_options) -> ArmSettings:
    lustre = Tier("lustre", "lustre", str(persistent))
    scratch_tier = Tier("shm", "memory", str(scratch), persistent=False, shared=False) if scratch else lustre
    return ArmSettings(study=study, arm=scratch_tier.name, start="2026010100", seed=3, resolution="C12", levels=4,
                       persistent=lustre, scratch=scratch_tier, staging=StagingSettings(**staging_options),
                       forecast=TINY, write_component=ONE_RANK)


def test_full_persistent_tier_fails_stage_out_with_the_os_error_then_rerun_succeeds(tmp_path):
    with tmpfs(tmp_path / "lustre", "16m") as lustre:
        settings = arm_on(lustre, tmp_path / "scratch")
        # prep, the cheapest staged step: stages in the dumps, stages out its three files (16, 2.4 and 1.7 kB)
        run_arrival(settings, "2026010106", "dump", tmp_path / "d.jsonl", tmp_path / "d.json")
        filler = lustre / "filler"
        free = os.statvfs(lustre).f_bavail * os.statvfs(lustre).f_frsize
        filler.write_bytes(b"\0" * (free - 8 * 1024))  # leave 8 KiB: less than the prepbufr file alone
        with pytest.raises(StagingError, match=r"copy .* failed: \[Errno 28\] No space left on device"):
            run_step(settings, "2026010106", "prep", tmp_path / "r.jsonl", tmp_path / "m.json")
        assert not (tmp_path / "m.json").exists() and not (tmp_path / "r.jsonl").exists()
        assert no_temporaries(lustre)
        assert not list((tmp_path / "scratch").rglob(".job.*")), "the failed attempt's scratch folder is left"
        filler.unlink()
        manifest = run_step(settings, "2026010106", "prep", tmp_path / "r.jsonl", tmp_path / "m.json")
        root = Path(manifest["root"])
        assert all((root / o["path"]).stat().st_size == o["bytes"] for o in manifest["outputs"])
        assert all(checksum_file(root / o["path"]) == o["xxh3_64"] for o in manifest["outputs"])


def test_unwritable_tiers_are_refused_before_and_inside_jobs(tmp_path, repo):
    import yaml

    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    config = yaml.safe_load((repo / "config" / "config.yaml").read_text())
    config["tiers"]["node_local"]["path"] = str(blocker / "scratch")
    study = build_study(validate_config(config))
    with pytest.raises(ConfigError, match=r"tier 'node_local': path .*a-file/scratch.* cannot be written: .*a-file is not a folder"):
        check_study(study)
    with tmpfs(tmp_path / "ro", "1m", readonly=True) as readonly:
        settings = arm_on(tmp_path / "lustre", readonly / "scratch")
        with pytest.raises(TierError, match=r"tier 'shm': path .*ro/scratch.* is not writable \(Read-only file system\)"):
            run_step(settings, "2026010100", "fcst", tmp_path / "r.jsonl", tmp_path / "m.json")


def test_missing_variable_is_a_clear_error_before_the_study(repo, monkeypatch):
    import yaml

    monkeypatch.delenv("CYCLEIO_TEST_UNSET", raising=False)
    config = yaml.safe_load((repo / "config" / "config.yaml").read_text())
    config["tiers"]["node_local"]["path"] = "$CYCLEIO_TEST_UNSET/scratch"
    with pytest.raises(ConfigError, match=r"tiers.node_local.path.*uses \$CYCLEIO_TEST_UNSET, which is not set"):
        validate_config(config)


def test_granularity_sweep_makes_one_arm_per_tier_and_granularity(repo):
    import yaml

    config = yaml.safe_load((repo / "config" / "config.yaml").read_text())
    config["staging"]["granularity"] = ["step", "cycle"]
    study = build_study(validate_config(config))
    assert list(study.arms) == ["lustre", "node_local_per_step", "node_local_per_cycle", "shm_per_step", "shm_per_cycle"]
    assert study.arms["shm_per_cycle"].granularity == "cycle" and study.arms["lustre"].granularity == "step"


@pytest.mark.integration
def test_per_cycle_job_stages_only_external_inputs_and_all_outputs(tmp_path, lay_cold_start):
    settings = arm_on(tmp_path / "lustre", tmp_path / "scratch")
    lay_cold_start(settings)
    run_step(settings, "2026010100", "cycle", tmp_path / "r0.jsonl", tmp_path / "m0.json")
    run_arrival(settings, "2026010106", "dump", tmp_path / "d.jsonl", tmp_path / "d.json")
    manifest = run_step(settings, "2026010106", "cycle", tmp_path / "r.jsonl", tmp_path / "m.json")
    records = read_records(tmp_path / "r.jsonl")
    staged_in = {r["file"] for r in records if r["phase"] == "stage_in" and r["op"] == "copy"}
    assert staged_in == set(manifest["inputs"])
    assert not any("prepbufr" in f or "atminc" in f for f in staged_in)  # made inside the job
    assert any("crisf4.tm00.bufr_d" in f for f in staged_in)  # satellite dumps, read by the analysis
    assert {r["step"] for r in records if r["phase"] == "run"} == {"prep", "anal", "fcst", "post"}
    assert len([r for r in records if r["phase"] == "stage_out" and r["op"] == "copy"]) == len(manifest["outputs"])


def test_dropping_caches_marks_reads_as_from_storage(tmp_path):
    if os.geteuid() != 0:
        cannot_run_here("dropping the page cache needs root")
    settings = arm_on(tmp_path / "lustre", None, drop_caches=True)
    # prep reads the dumps just written (in the page cache): the cheapest step with reads, and every step's
    # reads go through the same reader after the same drop
    run_arrival(settings, "2026010106", "dump", tmp_path / "d.jsonl", tmp_path / "d.json")
    run_step(settings, "2026010106", "prep", tmp_path / "r.jsonl", tmp_path / "m.json")
    reads = [r for r in read_records(tmp_path / "r.jsonl") if r["op"] == "read"]
    assert reads and not any(r["cache_risk"] for r in reads)
    assert all(r["cached_fraction"] == 0.0 for r in reads)  # and the records measured that they were


def test_copies_onto_scratch_are_verified_and_renamed_but_not_synced(tmp_path, monkeypatch, small_blocks):
    contents = make_files(tmp_path / "src")
    synced: list = []
    monkeypatch.setattr(staging, "make_durable", lambda paths: synced.append(paths))
    monkeypatch.setattr(copyengine, "_sync_file_range", lambda *args: synced.append(args) or 0)
    monkeypatch.setattr(staging.os, "fsync", lambda fd: synced.append(fd))
    pairs = [(tmp_path / "src" / n, tmp_path / "dst" / n) for n in contents]
    results, _ = copy_and_verify(pairs, StagingOptions(streams=4, durable=False))
    assert not synced
    assert all((tmp_path / "dst" / n).read_bytes() == data for n, data in contents.items())
    assert all(verified is not None for _, verified in results) and no_temporaries(tmp_path / "dst")


def test_temporaries_left_by_a_killed_copy_are_removed_when_the_files_are_copied_again(tmp_path):
    contents = make_files(tmp_path / "src")
    dst = tmp_path / "dst"
    dst.mkdir()
    stale = dst / ".big.nc.tmp-999999"  # what a copy killed before its rename leaves
    stale.write_bytes(b"half a file")
    other = dst / ".unrelated.nc.tmp-999999"  # not a file of this batch: left alone
    other.write_bytes(b"x")
    pairs = [(tmp_path / "src" / n, dst / n) for n in contents]
    copy_and_verify(pairs, StagingOptions(streams=2))
    assert not stale.exists() and other.exists()
    assert (dst / "big.nc").read_bytes() == contents["big.nc"]


def test_a_baseline_step_rerun_removes_the_temporaries_of_its_killed_attempt(tmp_path):
    settings = arm_on(tmp_path / "lustre", None)
    # run_step sweeps the outputs' temporaries before any step runs: prep, the cheapest step, shows it
    run_arrival(settings, "2026010106", "dump", tmp_path / "d.jsonl", tmp_path / "d.json")
    manifest = run_step(settings, "2026010106", "prep", tmp_path / "r.jsonl", tmp_path / "m.json")
    output = Path(manifest["root"]) / manifest["outputs"][0]["path"]
    stale = output.with_name(f".{output.name}.tmp-999999")  # as a killed writer leaves it
    stale.write_bytes(b"half a file")
    run_step(settings, "2026010106", "prep", tmp_path / "r2.jsonl", tmp_path / "m2.json")
    assert not stale.exists() and output.exists()


@pytest.mark.integration
def test_a_cold_start_rerun_removes_the_temporaries_of_its_killed_attempt(tmp_path):
    settings = arm_on(tmp_path / "lustre", None)
    manifest = run_coldstart(settings, tmp_path / "c.jsonl", tmp_path / "c.json")
    output = Path(manifest["root"]) / manifest["outputs"][0]["path"]
    stale = output.with_name(f".{output.name}.tmp-999999")
    stale.write_bytes(b"half a file")
    run_coldstart(settings, tmp_path / "c2.jsonl", tmp_path / "c2.json")
    assert not stale.exists() and output.exists()


def test_a_full_tier_fails_every_write_path_naming_enospc_and_the_file(tmp_path, lay_cold_start):
    from cycleio.surrogates.grid import Grid
    from cycleio.surrogates.inventory import coldstart_files
    from cycleio.surrogates.context import WriteContext
    from cycleio.surrogates.writers import write_file

    with tmpfs(tmp_path / "lustre", "64m") as lustre:
        settings = arm_on(lustre, None)  # the baseline: steps write straight onto the tier
        lay_cold_start(settings)
        free = os.statvfs(lustre).f_bavail * os.statvfs(lustre).f_frsize
        (lustre / "filler").write_bytes(b"\0" * (free - 2 * 2**20))
        # the MPI forecast: its ranks' files, and their error files, are on the full tier
        with pytest.raises(Exception, match=r"No space left on device") as failed:
            run_step(settings, "2026010100", "fcst", tmp_path / "r.jsonl", tmp_path / "m.json")
        assert re.search(r"No space left on device: '[^']+\.nc'", str(failed.value)), failed.value  # names the file
        # an in-process writer (netCDF through HDF5): the error carries ENOSPC and the file's name
        spec = max(coldstart_files("2026010100"), key=lambda s: s.kind.startswith("restart"))
        dest = lustre / "direct" / spec.path
        with pytest.raises(OSError) as direct:
            for _ in range(4):
                write_file(dest, spec, WriteContext(Grid("C48", 127), 1, "2026010100", settings.compression))
        assert direct.value.errno == errno.ENOSPC and direct.value.filename == str(dest)
        assert no_temporaries(lustre)
