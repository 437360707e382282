"""What the benchmark plan, its points and the field-I/O benchmark share: the error they raise, the
columns of their rows, the launcher's words, and the runner that keeps each tool's raw output.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .benchparse import ROW_KEYS

CONTEXT_COLUMNS = ("study", "benchmark", "pattern", "tier", "tier_kind", "fs_type", "host")
EXTRA_COLUMNS = ("cache_risk", "t_start")
COLUMNS = CONTEXT_COLUMNS + ROW_KEYS + EXTRA_COLUMNS


class BenchmarkError(RuntimeError):
    """A benchmark that could not run or failed; the message carries the tool's own words."""


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))


def launcher_argv(template: str, tasks: int) -> list[str]:
    """The launcher's words for ``tasks`` ranks; a bare launcher name is also looked up beside Python."""
    try:
        argv = shlex.split(template.format(ntasks=tasks))
    except (KeyError, IndexError, ValueError) as err:
        raise BenchmarkError(f"config key 'launcher': {template!r} is not a valid template ({err})") from None
    if argv and os.sep not in argv[0] and not shutil.which(argv[0]):
        argv[0] = _which(argv[0]) or argv[0]  # e.g. the mpich wheel's mpiexec beside this Python
    return argv


@dataclass
class Run:
    argv: list[str]
    returncode: int
    seconds: float
    stdout: Path
    stderr: Path


def run_tool(argv: list[str], raw_dir: Path, name: str, cwd: Path | None = None,
             env: dict | None = None) -> Run:
    """Run a command, its stdout and stderr to NAME.stdout.txt / NAME.stderr.txt, and its exact
    command line, exit code and timing to NAME.meta.json, all in ``raw_dir``."""
    stdout, stderr = raw_dir / f"{name}.stdout.txt", raw_dir / f"{name}.stderr.txt"
    t_start, t0 = time.time(), time.perf_counter()
    try:
        with open(stdout, "w") as out, open(stderr, "w") as err:
            result = subprocess.run(argv, stdout=out, stderr=err, cwd=cwd, env=env)
    except OSError as err:  # the executable itself cannot start
        raise BenchmarkError(f"cannot run {argv[0]}: {err.strerror}") from None
    seconds = time.perf_counter() - t0
    meta = {"name": name, "command_line": shlex.join(argv), "argv": argv, "host": socket.gethostname(),
            "t_start": t_start, "wall_seconds": round(seconds, 6), "exit_code": result.returncode}
    (raw_dir / f"{name}.meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return Run(argv, result.returncode, seconds, stdout, stderr)


def _tail(path: Path, lines: int = 6) -> list[str]:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    return [line.strip() for line in text.splitlines() if line.strip()][-lines:]


def tool_failure(tool: str, run: Run, detail: str = "", output: Path | None = None) -> BenchmarkError:
    """The tool's own words: its ``ERROR`` lines (IOR, mdtest), ``fio:`` lines (fio also writes them
    into its --output file, and may exit 0) and ``error:`` lines, else the last lines it printed."""
    said: list[str] = []
    for path in (run.stdout, run.stderr, output):
        if path is not None and path.is_file():
            for line in path.read_text(errors="replace").splitlines():
                line = line.strip()
                if re.search(r"\bERROR\b|^fio: |\berror: ", line) and line not in said:
                    said.append(line)
    if not said:
        said = _tail(run.stderr) or _tail(run.stdout)
    message = f"{tool} failed (exit code {run.returncode}): " + (" | ".join(said) or "it printed nothing")
    if detail:
        message += f"; {detail}"
    return BenchmarkError(message + f" (command: {shlex.join(run.argv)})")
