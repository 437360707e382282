"""The parent side of ``cycleio darshan replay``: check, lay out, launch, and answer.

Before anything is written: the log is read and checked (logs.read_log), the plan made (plan.make_plan:
ranks within the log's, a scale above 0, a timing mode), the replay's ranks checked against what can
start here (Slurm's tasks, else the CPUs this process may use), and every folder's free space against
the replay's files at the requested scale (the message names the scale that would fit). Then, per
folder: the replay's files from an earlier run are removed (its writes make new files, as the job's
did), the files the job read are laid out at their replayed size (written, fsynced, not timed), and the
ranks run (rank.py) under the MPI launcher through the project's process runner, bounded in time.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..fsutil import fsync_dir, fsync_file
from ..kernelio import read_proc_io
from ..process import StartupTimeout, launch_ranks, launcher_argv, rank_program
from ..storage.tiers import filesystem_type, free_bytes, nearest_existing
from ..units import format_bytes
from .logs import DarshanLogError, JobLog, read_log
from .plan import Plan, make_plan, option

log = logging.getLogger("cycleio")

TIMEOUT_VARIABLE = "CYCLEIO_DARSHAN_TIMEOUT_S"
PROGRESS_VARIABLE = "CYCLEIO_DARSHAN_PROGRESS_S"  # seconds between rank 0's progress lines (default 10)
ROOM_MARGIN = 0.9          # the replay may take at most this share of a folder's free space
LAYOUT_BLOCK = 8 * 2**20


@dataclass
class Target:
    """A folder to replay on, and the name its rows carry (a tier's name)."""

    tier: str
    path: Path

    @classmethod
    def parse(cls, text: str) -> Target:
        """``NAME=PATH`` or ``PATH`` (its name is then the folder's own)."""
        name, sep, path = text.partition("=")
        if not sep or os.sep in name or not name:
            name, path = "", text
        path_ = Path(os.path.expandvars(os.path.expanduser(path)))
        return cls(tier=name or path_.name or str(path_), path=path_)


@dataclass
class RankRun:
    """One replay of the plan on one folder: every rank's counts (rank.py's result) and the run's wall time."""

    target: Target
    ranks: list[dict]
    wall_s: float
    fs_type: str
    launcher: list[str] = field(default_factory=list)
    # what the kernel counted of this process's own I/O on the replay's plan and result files (a ProcIO's fields):
    # a job's kernel window leaves it out, as it leaves out the ranks' start-up
    own_io: dict = field(default_factory=dict)


def available_slots() -> tuple[int, str]:
    """How many ranks can start here, and why that many."""
    if os.environ.get("SLURM_NTASKS", "").isdigit():
        return int(os.environ["SLURM_NTASKS"]), "SLURM_NTASKS"
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    return cpus, "CPUs this process may use"


def check_slots(nranks: int, oversubscribe: bool = False, say=option) -> None:
    slots, why = available_slots()
    if nranks > slots and not oversubscribe:
        more = (" (or --oversubscribe to start more ranks than that on purpose)" if say is option else
                " (or oversubscribe: true to start more ranks than that on purpose)")
        raise DarshanLogError(f"{say('ranks', nranks)}: only {slots} ranks can start here ({slots} {why}); expected "
                              f"at most {slots}{more}")


def fitting_scale(scale: float, need: int, free: int) -> float:
    """The largest round scale (one significant digit) whose files fit in ``free`` bytes with the margin."""
    if need <= 0:
        return scale
    exact = scale * free * ROOM_MARGIN / need
    if exact <= 0:
        return 0.0
    digits = math.floor(math.log10(exact))
    return math.floor(exact / 10**digits) * 10**digits


def room_problem(need: int, scale: float, free: int, where: str, say=option) -> str | None:
    """Why files of ``need`` bytes at ``scale`` do not fit ``free`` bytes (the scale that would fit named), or None."""
    if need <= free * ROOM_MARGIN:
        return None
    fit = fitting_scale(scale, need, free)
    hint = f"{say('scale', f'{fit:g}')} would fit" if fit > 0 else "no scale fits: free some space"
    return (f"the replay's files take {format_bytes(need)} at {say('scale', f'{scale:g}')}, and {where} has "
            f"{format_bytes(free)} free (the replay may use {ROOM_MARGIN:.0%} of it); {hint}")


def check_room(plan: Plan, target: Target) -> None:
    here = target.path
    # what an earlier replay left of these files is removed before this one starts: it counts as room
    earlier = sum((here / f.path).stat().st_size for f in plan.files if (here / f.path).is_file())
    problem = room_problem(plan.room_bytes(), plan.scale, free_bytes(here) + earlier, str(nearest_existing(here)))
    if problem:
        raise DarshanLogError(f"--dir {target.path}: {problem}")


def lay_out(plan: Plan, target: Target) -> int:
    """Remove the replay's files left by an earlier run, and write the files the job reads at their replayed
    size (fsynced; untimed); a file the job neither read nor wrote (opened, stat'ed) is laid out empty, as it
    was there for the job. Returns the bytes laid out."""
    target.path.mkdir(parents=True, exist_ok=True)
    pattern = bytes(range(256)) * (LAYOUT_BLOCK // 256)
    laid = 0
    for file in plan.files:
        path = target.path / file.path
        path.unlink(missing_ok=True)
        if file.read_extent <= 0:
            if not any(file.logged_ops.values()):
                path.touch()
            continue
        with open(path, "wb") as handle:
            left = file.read_extent
            while left > 0:
                left -= handle.write(pattern[: min(left, len(pattern))])
        fsync_file(path)
        laid += file.read_extent
    fsync_dir(target.path)
    return laid


def _launcher(template: str, nranks: int) -> list[str]:
    """The launcher's words. A bare program name is the one beside this Python first (the mpich wheel's mpiexec
    in the venv): the ranks run this Python, whose mpi4py is built on that MPI, so a system's Open MPI found
    earlier on PATH must not start them (nor get Open MPI's options)."""
    program, _, rest = template.strip().partition(" ")
    if program and os.sep not in program:
        beside = shutil.which(program, path=str(Path(sys.executable).parent))
        if beside:
            template = f"{shlex.quote(beside)} {rest}"
    try:
        words = launcher_argv(template, nranks)
    except ValueError as err:
        raise DarshanLogError(f"--launcher {err}") from None
    if not shutil.which(words[0]):
        raise DarshanLogError(f"--launcher {template!r}: {words[0]!r} is not on PATH nor beside {sys.executable}; "
                              f"expected an MPI launcher (the mpich wheel's mpiexec: `make setup`)")
    return words


def write_plan(plan: Plan, target: Target, folder: Path) -> None:
    spec = {"dir": str(target.path.resolve()), "nranks": plan.nranks,
            "files": [{"path": f.path} for f in plan.files],
            "mpiio": {str(index): how for index, how in plan.mpiio.items()},
            "progress_s": float(os.environ.get(PROGRESS_VARIABLE, "10"))}
    (folder / "spec.json").write_text(json.dumps(spec))
    for rank, arrays in enumerate(plan.ranks):
        np.savez(folder / f"rank{rank}.npz", **{f"op_{k}": v for k, v in arrays.items()})  # np.savez has its own `file`


def default_timeout(plan: Plan) -> float:
    if os.environ.get(TIMEOUT_VARIABLE):
        return float(os.environ[TIMEOUT_VARIABLE])
    gaps = max((float(rank["gap_s"].sum()) for rank in plan.ranks), default=0.0)
    moved = plan.bytes("read") + plan.bytes("write")
    return 600.0 + 2 * gaps + moved / 2**20 + plan.n_ops / 1000


def run_ranks(plan: Plan, target: Target, launcher: str = "mpiexec -n {ntasks}",
              timeout: float | None = None) -> RankRun:
    """Run the plan's ranks on ``target`` (laid out already): their counts, or RuntimeError with the launcher's
    words."""
    command = _launcher(launcher, plan.nranks)
    timeout = default_timeout(plan) if timeout is None else timeout
    with tempfile.TemporaryDirectory(prefix="cycleio-darshan.") as tmp:
        folder = Path(tmp)
        before = read_proc_io()
        write_plan(plan, target, folder)
        planned = read_proc_io()
        program = rank_program("cycleio.darshan.rank", "--plan", str(folder), started=folder / "started")
        argv, env = [*command, *program.argv], program.env
        env["PATH"] = os.pathsep.join(filter(None, [str(Path(sys.executable).parent), env.get("PATH")]))
        log.info("replaying %d operations on %s (%s) with %d ranks: %s", plan.n_ops, target.tier, target.path,
                 plan.nranks, shlex.join(argv))
        output = folder / "launcher.err"
        progress = _log_stream()
        if progress is not None:
            progress.flush()
        t0 = time.perf_counter()
        with open(output, "w") as err:
            try:
                code = launch_ranks(argv, ntasks=plan.nranks, started=folder / "started", timeout=timeout,
                                    name=f"the replay on {target.path}", outputs=(err,), stdout=progress, stderr=err,
                                    env=env).returncode
            except StartupTimeout as hung:
                raise RuntimeError(f"the replay on {target.path} did not start twice: its ranks did not all pass "
                                   f"MPI's start-up within {hung.timeout:.0f} s; launcher output: "
                                   f"{output.read_text(errors='replace')[-1000:].strip()}") from None
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"the replay on {target.path} did not finish within {timeout:.0f} s and was stopped "
                                   f"(set {TIMEOUT_VARIABLE} to allow longer)") from None
        wall = time.perf_counter() - t0
        reading = read_proc_io()
        said = output.read_text(errors="replace").strip()
        for line in said.splitlines()[-20:]:
            log.info("replay: %s", line)
        result = folder / "result.json"
        if code != 0 or not result.is_file():
            raise RuntimeError(f"the replay on {target.path} failed (launcher exit code {code}): "
                               f"{said[-600:] or '(no output)'}")
        ranks = json.loads(result.read_text())["ranks"]
        read = read_proc_io()
    own = {}
    if None not in (before, planned, reading, read):
        own = ((planned - before) + (read - reading)).as_dict()
    return RankRun(target=target, ranks=ranks, wall_s=wall, fs_type=filesystem_type(target.path), launcher=command,
                   own_io=own)


def _log_stream():
    """Where the log goes (the --log file, else stderr), for rank 0's progress lines as the replay runs; None
    (the launcher's own stdout) where neither is a real file."""
    handlers = logging.getLogger().handlers + log.handlers
    for stream in [getattr(h, "stream", None) for h in handlers] + [sys.stderr]:
        try:
            stream.fileno()
        except (AttributeError, OSError, ValueError):
            continue
        return stream
    return None


def prepare(log_path: str | os.PathLike | JobLog, targets: list[Target], nranks: int, scale: float, timing: str,
            oversubscribe: bool = False, layer: str = "posix") -> tuple[JobLog, Plan]:
    """Every check that comes before any replay: the log, the request, the ranks, each folder's room."""
    job = log_path if isinstance(log_path, JobLog) else read_log(log_path)
    t0 = time.perf_counter()
    plan = make_plan(job, nranks, scale, timing, layer)
    log.info("planned %s operations of %d files for %d ranks in %.2f s (%s read, %s written at scale %g)",
             f"{plan.n_ops:,}", len(plan.files), nranks, time.perf_counter() - t0, format_bytes(plan.bytes("read")),
             format_bytes(plan.bytes("write")), scale)
    for note in plan.notes:
        log.warning("%s: %s", job.path.name, note)
    check_slots(nranks, oversubscribe)
    for target in targets:
        check_room(plan, target)
    return job, plan


def replay(log_path: str | os.PathLike | JobLog, targets: list[Target], nranks: int = 1, scale: float = 1.0,
           timing: str = "io", launcher: str = "mpiexec -n {ntasks}", oversubscribe: bool = False,
           timeout: float | None = None, keep: bool = False,
           layer: str = "posix") -> tuple[JobLog, Plan, list[RankRun]]:
    """Replay the log on every target in turn (each laid out just before its run); the runs' counts."""
    job, plan = prepare(log_path, targets, nranks, scale, timing, oversubscribe, layer)
    runs = []
    for target in targets:
        try:
            laid = lay_out(plan, target)
            log.info("laid out %s of input files on %s (untimed)", format_bytes(laid), target.path)
            runs.append(run_ranks(plan, target, launcher, timeout))
        finally:
            if not keep:
                for file in plan.files:
                    (target.path / file.path).unlink(missing_ok=True)
    return job, plan, runs
