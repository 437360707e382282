"""The Python the jobs run: checked once before any job, not by every job failing on an import."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

# What a job imports beyond the standard library (the surrogates, staging, tables).
JOB_MODULES = ("numpy", "pandas", "pyarrow", "netCDF4", "h5py", "mpi4py", "eccodes", "xxhash", "yaml", "jsonschema")


def job_python_problem(python: str = "python", modules: tuple[str, ...] = JOB_MODULES) -> str | None:
    """Why the ``python`` jobs start (``python -m cycleio``, found on PATH) cannot run them; None if it can."""
    from ..process import run_command

    found = shutil.which(python)
    if found is None:
        return f"no {python!r} on PATH: the jobs run `{python} -m cycleio`"
    probe = "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
    try:
        result = run_command([found, "-c", probe, *modules], timeout=60, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{found} could not be run ({err})"
    missing = result.stdout.split()
    if result.returncode != 0 or missing:
        what = ", ".join(missing) if missing else result.stderr.strip()[-300:]
        return (f"the jobs run `python -m cycleio` with {found}, which lacks {what}; run through make "
                "(make study), or put the project's environment first on PATH (source .venv/bin/activate)")
    return None


# Rank 0 of each world says its size (the launcher may interleave the output of several ranks).
MPI_PROBE = ("from mpi4py import MPI; c = MPI.COMM_WORLD; c.Get_rank() or print('cycleio-probe', c.Get_size(), "
             "'|', ' '.join(MPI.Get_library_version().split()[:3]), flush=True)")


def launcher_problem(template: str, python: str = "python", ntasks: int = 2, timeout: float = 120) -> str | None:
    """Why the ``launcher`` cannot start the forecast's ranks as one MPI world; None if it can.

    Another MPI's mpiexec first on PATH (a site module, Debian's OpenMPI) starts ranks that are not
    of the MPI mpi4py was built with: they fail, or each runs as its own world of one and would write
    every file whole. One short run of ``ntasks`` ranks tells.
    """
    import re
    import subprocess

    from ..process import launcher_argv, run_command

    argv = [*launcher_argv(template, ntasks), shutil.which(python) or python, "-c", MPI_PROBE]
    try:
        result = run_command(argv, timeout=timeout, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        output = result.stdout or ""
        returncode = result.returncode
    except (OSError, subprocess.TimeoutExpired) as err:
        output, returncode = str(err), -1
    worlds = [int(size) for size in re.findall(r"cycleio-probe (\d+)", output)]
    if returncode == 0 and worlds == [ntasks]:
        return None
    alone = run_command([shutil.which(python) or python, "-c", MPI_PROBE], timeout=timeout, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True).stdout
    ours = [alone.split("|", 1)[1]] if "|" in alone else ["(mpi4py cannot start)"]
    if worlds:
        found = f"worlds of sizes {sorted(worlds)}"
    else:
        tail = re.sub(r"\s+", " ", output.strip())[-300:]
        found = f"no rank (exit code {returncode}: {tail or 'no output'})"
    library = " ".join(ours[0].split())
    return (f"config key 'launcher': {template!r} ({shutil.which(argv[0]) or argv[0]}) started {found} instead of "
            f"{ntasks} ranks of one world of the MPI that mpi4py uses ({library}); put that MPI's launcher first on "
            "PATH or give its full path in `launcher`")


# What the shared-file strategies' Python must have: netCDF4 with parallel support, and mpi4py of the same MPI.
PARALLEL_PROBE = ("import sys, importlib.util; missing = [m for m in ('numpy', 'netCDF4', 'h5py', 'mpi4py', 'xxhash', "
                  "'yaml') if importlib.util.find_spec(m) is None]; print('missing', *missing) if missing else None; "
                  "missing and sys.exit(0); import netCDF4; print('parallel4', int(netCDF4.__has_parallel4_support__))")


def parallel_stack_problem(study, timeout: float = 120) -> str | None:
    """Why the study's shared-file arms (write strategies parallel, quilt_parallel) cannot run here; None if they can.

    Checked before any job: the parallel stack's Python (config ``parallel_stack.python``) exists and its
    netCDF4 has parallel support, and the launcher program (``parallel_stack.launcher``) is found. The
    message names the strategies and what to install or run.
    """
    from ..config.settings import SHARED_FILE_STRATEGIES

    arms = [arm for arm in study.arms.values() if arm.strategy in SHARED_FILE_STRATEGIES]
    if not arms:
        return None
    from ..process import launcher_argv, run_command
    from ..surrogates.forecast.launcher import SETUP_PARALLEL, program_stack

    strategies = " and ".join(repr(name) for name in sorted({arm.strategy for arm in arms}))
    need = f"write strategy {strategies} (config key write_strategies) needs the parallel-netCDF stack"
    key, template, python = program_stack(arms[0])
    if not Path(python).is_file():
        return f"{need}, but its Python {python} (config key parallel_stack.python) is missing; {SETUP_PARALLEL}"
    try:
        result = run_command([python, "-c", PARALLEL_PROBE], timeout=timeout, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{need}, but its Python {python} could not be run ({err}); {SETUP_PARALLEL}"
    words = result.stdout.split()
    if result.returncode != 0 or not words:
        return (f"{need}, but `import netCDF4` fails in {python} ({result.stderr.strip()[-300:]}); "
                f"{SETUP_PARALLEL}")
    if words[0] == "missing":
        return f"{need}, but {python} lacks {', '.join(words[1:])}; {SETUP_PARALLEL}"
    if words[-1] != "1":
        return f"{need}, but the netCDF4 of {python} has no parallel support; {SETUP_PARALLEL}"
    try:
        program = launcher_argv(template, 2)[0]
    except ValueError as err:
        return f"config key 'parallel_stack.launcher': {err}"
    if not shutil.which(program):
        return (f"{need}: its launcher program {program!r} (config key parallel_stack.launcher) is not on PATH; "
                f"{SETUP_PARALLEL}")
    return None


def parallel_launcher_problem(study) -> str | None:
    """As :func:`launcher_problem`, for the parallel stack's launcher and Python (when the study has shared-file arms)."""
    from ..config.settings import SHARED_FILE_STRATEGIES
    from ..surrogates.forecast.launcher import program_stack

    arms = [arm for arm in study.arms.values() if arm.strategy in SHARED_FILE_STRATEGIES]
    if not arms:
        return None
    _, template, python = program_stack(arms[0])
    problem = launcher_problem(template, python=python)
    return problem and problem.replace("config key 'launcher'", "config key 'parallel_stack.launcher'")
