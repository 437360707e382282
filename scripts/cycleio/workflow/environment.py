"""The Python the jobs run: checked once before any job, not by every job failing on an import."""

from __future__ import annotations

import shutil
import subprocess

# What a job imports beyond the standard library (the surrogates, staging, tables).
JOB_MODULES = ("numpy", "pandas", "pyarrow", "netCDF4", "h5py", "mpi4py", "eccodes", "xxhash", "yaml", "jsonschema")


def job_python_problem(python: str = "python", modules: tuple[str, ...] = JOB_MODULES) -> str | None:
    """Why the ``python`` jobs start (``python -m cycleio``, found on PATH) cannot run them; None if it can."""
    found = shutil.which(python)
    if found is None:
        return f"no {python!r} on PATH: the jobs run `{python} -m cycleio`"
    probe = "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
    try:
        result = subprocess.run([found, "-c", probe, *modules], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{found} could not be run ({err})"
    missing = result.stdout.split()
    if result.returncode != 0 or missing:
        what = ", ".join(missing) if missing else result.stderr.strip()[-300:]
        return (f"the jobs run `python -m cycleio` with {found}, which lacks {what}; run through make "
                "(make study), or put the project's environment first on PATH (source .venv/bin/activate)")
    return None
