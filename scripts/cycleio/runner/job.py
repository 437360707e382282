"""One job: stage_in, run, stage_out, verify, cleanup, then the records and the manifest, last.

A job runs one step (the default granularity) or a whole cycle (granularity ``cycle``: inputs staged once, all four
steps on scratch, outputs staged once), or a replay job of a Darshan log (surrogates.darshanjob). Staging happens
inside the job because node-local disk is seen only by the job's node and a burst-buffer allocation lives only as
long as the job. Every phase is timed into records; the instruments (runner.instruments) are entered and left
around each phase; a failed attempt's scratch goes at once and its records are kept apart. A job whose Slurm
allocation spans several nodes of a tier not shared across them stages in, stages out and cleans up on every node
(runner.nodes).

The kernel counts each phase's I/O beside the records (instruments.KernelCounts, one window each: stage_in, each
step's run, stage_out, cleanup; unstaged: run and verify). Inside a window: this process's reads and writes, its
threads', and those of the children it reaps (the forecast's launcher and ranks), the log's lines and the counters'
own reads (a few KiB). Left out: the libraries' imports (done before the windows open: steps.import_libraries), the
forecast's MPI program besides its ranks' I/O work (each rank reports its work: kernelio.outside_work), the eviction of the inputs, the paired replay, and everything
between the windows (the page-cache drop, the manifest, the records).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from ..benchmarks.paired import PairedReplay
from ..config.calendar import is_half_cycle
from ..config.forecast import cycle_steps
from ..config.keys import is_replay_job
from ..config.settings import ArmSettings
from ..fsutil import remove_tree
from ..records import RecordLog
from ..storage.pagecache import drop_page_cache
from ..storage.staging import remove_stale_temporaries
from ..storage.tiers import TierSite
from ..surrogates.context import WriteContext
from ..surrogates.grid import Grid
from ..surrogates.inventory import FileSpec, job_files
from ..surrogates.steps import StepRun, import_libraries, run_gdas_step
from .instruments import Instrument, JobState, Phase, entered, job_instruments
from .manifest import finish, keep_failed_attempt, outputs_listing, provenance
from .nodes import NodeStaging, allocation_env, per_node_allocation
from .stagefiles import stage_files, staging_options, verify_in_place

log = logging.getLogger("cycleio")


Landed = dict[str, tuple[int, str]]  # a landed output's path -> (bytes, checksum)


class StepError(RuntimeError):
    """A step that cannot run or finish; the message names the file and the step."""


@dataclass(frozen=True)
class JobTiers:
    """A job's tiers, opened once where it runs: the persistent one and its scratch (the persistent one itself for an
    arm that does not stage)."""

    persistent: TierSite
    scratch: TierSite

    @classmethod
    def open(cls, settings: ArmSettings) -> "JobTiers":
        persistent = TierSite(settings.persistent, settings.study, settings.arm)
        scratch = TierSite(settings.scratch, settings.study, settings.arm) if settings.staged else persistent
        return cls(persistent, scratch)


@dataclass
class JobWork:
    """What the runner needs of a job's surrogate: the files it reads (below ``source`` on the persistent tier) and
    writes (landing below ``dest``), the folder it works in, its steps with each one's reads, and how to run each."""

    inputs: list[FileSpec]
    outputs: list[FileSpec]
    source: Path
    dest: Path
    workdir: Path
    reads: dict[str, list[FileSpec]]  # step -> the files its run reads (in a cycle's job: each step's)
    run: Callable[[str, StepRun, RecordLog], None]  # one step's run, its records into the RecordLog
    prepare: Callable[[], None] | None = None  # before the runs, outside the kernel's windows
    # an unstaged job that copied its inputs into its folder removes the copies it only read after its verify
    tidy_in_place: Callable[[RecordLog], None] | None = None
    steps: list[str] = field(default_factory=list)
    held_on: dict[str, str] = field(default_factory=dict)  # over several nodes: each landed output's node
    nodes: list[str] = field(default_factory=list)  # over several nodes: the job's nodes

    @property
    def stages_in(self) -> bool:
        """Whether the inputs are copied into the job's folder: it is not where they lie."""
        return self.workdir != self.source


def run_job(settings: ArmSettings, cycle: str, step: str, work: JobWork, tiers: JobTiers, records: RecordLog,
            instruments: list[Instrument], raw_dir: Path, attempt: int = 1,
            failed_attempts: Path | None = None) -> tuple[Landed, dict]:
    """The job's phases (the module's docstring) around ``work``'s runs; returns its landed outputs (paths below
    ``work.dest``) and what its runs reported of their MPI."""
    t_job, t0 = time.time(), time.perf_counter()
    label = f"[{settings.arm} {cycle} {step}]"
    persistent, scratch = tiers.persistent, tiers.scratch
    options = staging_options(settings)
    state = JobState(cycle=cycle, records=records, label=label, raw_dir=raw_dir)
    mpi: dict = {}
    allocation = per_node_allocation(settings) if work.stages_in else None
    nodes = (NodeStaging(settings, allocation, raw_dir.with_name(f"{raw_dir.name}.nodes"), records, label)
             if allocation is not None else None)
    if nodes is None and work.stages_in:
        remove_tree(work.workdir)  # leftovers of a killed attempt
        work.workdir.mkdir(parents=True)
    try:
        if work.stages_in:
            phase = Phase("stage_in", step, scratch, work.inputs, work.workdir)
            with entered(instruments, phase, state):
                if nodes is not None:
                    work.nodes = list(allocation.nodes)
                    nodes.stage_in(work.inputs, work.source, work.workdir, step, state.staging_faults)
                else:
                    stage_files(work.inputs, work.source, work.workdir, "stage_in", step, persistent, scratch, records,
                                options, label, state.staging_faults)
        else:  # the steps write straight onto the persistent tier: sweep a killed attempt's temporaries
            remove_stale_temporaries([work.dest / spec.path for spec in work.outputs])

        cache_cold = False
        if settings.staging.drop_caches:
            cache_cold = drop_page_cache()
            if not cache_cold:
                log.warning("%s drop_caches is set but needs root: reads may come from the page cache", label)
        state.phase = "run"
        if work.prepare is not None:
            work.prepare()
        for name in work.steps:
            state.run = StepRun(folder=work.workdir, cache_cold=cache_cold,
                                control=nodes.control if nodes is not None else None)
            with entered(instruments, Phase("run", name, scratch, work.reads[name]), state):
                work.run(name, state.run, records)
            mpi.update(state.run.mpi)
            state.run = None

        if settings.staged:
            phase = Phase("stage_out", step, persistent, work.outputs, work.dest)
            with entered(instruments, phase, state):
                if nodes is not None:
                    landed, work.held_on = nodes.stage_out(work.outputs, work.workdir, work.dest, step,
                                                           state.staging_faults)
                else:
                    landed = stage_files(work.outputs, work.workdir, work.dest, "stage_out", step, scratch, persistent,
                                         records, options, label, state.staging_faults)
            with entered(instruments, Phase("cleanup", step, scratch), state):
                if nodes is not None:
                    nodes.cleanup(work.workdir, step)
                else:
                    with records.timed(phase="cleanup", op="remove", **scratch.fields()) as event:
                        event["n_files"] = remove_tree(work.workdir)
        else:
            with entered(instruments, Phase("verify", step, persistent, work.outputs), state):
                landed = verify_in_place(work.outputs, persistent, records, options, work.workdir)
            if work.tidy_in_place is not None:
                state.phase = "cleanup"
                work.tidy_in_place(records)
    except BaseException:
        if settings.staged:  # a failed attempt's scratch goes now: under Slurm its path holds the job id
            with contextlib.suppress(OSError):
                remove_tree(work.workdir)
            if nodes is not None:  # on every node
                with contextlib.suppress(Exception):
                    nodes.cleanup(work.workdir, step)
        if failed_attempts is not None:
            keep_failed_attempt(records, failed_attempts, attempt, state.phase, t_job, time.perf_counter() - t0,
                                scratch)
        raise
    finally:
        if nodes is not None:
            nodes.close()
    return landed, mpi


def run_step(settings: ArmSettings, cycle: str, step: str, records_path: Path, manifest_path: Path,
             attempt: int = 1, failed_attempts: Path | None = None, replay: PairedReplay | None = None) -> dict:
    """Run one step of one cycle (``step`` = ``cycle`` runs all the cycle's steps in one job, a replay job's name
    its replay); records, then the manifest, last.

    ``attempt`` is Snakemake's (1, then 2 for a retry), which the records carry; a failed attempt's records go to
    ``failed_attempts`` if given. The config's ``faults`` aimed at this job fire here (instruments.FaultInjection).
    ``replay``: for a job paired with a replay (benchmarks.paired.PairedReplay), its ``run`` right after each step,
    in the step's folder on scratch; fio's own output goes beside the records (``*.replay.raw``).
    """
    records = RecordLog(study=settings.study, arm=settings.arm, cycle=cycle, step=step,
                        strategy=settings.strategy, attempt=attempt)
    instruments = job_instruments(settings, attempt, replay)
    raw_dir = records_path.with_name(f"{step}.replay.raw")
    if is_replay_job(step):
        return _run_replay_job(settings, cycle, step, records, instruments, raw_dir, records_path, manifest_path,
                               attempt, failed_attempts, paired=replay is not None)
    restored = allocation_env()  # a job over several nodes: its nodes, for its staging and its ranks' srun
    if restored:
        os.environ.update(restored)
        log.info("[%s %s %s] the job's %s nodes: %s", settings.arm, cycle, step, restored["SLURM_JOB_NUM_NODES"],
                 restored["SLURM_JOB_NODELIST"])
    tiers = JobTiers.open(settings)
    work, inputs, steps = gdas_work(settings, cycle, step, tiers)
    landed, mpi = run_job(settings, cycle, step, work, tiers, records, instruments, raw_dir, attempt, failed_attempts)
    persistent, scratch = tiers.persistent, tiers.scratch
    manifest = {
        "study": settings.study, "arm": settings.arm, "cycle": cycle, "step": step, "steps": steps,
        "half_cycle": is_half_cycle(cycle, settings.start),
        "root": str(persistent.root.resolve()),
        "inputs": [spec.path for spec in inputs],
        "outputs": outputs_listing(landed, work.held_on),
        "provenance": provenance(settings, {"persistent": persistent, "scratch": scratch}, mpi,
                                 staging=asdict(settings.staging), granularity=settings.granularity,
                                 **({"nodes": work.nodes} if work.nodes else {})),
    }
    return finish(records, records_path, manifest, manifest_path)


def gdas_work(settings: ArmSettings, cycle: str, step: str,
              tiers: JobTiers) -> tuple[JobWork, list[FileSpec], list[str]]:
    """A GDAS step's (or a whole cycle's) work for the runner, its inputs and its steps; raises StepError when an
    input is not on the persistent tier."""
    label = f"[{settings.arm} {cycle} {step}]"
    steps = list(cycle_steps(cycle, settings.start, settings.forecast)) if step == "cycle" else [step]
    persistent, scratch = tiers.persistent, tiers.scratch
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
    ctx = WriteContext(Grid(settings.resolution, settings.levels), settings.seed, cycle, settings.compression)
    workdir = scratch.root / f".job.{cycle}.{step}" if settings.staged else persistent.root

    def run(name: str, step_run: StepRun, records: RecordLog) -> None:
        run_gdas_step(settings, name, per_step[name], ctx, records, scratch, step_run, label)

    work = JobWork(inputs=inputs, outputs=outputs, source=persistent.root, dest=persistent.root, workdir=workdir,
                   reads={name: list(per_step[name].reads) for name in steps}, run=run,
                   prepare=lambda: import_libraries(per_step), steps=steps)
    return work, inputs, steps


def _run_replay_job(settings: ArmSettings, cycle: str, step: str, records: RecordLog, instruments: list[Instrument],
                    raw_dir: Path, records_path: Path, manifest_path: Path, attempt: int,
                    failed_attempts: Path | None, paired: bool) -> dict:
    """run_step for a replay job of a Darshan log (surrogates.darshanjob): its inputs staged in from where
    ``darshan_inputs`` laid them out, its outputs landed in the cycle's folder; the manifest carries the replay's
    log, request and timing answer."""
    from ..surrogates.darshanjob import ReplayWork

    label = f"[{settings.arm} {cycle} {step}]"
    tiers = JobTiers.open(settings)
    persistent, scratch = tiers.persistent, tiers.scratch
    job = ReplayWork(settings, cycle, step, scratch, persistent, label)
    work = JobWork(inputs=job.inputs, outputs=job.outputs, source=job.source, dest=persistent.root / job.outdir,
                   workdir=job.workdir, reads={step: job.inputs}, run=job.run, prepare=job.prepare,
                   tidy_in_place=job.tidy_in_place, steps=[step])
    landed, _ = run_job(settings, cycle, step, work, tiers, records, instruments, raw_dir, attempt, failed_attempts)
    darshan = job.provenance(paired)
    manifest = {
        "study": settings.study, "arm": settings.arm, "cycle": cycle, "step": step, "steps": [step],
        "half_cycle": is_half_cycle(cycle, settings.start), "root": str(persistent.root.resolve()),
        "inputs": job.manifest_inputs(),
        "outputs": outputs_listing({f"{job.outdir}/{path}": value for path, value in landed.items()}),
        "provenance": provenance(settings, {"persistent": persistent, "scratch": scratch},
                                 {"launcher": darshan["launcher"], "python": darshan["python"]},
                                 staging=asdict(settings.staging), darshan=darshan),
    }
    return finish(records, records_path, manifest, manifest_path)
