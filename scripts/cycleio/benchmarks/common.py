"""What the benchmark tools, points, replay and field I/O share: the error they raise, the columns of
their rows, the launcher's words, and the one runner of every tool, which bounds it in time and keeps
its raw output.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .. import process
from ..process import StartupTimeout, last_lines, last_words, launch_ranks, run_command, which
from .rows import ROW_KEYS, BenchmarkOutputError

CONTEXT_COLUMNS = ("study", "benchmark", "pattern", "tier", "tier_kind", "fs_type", "host", "host_cores")
EXTRA_COLUMNS = ("cache_risk", "t_start")
COLUMNS = CONTEXT_COLUMNS + ROW_KEYS + EXTRA_COLUMNS

TIMEOUT_VARIABLE = "CYCLEIO_TOOL_TIMEOUT_S"


class BenchmarkError(RuntimeError):
    """A benchmark that could not run or failed; the message carries the tool's own words."""


def host_cores() -> int:
    """The cores this process may run on (its CPU affinity): more tasks than these oversubscribe the machine."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def launcher_argv(template: str, tasks: int) -> list[str]:
    """The launcher's words for ``tasks`` ranks (process.launcher_argv), as a benchmark's error."""
    try:
        return process.launcher_argv(template, tasks)
    except ValueError as err:
        raise BenchmarkError(f"config key 'launcher': {err}") from None


def time_limit(nbytes: float = 0, operations: float = 0) -> float:
    """A generous bound on one tool run: 10 minutes, plus its bytes at 2 MiB/s, plus its file or I/O
    calls at 50 per second; the environment variable CYCLEIO_TOOL_TIMEOUT_S sets it instead."""
    if os.environ.get(TIMEOUT_VARIABLE):
        return float(os.environ[TIMEOUT_VARIABLE])
    return 600.0 + nbytes / 2**21 + operations / 50.0


@dataclass
class Run:
    argv: list[str]
    returncode: int
    seconds: float
    stdout: Path
    stderr: Path


def run_tool(tool: str, argv: list[str], raw_dir: Path, name: str, timeout: float, cwd: Path | None = None,
             env: dict | None = None, ranks: tuple[int, Path] | None = None) -> Run:
    """Run ``tool`` (its name in errors) with stdout and stderr to NAME.stdout.txt / NAME.stderr.txt, and
    its exact command line, exit code and timing to NAME.meta.json, all in ``raw_dir``.

    A run that cannot start, or outlives ``timeout`` seconds (its whole process tree is then stopped),
    raises BenchmarkError; a non-zero exit is the caller's to judge (see :func:`parse_run`). ``ranks``: (the
    ranks, the file they touch once past MPI's start-up) of a rank program (process.rank_program's ``started``),
    launched once more if its start-up hangs (process.launch_ranks).
    """
    stdout, stderr = raw_dir / f"{name}.stdout.txt", raw_dir / f"{name}.stderr.txt"
    t_start, t0 = time.time(), time.perf_counter()
    timed_out = False
    try:
        with open(stdout, "w") as out, open(stderr, "w") as err:
            if ranks is None:
                returncode = run_command(argv, timeout=timeout, stdout=out, stderr=err, cwd=cwd, env=env).returncode
            else:
                returncode = launch_ranks(argv, ntasks=ranks[0], started=ranks[1], timeout=timeout, name=tool,
                                          outputs=(err, out), stdout=out, stderr=err, cwd=cwd, env=env).returncode
    except StartupTimeout as hung:
        raise BenchmarkError(f"{tool} did not start twice: its ranks did not all pass MPI's start-up within "
                             f"{hung.timeout:.0f} s; its last words: {last_words(stderr, stdout)} "
                             f"(command: {shlex.join(argv)})") from None
    except subprocess.TimeoutExpired:
        timed_out, returncode = True, None
    except OSError as err:  # the executable itself cannot start
        raise BenchmarkError(f"{tool} could not start: {err.strerror} (command: {shlex.join(argv)})") from None
    seconds = time.perf_counter() - t0
    meta = {"name": name, "command_line": shlex.join(argv), "argv": argv, "cwd": str(Path(cwd or ".").absolute()),
            "host": socket.gethostname(),
            "t_start": t_start, "wall_seconds": round(seconds, 6), "exit_code": returncode,
            "timeout_s": timeout, "timed_out": timed_out}
    (raw_dir / f"{name}.meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    if timed_out:
        raise BenchmarkError(
            f"{tool} did not finish within {timeout:.0f} s and was stopped with its child processes (set "
            f"{TIMEOUT_VARIABLE} to allow longer); its last words: {last_words(stderr, stdout)} "
            f"(command: {shlex.join(argv)})")
    return Run(argv, returncode, seconds, stdout, stderr)


# the lines of a tool's output that say what went wrong (tool_failure)
TOOL_SAYS = re.compile(r"\bERROR\b|^fio: |\berror: |^[A-Za-z_][\w.]*(Error|Exception): ")


def tool_failure(tool: str, run: Run, detail: str = "", output: Path | None = None) -> BenchmarkError:
    """The tool's own words: its ``ERROR`` lines (IOR, mdtest), ``fio:`` lines (fio also writes them
    into its --output file, and may exit 0), ``error:`` lines and a Python rank's exception (``ValueError: ...``:
    two ranks' tracebacks interleave, and the last lines may end inside one), else the last lines it printed."""
    said: list[str] = []
    for path in (run.stdout, run.stderr, output):
        if path is not None and path.is_file():
            for line in path.read_text(errors="replace").splitlines():
                line = line.strip()
                if TOOL_SAYS.search(line) and line not in said:
                    said.append(line)
    if not said:
        said = last_lines(run.stderr, run.stdout)
    message = f"{tool} failed (exit code {run.returncode}): " + (" | ".join(said) or "it printed nothing")
    if detail:
        message += f"; {detail}"
    return BenchmarkError(message + f" (command: {shlex.join(run.argv)})")


def parse_run(parser: Callable, path: Path, tool: str, run: Run, **kwargs) -> list[dict]:
    """A run's rows from its output ``path``; a failed run or an unusable output fails with the tool's words."""
    try:
        rows = parser(path, **kwargs)
    except BenchmarkOutputError as err:
        raise tool_failure(tool, run, str(err), output=path) from None
    if run.returncode != 0:
        raise tool_failure(tool, run, output=path)
    return rows
