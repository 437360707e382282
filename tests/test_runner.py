"""runner.job.run_job: the phases of a job in their order, each instrument entered and left around each of them, and a
failed run that still leaves every instrument, cleans its scratch and keeps its attempt's records."""

from __future__ import annotations

import contextlib

import pytest

from cycleio.config.settings import ArmSettings
from cycleio.config.tierspec import Tier
from cycleio.records import RecordLog, read_records
from cycleio.storage.tiers import TierSite
from cycleio.runner.instruments import Instrument
from cycleio.runner.job import JobTiers, JobWork, run_job
from cycleio.surrogates.inventory import FileSpec

CYCLE = "2026010100"


class CallLog(Instrument):
    """A test double of the instrument contract: it writes down each phase it is entered and left around."""

    def __init__(self, name: str, calls: list):
        self.name, self.calls = name, calls

    @contextlib.contextmanager
    def around(self, phase, job):
        self.calls.append((self.name, "enter", phase.name, phase.step))
        try:
            yield
        finally:
            self.calls.append((self.name, "leave", phase.name, phase.step))


def arm(tmp_path, scratch: str) -> ArmSettings:
    lustre = Tier("lustre", "lustre", str(tmp_path / "lustre"))
    tiers = {"lustre": lustre, "shm": Tier("shm", "memory", str(tmp_path / "shm"), persistent=False, shared=False)}
    return ArmSettings(study="t", arm=scratch, start=CYCLE, seed=7, resolution="C12", levels=4,
                       persistent=lustre, scratch=tiers[scratch])


def work_of(settings: ArmSettings, fail: bool = False) -> JobWork:
    """Two steps: ``a`` copies the input to ``mid``, ``b`` copies ``mid`` to the output (or fails)."""
    root = tmp_root(settings)
    (root / "in.bin").parent.mkdir(parents=True, exist_ok=True)
    (root / "in.bin").write_bytes(b"x" * 4096)
    scratch = TierSite(settings.scratch, settings.study, settings.arm).root
    workdir = scratch / f".job.{CYCLE}.s" if settings.staged else root

    def run(name: str, step_run, records: RecordLog) -> None:
        source, target = ("in.bin", "mid.bin") if name == "a" else ("mid.bin", "out.bin")
        if fail and name == "b":
            raise RuntimeError("the step failed")
        with records.timed(step=name, phase="run", op="write", file=target, bytes=4096, tier="t", tier_kind="memory",
                           fs_type="tmpfs"):
            (step_run.folder / target).write_bytes((step_run.folder / source).read_bytes())

    return JobWork(inputs=[FileSpec("in.bin", "x")], outputs=[FileSpec("out.bin", "x"), FileSpec("mid.bin", "x")],
                   source=root, dest=root, workdir=workdir,
                   reads={"a": [FileSpec("in.bin", "x")], "b": [FileSpec("mid.bin", "x")]}, run=run, steps=["a", "b"])


def tmp_root(settings: ArmSettings):
    return TierSite(settings.persistent, settings.study, settings.arm).root


def records_of(settings: ArmSettings) -> RecordLog:
    return RecordLog(study=settings.study, arm=settings.arm, cycle=CYCLE, step="s", strategy="serial")


@pytest.mark.parametrize("scratch", ["shm", "lustre"])
def test_a_job_runs_its_phases_in_order_inside_every_instrument(tmp_path, scratch):
    settings, calls = arm(tmp_path, scratch), []
    work = work_of(settings)
    records = records_of(settings)
    instruments = [CallLog("outer", calls), CallLog("inner", calls)]
    landed, _ = run_job(settings, CYCLE, "s", work, JobTiers.open(settings), records, instruments, tmp_path / "raw")
    phases = [("stage_in", "s"), ("run", "a"), ("run", "b"), ("stage_out", "s"), ("cleanup", "s")] \
        if settings.staged else [("run", "a"), ("run", "b"), ("verify", "s")]
    expected = []
    for phase, step in phases:
        expected += [("outer", "enter", phase, step), ("inner", "enter", phase, step),
                     ("inner", "leave", phase, step), ("outer", "leave", phase, step)]
    assert calls == expected
    assert set(landed) == {"out.bin", "mid.bin"} and landed["out.bin"][0] == 4096
    assert (tmp_root(settings) / "out.bin").read_bytes() == b"x" * 4096
    if settings.staged:
        assert not work.workdir.exists()


def test_a_failing_run_leaves_every_instrument_cleans_its_scratch_and_keeps_its_records(tmp_path):
    settings, calls = arm(tmp_path, "shm"), []
    work = work_of(settings, fail=True)
    with pytest.raises(RuntimeError, match="the step failed"):
        run_job(settings, CYCLE, "s", work, JobTiers.open(settings), records_of(settings),
                [CallLog("outer", calls), CallLog("inner", calls)], tmp_path / "raw",
                failed_attempts=tmp_path / "failed")
    assert calls[-4:] == [("outer", "enter", "run", "b"), ("inner", "enter", "run", "b"),
                          ("inner", "leave", "run", "b"), ("outer", "leave", "run", "b")]
    assert not work.workdir.exists()  # the attempt's scratch is gone
    assert not (tmp_root(settings) / "out.bin").exists()
    [kept] = (tmp_path / "failed").glob("attempt1.*.records.jsonl")
    kept_records = read_records(kept)
    assert kept_records[-1]["op"] == "failed" and kept_records[-1]["phase"] == "run"
    assert "copy" in {record["op"] for record in kept_records}  # the stage-in that went before


@pytest.mark.parametrize("measurable", [True, False])
def test_the_page_probe_comes_only_with_a_paired_replay_where_fresh_pages_can_be_told(tmp_path, monkeypatch,
                                                                                      measurable):
    from cycleio.benchmarks.paired import PairedReplay
    from cycleio.runner import instruments

    monkeypatch.setattr(instruments, "fresh_pages_measurable", lambda: measurable)
    settings = arm(tmp_path, "shm")
    paired = [type(i).__name__ for i in instruments.job_instruments(settings, 1, PairedReplay())]
    alone = [type(i).__name__ for i in instruments.job_instruments(settings, 1, None)]
    evict = ["InputEviction"] if settings.staging.reads_from_storage else []
    assert paired == ["FaultInjection", "PairedReplayAfterRun", *evict, "KernelCounts"] + (["PageProbe"] if measurable
                                                                                         else [])
    assert alone == ["FaultInjection", *evict, "KernelCounts"]


def test_the_page_probe_hands_a_steps_run_its_probe_and_no_other_phase(tmp_path):
    from cycleio.hostmemory import FilePageProbe
    from cycleio.runner.instruments import JobState, PageProbe, Phase
    from cycleio.surrogates.steps import StepRun

    state = JobState(cycle=CYCLE, records=RecordLog(study="t", arm="a", cycle=CYCLE), label="[t]",
                     raw_dir=tmp_path)
    state.run = StepRun(folder=tmp_path)
    with PageProbe().around(Phase("stage_in", "post", tier=None), state):
        assert state.run.page_probe is None
    with PageProbe().around(Phase("run", "post", tier=None), state):
        assert isinstance(state.run.page_probe, FilePageProbe)
