"""Run a command bounded in time: on timeout, or when the caller is interrupted, its whole process tree
ends (an MPI launcher's ranks, a shell's children), not only the process started. And the MPI
launcher's command line, made from the config's template in this one place, and the rank program's
(``python -m cycleio...``), which imports the cycleio this process runs."""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import shlex
import shutil
import site
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable

import psutil

log = logging.getLogger(__name__)
LAUNCHER_EXAMPLE = "e.g. 'mpiexec -n {ntasks}' or 'srun -n {ntasks}'"


def which(name: str) -> str | None:
    """``name`` on PATH, else beside this Python (the mpich wheel's mpiexec, a venv's tools)."""
    return shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))


def launcher_argv(template: str, ntasks: int) -> list[str]:
    """The launcher's words for ``ntasks`` ranks (the config key ``launcher``); a bare program name
    not on PATH is looked up beside Python. ValueError for a template that cannot start N tasks."""
    try:
        argv = shlex.split(template.format(ntasks=ntasks))
    except (KeyError, IndexError, ValueError) as err:
        raise ValueError(f"{template!r} is not a valid template ({err}); expected a command with {{ntasks}}, "
                         f"{LAUNCHER_EXAMPLE}") from None
    if not argv or "{ntasks}" not in template:
        raise ValueError(f"{template!r} does not say how many tasks to start; expected a command with {{ntasks}}, "
                         f"{LAUNCHER_EXAMPLE}")
    if os.sep not in argv[0] and not shutil.which(argv[0]):
        argv[0] = which(argv[0]) or argv[0]
    if os.geteuid() == 0 and is_open_mpi_launcher(argv[0]) and "--allow-run-as-root" not in argv:
        argv.insert(1, "--allow-run-as-root")  # Open MPI refuses root without it
    return argv


@dataclass(frozen=True)
class RankProgram:
    """The words after the launcher's, and the environment to start them in."""

    argv: list[str]
    env: dict[str, str]


# The file a rank program's rank 0 touches once every rank is past MPI's start-up (say_ranks_started), named in
# the ranks' environment by rank_program's ``started``; launch_ranks waits for it.
STARTED_VARIABLE = "CYCLEIO_RANKS_STARTED"


def startup_timeout(ntasks: int) -> float:
    """The seconds an MPI program's ranks may take to all pass MPI's start-up: a minute, and more for many ranks."""
    return 60.0 + 0.05 * ntasks


def say_ranks_started(comm) -> None:
    """In a rank program, right after MPI's start-up: once every rank is past it, rank 0 touches the file
    STARTED_VARIABLE names (if the launcher named one)."""
    path = os.environ.get(STARTED_VARIABLE)
    if path:
        comm.Barrier()
        if comm.Get_rank() == 0:
            Path(path).touch()


def launch_ranks(argv: list[str], *, ntasks: int, started: Path, timeout: float, name: str,
                 outputs: tuple[IO[str], ...] = (), before_relaunch: Callable[[], None] | None = None,
                 **kwargs) -> subprocess.CompletedProcess:
    """``run_command`` for a rank program started with ``started`` (rank_program's). Ranks that have not all passed
    MPI's start-up within startup_timeout(ntasks) are stopped and launched once more (as when Slurm's pmi2 plugin
    misreads a PMI-1 request longer than its one read: every rank waits in PMI for an answer that never comes),
    after a warning naming the program (``name``) with the last words of its ``outputs`` (the files its stdout and
    stderr go to, then emptied) and ``before_relaunch()`` (the caller's clean-up). A second such start raises
    StartupTimeout (its ``timeout``: the seconds)."""
    watch = (started.exists, startup_timeout(ntasks))
    try:
        return run_command(argv, timeout=timeout, started=watch, **kwargs)
    except StartupTimeout:
        log.warning("%s: its ranks did not all start within %.0f s: stopped and launched again; its last words: %s",
                    name, watch[1], last_words(*(Path(handle.name) for handle in outputs)))
        if before_relaunch is not None:
            before_relaunch()
        for handle in outputs:
            handle.seek(0)
            handle.truncate()
        return run_command(argv, timeout=timeout, started=watch, **kwargs)


def last_lines(*paths: Path, lines: int = 6) -> list[str]:
    """The last lines (not blank) a program wrote to these files: of the first that has any; none if none has."""
    for path in paths:
        try:
            said = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            continue
        if said:
            return said[-lines:]
    return []


def last_words(*paths: Path) -> str:
    """last_lines joined by " | ", or "none"."""
    return " | ".join(last_lines(*paths)) or "none"


def rank_program(module: str, *args: str, python: str | None = None, links: Path | None = None,
                 started: Path | None = None) -> RankProgram:
    """``python -m module args`` (``python`` this one by default) started so that every rank imports the cycleio
    this process imported, from a checkout or an installed package alike; with ``started``, its ranks say there
    when they have all passed MPI's start-up (say_ranks_started), for launch_ranks.

    A checkout's package (the folder holding it: scripts/) goes first on PYTHONPATH. An installed one needs nothing
    for this Python; another Python (the parallel stack's, an environment of its own) gets a folder holding only a
    link to the package, made in ``links`` (a folder the ranks see), so that the rest of this environment's
    site-packages (its netCDF4, its mpi4py) stays out of that Python's way.
    """
    python = python or sys.executable
    folder = package_folder()
    if folder in _site_folders():
        if os.path.abspath(python) == os.path.abspath(sys.executable):
            folder = None
        elif links is None:
            raise ValueError(f"{python} would import cycleio from {folder}, the site-packages of {sys.executable}: "
                             "give a folder for the link to the package alone")
        else:
            link = links / PACKAGE
            if not link.is_symlink():
                link.symlink_to(folder / PACKAGE, target_is_directory=True)
            folder = links
    env = dict(os.environ)
    if started is not None:
        env[STARTED_VARIABLE] = str(started)
    if folder is not None:
        paths = [str(folder), *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(folder))]
        env["PYTHONPATH"] = os.pathsep.join(paths)
    return RankProgram(argv=[python, "-m", module, *args], env=env)


PACKAGE = __name__.partition(".")[0]


def package_folder() -> Path:
    """The folder this process imported cycleio from: a checkout's scripts/, or an environment's site-packages."""
    locations = sys.modules[PACKAGE].__spec__.submodule_search_locations
    return Path(next(iter(locations))).resolve().parent


def _site_folders() -> set[Path]:
    """This Python's site-packages folders, where an installed cycleio lives."""
    paths = [*site.getsitepackages(), site.getusersitepackages(), sysconfig.get_path("purelib"),
             sysconfig.get_path("platlib")]
    return {Path(path).resolve() for path in paths if path}


# Open MPI's launchers (Debian's mpirun.openmpi and mpiexec.openmpi are links to orterun; 5.x has prterun).
OPEN_MPI_LAUNCHERS = ("orterun", "prterun", "mpirun.openmpi", "mpiexec.openmpi")


def is_open_mpi_launcher(program: str) -> bool:
    """Whether ``program`` (a name on PATH or a path) is Open MPI's mpirun, through any links."""
    found = shutil.which(program)
    return found is not None and Path(os.path.realpath(found)).name in OPEN_MPI_LAUNCHERS

GRACE_S = 10.0


def stop_tree(process: subprocess.Popen, grace: float = GRACE_S) -> None:
    """SIGTERM the process and every descendant, SIGKILL what is left after ``grace`` seconds, reap.

    Descendants are listed before anything is signalled: once a parent dies its children are
    reparented and can no longer be found from it.
    """
    try:
        parent = psutil.Process(process.pid)
        procs = [parent, *parent.children(recursive=True)]
    except psutil.NoSuchProcess:
        procs = []
    for signal_them in (psutil.Process.terminate, psutil.Process.kill):
        for proc in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                signal_them(proc)
        procs = _wait_gone(procs, grace)
        if not procs:
            break
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=grace)


def _wait_gone(procs: list[psutil.Process], seconds: float) -> list[psutil.Process]:
    """The processes still running after up to ``seconds``. A zombie counts as gone: an orphan's is
    reaped by whoever adopted it, which may be slow to do so."""
    deadline = time.monotonic() + seconds
    while True:
        alive = [proc for proc in procs if _running(proc)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


class StartupTimeout(subprocess.TimeoutExpired):
    """The command did not say it had started (``run_command``'s ``started``) within its start-up time."""


def run_command(argv: list[str], *, timeout: float, stdout: int | IO | None = None, stderr: int | IO | None = None,
                stdin: int | IO | None = subprocess.DEVNULL, cwd: Any = None, env: dict | None = None,
                text: bool = False, started: tuple[Callable[[], bool], float] | None = None
                ) -> subprocess.CompletedProcess:
    """``subprocess.run`` with a timeout that ends the whole tree, then raises ``subprocess.TimeoutExpired``.

    ``started``: (a test that the command has started, the seconds it may take): a command that has not started
    by then is ended the same way and raises StartupTimeout (an MPI program hung in its start-up).
    The command stays in the caller's process group (no new session), so a signal that Snakemake or
    a terminal sends to the job's group still reaches the tool directly. Starting failures raise
    OSError, as Popen does.
    """
    started_at, began = time.time(), time.monotonic()
    process = subprocess.Popen(argv, stdin=stdin, stdout=stdout, stderr=stderr, cwd=cwd, env=env, text=text)
    try:
        if started is not None and started[1] < timeout:
            try:
                out, err = process.communicate(timeout=started[1])
            except subprocess.TimeoutExpired:
                if not started[0]():
                    raise StartupTimeout(argv, started[1]) from None
                out, err = process.communicate(timeout=timeout - (time.monotonic() - began))
        else:
            out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        stop_tree(process)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.communicate(timeout=GRACE_S)  # closes the pipes, if any
        remove_orphan_segments(started_at)
        if isinstance(expired, StartupTimeout):
            raise
        raise subprocess.TimeoutExpired(argv, timeout) from None
    except BaseException:
        stop_tree(process)
        remove_orphan_segments(started_at)
        raise
    remove_orphan_segments(started_at if process.returncode != 0 else None)
    return subprocess.CompletedProcess(argv, process.returncode, out, err)


# MPICH's shared-memory segments: the ranks of a run remove theirs as they finalize, so a run that aborts
# (MPI_Abort, a failed rank) or is killed leaves its own behind, in memory until the node reboots.
MPICH_SEGMENTS = "/dev/shm/mpich_shm_*"
# A segment older than this that no process maps was left by a run killed outright (its job could not clean up)
STALE_SEGMENT_S = 60.0


# The ranks of an aborted run may outlive its launcher by a moment, still mapping their segment
RANKS_GONE_S = 2.0


def remove_orphan_segments(since: float | None, pattern: str = MPICH_SEGMENTS,
                           settle_s: float = RANKS_GONE_S) -> list[str]:
    """Remove this user's MPICH segments that no process maps any more, made since ``since`` (epoch seconds: the
    failed run's own) or over STALE_SEGMENT_S ago (a killed run's); the paths removed. A segment a run still uses
    is mapped by its ranks and stays; one made since ``since`` is looked at again for up to ``settle_s``, as the
    aborted run's ranks end after its launcher."""
    uid, now = os.getuid(), time.time()
    fresh, stale = [], []
    for path in glob.glob(pattern):
        with contextlib.suppress(OSError):
            info = os.stat(path)
            if info.st_uid != uid:
                continue
            if since is not None and info.st_ctime >= since - 1.0:  # ctime ticks coarser than time.time()
                fresh.append(path)
            elif info.st_ctime < now - STALE_SEGMENT_S:
                stale.append(path)
    removed: list[str] = []
    deadline = time.monotonic() + settle_s
    while fresh or stale:
        mapped = _mapped_paths()
        for candidates in (fresh, stale):
            for path in [p for p in candidates if p not in mapped]:
                candidates.remove(path)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                    removed.append(path)
        stale.clear()  # a stale segment still mapped belongs to a run that is still going
        if not fresh or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    return removed


def _mapped_paths() -> set[str]:
    """Every file some process of the machine maps."""
    mapped: set[str] = set()
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            mapped.update(region.path for region in proc.memory_maps(grouped=True))
    return mapped
