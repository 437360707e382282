"""The instruments a job runs with. Each is a small object the runner enters and leaves around each phase of the job
(``around``, a context manager): left on the way out whether the phase ended or failed. An instrument acts only in
the phases it cares about; adding one touches neither the runner nor the surrogates.

They are stacked in :func:`job_instruments`' order, the first outermost: fault injection around everything (a full
or slow tier is the step's whole world, its paired replay's too), the paired replay after the step's run, the
eviction of the step's inputs before it, then the kernel's count of the run itself, and the page probe innermost.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import ContextManager, Iterator

from ..benchmarks.paired import PairedReplay
from ..faults import JobFaults, filled
from ..hostmemory import FilePageProbe, fresh_pages_measurable
from ..kernelio import ProcIO, counted
from ..records import REPLAY, RecordLog
from ..storage.slowfs import slowed
from ..storage.stagingtypes import StagingFaults
from ..storage.tiers import TierSite
from ..surrogates.inventory import FileSpec
from ..surrogates.steps import StepRun
from .nodes import node_name

STAGES = ("stage_in", "stage_out")


@dataclass
class Phase:
    """One phase of a job: its name (stage_in, run, stage_out, verify, cleanup), the step its records name (in a
    cycle's job each step has its own run), the tier they name, and the files it moves (a stage's copies, a run's
    inputs) with where they go (``dest``: a stage's destination folder)."""

    name: str
    step: str
    tier: TierSite
    files: list[FileSpec] = field(default_factory=list)
    dest: Path | None = None


@dataclass
class JobState:
    """What the instruments see of the job, and the little they hand the runner back."""

    cycle: str
    records: RecordLog
    label: str
    raw_dir: Path  # beside the records: the paired replay's fio output
    phase: str = "stage_in"  # where the job is, for a failed attempt's record
    run: StepRun | None = None  # in a run phase: the step's run
    staging_faults: StagingFaults = field(default_factory=StagingFaults)  # in a stage phase


class Instrument:
    """The contract: ``around(phase, job)`` wraps one phase; an instrument does nothing where it has no business."""

    def around(self, phase: Phase, job: JobState) -> ContextManager[None]:
        return contextlib.nullcontext()


class KernelCounts(Instrument):
    """The kernel's count of each phase's I/O beside the records (kernelio.counted), less what the run says is not
    its own (the forecast's MPI program besides its ranks' I/O work, the replayer's plan and result files)."""

    @contextlib.contextmanager
    def around(self, phase: Phase, job: JobState) -> Iterator[None]:
        with counted(job.records, step=phase.step, phase=phase.name, **phase.tier.fields()) as window:
            yield
            if phase.name == "run" and job.run is not None:
                for counts in job.run.kernel_outside:
                    if counts:
                        window.exclude(ProcIO.from_dict(counts))


class PageProbe(Instrument):
    """A paired step's writes keep the share of fresh pages each file met (hostmemory.FilePageProbe), against which
    its replay is set (report.pairedreference). Made only where the machine hands free pages back to its host."""

    @contextlib.contextmanager
    def around(self, phase: Phase, job: JobState) -> Iterator[None]:
        if phase.name == "run" and job.run is not None:
            job.run.page_probe = FilePageProbe()
        yield


class PairedReplayAfterRun(Instrument):
    """After a step's run, fio does its reads and writes again in the step's folder (benchmarks.paired)."""

    def __init__(self, replay: PairedReplay):
        self.replay = replay

    @contextlib.contextmanager
    def around(self, phase: Phase, job: JobState) -> Iterator[None]:
        yield
        if phase.name == "run" and job.run is not None:
            job.phase = REPLAY
            self.replay.run(phase.step, job.records, phase.tier, job.run.folder / f".replay.{job.cycle}.{phase.step}",
                            job.raw_dir, job.label)
            job.phase = phase.name


class InputEviction(Instrument):
    """Before a run, its inputs' pages are dropped so that its reads come from the tier (staging.reads_from_storage;
    storage.tiers.TierSite.drop_pages, one record of op ``evict``, the instrument's)."""

    @contextlib.contextmanager
    def around(self, phase: Phase, job: JobState) -> Iterator[None]:
        if phase.name == "run" and job.run is not None:
            job.run.evicted = phase.tier.drop_pages([job.run.folder / spec.path for spec in phase.files],
                                                    job.records, phase.step)
        yield


class FaultInjection(Instrument):
    """The config's ``faults`` aimed at this attempt (cycleio.faults): a stage's corrupted copy or failed batch, a
    run on a full or slow tier, a step or a forecast rank that fails."""

    def __init__(self, faults: JobFaults):
        self.faults = faults

    @contextlib.contextmanager
    def around(self, phase: Phase, job: JobState) -> Iterator[None]:
        if phase.name in STAGES:
            corrupt = self.faults.corrupt_staged_file(phase.name) and phase.files
            job.staging_faults = StagingFaults(
                corrupt=phase.dest / phase.files[0].path if corrupt else None,
                fail_after_files=self.faults.fail_stage_out_after() if phase.name == "stage_out" else None,
                fill_node=self.faults.fill_node(phase.step) if phase.name == "stage_in" else None)
            try:
                yield
            finally:
                job.staging_faults = StagingFaults()
        elif phase.name == "run" and job.run is not None:
            run, workdir = job.run, job.run.folder
            # a job over several nodes (its run has a control folder) fills a named node as that node's stage-in
            # begins (runner.nodes); a job on one node fills here, the node named or not
            here = None if run.control is not None else node_name()
            with filled(workdir, self.faults.fill_tier(phase.step, here)), \
                    slowed(workdir, self.faults.slow_tier(phase.step)) as folder:
                run.folder = folder  # a slow tier: the step works through its mount
                try:
                    self.faults.fail_step(phase.step, job.cycle)
                    run.fail_rank = self.faults.fail_rank()
                    yield
                finally:
                    run.folder = workdir
        else:
            yield


def job_instruments(settings, attempt: int, replay: PairedReplay | None) -> list[Instrument]:
    """A job's instruments, outermost first (the module's docstring)."""
    instruments: list[Instrument] = [FaultInjection(JobFaults(settings.faults, attempt))]
    if replay is not None:
        instruments.append(PairedReplayAfterRun(replay))
    if settings.staging.reads_from_storage:
        instruments.append(InputEviction())
    instruments.append(KernelCounts())
    if replay is not None and fresh_pages_measurable():
        instruments.append(PageProbe())
    return instruments


@contextlib.contextmanager
def entered(instruments: list[Instrument], phase: Phase, job: JobState) -> Iterator[None]:
    """Inside every instrument for ``phase``, the first outermost; each left again, in reverse, however it ends."""
    job.phase = phase.name
    with contextlib.ExitStack() as stack:
        for instrument in instruments:
            stack.enter_context(instrument.around(phase, job))
        yield
