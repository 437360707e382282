"""One step's job: stage_in, run, stage_out, verify, cleanup, then the manifest, last.

Staging happens inside the job because node-local disk is seen only by the job's node and a
burst-buffer allocation lives only as long as the job. Every phase is timed into records.
"""

from __future__ import annotations

import logging
import os
import platform
import socket
import time
from pathlib import Path

from .calendar import is_half_cycle
from .config import ArmSettings
from .fsutil import file_checksum, write_json_atomic
from .grid import Grid
from .inventory import FileSpec, coldstart_files, step_io
from .ncfiles import WriteContext, read_file, write_file
from .records import RecordLog
from .staging import copy_file, remove_tree, verify_file
from .tiers import check_writable, filesystem_type

log = logging.getLogger("cycleio")
MiB = 2**20


class StepError(RuntimeError):
    """A step that cannot run or finish; the message names the file and the step."""


def _mib_per_s(nbytes: int, seconds: float) -> str:
    return f"{nbytes / MiB / seconds:.1f} MiB/s" if seconds > 0 else "-"


class TierContext:
    """A tier resolved where the job runs: its root for this arm and its probed filesystem type."""

    def __init__(self, tier, settings: ArmSettings):
        self.tier = tier
        self.base = tier.resolve(settings.study)
        check_writable(tier.name, self.base)
        self.root = self.base / settings.study / settings.arm
        self.fs_type = filesystem_type(self.base)

    def fields(self) -> dict:
        return {"tier": self.tier.name, "tier_kind": self.tier.kind, "fs_type": self.fs_type}

    def describe(self) -> dict:
        return {**self.fields(), "path": str(self.base.resolve()), "template": self.tier.path}


def provenance(settings: ArmSettings, tiers: dict[str, TierContext]) -> dict:
    import netCDF4
    import numpy

    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "netCDF4": netCDF4.__version__,
        "netcdf_c": netCDF4.__netcdf4libversion__,
        "hdf5": netCDF4.__hdf5libversion__,
        "numpy": numpy.__version__,
        "slurm_job_id": os.environ.get("SLURM_JOB_ID", ""),
        "tiers": {role: ctx.describe() for role, ctx in tiers.items()},
        "resolution": settings.resolution,
        "levels": settings.levels,
    }


def _stage(files: list[FileSpec], src_root: Path, dst_root: Path, phase: str, src: TierContext,
           dst: TierContext, records: RecordLog, label: str) -> dict[str, tuple[int, str]]:
    """Copy files between tiers and verify each landed copy; return path -> (bytes, checksum)."""
    landed: dict[str, tuple[int, str]] = {}
    total_bytes, t0 = 0, time.perf_counter()
    for spec in files:
        result = copy_file(src_root / spec.path, dst_root / spec.path)
        records.add(phase=phase, op="copy", file=spec.path, bytes=result.bytes, t_start=result.t_start,
                    seconds=result.seconds, **dst.fields())
        with records.timed(phase="verify", op="checksum", file=spec.path, bytes=result.bytes,
                           cache_risk=True, **dst.fields()):
            verify_file(result.dest, result.bytes, result.checksum)
        landed[spec.path] = (result.bytes, result.checksum)
        total_bytes += result.bytes
    seconds = time.perf_counter() - t0
    log.info("%s %s: %d files, %.1f MiB in %.2f s (%s, verified)", label, phase, len(files),
             total_bytes / MiB, seconds, _mib_per_s(total_bytes, seconds))
    return landed


def _timed_write(path: Path, spec: FileSpec, ctx: WriteContext, records: RecordLog, tier: TierContext) -> int:
    """Write one file; the write record times only I/O, data generation gets its own record."""
    t_start, t0 = time.time(), time.perf_counter()
    size, generate_s = write_file(path, spec, ctx)
    elapsed = time.perf_counter() - t0
    records.add(phase="run", op="write", file=spec.path, bytes=size, t_start=t_start,
                seconds=elapsed - generate_s, **tier.fields())
    records.add(phase="run", op="generate", file=spec.path, n_files=0, t_start=t_start, seconds=generate_s,
                **tier.fields())
    return size


def _compute(seconds: float, records: RecordLog, scratch: TierContext, label: str) -> None:
    if seconds <= 0:
        return
    with records.timed(phase="run", op="compute", n_files=0, **scratch.fields()):
        time.sleep(seconds)


def run_step(settings: ArmSettings, cycle: str, step: str, records_path: Path, manifest_path: Path,
             attempt: int = 1) -> dict:
    """Run one step of one cycle of one arm; return the manifest it wrote."""
    label = f"[{settings.arm} {cycle} {step}]"
    persistent = TierContext(settings.persistent, settings)
    scratch = TierContext(settings.scratch, settings) if settings.staged else persistent
    io = step_io(step, cycle, settings.start, settings.forecast)
    missing = [spec.path for spec in io.reads if not (persistent.root / spec.path).is_file()]
    if missing:
        raise StepError(
            f"{label} missing input on the persistent tier: {persistent.root / missing[0]}"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
            + "; it is written by an earlier step or the cold start"
        )
    records = RecordLog(study=settings.study, arm=settings.arm, cycle=cycle, step=step,
                        strategy=settings.strategy, attempt=attempt)
    ctx = WriteContext(Grid(settings.resolution, settings.levels), settings.seed, cycle, settings.compression)
    workdir = scratch.root / f".job.{cycle}.{step}" if settings.staged else persistent.root
    if settings.staged:
        remove_tree(workdir)  # leftovers of a killed attempt
        workdir.mkdir(parents=True)
        _stage(io.reads, persistent.root, workdir, "stage_in", persistent, scratch, records, label)

    log.info("%s run: reading %d files, writing %d files on %s", label, len(io.reads), len(io.writes), scratch.tier.name)
    for spec in io.reads:
        with records.timed(phase="run", op="read", file=spec.path, cache_risk=settings.staged,
                           **scratch.fields()) as event:
            event["bytes"] = read_file(workdir / spec.path, spec.kind)
    _write_outputs(settings, step, io.writes, workdir, ctx, records, scratch, label)

    if settings.staged:
        landed = _stage(io.writes, workdir, persistent.root, "stage_out", scratch, persistent, records, label)
        with records.timed(phase="cleanup", op="remove", **scratch.fields()) as event:
            event["n_files"] = remove_tree(workdir)
    else:
        landed = {}
        for spec in io.writes:
            path = persistent.root / spec.path
            with records.timed(phase="verify", op="checksum", file=spec.path, cache_risk=True,
                               **persistent.fields()) as event:
                event["bytes"] = path.stat().st_size
                landed[spec.path] = (event["bytes"], file_checksum(path))

    manifest = {
        "study": settings.study, "arm": settings.arm, "cycle": cycle, "step": step,
        "half_cycle": is_half_cycle(cycle, settings.start),
        "root": str(persistent.root.resolve()),
        "inputs": [spec.path for spec in io.reads],
        "outputs": [{"path": path, "bytes": size, "xxh3_64": checksum} for path, (size, checksum) in landed.items()],
        "provenance": provenance(settings, {"persistent": persistent, "scratch": scratch}),
    }
    records.write(records_path)
    write_json_atomic(manifest_path, manifest)  # last: its presence means the step is complete
    return manifest


def _write_outputs(settings: ArmSettings, step: str, writes: list[FileSpec], workdir: Path, ctx: WriteContext,
                   records: RecordLog, scratch: TierContext, label: str) -> None:
    """Write the step's files; the forecast computes between output hours, as the model does."""
    if step != "fcst":
        _compute(settings.step_compute_seconds.get(step, 0.0), records, scratch, label)
    previous_hour = 0
    for spec in writes:
        hour = spec.param("fhour")
        if step == "fcst" and hour is not None and hour > previous_hour:
            _compute(settings.compute_seconds_per_hour * (hour - previous_hour), records, scratch, label)
            previous_hour = hour
        _timed_write(workdir / spec.path, spec, ctx, records, scratch)
    total = sum(r.bytes for r in records.records if r.phase == "run" and r.op == "write")
    log.info("%s run: wrote %.1f MiB", label, total / MiB)


def run_coldstart(settings: ArmSettings, records_path: Path, manifest_path: Path) -> dict:
    """Generate the arm's cold-start initial conditions on the persistent tier, once."""
    persistent = TierContext(settings.persistent, settings)
    records = RecordLog(study=settings.study, arm=settings.arm, cycle=settings.start, step="coldstart",
                        strategy=settings.strategy)
    ctx = WriteContext(Grid(settings.resolution, settings.levels), settings.seed, settings.start, settings.compression)
    outputs = []
    for spec in coldstart_files(settings.start):
        path = persistent.root / spec.path
        size = _timed_write(path, spec, ctx, records, persistent)
        outputs.append({"path": spec.path, "bytes": size, "xxh3_64": file_checksum(path)})
    log.info("[%s coldstart] wrote %d files", settings.arm, len(outputs))
    records.write(records_path)
    manifest = {"study": settings.study, "arm": settings.arm, "cycle": settings.start, "step": "coldstart",
                "root": str(persistent.root.resolve()), "outputs": outputs,
                "provenance": provenance(settings, {"persistent": persistent})}
    write_json_atomic(manifest_path, manifest)
    return manifest
