"""A replay job of the cycle (config ``darshan.jobs.<name>``, job ``darshan_<name>``): a step of its own kind.

``cycleio step --step darshan_<name>`` runs it through jobs.run_step, the same phases as every step, with the same
staging (jobs._stage: copy, verify), records and manifest:

- ``stage_in``: the files the log reads, laid out once per arm on the persistent tier under ``darshan/<name>/``
  (:func:`run_replay_inputs`, job ``darshan_inputs``), are copied into the job's folder on scratch;
- ``run``: the replay (darshan.replay.run_ranks: the log's operations per rank under MPI, as ``cycleio darshan
  replay`` issues them) in that folder; each rank's reads and writes per file, its metadata calls (op ``meta``) and
  with timing ``logged`` its gaps (op ``compute``) become records (tool ``darshan-replay``), laid end to end from
  the rank's start so that a rank's records do not overlap; op ``launch`` spans the whole replay (the MPI
  launcher, the ranks' start-up and end around their calls);
- ``stage_out`` and ``verify``: the files the replay wrote go to the cycle's folder on the persistent tier,
  ``gdas.YYYYMMDD/HH/darshan/<name>/``, each verified; ``cleanup`` removes the job's folder;
- the manifest, last: its outputs with their checksums, and the log, request and timing answer of the replay.

An arm whose scratch is its persistent tier (the baseline) replays in the cycle's folder there: the inputs are
copied into it first (stage_in on the same tier: the replay reads and writes one folder), the outputs are verified
in place, and the copies of files it only read are removed.
"""

from __future__ import annotations

import contextlib
import logging
import shlex
import sys
import time
from pathlib import Path

from ..config.calendar import is_half_cycle
from ..config.keys import DARSHAN_INPUTS, DARSHAN_PREFIX
from ..config.settings import ArmSettings
from ..darshan.jobfiles import input_dir, output_dir, plan_job, replay_files
from ..darshan.logs import DIRECTIONS, DarshanLogError, rank_times, slowest_rank
from ..darshan.replay import Target, lay_out, run_ranks
from ..darshan.report import replay_times
from ..fsutil import remove_tree, write_json_atomic
from ..kernelio import ProcIO, counted
from ..records import RecordLog
from ..storage.checksums import checksum_file
from ..storage.pagecache import cache_risk, drop_page_cache
from ..storage.tiers import TierSite
from ..units import MiB
from .inventory import FileSpec
from .readers import evict_inputs

log = logging.getLogger("cycleio")

TOOL = "darshan-replay"


class ReplayJobError(RuntimeError):
    """A replay job that cannot run: the message names the job and what is wrong."""


def _planned(settings: ArmSettings, name: str, label: str):
    try:
        return plan_job(settings.darshan["jobs"][name])
    except DarshanLogError as err:
        raise ReplayJobError(f"{label} {err}") from None


def add_replay_records(records: RecordLog, run, plan, tier: TierSite, step: str, cache_cold: bool) -> None:
    """Each rank's reads and writes per file, its metadata calls (``meta``) and its logged gaps (``compute``) as
    records of phase run, laid end to end from the rank's start (the replay times each call, not its place)."""
    for result in run.ranks:
        t = result["t_start"]
        common = {"step": step, "phase": "run", "rank": result["rank"], "nranks": plan.nranks, "tool": TOOL,
                  **tier.fields()}
        for file in plan.files:
            for direction in DIRECTIONS:
                calls = result[f"{direction}_ops"][file.index]
                if not calls:
                    continue
                seconds = result[f"{direction}_s"][file.index]
                risk = direction == "read" and cache_risk("read", memory=tier.is_memory, dropped=cache_cold)
                # the ranks' reads of pages dropped before the run start from storage (the paired replay's reads too)
                cached = 0.0 if direction == "read" and cache_cold and not tier.is_memory else None
                records.add(**common, op=direction, file=file.path, bytes=result[f"{direction}_bytes"][file.index],
                            transfers=calls, t_start=t, seconds=seconds, cache_risk=risk, cached_fraction=cached)
                t += seconds
        if result["meta_ops"]:
            records.add(**common, op="meta", n_files=0, transfers=result["meta_ops"], t_start=t,
                        seconds=result["meta_s"])
            t += result["meta_s"]
        if result["gap_s"] > 0:
            records.add(**common, op="compute", n_files=0, t_start=t, seconds=result["gap_s"])


def run_replay(settings: ArmSettings, cycle: str, step: str, records: RecordLog, stage, verify_in_place,
               options, label: str, paired=None, raw_dir: Path | None = None) -> tuple[dict, dict, list[FileSpec]]:
    """The job's phases (see the module's docstring); ``stage`` and ``verify_in_place`` are jobs._stage and
    jobs._verify_in_place; ``paired``: in a paired cycle, the paired replay (benchmarks.paired.PairedReplay) of the
    run's reads and writes with fio, right after it in the job's folder (its output in ``raw_dir``). Returns the landed outputs (path -> (bytes, checksum)), the manifest's ``darshan``
    provenance and the inputs."""
    name = step.removeprefix(DARSHAN_PREFIX)
    persistent = TierSite(settings.persistent, settings.study, settings.arm)
    scratch = TierSite(settings.scratch, settings.study, settings.arm) if settings.staged else persistent
    job, plan = _planned(settings, name, label)
    files = replay_files(plan)
    inputs = [FileSpec(path, "darshan_input") for path, _ in files.inputs]
    outputs = [FileSpec(path, "darshan_output") for path, _ in files.outputs]
    source, outdir = persistent.root / input_dir(name), output_dir(name, cycle)
    missing = [spec.path for spec in inputs if not (source / spec.path).is_file()]
    if missing:
        raise ReplayJobError(f"{label} missing input on the persistent tier: {source / missing[0]}"
                             + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
                             + f"; job {DARSHAN_INPUTS} lays them out: rerun it (--forcerun {DARSHAN_INPUTS})")
    rundir = scratch.root / f".job.{cycle}.{step}" if settings.staged else persistent.root / outdir
    remove_tree(rundir)  # leftovers of a killed attempt
    rundir.mkdir(parents=True)
    try:
        with counted(records, step=step, phase="stage_in", **scratch.fields()):
            stage(inputs, source, rundir, "stage_in", step, persistent, scratch, records, options, label)
        cache_cold = settings.staging.drop_caches and drop_page_cache()
        if settings.staging.drop_caches and not cache_cold:
            log.warning("%s drop_caches is set but needs root: reads may come from the page cache", label)
        for note in plan.notes:
            log.warning("%s %s: %s", label, job.path.name, note)
        if settings.staging.reads_from_storage:
            cache_cold |= evict_inputs([rundir / spec.path for spec in inputs], records, scratch, step)
        with counted(records, step=step, phase="run", **scratch.fields()) as kernel, \
                records.timed(step=step, phase="run", op="launch", n_files=0, tool=TOOL, **scratch.fields()):
            run = run_ranks(plan, Target(scratch.tier.name, rundir), settings.launcher)
            # the ranks' start-up, which the kernel counts here once they end, and the replayer's plan and result files
            for counts in [result.get("started") for result in run.ranks] + [run.own_io]:
                if counts:
                    kernel.exclude(ProcIO.from_dict(counts))
        add_replay_records(records, run, plan, scratch, step, cache_cold)
        if paired is not None:  # the efficiency table's reference: fio moving the same bytes in the same transfers
            paired.run(step, records, scratch, rundir / f".replay.{cycle}.{step}", raw_dir, label)
        moved = sum(r.bytes for r in records.records if r.phase == "run" and r.op in DIRECTIONS)
        log.info("%s run: replayed %s operations of %d files with %d ranks (scale %g, timing %s), %.1f MiB",
                 label, f"{plan.n_ops:,}", len(plan.files), plan.nranks, plan.scale, plan.timing, moved / MiB)
        if settings.staged:
            with counted(records, step=step, phase="stage_out", **persistent.fields()):
                landed = stage(outputs, rundir, persistent.root / outdir, "stage_out", step, scratch, persistent,
                               records, options, label)
            with counted(records, step=step, phase="cleanup", **scratch.fields()), \
                    records.timed(step=step, phase="cleanup", op="remove", **scratch.fields()) as event:
                event["n_files"] = remove_tree(rundir)
        else:
            with counted(records, step=step, phase="verify", **persistent.fields()):
                landed = verify_in_place(outputs, persistent, records, options, root=rundir)
            written = {spec.path for spec in outputs}
            with records.timed(step=step, phase="cleanup", op="remove", **persistent.fields()) as event:
                copies = [rundir / spec.path for spec in inputs if spec.path not in written]
                for path in copies:
                    path.unlink(missing_ok=True)
                event["n_files"] = len(copies)
    except BaseException:
        if settings.staged:
            with contextlib.suppress(OSError):
                remove_tree(rundir)
        raise
    landed = {f"{outdir}/{path}": value for path, value in landed.items()}
    provenance = {
        "log": str(job.path), "log_sha256": job.sha256, "exe": job.exe, "jobid": job.jobid, "log_ranks": job.nprocs,
        "ranks": plan.nranks, "scale": plan.scale, "timing": plan.timing, "layer": plan.layer, "n_ops": plan.n_ops,
        "sources": {s: sum(1 for f in plan.files if f.source == s) for s in sorted({f.source for f in plan.files})},
        "notes": plan.notes, "logged_slowest_rank": slowest_rank(rank_times(job)), "replay": replay_times(run),
        "launcher": shlex.join(run.launcher), "fs_type": run.fs_type, "python": sys.executable,
        "paired": paired is not None,
        # the fidelity: per direction, what the log counted (bytes, calls), times the scale, and what the replay did
        "fidelity": {d: {"logged_bytes": sum(f.logged_bytes[d] for f in plan.files),
                         "logged_ops": sum(f.logged_ops[d] for f in plan.files),
                         "expected_bytes": round(sum(f.logged_bytes[d] for f in plan.files) * plan.scale),
                         "replayed_bytes": sum(sum(r[f"{d}_bytes"]) for r in run.ranks),
                         "replayed_ops": sum(sum(r[f"{d}_ops"]) for r in run.ranks)} for d in DIRECTIONS},
    }
    return landed, provenance, [FileSpec(f"{input_dir(name)}/{spec.path}", spec.kind) for spec in inputs]


def run_replay_inputs(settings: ArmSettings, records_path: Path, manifest_path: Path, provenance) -> dict:
    """Lay out, once per arm, the files every replay job's log reads at their replayed size on the persistent tier
    (``darshan/<name>/``), as the cold start is made once; records (step ``darshan_inputs``, one of
    records.ARRIVALS) and the manifest, last (``provenance``: jobs.provenance)."""
    persistent = TierSite(settings.persistent, settings.study, settings.arm)
    records = RecordLog(study=settings.study, arm=settings.arm, cycle=settings.start, step=DARSHAN_INPUTS,
                        strategy=settings.strategy)
    label = f"[{settings.arm} {DARSHAN_INPUTS}]"
    outputs, logs = [], {}
    for name, spec in settings.darshan["jobs"].items():
        job, plan = _planned(settings, name, label)
        folder = persistent.root / input_dir(name)
        remove_tree(folder)  # an earlier attempt's
        files = replay_files(plan).inputs
        with records.timed(phase="run", op="write", file=input_dir(name), tool=TOOL, **persistent.fields()) as event:
            event["bytes"] = lay_out(plan, Target(persistent.tier.name, folder))
            event["n_files"] = len(files)
        outputs += [{"path": f"{input_dir(name)}/{path}", "bytes": (folder / path).stat().st_size,
                     "xxh3_64": checksum_file(folder / path)} for path, _ in files]
        logs[name] = {"log": str(job.path), "log_sha256": job.sha256, "scale": plan.scale}
    log.info("%s laid out %d files, %.1f MiB in %s", label, len(outputs), sum(o["bytes"] for o in outputs) / MiB,
             persistent.root)
    records.write(records_path)
    manifest = {"study": settings.study, "arm": settings.arm, "cycle": settings.start, "step": DARSHAN_INPUTS,
                "half_cycle": is_half_cycle(settings.start, settings.start), "root": str(persistent.root.resolve()),
                "outputs": outputs, "provenance": provenance(settings, {"persistent": persistent}, darshan=logs),
                "written": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    write_json_atomic(manifest_path, manifest)
    return manifest

