"""The tidy row every benchmark output parser returns (IOR, mdtest, fio, cycleio field I/O), and the
helpers the parsers share.

Every parser returns ``list[dict]``: one flat dict of scalars per
observation, so ``pandas.DataFrame(rows)`` is tidy.  Rows hold only what the
output file itself reveals; they carry no storage-tier information (the caller
adds tier, study, ... columns).  Every row has exactly the keys of
:data:`ROW_KEYS`; a value the output does not reveal is ``None``.

Row schema (units are part of the key names)
--------------------------------------------
source               str   file name (no directory) the row was parsed from
tool                 str   "ior", "mdtest", "fio" or "cycleio-fieldio"
tool_version         str   e.g. "4.0.0", "3.33"
api                  str   IOR/mdtest backend ("POSIX", "MPIIO", ...); fio ioengine
job                  str   IOR "test<TestID>"; fio job name; mdtest None
operation            str   "write", "read" (IOR, fio); fio metadata engines:
                           filecreate -> "create", filestat -> "stat",
                           filedelete -> "remove" (dir* engines -> "dir_create",
                           "dir_stat", "dir_remove"); mdtest: its operation
                           names in snake_case ("directory_creation",
                           "file_creation", "file_stat", "file_read",
                           "file_removal", "tree_creation", "tree_removal", ...)
aggregate            str   "rep" (one repetition), "max"/"min"/"mean" (summary
                           over repetitions: IOR, mdtest), "job" (one fio job
                           process) or "group" (fio group_reporting over
                           ``tasks`` jobs)
repetition           int   0-based repetition for "rep" rows, 0 for fio rows,
                           None for max/min/mean rows
repetitions          int   repetitions the tool ran (IOR -i, mdtest -i); None for fio
tasks                int   MPI ranks (IOR, mdtest) or fio jobs behind the row
nodes                int   client nodes (a fio run: 1; a point over several nodes: their
                           count, its fio runs merged, benchmarks.multinode)
file_per_proc        bool  IOR -F; mdtest: not -S; fio: no shared ``filename``
random               bool  random offsets (IOR -z, fio rand* rw); mdtest None
transfer_size_bytes  int   IOR -t, fio bs
block_size_bytes     int   IOR -b (per task and segment); fio size (per job)
segments             int   IOR -s
direct_io            bool  IOR --posix.odirect (-B/useO_DIRECT in IOR 3), fio direct=1;
                           None if IOR's command line is unknown
fsync                bool  IOR -e/-Y (fsync after write phase / per write);
                           fio end_fsync, fsync, fdatasync
reorder              str   IOR task reordering for reads: "none", "constant" (-C)
                           or "random" (-Z); None for other tools
stonewall_s          float IOR -D deadline (0.0 = off), mdtest -W, fio runtime=
bw_MiB_per_s         float bandwidth in MiB/s (2**20 bytes/s); None for metadata ops
ops_per_s            float IOR IOPS / OPs, mdtest rate, fio iops
latency_s            float mean latency per operation (IOR "latency", fio lat_ns
                           mean or clat_ns mean); None for summary rows
seconds              float IOR totalTime (rep) / MeanTime (mean row) / Mean(s);
                           mdtest from a "SUMMARY time" table if printed;
                           fio op runtime
bytes                int   bytes moved by the row's operation (IOR: aggregate
                           file size; fio io_bytes); None for metadata ops

Errors: every unusable input raises :class:`BenchmarkOutputError` (a
``ValueError``) whose message names the file; for failed runs it also
carries the tool's own error line (IOR's ``ERROR`` line from the run's stdout).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from ..units import MiB

ROW_KEYS: tuple[str, ...] = (
    "source",
    "tool",
    "tool_version",
    "api",
    "job",
    "operation",
    "aggregate",
    "repetition",
    "repetitions",
    "tasks",
    "nodes",
    "file_per_proc",
    "random",
    "transfer_size_bytes",
    "block_size_bytes",
    "segments",
    "direct_io",
    "fsync",
    "reorder",
    "stonewall_s",
    "bw_MiB_per_s",
    "ops_per_s",
    "latency_s",
    "seconds",
    "bytes",
)



class BenchmarkOutputError(ValueError):
    """A benchmark output file is missing, empty, truncated, failed or unknown."""


def make_row(**values: Any) -> dict[str, Any]:
    """Return a row with every key of ROW_KEYS (missing ones set to None)."""
    unknown = set(values) - set(ROW_KEYS)
    if unknown:  # programming error, not an input error
        raise KeyError(f"unknown row keys: {sorted(unknown)}")
    return {key: values.get(key) for key in ROW_KEYS}


def read_text(path: Path) -> str:
    """Read a file as text, raising BenchmarkOutputError if it cannot be read."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise BenchmarkOutputError(f"{path}: cannot read file: {exc}") from exc


def num(value: Any) -> float | None:
    """Convert a number or numeric string to float; None for NA/empty/bad."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    if text.upper() in {"", "NA", "N/A", "-"}:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def as_int(value: Any) -> int | None:
    """Convert to int (via float); None if not a finite number."""
    number = num(value)
    if number is None or not math.isfinite(number):
        return None
    return int(round(number))


def as_bool(value: Any) -> bool | None:
    """Convert 0/1, "0"/"1", true/false strings or bools to bool; None if unknown."""
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off"}:
        return False
    number = num(text)
    return None if number is None else number != 0


def snake(name: str) -> str:
    """'File creation' -> 'file_creation'; 'File create (stonewall)' -> 'file_create_stonewall'."""
    return re.sub(r"[^a-z0-9]+", "_", name.strip().lower()).strip("_")


_BARE_NONFINITE = re.compile(r"(?<=[:\[,])(\s*)[-+]?(?:nan|inf(?:inity)?)\b", re.I)


def read_json_object(path: Path, what: str, empty_reason: str = "") -> dict[str, Any]:
    """The JSON object a tool wrote to ``path``; BenchmarkOutputError naming the file, ``what`` wrote
    it, and why it cannot be read (empty, truncated, not JSON: with its first line)."""
    text = read_text(path)
    if not text.strip():
        raise BenchmarkOutputError(f"{path}: {what} output is empty{empty_reason}")
    data, reason = decode_json_object(text)
    if data is None:
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        raise BenchmarkOutputError(f"{path}: {what} JSON output is unusable: {reason}; first line: {first[:200]!r}")
    return data


def decode_json_object(text: str) -> tuple[dict[str, Any] | None, str]:
    """Decode the JSON object in ``text``, skipping leading non-JSON lines.

    The object starts at the first line whose first non-blank character is
    ``{`` (or at the first ``{`` if no line starts with one); lines before it
    (e.g. fio warnings) are ignored, and so is trailing text.  Bare C
    ``nan``/``inf`` tokens are read as null.  Returns (object, "") or
    (None, reason) if it does not decode (e.g. truncated output).
    """
    match = re.search(r"^[ \t]*\{", text, re.M)
    start = match.end() - 1 if match else text.find("{")
    if start == -1:
        return None, "no JSON object found"
    decoder = json.JSONDecoder()
    reason = ""
    for attempt in (text, _BARE_NONFINITE.sub(r"\1null", text)):
        try:
            obj, _ = decoder.raw_decode(attempt, start)
        except json.JSONDecodeError as exc:
            if not reason:
                kind = "truncated JSON" if exc.pos >= len(attempt.rstrip()) else "invalid JSON"
                reason = f"{kind} ({exc.msg} at line {exc.lineno} column {exc.colno})"
            continue
        if isinstance(obj, dict):
            return obj, ""
        return None, "JSON value is not an object"
    return None, reason
