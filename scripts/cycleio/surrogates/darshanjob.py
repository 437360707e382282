"""A replay job of the cycle (config ``darshan.jobs.<name>``, job ``darshan_<name>``): a step of its own kind.

``cycleio step --step darshan_<name>`` runs it through the job runner (runner.job.run_step), the same phases as every
step, with the same staging (copy, verify), instruments, records and manifest:

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
from ..kernelio import ProcIO, outside_work, read_proc_io
from ..records import RecordLog
from ..storage.checksums import checksum_file
from ..storage.pagecache import cache_risk
from ..storage.tiers import TierSite
from ..units import MiB
from .inventory import FileSpec
from .steps import StepRun

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


class ReplayWork:
    """A replay job's own part (see the module's docstring), for the runner (runner.job): its files, its folder, the
    replay itself, the tidying of an unstaged folder and the manifest's ``darshan`` provenance."""

    def __init__(self, settings: ArmSettings, cycle: str, step: str, scratch: TierSite, persistent: TierSite,
                 label: str):
        self.settings, self.step, self.scratch, self.persistent, self.label = settings, step, scratch, persistent, label
        self.name = step.removeprefix(DARSHAN_PREFIX)
        self.job, self.plan = _planned(settings, self.name, label)
        files = replay_files(self.plan)
        self.inputs = [FileSpec(path, "darshan_input") for path, _ in files.inputs]
        self.outputs = [FileSpec(path, "darshan_output") for path, _ in files.outputs]
        self.source, self.outdir = persistent.root / input_dir(self.name), output_dir(self.name, cycle)
        missing = [spec.path for spec in self.inputs if not (self.source / spec.path).is_file()]
        if missing:
            raise ReplayJobError(f"{label} missing input on the persistent tier: {self.source / missing[0]}"
                                 + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
                                 + f"; job {DARSHAN_INPUTS} lays them out: rerun it (--forcerun {DARSHAN_INPUTS})")
        # an arm without scratch replays in the cycle's folder on the persistent tier
        self.workdir = scratch.root / f".job.{cycle}.{step}" if settings.staged else persistent.root / self.outdir
        self.result = None  # the replay's (darshan.replay.run_ranks), once it ran

    def prepare(self) -> None:
        for note in self.plan.notes:
            log.warning("%s %s: %s", self.label, self.job.path.name, note)

    def run(self, step: str, run: StepRun, records: RecordLog) -> None:
        """The replay in ``run.folder``: the log's operations per rank under MPI, then their records."""
        plan = self.plan
        program_started = read_proc_io()  # this process and, once reaped, the launcher and every rank
        with records.timed(step=step, phase="run", op="launch", n_files=0, tool=TOOL, **self.scratch.fields()):
            self.result = run_ranks(plan, Target(self.scratch.tier.name, run.folder), self.settings.launcher)
        program_finished = read_proc_io()
        # what the program moved besides its ranks' calls: their start-up, the launcher's, the replayer's plan and
        # result files; with a rank's work unknown, nothing is left out
        works = [ProcIO.from_dict(result["kernel"]) for result in self.result.ranks if result.get("kernel")]
        if program_started and program_finished and len(works) == len(self.result.ranks):
            run.kernel_outside.append(outside_work(program_finished - program_started, works).as_dict())
        add_replay_records(records, self.result, plan, self.scratch, step, run.cache_cold or run.evicted)
        moved = sum(r.bytes for r in records.records if r.phase == "run" and r.op in DIRECTIONS)
        log.info("%s run: replayed %s operations of %d files with %d ranks (scale %g, timing %s), %.1f MiB",
                 self.label, f"{plan.n_ops:,}", len(plan.files), plan.nranks, plan.scale, plan.timing, moved / MiB)

    def tidy_in_place(self, records: RecordLog) -> None:
        """Unstaged: the copies of the files the replay only read go from the cycle's folder."""
        written = {spec.path for spec in self.outputs}
        with records.timed(step=self.step, phase="cleanup", op="remove", **self.persistent.fields()) as event:
            copies = [self.workdir / spec.path for spec in self.inputs if spec.path not in written]
            for path in copies:
                path.unlink(missing_ok=True)
            event["n_files"] = len(copies)

    def manifest_inputs(self) -> list[str]:
        return [f"{input_dir(self.name)}/{spec.path}" for spec in self.inputs]

    def provenance(self, paired: bool) -> dict:
        """The manifest's ``darshan``: the log, the request, the replay's timing answer and its fidelity."""
        job, plan, run = self.job, self.plan, self.result
        return {
            "log": str(job.path), "log_sha256": job.sha256, "exe": job.exe, "jobid": job.jobid,
            "log_ranks": job.nprocs, "ranks": plan.nranks, "scale": plan.scale, "timing": plan.timing,
            "layer": plan.layer, "n_ops": plan.n_ops,
            "sources": {s: sum(1 for f in plan.files if f.source == s) for s in sorted({f.source for f in plan.files})},
            "notes": plan.notes, "logged_slowest_rank": slowest_rank(rank_times(job)), "replay": replay_times(run),
            "launcher": shlex.join(run.launcher), "fs_type": run.fs_type, "python": sys.executable,
            "paired": paired,
            # the fidelity: per direction, what the log counted (bytes, calls), times the scale, and what the replay did
            "fidelity": {d: {"logged_bytes": sum(f.logged_bytes[d] for f in plan.files),
                             "logged_ops": sum(f.logged_ops[d] for f in plan.files),
                             "expected_bytes": round(sum(f.logged_bytes[d] for f in plan.files) * plan.scale),
                             "replayed_bytes": sum(sum(r[f"{d}_bytes"]) for r in run.ranks),
                             "replayed_ops": sum(sum(r[f"{d}_ops"]) for r in run.ranks)} for d in DIRECTIONS},
        }


def run_replay_inputs(settings: ArmSettings, records_path: Path, manifest_path: Path, provenance) -> dict:
    """Lay out, once per arm, the files every replay job's log reads at their replayed size on the persistent tier
    (``darshan/<name>/``), as the cold start is made once; records (step ``darshan_inputs``, one of
    records.ARRIVALS) and the manifest, last (``provenance``: runner.manifest.provenance)."""
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

