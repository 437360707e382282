"""The parent side of the forecast's MPI program: start it under the arm's launcher, bound it with a
timeout, and return its records, or fail with the failing rank's error (see rank.py)."""

from __future__ import annotations

import errno
import functools
import json
import logging
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ...kernelio import RANK_WORK_OP, ProcIO, outside_work, read_proc_io
from ...process import StartupTimeout, launch_ranks, launcher_argv, rank_program, run_command
from ..inventory import FileSpec
from ..kinds import expected_bytes
from ..context import WriteContext
from .layout import ForecastError, RankLayout, check_layout
from .plan import hour_groups
from .writetime import actual_seconds, effective_per_hour, final_seconds

log = logging.getLogger("cycleio")

TIMEOUT_VARIABLE = "CYCLEIO_MPI_TIMEOUT_S"
SHM_DIR = Path("/dev/shm")


SETUP_PARALLEL = ("run `make setup MPI=system` (as root on Debian it installs libnetcdf-mpi-dev, libhdf5-openmpi-dev "
                  "and openmpi-bin, then builds netCDF4 against them into .venv-parallel), or point "
                  "parallel_stack.python at a Python whose netCDF4 has parallel support")


def program_stack(settings) -> tuple[str, str, str]:
    """(config key, launcher template, Python) the arm's forecast program runs with.

    The shared-file strategies (parallel, quilt_parallel) run on the parallel-netCDF stack
    (config ``parallel_stack``): netCDF4 on parallel HDF5 is built for its own MPI. The others run
    under ``launcher`` with this Python (the project's venv, mpi4py on the mpich wheel).
    """
    if not RankLayout.from_settings(settings.strategy, settings.write_component).write_strategy.shared_file:
        return "launcher", settings.launcher, sys.executable
    from ...config.schema import object_defaults

    stack = {**object_defaults("parallel_stack"), **(settings.parallel_stack or {})}
    python = Path(os.path.expandvars(os.path.expanduser(stack["python"])))
    return "parallel_stack.launcher", stack["launcher"], str(python if python.is_absolute() else Path.cwd() / python)


def _launch_command(launcher: str, ntasks: int, key: str = "launcher") -> list[str]:
    try:
        words = launcher_argv(launcher, ntasks)
    except ValueError as err:
        raise ForecastError(f"{key} {err}") from None
    found = shutil.which(words[0])
    if not found:
        install = "install an MPI (the mpich wheel)" if key == "launcher" else SETUP_PARALLEL
        raise ForecastError(f"launcher program {words[0]!r} (from {key} {launcher!r}) is not on PATH nor beside "
                            f"{sys.executable}; {install}, or set `{key}` in the config")
    return [found, *words[1:]]


@functools.lru_cache(maxsize=8)
def _launcher_version(program: str) -> str:
    """The launcher's own word on what it is (``--version``'s line naming a version), or ""."""
    try:
        result = run_command([program, "--version"], timeout=30, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = [" ".join(line.split()) for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    named = [line for line in lines if "version" in line.lower() and any(ch.isdigit() for ch in line)]
    return (named or [line for line in lines if any(ch.isdigit() for ch in line)] or [""])[0][:200]


def launch_provenance(settings) -> dict:
    """For a forecast job's manifest: what the arm's forecast program is started with (the launcher as it would
    run two ranks, its version, the Python); the job adds what its ranks reported (run_forecast_mpi's ``info``)."""
    try:
        key, template, python = program_stack(settings)
        words = launcher_argv(template, 2)
    except (ForecastError, ValueError) as err:
        return {"problem": str(err)}
    program = shutil.which(words[0])
    return {"config_key": key, "template": template, "argv": words, "program": program or "",
            "launcher_version": _launcher_version(program) if program else "", "python": python}


def default_timeout(settings, writes: list[FileSpec], ctx: WriteContext) -> float:
    """Generous: the compute stand-in, plus the outputs written at 2 MiB/s, plus 10 minutes."""
    if os.environ.get(TIMEOUT_VARIABLE):
        return float(os.environ[TIMEOUT_VARIABLE])
    compute = settings.compute_seconds_per_hour * settings.forecast.forecast_hours
    nbytes = sum(expected_bytes(spec, ctx.grid, ctx.compression) for spec in writes)
    return 600.0 + 2.0 * compute + nbytes / 2**21


def _mpich_segments() -> set[Path]:
    return set(SHM_DIR.glob("mpich_shm_*")) if SHM_DIR.is_dir() else set()


def _remove_orphaned_segments(before: set[Path]) -> None:
    """MPICH leaves its shared-memory segments in /dev/shm when its ranks are aborted or killed.

    Remove the ones that appeared during this run, are ours, and that no live process maps any more.
    """
    new = _mpich_segments() - before
    if not new:
        return
    mapped: set[Path] = set()
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            text = maps.read_text()
        except OSError:
            continue
        mapped.update(path for path in new if str(path) in text)
    for path in new - mapped:
        try:
            if path.stat().st_uid == os.getuid():
                path.unlink()
        except OSError:
            pass


def _failure_message(errors: Path, output: Path, returncode: int, ntasks: int, workdir: Path) -> tuple[str, str]:
    """The failing rank's error (first to fail), and its full traceback for the log.

    A rank writes its error beside the job's files; on a full tier that file stays empty or is never
    made, so the message then says how full the tier is rather than nothing.
    """
    full = _full_tier(workdir)
    files = sorted(errors.glob("rank*.txt"), key=lambda p: p.stat().st_mtime)
    for path in files:
        text = path.read_text(errors="replace").strip()
        if text:
            return f"rank {int(path.stem[4:])} of {ntasks} failed: {text.splitlines()[0]}{full}", text
    tail = output.read_text(errors="replace")[-3000:].strip() if output.exists() else ""
    who = f"rank {int(files[0].stem[4:])} failed and could not write its error" if files else "no rank reported an error"
    return f"the launcher exited with code {returncode}; {who}{full}: {tail[-500:] or '(no output)'}", tail


def _full_tier(workdir: Path) -> str:
    try:
        stats = os.statvfs(workdir)
    except OSError:
        return ""
    free = stats.f_bavail * stats.f_frsize
    if free >= 1024 * 1024:
        return ""
    return f" (the tier is full: {free} bytes free on {workdir}; {os.strerror(errno.ENOSPC)})"


def run_forecast_mpi(settings, cycle: str, workdir: Path, writes: list[FileSpec], ctx: WriteContext, *,
                     timeout: float | None = None, label: str = "", fail_rank: int | None = None,
                     info: dict | None = None, kernel_outside: list | None = None,
                     probe_pages: bool = False, control: Path | None = None) -> list[dict]:
    """Run the forecast's writes as an MPI program under the arm's launcher; return its records.

    ``fail_rank``: fault injection (config ``faults.fail_rank``), the rank that fails at its first output hour.
    ``info``, if given, gets what rank 0 reports of the program's stack: its MPI library, mpi4py, netCDF-C and
    HDF5 versions, whether netCDF4 has parallel support, and the launcher's command.

    ``settings`` is the arm's ArmSettings (strategy, launcher, write_component, compute stand-in).
    ``kernel_outside``, if given, gets the program's kernel counts outside its ranks' I/O work
    (kernelio.outside_work), which the job's count of the run leaves out. ``probe_pages``: a paired job's
    step; the writing rank tells the fresh pages each file meets (rank.Forecast.arm_probe). ``control``: where the
    program's spec, records and errors go when its ranks run on several nodes whose ``workdir`` is each their own
    (a folder every node sees); by default beside the outputs in ``workdir``.
    Each record is a dict of Record fields (op, file, bytes, t_start, seconds, rank, nranks, n_files);
    the caller adds step, phase and tier. Raises ForecastError with the failing rank's error.
    """
    # this process from here on and, once reaped, the launcher and every rank: all of it but the ranks' I/O work is
    # the program's making and starting, which the job's count of the run leaves out (kernelio.outside_work)
    program_started = read_proc_io()
    layout = RankLayout.from_settings(settings.strategy, settings.write_component)
    groups = hour_groups(writes)
    check_layout(layout, ctx.grid)  # here, not on every rank
    key, template, python = program_stack(settings)
    if not Path(python).is_file():
        raise ForecastError(f"{label} write strategy {settings.strategy!r} runs on the parallel-netCDF stack, but its "
                            f"Python {python} (config parallel_stack.python) is missing; {SETUP_PARALLEL}")
    command = _launch_command(template, layout.ntasks, key)
    timeout = default_timeout(settings, writes, ctx) if timeout is None else timeout
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".mpifcst.", dir=control or workdir))
    try:
        (tmp / "errors").mkdir()
        spec = {
            "workdir": str(workdir), "cycle": cycle, "seed": ctx.seed, "resolution": ctx.grid.resolution,
            "levels": ctx.grid.levels, "compression": {"zlib_level": ctx.compression.zlib_level,
                                                       "quantize_nsd": ctx.compression.quantize_nsd},
            "strategy": settings.strategy, "write_component": dict(settings.write_component or {}),
            "compute_seconds_per_hour": settings.compute_seconds_per_hour,
            "compute_kind": settings.compute_kind,
            "hours": [[hour, [[s.path, s.kind, [list(p) for p in s.params]] for s in specs]] for hour, specs in groups],
            "buffer_bytes": ctx.buffer_bytes,
            "records": str(tmp / "records.jsonl"), "errors": str(tmp / "errors"), "info": str(tmp / "info.json"),
            "fail_rank": fail_rank, "probe_pages": probe_pages,
        }
        (tmp / "spec.json").write_text(json.dumps(spec))
        program = rank_program("cycleio.surrogates.forecast.rank", "--spec", str(tmp / "spec.json"), python=python,
                               links=tmp, started=tmp / "started")
        argv, env = [*command, *program.argv], program.env
        log.info("%s fcst writes under MPI (%s): %s", label, layout.describe(), shlex.join(argv))
        output = tmp / "launcher.out"
        t0 = time.perf_counter()
        segments = _mpich_segments()
        with open(output, "w") as out:
            try:
                returncode = launch_ranks(argv, ntasks=layout.ntasks, started=tmp / "started", timeout=timeout,
                                          name=f"{label} the MPI forecast", outputs=(out,),
                                          before_relaunch=lambda: _remove_orphaned_segments(segments),
                                          stdout=out, stderr=subprocess.STDOUT, env=env).returncode
            except StartupTimeout as hung:
                _remove_orphaned_segments(segments)
                raise ForecastError(
                    f"{label} the MPI forecast ({layout.describe()}) did not start twice: its ranks did not all pass "
                    f"MPI's start-up within {hung.timeout:.0f} s; launcher output: "
                    f"{output.read_text(errors='replace')[-1000:].strip()}"
                ) from None
            except subprocess.TimeoutExpired:
                _remove_orphaned_segments(segments)
                raise ForecastError(
                    f"{label} the MPI forecast ({layout.describe()}) did not finish within {timeout:.0f} s and was "
                    f"stopped (set {TIMEOUT_VARIABLE} to allow longer); launcher output: "
                    f"{output.read_text(errors='replace')[-1000:].strip()}"
                ) from None
        if returncode != 0 or not (tmp / "records.jsonl").exists():
            _remove_orphaned_segments(segments)
            message, details = _failure_message(tmp / "errors", output, returncode, layout.ntasks, workdir)
            log.error("%s MPI forecast failed: %s", label, details)
            raise ForecastError(f"{label} MPI forecast ({layout.describe()}) failed: {message}")
        with open(tmp / "records.jsonl") as handle:
            records = [json.loads(line) for line in handle if line.strip()]
        works = [ProcIO.from_dict(record["counts"]) for record in records if record["op"] == RANK_WORK_OP]
        records = [record for record in records if record["op"] != RANK_WORK_OP]
        if info is not None:
            info.update(json.loads((tmp / "info.json").read_text()) if (tmp / "info.json").exists() else {})
            info["argv"] = argv[:len(command) + 1]
        chatter = output.read_text(errors="replace").strip()
        program_finished = read_proc_io()  # after reading the ranks' records, stack and output: ours, not the run's
        # with a rank's work unknown, nothing is left out: the window is judged on all the program moved
        if kernel_outside is not None and program_started and program_finished and len(works) == layout.ntasks:
            kernel_outside.append(outside_work(program_finished - program_started, works).as_dict())
        if chatter:
            log.info("%s launcher output: %s", label, chatter[-2000:])
        _log_summary(records, label, time.perf_counter() - t0)
        return records
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _log_summary(records: list[dict], label: str, wall: float) -> None:
    hours = effective_per_hour(records)
    log.info("%s fcst MPI program %.2f s: effective write %.3f s over %d output hours (slowest compute rank), "
             "actual write %.3f s (busiest writer), final un-overlapped write %.3f s",
             label, wall, sum(hours.values()), len(hours), actual_seconds(records), final_seconds(records))
