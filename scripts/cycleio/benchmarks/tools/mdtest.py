"""mdtest: its command line (a metadata pattern on files), its stdout's summary tables to rows, and
what ``cycleio parse`` needs to recognise them.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from ..common import launcher_argv
from ..rows import BenchmarkOutputError, as_int, make_row, num, read_text, snake
from ..specs import MetadataPattern

NAME = "mdtest"
LABEL = "mdtest"


def command(mdtest: str, pattern: MetadataPattern, tasks: int, directory: Path, launcher: str) -> list[str]:
    """mdtest's argv for one repetition on files only, with the rate and time tables (-P)."""
    argv = [*launcher_argv(launcher, tasks), mdtest, "-n", str(pattern.files_per_task), "-i", "1",
            "-d", str(directory), "-F", "-P", "-N", "1"]
    if pattern.unique_dir:
        argv.append("-u")
    if pattern.file_size_bytes:
        argv += ["-w", str(pattern.file_size_bytes), "-e", str(pattern.file_size_bytes)]
    return argv


_MDTEST_NUM = r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|-?nan|-?inf|NA)"
_MDTEST_ROW = re.compile(
    r"^\s*([A-Za-z][A-Za-z ()_/-]*?)\s*:?\s+" + r"\s+".join([_MDTEST_NUM] * 4) + r"\s*$",
    re.I,
)


def _mdtest_table(lines: list[str], start: int) -> dict[str, tuple[float | None, ...]]:
    """Read the rows of an mdtest SUMMARY table whose title line is ``lines[start - 1]``.

    Returns {snake_case operation: (max, min, mean, std)}; stops at the first
    line that is not a table row (blank line after rows, "-- finished", ...).
    """
    table: dict[str, tuple[float | None, ...]] = {}
    for line in lines[start:]:
        stripped = line.strip()
        if not stripped:
            if table:
                break
            continue
        if stripped.startswith("Operation") or set(stripped) <= {"-", " "}:
            continue
        m = _MDTEST_ROW.match(line)
        if not m:
            break
        table[snake(m.group(1))] = tuple(num(v) for v in m.group(2, 3, 4, 5))
    return table


def parse(path: str | Path) -> list[dict[str, Any]]:
    """Parse mdtest's stdout ``SUMMARY rate`` table into max/min/mean rows.

    ``operation`` is the snake_case operation name ("file_creation", ...),
    ``ops_per_s`` the rate; ``seconds`` is filled from a ``SUMMARY time``
    table if mdtest printed one (max rate <-> min time).  mdtest has no
    per-repetition output on stdout, so there are no "rep" rows.
    """
    path = Path(path)
    text = read_text(path)
    lines = text.splitlines()
    rate_start = next((i for i, ln in enumerate(lines) if ln.strip().startswith("SUMMARY rate")), None)
    if rate_start is None:
        detail = "; ".join(ln.strip() for ln in lines if re.search(r"\bERROR\b", ln)) or "no 'SUMMARY rate' table"
        raise BenchmarkOutputError(f"{path}: mdtest output without results: {detail}")
    rates = _mdtest_table(lines, rate_start + 1)
    if not rates:
        raise BenchmarkOutputError(f"{path}: mdtest 'SUMMARY rate' table is empty or truncated")
    time_start = next((i for i, ln in enumerate(lines) if ln.strip().startswith("SUMMARY time")), None)
    times = _mdtest_table(lines, time_start + 1) if time_start is not None else {}

    version_m = re.search(r"mdtest-(\S+) was launched with (\d+) total task\(s\) on (\d+) node\(s\)", text)
    iter_m = re.search(r"SUMMARY rate:\s*\(of (\d+) iterations?\)", text)
    cmd_m = re.search(r"^Command line used:\s*(.*)$", text, re.M)
    argv: list[str] = []
    if cmd_m:
        try:
            argv = shlex.split(cmd_m.group(1))
        except ValueError:
            argv = cmd_m.group(1).split()

    def opt(name: str) -> str | None:
        for i, arg in enumerate(argv):
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
        return None

    stonewall = num(opt("-W"))
    common = dict(
        source=path.name, tool="mdtest",
        tool_version=version_m.group(1) if version_m else None,
        api=opt("-a") or ("POSIX" if cmd_m else None),  # POSIX is mdtest's default backend
        tasks=int(version_m.group(2)) if version_m else None,
        nodes=int(version_m.group(3)) if version_m else None,
        repetitions=int(iter_m.group(1)) if iter_m else as_int(opt("-i")),
        file_per_proc=("-S" not in argv) if cmd_m else None,
        stonewall_s=stonewall if stonewall is not None else (0.0 if cmd_m else None),
    )
    rows: list[dict[str, Any]] = []
    for operation, (vmax, vmin, vmean, _std) in rates.items():
        t = times.get(operation)
        seconds = {"max": t[1], "min": t[0], "mean": t[2]} if t else {}
        for agg, value in (("max", vmax), ("min", vmin), ("mean", vmean)):
            rows.append(make_row(**common, operation=operation, aggregate=agg, repetition=None,
                             ops_per_s=value, seconds=seconds.get(agg)))
    return rows


def guess_can_open(path: str | Path, text: str | None = None) -> bool:
    """mdtest's stdout (its banner or its SUMMARY rate table), judged by content."""
    text = read_text(Path(path)) if text is None else text
    return bool(re.search(r"mdtest-\S+ was launched with", text)) or "SUMMARY rate" in text


def unsupported(text: str) -> str | None:
    """What an mdtest file that this package does not read is, or None."""
    if text.lstrip().startswith("rank,items,rate-"):
        return "mdtest --saveRankPerformanceDetails CSV (parse mdtest's stdout instead)"
    return None


def version(path: str) -> str | None:
    """None: mdtest has no option that prints its version; its stdout carries it (rows' tool_version)."""
    return None
