"""The jobs that work straight on the persistent tier, without stage-in: the data that arrive from outside the
cycle (the cold start, a cycle's observation dumps, the replay jobs' inputs), a cycle's cleanup, and its archive
jobs. Each writes its records, then its manifest, last."""

from __future__ import annotations

import logging
from pathlib import Path

from ..benchmarks.paired import PairedReplay
from ..config.calendar import com_dir
from ..config.settings import ArmSettings
from ..fsutil import remove_tree
from ..records import RecordLog
from ..storage.staging import remove_stale_temporaries
from ..storage.stagingtypes import StagingOptions
from ..storage.tiers import TierSite
from ..surrogates.context import WriteContext
from ..surrogates.grid import Grid
from ..surrogates.inventory import coldstart_files, step_io
from ..surrogates.steps import timed_write
from ..units import MiB
from .manifest import finish, outputs_listing, provenance
from .stagefiles import verify_in_place

log = logging.getLogger("cycleio")


def run_arrival(settings: ArmSettings, cycle: str, kind: str, records_path: Path, manifest_path: Path) -> dict:
    """Write data that arrive from outside the cycle straight onto the persistent tier.

    ``coldstart``: the arm's initial conditions (and first bias files), once. ``dump``: a cycle's
    observation dumps, before its prep. Their records are kept apart from the cycle's steps.
    """
    persistent = TierSite(settings.persistent, settings.study, settings.arm)
    records = RecordLog(study=settings.study, arm=settings.arm, cycle=cycle, step=kind, strategy=settings.strategy)
    ctx = WriteContext(Grid(settings.resolution, settings.levels), settings.seed, cycle, settings.compression)
    specs = (coldstart_files(cycle) if kind == "coldstart"
             else step_io("dump", cycle, settings.start, settings.forecast).writes)
    remove_stale_temporaries([persistent.root / spec.path for spec in specs])  # a killed attempt's
    for spec in specs:
        timed_write(persistent.root / spec.path, spec, ctx, records, persistent, kind)
    # each file read back for its checksum, recorded as every job's verification is
    outputs = outputs_listing(verify_in_place(specs, persistent, records, StagingOptions(), persistent.root))
    log.info("[%s %s %s] wrote %d files, %.1f MiB", settings.arm, cycle, kind, len(outputs),
             sum(o["bytes"] for o in outputs) / MiB)
    manifest = {"study": settings.study, "arm": settings.arm, "cycle": cycle, "step": kind,
                "root": str(persistent.root.resolve()), "outputs": outputs,
                "provenance": provenance(settings, {"persistent": persistent})}
    return finish(records, records_path, manifest, manifest_path)


def run_coldstart(settings: ArmSettings, records_path: Path, manifest_path: Path) -> dict:
    return run_arrival(settings, settings.start, "coldstart", records_path, manifest_path)


def run_darshan_inputs(settings: ArmSettings, records_path: Path, manifest_path: Path) -> dict:
    """The replay jobs' input files, laid out once per arm on the persistent tier (darshanjob.run_replay_inputs)."""
    from ..surrogates.darshanjob import run_replay_inputs

    return run_replay_inputs(settings, records_path, manifest_path, provenance)


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
    manifest = {"study": settings.study, "arm": settings.arm, "cycle": cycle, "step": "cleanup",
                "root": str(persistent.root.resolve()), "removed": removed,
                "provenance": provenance(settings, {"persistent": persistent})}
    return finish(records, records_path, manifest, manifest_path)


def run_archive(settings: ArmSettings, cycle: str, records_path: Path, manifest_path: Path,
                manifests: list[Path] = (), attempt: int = 1, replay: PairedReplay | None = None,
                job: str = "arch") -> dict:
    """One archive job of the cycle (surrogates.archivejob.write_archive: ``arch`` or ``earcNN``); records, then the
    manifest last, listing the tarballs.

    ``replay``: in a paired cycle, the archive's reads are replayed on the persistent tier and its writes on the
    archive tier right after it, for its rows of the efficiency table."""
    from ..surrogates.archivejob import PHASE, write_archive

    records = RecordLog(study=settings.study, arm=settings.arm, cycle=cycle, step=job, strategy=settings.strategy,
                        attempt=attempt)
    done = write_archive(settings, cycle, records, manifest_path.parent, manifests, job)
    if replay is not None:
        label = f"[{settings.arm} {cycle} {job}]"
        raw = records_path.with_name(f"{job}.replay.raw")
        replay.run(job, records, done.persistent, done.persistent.root / f".replay.{cycle}.{job}", raw, label,
                   phase=PHASE, ops=("read",))
        if done.remote:  # fio cannot write into an archive that is not a file system here
            log.info("%s no replay of the writes: the archive tier is remote (archive.remote)", label)
        else:
            replay.run(job, records, done.target, done.target.root / f".replay.{cycle}.{job}", raw, label,
                       phase=PHASE, ops=("write",))
    manifest = {"study": settings.study, "arm": settings.arm, "cycle": cycle, "step": job,
                "root": str(done.folder if done.remote else done.folder.resolve()), "tarballs": done.tarballs,
                "provenance": provenance(settings, {"persistent": done.persistent, "archive": done.target})}
    return finish(records, records_path, manifest, manifest_path)
