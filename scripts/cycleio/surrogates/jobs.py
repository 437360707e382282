"""One job: stage_in, run, stage_out, verify, cleanup, then the manifest, last.

A job runs one step (the default granularity) or a whole cycle (granularity ``cycle``: inputs
staged once, all four steps on scratch, outputs staged once). Staging happens inside the job
because node-local disk is seen only by the job's node and a burst-buffer allocation lives only as
long as the job. Every phase is timed into records.
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import socket
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

from ..config.calendar import com_dir, is_half_cycle
from ..config.keys import is_replay_job
from ..config.settings import ArmSettings
from ..faults import JobFaults, filled
from ..hostmemory import FilePageProbe, free_page_reporting
from ..kernelio import ProcIO, Window, counted
from ..storage.checksums import checksum_file
from ..fsutil import remove_tree, write_json_atomic
from .grid import Grid
from ..config.forecast import cycle_steps
from .inventory import FileSpec, coldstart_files, job_files, step_io
from .kinds import GRIB_KINDS, expected_bytes
from .context import WriteContext
from .readers import FileReader, evict_inputs
from .transfers import Transfer
from .writers import write_file
from ..records import REPLAY, RecordLog
from ..storage.pagecache import EVICTED_BELOW, cache_risk, drop_page_cache
from ..storage.staging import copy_and_verify, remove_stale_temporaries
from ..storage.stagingtypes import StagingFaults, StagingOptions
from ..storage.slowfs import slowed
from ..storage.tiers import TierSite
from .compute import COMPUTE_KINDS
from ..units import MiB

log = logging.getLogger("cycleio")


class StepError(RuntimeError):
    """A step that cannot run or finish; the message names the file and the step."""


def _mib_per_s(nbytes: int, seconds: float) -> str:
    return f"{nbytes / MiB / seconds:.1f} MiB/s" if seconds > 0 else "-"


def provenance(settings: ArmSettings, tiers: dict[str, TierSite], mpi: dict | None = None, **job) -> dict:
    """Where and with what the job ran; ``job``: what only some jobs have (a step's staging settings).

    ``mpi``: in a forecast's job, the launcher it started the ranks with and what they reported of their MPI
    (launcher.run_forecast_mpi's ``info``); every other job's manifest says that it started no MPI program
    (and reads no launcher setting: its rule does not pass them).
    """
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
        **free_page_reporting(),  # buffered writes follow the guest's memory where it is on (hostmemory)
        "tiers": {role: ctx.describe() for role, ctx in tiers.items()},
        "resolution": settings.resolution,
        "levels": settings.levels,
        "mpi": mpi or {"launcher": "", "python": sys.executable, "note": "this job starts no MPI program"},
        **job,
    }


def _options(settings: ArmSettings) -> StagingOptions:
    staging = settings.staging
    return StagingOptions(method=staging.method, streams=staging.streams, direct_io_verify=staging.direct_io_verify)


def _stage(files: list[FileSpec], src_root: Path, dst_root: Path, phase: str, step: str, src: TierSite,
           dst: TierSite, records: RecordLog, options: StagingOptions, label: str,
           faults: JobFaults = JobFaults({})) -> dict[str, tuple[int, str]]:
    """Copy files between tiers and verify each landed copy; return path -> (bytes, checksum)."""
    landed: dict[str, tuple[int, str]] = {}
    t0 = time.perf_counter()
    last_report = [t0]

    def progress(done: int, total: int, nbytes: int) -> None:
        if time.perf_counter() - last_report[0] > 10:
            last_report[0] = time.perf_counter()
            log.info("%s %s: %d of %d files, %.1f MiB so far", label, phase, done, total, nbytes / MiB)

    pairs = [(src_root / spec.path, dst_root / spec.path) for spec in files]
    # Copies onto scratch need not survive a crash (the job would start again from the persistent tier).
    options = replace(options, durable=dst.tier.persistent, faults=StagingFaults(
        corrupt=dst_root / files[0].path if files and faults.corrupt_staged_file(phase) else None,
        fail_after_files=faults.fail_stage_out_after() if phase == "stage_out" else None))
    results, land = copy_and_verify(pairs, options, progress)
    records.add(step=step, phase=phase, op="sync", n_files=land.files, t_start=land.t_start, seconds=land.seconds,
                tool=options.method, **dst.fields())
    for spec, (copied, verified) in zip(files, results):
        records.add(step=step, phase=phase, op="copy", file=spec.path, bytes=copied.bytes, t_start=copied.t_start,
                    seconds=copied.seconds, tool=options.method, **dst.fields())
        if copied.source_checksum_seconds:
            records.add(step=step, phase=phase, op="checksum", file=spec.path, bytes=copied.bytes,
                        t_start=copied.t_start, seconds=copied.source_checksum_seconds, **src.fields())
        records.add(step=step, phase="verify", op="checksum", file=spec.path, bytes=verified.bytes,
                    t_start=verified.t_start, seconds=verified.seconds,
                    cache_risk=cache_risk("checksum", memory=dst.is_memory, direct_io=verified.direct_io),
                    **dst.fields())
        landed[spec.path] = (copied.bytes, copied.checksum)
    seconds = time.perf_counter() - t0
    total = sum(size for size, _ in landed.values())
    log.info("%s %s: %d files, %.1f MiB in %.2f s (%s, %s, %d streams, verified)", label, phase, len(files),
             total / MiB, seconds, _mib_per_s(total, seconds), options.method, options.streams)
    return landed


# The instrument's own work inside a step's run: a paired step's page probe (hostmemory) and the eviction of an input's
# pages before it is read (reads_from_storage). Their records are phase ``replay``, as the paired replay's are: out of
# the step's storage seconds and its job's wall time.
INSTRUMENT_OPS = ("probe", "evict")


def _phase_of(op: str, phase: str = "run") -> str:
    """The phase of a record made in ``phase``: the instrument's ops (``INSTRUMENT_OPS``) are not the step's."""
    return REPLAY if op in INSTRUMENT_OPS else phase


def _record_transfer(records: RecordLog, op: str, spec: FileSpec, t_start: float, transfer: Transfer, **fields) -> None:
    """A file's storage I/O as one record, and each kind of CPU work kept apart from it as its own."""
    records.add(op=op, file=spec.path, bytes=transfer.bytes, t_start=t_start, seconds=transfer.io_s,
                transfers=transfer.cpu.transfers, cached_fraction=transfer.cached_fraction, **fields)
    for other, seconds in transfer.cpu.seconds().items():
        if seconds > 0 or other == "generate" and op == "write":
            cpu_fields = {k: v for k, v in fields.items() if k not in ("cache_risk", "fresh_MiB")}
            records.add(op=other, file=spec.path, n_files=0, t_start=t_start, seconds=seconds,
                        **{**cpu_fields, "phase": _phase_of(other, fields["phase"])})


def _timed_write(path: Path, spec: FileSpec, ctx: WriteContext, records: RecordLog, tier: TierSite,
                 step: str, probe_pages: bool = False) -> int:
    """Write one file; the write record times only storage I/O, CPU work gets records of its own."""
    if probe_pages:
        ctx.times.pages = ctx.times.pages or FilePageProbe()
        ctx.times.pages.arm(expected_bytes(spec, ctx.grid, ctx.compression))
    t_start = time.time()
    transfer = write_file(path, spec, ctx)
    fresh = ctx.times.pages.take() if ctx.times.pages is not None else None
    _record_transfer(records, "write", spec, t_start, transfer, step=step, phase="run", fresh_MiB=fresh,
                     **tier.fields())
    return transfer.bytes


def _compute(seconds: float, records: RecordLog, scratch: TierSite, step: str, kind: str = "sleep") -> None:
    if seconds <= 0:
        return
    with records.timed(step=step, phase="run", op="compute", n_files=0, **scratch.fields()):
        COMPUTE_KINDS[kind](seconds)


def _run_step(settings: ArmSettings, step: str, io, workdir: Path, ctx: WriteContext, records: RecordLog,
              scratch: TierSite, cache_cold: bool, label: str, faults: JobFaults = JobFaults({}),
              mpi: dict | None = None, kernel: Window | None = None, probe_pages: bool = False) -> None:
    """A step's own work on scratch: read its inputs, compute, write its outputs at its cadence.

    ``kernel``: the kernel's count of this run (kernelio.counted), told what of it is not the step's own I/O.
    ``probe_pages``: each write record keeps the fresh pages its file met (hostmemory.fresh_before_write).
    """
    faults.fail_step(step, ctx.cycle)
    reader = FileReader()
    if settings.staging.reads_from_storage:
        evict_inputs([workdir / spec.path for spec in io.reads], records, scratch, step)
    for spec in io.reads:
        t_start = time.time()
        transfer = reader.read(workdir / spec.path, spec.kind)
        from_storage = cache_cold or (transfer.cached_fraction is not None and transfer.cached_fraction < EVICTED_BELOW)
        _record_transfer(records, "read", spec, t_start, transfer, step=step, phase="run",
                         cache_risk=cache_risk("read", memory=scratch.is_memory, dropped=from_storage),
                         **scratch.fields())
    if step == "fcst":
        # The forecast is an MPI program (surrogates/forecast): the compute stand-in per forecast hour on
        # the compute ranks, and each output hour's history and restart files by the arm's strategy.
        from .forecast.launcher import run_forecast_mpi

        from .forecast.launcher import launch_provenance

        info: dict = {}
        outside: list[dict] = []  # the ranks' start-up, which the kernel counts in this process once they end
        for event in run_forecast_mpi(settings, ctx.cycle, workdir, io.writes, ctx, label=label,
                                      fail_rank=faults.fail_rank(), info=info, kernel_outside=outside,
                                      probe_pages=probe_pages):
            records.add(step=step, phase=_phase_of(event["op"]), **event, **scratch.fields())
        for counts in outside if kernel is not None else ():
            kernel.exclude(ProcIO.from_dict(counts))
        if mpi is not None:  # for the job's manifest
            mpi.update({**launch_provenance(settings), **info})
    else:
        _compute(settings.step_compute_seconds.get(step, 0.0), records, scratch, step, settings.compute_kind)
        for spec in io.writes:
            _timed_write(workdir / spec.path, spec, ctx, records, scratch, step, probe_pages)
    written = sum(r.bytes for r in records.records if r.step == step and r.op == "write")
    log.info("%s run %s: read %d files, wrote %d files, %.1f MiB", label, step, len(io.reads), len(io.writes),
             written / MiB)


def _verify_in_place(outputs: list[FileSpec], persistent: TierSite, records: RecordLog,
                     options: StagingOptions, root: Path | None = None) -> dict[str, tuple[int, str]]:
    """An unstaged job's outputs, checksummed where the run wrote them (below ``root``, by default the persistent
    tier's folder of the arm); return path -> (bytes, checksum)."""
    landed = {}
    for spec in outputs:
        path = (root or persistent.root) / spec.path
        with records.timed(phase="verify", op="checksum", file=spec.path,
                           cache_risk=cache_risk("checksum", memory=persistent.is_memory),
                           **persistent.fields()) as event:
            event["bytes"] = path.stat().st_size
            landed[spec.path] = (event["bytes"], checksum_file(path, options))
    return landed


def _import_libraries(per_step: dict) -> None:
    """Import now what the steps would import on first use, so that Python's reads of the libraries'
    files (h5py about 3 MB, ecCodes 1.6 MB, the forecast's launcher) stay out of the kernel's count of
    the run (kernelio.counted): prep, moving about 1.5 MiB, would otherwise read three times its records."""
    import h5py  # noqa: F401: netCDF-4 reads and writes

    if any(spec.kind in GRIB_KINDS for io in per_step.values() for spec in io.writes):
        import eccodes  # noqa: F401
    if "fcst" in per_step:
        from .forecast import launcher  # noqa: F401


def _keep_failed_attempt(records: RecordLog, folder: Path, attempt: int, phase: str, t_start: float, seconds: float,
                         tier: TierSite) -> None:
    """A failed attempt's records, and a ``failed`` record spanning the attempt, in a file of their own
    (``folder``/attemptN.PID.records.jsonl): kept for the record, read by no table."""
    records.add(phase=phase, op="failed", n_files=0, t_start=t_start, seconds=seconds, **tier.fields())
    path = folder / f"attempt{attempt}.{os.getpid()}.records.jsonl"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        records.write(path)
        log.info("kept the records of failed attempt %d in %s", attempt, path)
    except OSError as err:
        log.warning("could not keep the records of failed attempt %d in %s: %s", attempt, path, err)


def run_step(settings: ArmSettings, cycle: str, step: str, records_path: Path, manifest_path: Path,
             attempt: int = 1, failed_attempts: Path | None = None, replay=None) -> dict:
    """Run one step of one cycle (``step`` = ``cycle`` runs all the cycle's steps in one job).

    ``attempt`` is Snakemake's (1, then 2 for a retry), which the records carry; a failed attempt's
    records go to ``failed_attempts`` if given. The config's ``faults`` aimed at this job fire here.
    ``replay``: for a job paired with a replay (benchmarks.paired.PairedReplay), its ``run`` right after
    each step, in the step's folder on scratch; fio's own output goes beside the records (``*.replay.raw``).

    The kernel counts each phase's I/O beside the records (kernelio.counted, one window each: stage_in,
    each step's run, stage_out with its verify, cleanup; unstaged: run and verify). Inside a window: this
    process's reads and writes, its threads', and those of the children it reaps (the forecast's launcher
    and ranks), the log's lines and the counters' own reads (a few KiB). Left out: the libraries' imports
    (done before the windows open: _import_libraries), the forecast ranks' start-up (each rank reports it),
    the paired replay, and everything between the windows (the page-cache drop, the manifest, the records).
    """
    t_job, t0 = time.time(), time.perf_counter()
    label = f"[{settings.arm} {cycle} {step}]"
    if is_replay_job(step):  # a replay job from a Darshan log (surrogates/replayjob.py): its files and run
        return _run_replay_step(settings, cycle, step, records_path, manifest_path, attempt, failed_attempts, label,
                                replay)
    faults = JobFaults(settings.faults, attempt)
    steps = list(cycle_steps(cycle, settings.start, settings.forecast)) if step == "cycle" else [step]
    persistent = TierSite(settings.persistent, settings.study, settings.arm)
    scratch = TierSite(settings.scratch, settings.study, settings.arm) if settings.staged else persistent
    inputs, outputs, per_step = job_files(settings, cycle, steps)
    missing = [spec.path for spec in inputs if not (persistent.root / spec.path).is_file()]
    if missing:
        raise StepError(
            f"{label} missing input on the persistent tier: {persistent.root / missing[0]}"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
            + "; it is written by an earlier step or the cold start, and a finished cycle's cleanup removes it "
            "(cycles.keep): to rerun old cycles, rerun the study from its cold start (--forcerun coldstart) or keep "
            "every cycle (cycles.keep: null)"
        )
    records = RecordLog(study=settings.study, arm=settings.arm, cycle=cycle, step=step,
                        strategy=settings.strategy, attempt=attempt)
    ctx = WriteContext(Grid(settings.resolution, settings.levels), settings.seed, cycle, settings.compression)
    options = _options(settings)
    workdir = scratch.root / f".job.{cycle}.{step}" if settings.staged else persistent.root
    if settings.staged:
        remove_tree(workdir)  # leftovers of a killed attempt
        workdir.mkdir(parents=True)
    phase = "stage_in"
    mpi: dict = {}  # what the forecast's ranks report of their MPI
    try:
        if settings.staged:
            with counted(records, step=step, phase="stage_in", **scratch.fields()):
                _stage(inputs, persistent.root, workdir, "stage_in", step, persistent, scratch, records, options,
                       label, faults)
        else:  # the steps write straight onto the persistent tier: sweep a killed attempt's temporaries
            remove_stale_temporaries([persistent.root / spec.path for spec in outputs])

        cache_cold = False
        if settings.staging.drop_caches:
            cache_cold = drop_page_cache()
            if not cache_cold:
                log.warning("%s drop_caches is set but needs root: reads may come from the page cache", label)
        phase = "run"
        _import_libraries(per_step)
        for name in steps:
            with filled(workdir, faults.fill_tier(name)), slowed(workdir, faults.slow_tier(name)) as rundir:
                with counted(records, step=name, phase="run", **scratch.fields()) as kernel:
                    # a paired step's writes are set against its replay at the share of fresh pages they met
                    _run_step(settings, name, per_step[name], rundir, ctx, records, scratch, cache_cold, label,
                              faults, mpi, kernel, probe_pages=replay is not None)
                if replay is not None:
                    phase = "replay"
                    replay.run(name, records, scratch, rundir / f".replay.{cycle}.{name}",
                               records_path.with_name(f"{step}.replay.raw"), label)
                    phase = "run"

        if settings.staged:
            phase = "stage_out"
            with counted(records, step=step, phase="stage_out", **persistent.fields()):
                landed = _stage(outputs, workdir, persistent.root, "stage_out", step, scratch, persistent, records,
                                options, label, faults)
            phase = "cleanup"
            with counted(records, step=step, phase="cleanup", **scratch.fields()), \
                    records.timed(phase="cleanup", op="remove", **scratch.fields()) as event:
                event["n_files"] = remove_tree(workdir)
        else:
            phase = "verify"
            landed = {}
            with counted(records, step=step, phase="verify", **persistent.fields()):
                landed = _verify_in_place(outputs, persistent, records, options)
    except BaseException:
        if settings.staged:  # a failed attempt's scratch goes now: under Slurm its path holds the job id
            with contextlib.suppress(OSError):
                remove_tree(workdir)
        if failed_attempts is not None:
            _keep_failed_attempt(records, failed_attempts, attempt, phase, t_job, time.perf_counter() - t0, scratch)
        raise

    manifest = {
        "study": settings.study, "arm": settings.arm, "cycle": cycle, "step": step, "steps": steps,
        "half_cycle": is_half_cycle(cycle, settings.start),
        "root": str(persistent.root.resolve()),
        "inputs": [spec.path for spec in inputs],
        "outputs": [{"path": path, "bytes": size, "xxh3_64": checksum} for path, (size, checksum) in landed.items()],
        "provenance": provenance(settings, {"persistent": persistent, "scratch": scratch}, mpi,
                                 staging=asdict(settings.staging), granularity=settings.granularity),
    }
    records.write(records_path)
    write_json_atomic(manifest_path, manifest)  # last: its presence means the step is complete
    return manifest


def _run_replay_step(settings: ArmSettings, cycle: str, step: str, records_path: Path, manifest_path: Path,
                     attempt: int, failed_attempts: Path | None, label: str, paired=None) -> dict:
    """run_step for a replay job: its phases in replayjob.run_replay (with this module's staging and verification,
    and in a paired cycle the paired replay right after the run), then, as every step's, the records and the
    manifest, last; a failed attempt's records kept."""
    from .replayjob import run_replay

    t_job, t0 = time.time(), time.perf_counter()
    records = RecordLog(study=settings.study, arm=settings.arm, cycle=cycle, step=step,
                        strategy=settings.strategy, attempt=attempt)
    try:
        landed, darshan, inputs = run_replay(settings, cycle, step, records, _stage, _verify_in_place,
                                             _options(settings), label, paired, records_path.with_name(f"{step}.replay.raw"))
    except BaseException:
        if failed_attempts is not None:
            scratch = settings.scratch if settings.staged else settings.persistent
            last = records.records[-1].phase if records.records else "stage_in"
            with contextlib.suppress(OSError):  # the tier gone: the attempt's records cannot be kept, its error can
                _keep_failed_attempt(records, failed_attempts, attempt, last, t_job, time.perf_counter() - t0,
                                     TierSite(scratch, settings.study, settings.arm))
        raise
    persistent = TierSite(settings.persistent, settings.study, settings.arm)
    scratch = TierSite(settings.scratch, settings.study, settings.arm) if settings.staged else persistent
    manifest = {
        "study": settings.study, "arm": settings.arm, "cycle": cycle, "step": step, "steps": [step],
        "half_cycle": is_half_cycle(cycle, settings.start), "root": str(persistent.root.resolve()),
        "inputs": [spec.path for spec in inputs],
        "outputs": [{"path": path, "bytes": size, "xxh3_64": checksum} for path, (size, checksum) in landed.items()],
        "provenance": provenance(settings, {"persistent": persistent, "scratch": scratch},
                                 {"launcher": darshan["launcher"], "python": darshan["python"]},
                                 staging=asdict(settings.staging), darshan=darshan),
    }
    records.write(records_path)
    write_json_atomic(manifest_path, manifest)  # last: its presence means the step is complete
    return manifest


def run_darshan_inputs(settings: ArmSettings, records_path: Path, manifest_path: Path) -> dict:
    """The replay jobs' input files, laid out once per arm on the persistent tier (replayjob.run_replay_inputs)."""
    from .replayjob import run_replay_inputs

    return run_replay_inputs(settings, records_path, manifest_path, provenance)


def run_arrival(settings: ArmSettings, cycle: str, kind: str, records_path: Path, manifest_path: Path) -> dict:
    """Write data that arrive from outside the cycle straight onto the persistent tier.

    ``coldstart``: the arm's initial conditions (and first bias files), once. ``dump``: a cycle's
    observation dumps, before its prep. Their records are kept apart from the cycle's steps.
    """
    persistent = TierSite(settings.persistent, settings.study, settings.arm)
    records = RecordLog(study=settings.study, arm=settings.arm, cycle=cycle, step=kind, strategy=settings.strategy)
    ctx = WriteContext(Grid(settings.resolution, settings.levels), settings.seed, cycle, settings.compression)
    specs = coldstart_files(cycle) if kind == "coldstart" else step_io("dump", cycle, settings.start, settings.forecast).writes
    remove_stale_temporaries([persistent.root / spec.path for spec in specs])  # a killed attempt's
    for spec in specs:
        _timed_write(persistent.root / spec.path, spec, ctx, records, persistent, kind)
    # each file read back for its checksum, recorded as every job's verification is
    landed = _verify_in_place(specs, persistent, records, StagingOptions())
    outputs = [{"path": path, "bytes": size, "xxh3_64": checksum} for path, (size, checksum) in landed.items()]
    log.info("[%s %s %s] wrote %d files, %.1f MiB", settings.arm, cycle, kind, len(outputs),
             sum(o["bytes"] for o in outputs) / MiB)
    records.write(records_path)
    manifest = {"study": settings.study, "arm": settings.arm, "cycle": cycle, "step": kind,
                "root": str(persistent.root.resolve()), "outputs": outputs,
                "provenance": provenance(settings, {"persistent": persistent})}
    write_json_atomic(manifest_path, manifest)
    return manifest


def run_coldstart(settings: ArmSettings, records_path: Path, manifest_path: Path) -> dict:
    return run_arrival(settings, settings.start, "coldstart", records_path, manifest_path)


def run_cleanup(settings: ArmSettings, cycle: str, records_path: Path, manifest_path: Path) -> dict:
    """Remove a cycle's data (its COM folders, cold start included) from the arm's persistent tier.

    As the operational cleanup job does (it keeps 144 h): the workflow runs this only once every job
    that reads the cycle is done, so long studies fit their tier. The manifest lists what went.
    """
    persistent = TierSite(settings.persistent, settings.study, settings.arm)
    records = RecordLog(study=settings.study, arm=settings.arm, cycle=cycle, step="cleanup",
                        strategy=settings.strategy)
    removed = []
    for run in ("gdas", "enkfgdas"):
        folder = persistent.root / com_dir(cycle, run)
        if folder.exists():
            nbytes = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
            with records.timed(phase="cleanup", op="remove", file=com_dir(cycle, run), **persistent.fields()) as event:
                event["n_files"] = remove_tree(folder)
                event["bytes"] = nbytes
            removed.append({"folder": com_dir(cycle, run), "files": event["n_files"], "bytes": nbytes})
    log.info("[%s %s cleanup] removed %d files, %.1f MiB from %s", settings.arm, cycle,
             sum(r["files"] for r in removed), sum(r["bytes"] for r in removed) / MiB, persistent.root)
    records.write(records_path)
    manifest = {"study": settings.study, "arm": settings.arm, "cycle": cycle, "step": "cleanup",
                "root": str(persistent.root.resolve()), "removed": removed,
                "provenance": provenance(settings, {"persistent": persistent})}
    write_json_atomic(manifest_path, manifest)
    return manifest
