"""What a job leaves: its records, then its manifest, last (its presence means the job is complete); a failed
attempt's records in a file of their own; and the provenance every manifest carries."""

from __future__ import annotations

import logging
import os
import platform
import resource
import socket
import sys
from pathlib import Path

from ..config.settings import ArmSettings
from ..fsutil import write_json_atomic
from ..hostmemory import free_page_reporting
from ..records import RecordLog
from ..storage.tiers import TierSite

log = logging.getLogger("cycleio")


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
        # what the job ran with (its rule's params): workflow.rerun compares them with the study's now
        **({"settings": settings.given} if settings.given is not None else {}),
        **job,
    }


def outputs_listing(landed: dict[str, tuple[int, str]], held_on: dict[str, str] | None = None) -> list[dict]:
    """A manifest's ``outputs``: each landed file's path, bytes and checksum; in a job over several nodes
    (``held_on``) also the node whose scratch held it."""
    held_on = held_on or {}
    return [{"path": path, "bytes": size, "xxh3_64": checksum, **({"node": held_on[path]} if path in held_on else {})}
            for path, (size, checksum) in landed.items()]


def usage() -> dict:
    """What the job's process used so far, and the processes it waited for (its tools, an MPI launcher and the ranks
    that launcher reaped; not ranks Slurm started): peak resident memory and CPU seconds (getrusage)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"max_rss_MiB": round(own.ru_maxrss / 1024, 1), "children_max_rss_MiB": round(children.ru_maxrss / 1024, 1),
            "cpu_user_s": round(own.ru_utime + children.ru_utime, 3),
            "cpu_system_s": round(own.ru_stime + children.ru_stime, 3)}


def finish(records: RecordLog, records_path: Path, manifest: dict, manifest_path: Path) -> dict:
    """The job's records, then its manifest (with what the job used), last: its presence means the job is
    complete."""
    records.write(records_path)
    manifest = {**manifest, "usage": usage()}
    write_json_atomic(manifest_path, manifest)
    return manifest


def keep_failed_attempt(records: RecordLog, folder: Path, attempt: int, phase: str, t_start: float, seconds: float,
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
