"""Copies by a command (cp, rsync) into the temporary name; the source checksum is then a separate read."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Callable

from ..process import run_command
from ..units import MiB
from .checksums import checksum_file
from ..fsutil import discard, fsync_file, temp_name
from .stagingtypes import CopyResult, StagingError, StagingOptions


# The staging methods (config key staging.method): this engine, or a command that copies a file
# into the temporary name, as argv from (the command's path, source, temporary).
TOOL_COMMANDS: dict[str, Callable[[str, Path, Path], list[str]]] = {
    "cp": lambda tool, source, tmp: [tool, "--", str(source), str(tmp)],
    "rsync": lambda tool, source, tmp: [tool, "--whole-file", "--", str(source), str(tmp)],
}
METHODS = ("cycleio", *TOOL_COMMANDS)
TOOL_TIMEOUT_S = 600


def _copy_with_tool(source: Path, tmp: Path, method: str) -> None:
    tool = shutil.which(method)
    if tool is None:
        raise StagingError(f"staging method {method!r}: the {method} command is not installed")
    timeout = TOOL_TIMEOUT_S + os.stat(source).st_size / MiB  # at least 1 MiB/s after a start-up allowance
    try:
        result = run_command(TOOL_COMMANDS[method](tool, source, tmp), timeout=timeout, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    except subprocess.TimeoutExpired:
        raise StagingError(f"{method} {source} -> {tmp} did not finish within {timeout:.0f} s; stopped") from None
    if result.returncode != 0:
        raise StagingError(f"{method} {source} -> {tmp} failed: {result.stderr.strip()}")


def stage_with_tool(source: Path, dest: Path, options: StagingOptions, streams: int, fsync: bool) -> CopyResult:
    """cp or rsync into the temporary name (fsynced here if ``fsync``), then the source checksum as a separate read."""
    tmp = temp_name(dest)
    t_start, t0 = time.time(), time.perf_counter()
    try:
        _copy_with_tool(source, tmp, options.method)
        if fsync:
            fsync_file(tmp)
        c0 = time.perf_counter()
        checksum = checksum_file(source, options, streams)
    except BaseException:
        discard(tmp)
        raise
    checksum_seconds = time.perf_counter() - c0
    return CopyResult(source, dest, tmp.stat().st_size, checksum, t_start, c0 - t0, checksum_seconds, tmp)
