"""A GDAS step's own work in its folder: read its inputs, compute, write its outputs at its cadence.

The job around it (stage-in, stage-out, verify, the manifest, the instruments) is the runner's (cycleio.runner).
The step is told what the instruments want of it through :class:`StepRun` and hands back what they need.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..config.settings import ArmSettings
from ..records import REPLAY, RecordLog
from ..storage.pagecache import EVICTED_BELOW, cache_risk
from ..storage.tiers import TierSite
from ..units import MiB
from .compute import COMPUTE_KINDS
from .context import WriteContext
from .inventory import FileSpec
from .kinds import GRIB_KINDS, expected_bytes
from .readers import FileReader
from .transfers import Transfer
from .writers import write_file

log = logging.getLogger("cycleio")


@dataclass
class StepRun:
    """One step's run as the runner hands it over: its folder and what the instruments ask of it; the step fills in
    what they need back (``mpi``, ``kernel_outside``)."""

    folder: Path
    cache_cold: bool = False  # the page cache was dropped before the run (staging.drop_caches)
    evicted: bool = False  # the step's inputs' pages were dropped just before it (staging.reads_from_storage)
    # the page probe's (runner.instruments.PageProbe): armed before each file, each write record keeps what it found
    page_probe: object = None
    fail_rank: int | None = None  # fault injection: the forecast rank that fails
    mpi: dict = field(default_factory=dict)  # what the forecast's ranks report of their MPI, for the manifest
    # the kernel's counts in this process that are not the step's own I/O (kernelio.outside_work: the forecast's)
    kernel_outside: list[dict] = field(default_factory=list)
    # a job over several nodes: a folder every node sees, for the forecast's MPI program's spec and records
    control: Path | None = None


# The instrument's own work inside a step's run: a paired step's page probe (hostmemory) and the eviction of an input's
# pages before it is read (reads_from_storage). Their records are phase ``replay``, as the paired replay's are: out of
# the step's storage seconds and its job's wall time.
INSTRUMENT_OPS = ("probe", "evict")


def _phase_of(op: str, phase: str = "run") -> str:
    """The phase of a record made in ``phase``: the instrument's ops (``INSTRUMENT_OPS``) are not the step's."""
    return REPLAY if op in INSTRUMENT_OPS else phase


def record_transfer(records: RecordLog, op: str, spec: FileSpec, t_start: float, transfer: Transfer, **fields) -> None:
    """A file's storage I/O as one record, and each kind of CPU work kept apart from it as its own."""
    records.add(op=op, file=spec.path, bytes=transfer.bytes, t_start=t_start, seconds=transfer.io_s,
                transfers=transfer.cpu.transfers, cached_fraction=transfer.cached_fraction, **fields)
    for other, seconds in transfer.cpu.seconds().items():
        if seconds > 0 or other == "generate" and op == "write":
            cpu_fields = {k: v for k, v in fields.items() if k not in ("cache_risk", "fresh_MiB")}
            records.add(op=other, file=spec.path, n_files=0, t_start=t_start, seconds=seconds,
                        **{**cpu_fields, "phase": _phase_of(other, fields["phase"])})


def timed_write(path: Path, spec: FileSpec, ctx: WriteContext, records: RecordLog, tier: TierSite,
                step: str, page_probe=None) -> int:
    """Write one file; the write record times only storage I/O, CPU work gets records of its own.

    ``page_probe``: a paired step's (hostmemory.FilePageProbe), armed for the file: the record keeps the fresh
    pages it found (``fresh_MiB``)."""
    if page_probe is not None:
        ctx.times.pages = page_probe
        page_probe.arm(expected_bytes(spec, ctx.grid, ctx.compression))
    t_start = time.time()
    transfer = write_file(path, spec, ctx)
    fresh = ctx.times.pages.take() if ctx.times.pages is not None else None
    record_transfer(records, "write", spec, t_start, transfer, step=step, phase="run", fresh_MiB=fresh,
                    **tier.fields())
    return transfer.bytes


def compute(seconds: float, records: RecordLog, scratch: TierSite, step: str, kind: str = "sleep") -> None:
    if seconds <= 0:
        return
    with records.timed(step=step, phase="run", op="compute", n_files=0, **scratch.fields()):
        COMPUTE_KINDS[kind](seconds)


def run_gdas_step(settings: ArmSettings, step: str, io, ctx: WriteContext, records: RecordLog, scratch: TierSite,
                  run: StepRun, label: str) -> None:
    """A step's own work in ``run.folder``: read its inputs (``io.reads``), compute, write its outputs
    (``io.writes``)."""
    reader = FileReader()
    for spec in io.reads:
        t_start = time.time()
        transfer = reader.read(run.folder / spec.path, spec.kind)
        from_storage = run.cache_cold or (transfer.cached_fraction is not None
                                          and transfer.cached_fraction < EVICTED_BELOW)
        record_transfer(records, "read", spec, t_start, transfer, step=step, phase="run",
                        cache_risk=cache_risk("read", memory=scratch.is_memory, dropped=from_storage),
                        **scratch.fields())
    if step == "fcst":
        # The forecast is an MPI program (surrogates/forecast): the compute stand-in per forecast hour on
        # the compute ranks, and each output hour's history and restart files by the arm's strategy.
        from .forecast.launcher import launch_provenance, run_forecast_mpi

        info: dict = {}
        for event in run_forecast_mpi(settings, ctx.cycle, run.folder, io.writes, ctx, label=label,
                                      fail_rank=run.fail_rank, info=info, kernel_outside=run.kernel_outside,
                                      probe_pages=run.page_probe is not None, control=run.control):
            records.add(step=step, phase=_phase_of(event["op"]), **event, **scratch.fields())
        run.mpi.update({**launch_provenance(settings), **info})
    else:
        compute(settings.step_compute_seconds.get(step, 0.0), records, scratch, step, settings.compute_kind)
        for spec in io.writes:
            timed_write(run.folder / spec.path, spec, ctx, records, scratch, step, run.page_probe)
    written = sum(r.bytes for r in records.records if r.step == step and r.op == "write")
    log.info("%s run %s: read %d files, wrote %d files, %.1f MiB", label, step, len(io.reads), len(io.writes),
             written / MiB)


def import_libraries(per_step: dict) -> None:
    """Import now what the steps would import on first use, so that Python's reads of the libraries'
    files (h5py about 3 MB, ecCodes 1.6 MB, the forecast's launcher) stay out of the kernel's count of
    the run (kernelio.counted): prep, moving about 1.5 MiB, would otherwise read three times its records."""
    import h5py  # noqa: F401: netCDF-4 reads and writes
    import numpy.random  # noqa: F401: the fields' data (fields.py), about 33 KB of the libraries' files

    if any(spec.kind in GRIB_KINDS for io in per_step.values() for spec in io.writes):
        import eccodes  # noqa: F401
    if "fcst" in per_step:
        from .forecast import launcher  # noqa: F401
