"""Parse real benchmark outputs (IOR, mdtest, fio, cycleio field I/O) into tidy rows.

Every public parser returns ``list[dict]``: one flat dict of scalars per
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
nodes                int   nodes (fio: always 1)
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

IOR notes: ``tests[].Results`` is a flat list (write, read, write, read, ...)
with no repetition index; the repetition of an entry is the number of earlier
entries with the same ``access`` (IOR 3.x nested lists are also accepted).  IOR
rounds the JSON ``latency`` to 4 decimals; when it reads 0.0 the latency is
estimated as wrRdTime / (blockSize / transferSize * segmentCount).

Errors: every unusable input raises :class:`BenchmarkOutputError` (a
``ValueError``) whose message names the file; for failed IOR runs it also
carries IOR's own ``ERROR`` line from the run's stdout.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
from pathlib import Path
from typing import Any

from ..config.sizes import size_or_none

__all__ = [
    "ROW_KEYS",
    "BenchmarkOutputError",
    "parse_ior_json",
    "parse_ior_text",
    "parse_mdtest_text",
    "parse_fio_json",
    "parse_fieldio_json",
    "parse_any",
]

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

MiB = 2**20


class BenchmarkOutputError(ValueError):
    """A benchmark output file is missing, empty, truncated, failed or unknown."""


# --------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------


def _row(**values: Any) -> dict[str, Any]:
    """Return a row with every key of ROW_KEYS (missing ones set to None)."""
    unknown = set(values) - set(ROW_KEYS)
    if unknown:  # programming error, not an input error
        raise KeyError(f"unknown row keys: {sorted(unknown)}")
    return {key: values.get(key) for key in ROW_KEYS}


def _read_text(path: Path) -> str:
    """Read a file as text, raising BenchmarkOutputError if it cannot be read."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise BenchmarkOutputError(f"{path}: cannot read file: {exc}") from exc


def _num(value: Any) -> float | None:
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


def _int(value: Any) -> int | None:
    """Convert to int (via float); None if not a finite number."""
    number = _num(value)
    if number is None or not math.isfinite(number):
        return None
    return int(round(number))


def _bool(value: Any) -> bool | None:
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
    number = _num(text)
    return None if number is None else number != 0


def _snake(name: str) -> str:
    """'File creation' -> 'file_creation'; 'File create (stonewall)' -> 'file_create_stonewall'."""
    return re.sub(r"[^a-z0-9]+", "_", name.strip().lower()).strip("_")


def _fio_bs_for(bs: Any, operation: str) -> int | None:
    """fio bs may be "4k" or per-direction "read,write[,trim]"; pick the op's value."""
    if bs is None:
        return None
    parts = str(bs).split(",")
    index = {"read": 0, "write": 1, "trim": 2}.get(operation, 0)
    if len(parts) == 1:
        return size_or_none(parts[0])
    if index < len(parts) and parts[index].strip():
        return size_or_none(parts[index])
    return size_or_none(parts[0])


def _fio_seconds(value: Any) -> float | None:
    """Parse a fio time option (default unit seconds; us/ms/s/m/h/d suffixes)."""
    if value is None:
        return None
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(us|usec|ms|msec|s|sec|m|min|h|d)?\s*", str(value), re.I)
    if not match:
        return None
    scale = {
        None: 1.0, "us": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3, "s": 1.0,
        "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0,
    }[match.group(2).lower() if match.group(2) else None]
    return float(match.group(1)) * scale


_BARE_NONFINITE = re.compile(r"(?<=[:\[,])(\s*)[-+]?(?:nan|inf(?:inity)?)\b", re.I)


def _decode_json_object(text: str) -> tuple[dict[str, Any] | None, str]:
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


# --------------------------------------------------------------------------
# IOR
# --------------------------------------------------------------------------


def _ior_error_lines(text: str) -> list[str]:
    """IOR's own error lines ("ERROR: ...", "ior ERROR: ...") from stdout/stderr text."""
    return [line.strip() for line in text.splitlines() if re.search(r"\bERROR\b", line)]


def _sibling(path: Path, suffix: str) -> Path:
    """NAME.json -> NAME<suffix> in the same directory."""
    name = path.name
    base = name[: -len(".json")] if name.endswith(".json") else path.stem
    return path.with_name(base + suffix)


def _ior_failure_detail(path: Path, stdout_path: str | Path | None) -> str:
    """Describe why IOR failed from its stdout (given or NAME.stdout.txt) or stderr."""
    candidates: list[Path] = []
    if stdout_path is not None:
        candidates.append(Path(stdout_path))
    candidates += [_sibling(path, ".stdout.txt"), _sibling(path, ".stdout")]
    for candidate in candidates:
        if candidate.is_file():
            errors = _ior_error_lines(candidate.read_text(encoding="utf-8", errors="replace"))
            if errors:
                return f"IOR reported (in {candidate.name}): " + " | ".join(errors)
            stderr = _sibling(path, ".stderr.txt")
            if stderr.is_file():
                lines = [ln.strip() for ln in stderr.read_text(errors="replace").splitlines() if ln.strip()]
                if lines:
                    return (f"no ERROR line in {candidate.name}; {stderr.name} says: "
                            + " | ".join(lines[:3]))
            return f"no ERROR line in {candidate.name}"
    return "no IOR stdout file found (looked for NAME.stdout.txt beside the JSON)"


def _ior_cmdline_flags(cmdline: str | None) -> dict[str, Any]:
    """Settings visible only on IOR's command line (direct I/O; fsync etc. for text output)."""
    if not cmdline:
        return {}
    try:
        argv = shlex.split(cmdline)
    except ValueError:
        argv = cmdline.split()
    flags: dict[str, Any] = {
        "direct_io": "--posix.odirect" in argv or "-B" in argv
        or any(re.fullmatch(r"useO_DIRECT=(1|true)", a, re.I) for a in argv),
        "fsync": "-e" in argv or "-Y" in argv or "--fsync" in argv,
        "random": "-z" in argv,
    }
    for i, arg in enumerate(argv[:-1]):
        if arg == "-D":
            flags["stonewall_s"] = _num(argv[i + 1])
        elif arg == "-i":
            flags["repetitions"] = _int(argv[i + 1])
    if "stonewall_s" not in flags:
        flags["stonewall_s"] = 0.0
    return flags


def _ior_reorder(constant: Any, random: Any) -> str | None:
    """IOR reorderTasks/reorderTasksRandom -> "constant"/"random"/"none"."""
    if constant is None and random is None:
        return None
    if _bool(random):
        return "random"
    if _bool(constant):
        return "constant"
    return "none"


def _ior_test_params(test: dict[str, Any], flags: dict[str, Any]) -> dict[str, Any]:
    """Row parameters of one IOR JSON test (Parameters + Options + command line)."""
    params = test.get("Parameters") or {}
    options = test.get("Options") or {}
    fsync: bool | None = None
    if "fsync" in params or "fsyncperwrite" in params:
        fsync = bool(_bool(params.get("fsync")) or _bool(params.get("fsyncperwrite")))
    else:
        fsync = flags.get("fsync")
    stonewall = _num(params.get("deadlineForStonewall"))
    return {
        "api": params.get("api") or options.get("api"),
        "job": f"test{test.get('TestID', params.get('testID', 0))}",
        "repetitions": _int(params.get("repetitions", options.get("repetitions"))),
        "tasks": _int(options.get("tasks", params.get("numTasks"))),
        "nodes": _int(params.get("nodes", options.get("nodes"))),
        "file_per_proc": _bool(params.get("filePerProc"))
        if "filePerProc" in params
        else (options["access"] == "file-per-process" if options.get("access") else None),
        "random": _bool(params.get("randomOffset"))
        if "randomOffset" in params else flags.get("random"),
        "transfer_size_bytes": _int(params.get("transferSize")) or size_or_none(options.get("xfersize")),
        "block_size_bytes": _int(params.get("blockSize")) or size_or_none(options.get("blocksize")),
        "segments": _int(params.get("segmentCount", options.get("segments"))),
        "direct_io": flags.get("direct_io"),
        "fsync": fsync,
        "reorder": _ior_reorder(params.get("reorderTasks"), params.get("reorderTasksRandom")),
        "stonewall_s": stonewall if stonewall is not None else flags.get("stonewall_s"),
    }


def _transfers_per_task(p: dict[str, Any]) -> float | None:
    """Number of transfers one task performs per phase (block/xfer*segments)."""
    block, xfer, seg = p.get("block_size_bytes"), p.get("transfer_size_bytes"), p.get("segments") or 1
    if not block or not xfer:
        return None
    return block / xfer * seg


def _ior_rep_repetitions(results: list[Any]) -> list[tuple[int, dict[str, Any]]]:
    """Assign 0-based repetitions to IOR Results entries (flat or nested lists)."""
    out: list[tuple[int, dict[str, Any]]] = []
    if results and all(isinstance(r, list) for r in results):  # IOR 3.x: one list per repetition
        for rep, group in enumerate(results):
            out += [(rep, r) for r in group if isinstance(r, dict)]
        return out
    seen: dict[str, int] = {}
    for entry in results:
        if not isinstance(entry, dict):
            continue
        access = str(entry.get("access", ""))
        out.append((seen.get(access, 0), entry))
        seen[access] = seen.get(access, 0) + 1
    return out


def parse_ior_json(path: str | Path, stdout_path: str | Path | None = None) -> list[dict[str, Any]]:
    """Parse an IOR JSON summary file (``-O summaryFormat=JSON``) into rows.

    Returns one ``aggregate="rep"`` row per ``tests[].Results`` entry
    (repetition from its order) plus ``"max"``/``"min"``/``"mean"`` rows per
    ``summary[]`` operation.

    A failed IOR run leaves an empty or truncated JSON and prints its error on
    stdout.  Then :class:`BenchmarkOutputError` is raised naming ``path`` and
    quoting IOR's ``ERROR`` line(s) from ``stdout_path`` or, if not given, from
    ``NAME.stdout.txt`` beside ``NAME.json``.
    """
    path = Path(path)
    text = _read_text(path)
    if not text.strip():
        raise BenchmarkOutputError(
            f"{path}: IOR JSON summary is empty (IOR failed before writing results); "
            + _ior_failure_detail(path, stdout_path))
    data, reason = _decode_json_object(text)
    if data is None:
        raise BenchmarkOutputError(
            f"{path}: IOR JSON summary is unusable: {reason}; " + _ior_failure_detail(path, stdout_path))
    if "tests" not in data and "summary" not in data:
        raise BenchmarkOutputError(f"{path}: not an IOR JSON summary (no 'tests' or 'summary' key)")

    version = data.get("Version")
    flags = _ior_cmdline_flags(data.get("Command line"))
    source = path.name
    tests = [t for t in data.get("tests") or [] if isinstance(t, dict)]
    params_by_id: dict[Any, dict[str, Any]] = {}
    rows: list[dict[str, Any]] = []
    for test in tests:
        p = _ior_test_params(test, flags)
        params_by_id[test.get("TestID")] = p
        per_task = _transfers_per_task(p)
        for rep, res in _ior_rep_repetitions(test.get("Results") or []):
            latency = _num(res.get("latency"))
            wrrd = _num(res.get("wrRdTime"))
            if latency == 0.0 and wrrd and per_task:
                latency = wrrd / per_task  # JSON latency rounded to 0.0000
            block_kib = _num(res.get("blockKiB"))
            bytes_moved = None
            if block_kib is not None:
                bytes_moved = int(round(block_kib * 1024 * (p["segments"] or 1) * (p["tasks"] or 1)))
            rows.append(_row(
                source=source, tool="ior", tool_version=version, **p,
                operation=str(res.get("access")), aggregate="rep", repetition=rep,
                bw_MiB_per_s=_num(res.get("bwMiB")), ops_per_s=_num(res.get("iops")),
                latency_s=latency, seconds=_num(res.get("totalTime")), bytes=bytes_moved,
            ))

    summary = [s for s in data.get("summary") or [] if isinstance(s, dict)]
    if not summary and not rows:
        raise BenchmarkOutputError(
            f"{path}: IOR JSON summary has no results; " + _ior_failure_detail(path, stdout_path))
    for entry in summary:
        p = dict(params_by_id.get(entry.get("TestID")) or {})
        p.setdefault("job", f"test{entry.get('TestID', 0)}")
        # the summary repeats some parameters; use them where the test lacked them
        fallback = {
            "api": entry.get("API"), "tasks": _int(entry.get("numTasks")),
            "repetitions": _int(entry.get("repetitions")),
            "file_per_proc": _bool(entry.get("filePerProc")),
            "transfer_size_bytes": _int(entry.get("transferSize")),
            "block_size_bytes": _int(entry.get("blockSize")),
            "segments": _int(entry.get("segmentCount")),
            "reorder": _ior_reorder(entry.get("reorderTasks"), entry.get("reorderTasksRandom")),
        }
        for key, value in fallback.items():
            if p.get(key) is None:
                p[key] = value
        for key in ("nodes", "random", "direct_io", "fsync", "stonewall_s"):
            p.setdefault(key, flags.get(key))
        xsize = _num(entry.get("xsizeMiB"))
        for agg, bw_key, ops_key in (("max", "bwMaxMIB", "OPsMax"), ("min", "bwMinMIB", "OPsMin"),
                                     ("mean", "bwMeanMIB", "OPsMean")):
            rows.append(_row(
                source=source, tool="ior", tool_version=version, **p,
                operation=str(entry.get("operation")), aggregate=agg, repetition=None,
                bw_MiB_per_s=_num(entry.get(bw_key)), ops_per_s=_num(entry.get(ops_key)),
                seconds=_num(entry.get("MeanTime")) if agg == "mean" else None,
                bytes=int(round(xsize * MiB)) if xsize is not None else None,
            ))
    return rows


def _table_header(line: str) -> list[str]:
    """Split a table header; duplicate names get a numeric suffix ("StdDev", "StdDev#2")."""
    names: list[str] = []
    for token in line.split():
        name, n = token, 2
        while name in names:
            name = f"{token}#{n}"
            n += 1
        names.append(name)
    return names


def parse_ior_text(path: str | Path) -> list[dict[str, Any]]:
    """Parse IOR's human-readable stdout into rows (same schema as parse_ior_json).

    Uses the per-iteration "Results:" table (``aggregate="rep"``, repetition
    from its ``iter`` column) if present and the "Summary of all tests:" table
    (max/min/mean rows).  Parameters come from the "Options:" block, the
    summary table and the command line (fsync, direct I/O are only there).
    """
    path = Path(path)
    text = _read_text(path)
    lines = text.splitlines()
    version_match = re.search(r"^IOR-(\S+?):", text, re.M)
    if not version_match and "Summary of all tests:" not in text:
        errors = _ior_error_lines(text)
        detail = ("IOR reported: " + " | ".join(errors)) if errors else "no IOR header or summary table"
        raise BenchmarkOutputError(f"{path}: not IOR text output with results; {detail}")
    version = version_match.group(1) if version_match else None
    cmd_match = re.search(r"^Command line\s*:\s*(.*)$", text, re.M)
    flags = _ior_cmdline_flags(cmd_match.group(1) if cmd_match else None)

    tests: list[dict[str, Any]] = []  # each: {"id", "options", "reps": [dict]}
    summary: list[dict[str, str]] = []
    current_id = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        m = re.match(r"^TestID\s*:\s*(\d+)", stripped)
        if m:
            current_id = int(m.group(1))
        if re.match(r"^Options:\s*$", stripped):
            options: dict[str, str] = {}
            i += 1
            while i < len(lines) and lines[i].strip() and not lines[i].startswith("Results:"):
                if ":" in lines[i]:
                    key, _, value = lines[i].partition(":")
                    options[key.strip()] = value.strip()
                i += 1
            tests.append({"id": current_id, "options": options, "reps": []})
            continue
        if stripped.startswith("access") and "bw(MiB/s)" in stripped:
            header = _table_header(stripped)
            if not tests:
                tests.append({"id": current_id, "options": {}, "reps": []})
            i += 1
            while i < len(lines) and lines[i].strip():
                tokens = lines[i].split()
                if not set(lines[i].strip()) <= {"-", " "} and len(tokens) == len(header):
                    tests[-1]["reps"].append(dict(zip(header, tokens)))
                i += 1
            continue
        if stripped.startswith("Operation") and "Max(MiB)" in stripped:
            header = _table_header(stripped)
            i += 1
            while i < len(lines):
                tokens = lines[i].split()
                if len(tokens) != len(header) or _num(tokens[1]) is None:
                    break
                summary.append(dict(zip(header, tokens)))
                i += 1
            continue
        i += 1

    if not summary and not any(t["reps"] for t in tests):
        raise BenchmarkOutputError(f"{path}: IOR text output has no results table; "
                                   + ("IOR reported: " + " | ".join(_ior_error_lines(text))
                                      if _ior_error_lines(text) else "run incomplete?"))

    def params_for(test_id: int, options: dict[str, str]) -> dict[str, Any]:
        inter = options.get("ordering inter file", "")
        reorder = None
        if inter:
            reorder = "random" if "random" in inter else "constant" if "constant" in inter else "none"
        ordering = options.get("ordering in a file")
        stonewall = _num(options.get("stonewallingTime"))
        p: dict[str, Any] = {
            "api": options.get("api"), "job": f"test{test_id}",
            "repetitions": _int(options.get("repetitions")) or flags.get("repetitions"),
            "tasks": _int(options.get("tasks")), "nodes": _int(options.get("nodes")),
            "file_per_proc": (options["access"] == "file-per-process") if "access" in options else None,
            "random": (ordering == "random") if ordering else flags.get("random"),
            "transfer_size_bytes": size_or_none(options.get("xfersize")),
            "block_size_bytes": size_or_none(options.get("blocksize")),
            "segments": _int(options.get("segments")),
            "direct_io": flags.get("direct_io"), "fsync": flags.get("fsync"), "reorder": reorder,
            "stonewall_s": stonewall if stonewall is not None else flags.get("stonewall_s"),
        }
        for s in summary:  # exact values from the summary table override rounded text
            if _int(s.get("Test#")) == test_id:
                exact = {
                    "api": s.get("API"), "tasks": _int(s.get("#Tasks")), "repetitions": _int(s.get("reps")),
                    "file_per_proc": _bool(s.get("fPP")),
                    "reorder": _ior_reorder(s.get("reord"), s.get("reordrand")),
                    "segments": _int(s.get("segcnt")), "block_size_bytes": _int(s.get("blksiz")),
                    "transfer_size_bytes": _int(s.get("xsize")),
                }
                p.update({k: v for k, v in exact.items() if v is not None})
                break
        return p

    source = path.name
    rows: list[dict[str, Any]] = []
    for test in tests:
        p = params_for(test["id"], test["options"])
        per_task = _transfers_per_task(p)
        seen: dict[str, int] = {}
        for rep_row in test["reps"]:
            access = rep_row.get("access", "")
            rep = _int(rep_row.get("iter"))
            if rep is None:
                rep = seen.get(access, 0)
            seen[access] = seen.get(access, 0) + 1
            latency = _num(rep_row.get("Latency(s)"))
            wrrd = _num(rep_row.get("wr/rd(s)"))
            if latency == 0.0 and wrrd and per_task:
                latency = wrrd / per_task
            block_kib = _num(rep_row.get("block(KiB)"))
            rows.append(_row(
                source=source, tool="ior", tool_version=version, **p,
                operation=access, aggregate="rep", repetition=rep,
                bw_MiB_per_s=_num(rep_row.get("bw(MiB/s)")), ops_per_s=_num(rep_row.get("IOPS")),
                latency_s=latency, seconds=_num(rep_row.get("total(s)")),
                bytes=int(round(block_kib * 1024 * (p["segments"] or 1) * (p["tasks"] or 1)))
                if block_kib is not None else None,
            ))
    options_by_id = {t["id"]: t["options"] for t in tests}
    for s in summary:
        test_id = _int(s.get("Test#")) or 0
        p = params_for(test_id, options_by_id.get(test_id, {}))
        aggs = _num(s.get("aggs(MiB)"))
        for agg, bw_key, ops_key in (("max", "Max(MiB)", "Max(OPs)"), ("min", "Min(MiB)", "Min(OPs)"),
                                     ("mean", "Mean(MiB)", "Mean(OPs)")):
            rows.append(_row(
                source=source, tool="ior", tool_version=version, **p,
                operation=s["Operation"], aggregate=agg, repetition=None,
                bw_MiB_per_s=_num(s.get(bw_key)), ops_per_s=_num(s.get(ops_key)),
                seconds=_num(s.get("Mean(s)")) if agg == "mean" else None,
                bytes=int(round(aggs * MiB)) if aggs is not None else None,
            ))
    return rows


# --------------------------------------------------------------------------
# mdtest
# --------------------------------------------------------------------------

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
        table[_snake(m.group(1))] = tuple(_num(v) for v in m.group(2, 3, 4, 5))
    return table


def parse_mdtest_text(path: str | Path) -> list[dict[str, Any]]:
    """Parse mdtest's stdout ``SUMMARY rate`` table into max/min/mean rows.

    ``operation`` is the snake_case operation name ("file_creation", ...),
    ``ops_per_s`` the rate; ``seconds`` is filled from a ``SUMMARY time``
    table if mdtest printed one (max rate <-> min time).  mdtest has no
    per-repetition output on stdout, so there are no "rep" rows.
    """
    path = Path(path)
    text = _read_text(path)
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

    stonewall = _num(opt("-W"))
    common = dict(
        source=path.name, tool="mdtest",
        tool_version=version_m.group(1) if version_m else None,
        api=opt("-a") or ("POSIX" if cmd_m else None),  # POSIX is mdtest's default backend
        tasks=int(version_m.group(2)) if version_m else None,
        nodes=int(version_m.group(3)) if version_m else None,
        repetitions=int(iter_m.group(1)) if iter_m else _int(opt("-i")),
        file_per_proc=("-S" not in argv) if cmd_m else None,
        stonewall_s=stonewall if stonewall is not None else (0.0 if cmd_m else None),
    )
    rows: list[dict[str, Any]] = []
    for operation, (vmax, vmin, vmean, _std) in rates.items():
        t = times.get(operation)
        seconds = {"max": t[1], "min": t[0], "mean": t[2]} if t else {}
        for agg, value in (("max", vmax), ("min", vmin), ("mean", vmean)):
            rows.append(_row(**common, operation=operation, aggregate=agg, repetition=None,
                             ops_per_s=value, seconds=seconds.get(agg)))
    return rows


# --------------------------------------------------------------------------
# fio
# --------------------------------------------------------------------------

_FIO_META_ENGINES = {
    "filecreate": "create", "filestat": "stat", "filedelete": "remove",
    "dircreate": "dir_create", "dirstat": "dir_stat", "dirdelete": "dir_remove",
}


def _fio_latency_s(op: dict[str, Any]) -> float | None:
    """Mean latency (s) of a fio op: lat_ns (total) if sampled, else clat_ns."""
    for key in ("lat_ns", "clat_ns"):
        stats = op.get(key)
        if isinstance(stats, dict) and (stats.get("N") or 0) > 0 and _num(stats.get("mean")):
            return float(stats["mean"]) / 1e9
    for key, scale in (("lat", 1e6), ("clat", 1e6)):  # fio < 3: microseconds
        stats = op.get(key)
        if isinstance(stats, dict) and _num(stats.get("mean")):
            return float(stats["mean"]) / scale
    return None


def parse_fio_json(path: str | Path) -> list[dict[str, Any]]:
    """Parse ``fio --output-format=json`` (or json+) output into rows.

    One row per job entry (``aggregate="group"`` when group_reporting merged
    ``numjobs`` > 1 jobs into it, else ``"job"``) and per operation
    (read/write/trim) with I/O done.  ``bw_MiB_per_s = bw_bytes / 2**20``,
    ``ops_per_s = iops``, ``latency_s`` = mean lat_ns (clat_ns if lat_ns is
    not sampled) in seconds, ``seconds`` = op runtime.  Metadata engines
    (filecreate, filestat, ...) give operation "create"/"stat"/... with
    bandwidth and bytes set to None (fio counts nominal bytes there).
    Non-JSON lines before the JSON (fio warnings) are skipped.
    """
    path = Path(path)
    text = _read_text(path)
    if not text.strip():
        raise BenchmarkOutputError(f"{path}: fio output is empty")
    data, reason = _decode_json_object(text)
    if data is None:
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        raise BenchmarkOutputError(f"{path}: fio JSON output is unusable: {reason}; first line: {first[:200]!r}")
    jobs = data.get("jobs")
    if not isinstance(jobs, list):
        raise BenchmarkOutputError(f"{path}: not fio JSON output (no 'jobs' list)")
    version = str(data.get("fio version", "")).removeprefix("fio-") or None
    global_opts = data.get("global options") or {}

    rows: list[dict[str, Any]] = []
    for job in jobs:
        if not isinstance(job, dict):
            continue
        opts = {**global_opts, **(job.get("job options") or {})}
        name = job.get("jobname")
        if _int(job.get("error")):
            code = _int(job["error"]) or 0
            raise BenchmarkOutputError(
                f"{path}: fio job {name!r} failed with error {code} ({os.strerror(code)})")
        numjobs = _int(opts.get("numjobs")) or 1
        siblings = sum(1 for j in jobs if isinstance(j, dict)
                       and j.get("jobname") == name and j.get("groupid") == job.get("groupid"))
        grouped = numjobs > 1 and siblings < numjobs
        engine = opts.get("ioengine")
        rw = str(opts.get("rw", opts.get("readwrite", "read")))
        meta_op = _FIO_META_ENGINES.get(str(engine)) if engine else None
        fsync = any(_bool(opts.get(k)) for k in ("end_fsync", "fsync", "fdatasync", "fsync_on_close"))
        direct = _bool(opts.get("direct"))
        if direct is None and "buffered" in opts:
            direct = not _bool(opts.get("buffered"))
        for op_name in ("read", "write", "trim"):
            op = job.get(op_name)
            if not isinstance(op, dict):
                continue
            io_bytes = _int(op.get("io_bytes"))
            if io_bytes is None:
                io_kib = _num(op.get("io_kbytes"))
                io_bytes = int(io_kib * 1024) if io_kib is not None else None
            if not io_bytes and not _int(op.get("total_ios")):
                continue
            bw_bytes = _num(op.get("bw_bytes"))
            if bw_bytes is None and _num(op.get("bw")) is not None:
                bw_bytes = float(op["bw"]) * 1024  # fio's bw is KiB/s
            runtime_ms = _num(op.get("runtime"))
            rows.append(_row(
                source=path.name, tool="fio", tool_version=version, api=engine, job=name,
                operation=meta_op or op_name, aggregate="group" if grouped else "job", repetition=0,
                tasks=numjobs if grouped else 1, nodes=1,
                file_per_proc="filename" not in opts,
                random=rw.startswith("rand"),
                transfer_size_bytes=_fio_bs_for(opts.get("bs", opts.get("blocksize")), op_name),
                block_size_bytes=size_or_none(opts.get("size")),
                direct_io=bool(direct), fsync=fsync,
                stonewall_s=_fio_seconds(opts.get("runtime")),
                bw_MiB_per_s=None if meta_op else (bw_bytes / MiB if bw_bytes is not None else None),
                ops_per_s=_num(op.get("iops")),
                latency_s=_fio_latency_s(op),
                seconds=runtime_ms / 1000.0 if runtime_ms is not None else None,
                bytes=None if meta_op else io_bytes,
            ))
    if not rows:
        raise BenchmarkOutputError(f"{path}: fio JSON output has no job with I/O done")
    return rows


# --------------------------------------------------------------------------
# cycleio field I/O
# --------------------------------------------------------------------------


def parse_fieldio_json(path: str | Path) -> list[dict[str, Any]]:
    """Parse the JSON output of ``cycleio fieldio`` (:mod:`cycleio.benchmarks.fieldio`) into rows.

    One ``aggregate="rep"`` row per run (access pattern x layout x repetition) and operation:
    ``job`` is the access pattern ("0A", "0B", "1", "2B"), ``api`` the layout
    ("file_per_field", "appended"), ``bw_MiB_per_s`` the global bandwidth (all tasks' bytes over
    the first call's start to the last call's end), ``ops_per_s`` calls per second over the same
    time, ``latency_s`` the mean time of one call, ``seconds`` that global time, ``bytes`` all
    tasks' bytes.  Each call's own latency stays in the file.
    """
    path = Path(path)
    text = _read_text(path)
    if not text.strip():
        raise BenchmarkOutputError(f"{path}: field I/O output is empty (the run failed before writing results)")
    data, reason = _decode_json_object(text)
    if data is None:
        raise BenchmarkOutputError(f"{path}: field I/O JSON output is unusable: {reason}")
    if data.get("tool") != "cycleio-fieldio" or not isinstance(data.get("runs"), list):
        raise BenchmarkOutputError(f"{path}: not cycleio field I/O output (no 'tool': 'cycleio-fieldio' with 'runs')")
    rows: list[dict[str, Any]] = []
    for run in data["runs"]:
        ops = run.get("ops") or {}
        columns = ("op", "bytes", "start_s", "seconds")
        if not all(isinstance(ops.get(c), list) for c in columns):
            raise BenchmarkOutputError(f"{path}: run {run.get('pattern')}/{run.get('layout')} has no operations")
        for operation in ("write", "read"):
            picked = [i for i, op in enumerate(ops["op"]) if op == operation]
            if not picked:
                continue
            start = min(ops["start_s"][i] for i in picked)
            end = max(ops["start_s"][i] + ops["seconds"][i] for i in picked)
            wall = end - start
            nbytes = sum(int(ops["bytes"][i]) for i in picked)
            rows.append(_row(
                source=path.name, tool="cycleio-fieldio", tool_version=data.get("version"),
                api=run.get("layout"), job=str(run.get("pattern")), operation=operation, aggregate="rep",
                repetition=_int(run.get("repetition")), repetitions=_int(data.get("repetitions")),
                tasks=_int(data.get("tasks")), nodes=_int(data.get("nodes")), file_per_proc=None, random=False,
                transfer_size_bytes=_int(data.get("field_size_bytes")),
                block_size_bytes=_int(data.get("field_size_bytes")),
                segments=_int(data.get("fields_per_task")), direct_io=False, fsync=bool(data.get("fsync")),
                reorder=None, stonewall_s=None,
                bw_MiB_per_s=nbytes / MiB / wall if wall > 0 else None,
                ops_per_s=len(picked) / wall if wall > 0 else None,
                latency_s=sum(ops["seconds"][i] for i in picked) / len(picked),
                seconds=wall, bytes=nbytes,
            ))
    if not rows:
        raise BenchmarkOutputError(f"{path}: field I/O output has no operations")
    return rows


# --------------------------------------------------------------------------
# dispatch
# --------------------------------------------------------------------------


def parse_any(path: str | Path) -> list[dict[str, Any]]:
    """Detect the output format from the file's content and parse it.

    Recognised: IOR JSON summary, IOR text output, mdtest text output, fio
    JSON, cycleio field-I/O JSON.  An empty or truncated IOR JSON summary is recognised by its content
    or by the IOR stdout beside it, so IOR's error is reported.  Anything else
    (mdtest CSV, dd output, run metadata, IOR stdout that only points to its
    JSON file, ...) raises BenchmarkOutputError saying what the file is.
    """
    path = Path(path)
    text = _read_text(path)
    head = text.lstrip()[:4000]
    if not head:
        if path.name.endswith(".json") and _ior_failure_detail(path, None).startswith("IOR reported"):
            return parse_ior_json(path)
        raise BenchmarkOutputError(f"{path}: empty file, cannot tell which benchmark wrote it")
    if re.search(r'"tool"\s*:\s*"cycleio-fieldio"', head):
        return parse_fieldio_json(path)
    if '"fio version"' in head or (re.search(r'"jobs"\s*:\s*\[', head) and '"job options"' in text):
        return parse_fio_json(path)
    if ('"tests"' in head and ('"Version"' in head or '"Command line"' in head)) or (
            '"summary"' in head and '"bwMaxMIB"' in text):
        return parse_ior_json(path)
    if re.search(r"^IOR-\S+: MPI Coordinated Test", text, re.M) or "Summary of all tests:" in text:
        return parse_ior_text(path)
    if re.search(r"mdtest-\S+ was launched with", text) or "SUMMARY rate" in text:
        return parse_mdtest_text(path)
    # recognisable but unsupported content: say what it is
    first_line = head.splitlines()[0]
    if first_line.startswith("rank,items,rate-"):
        why = "mdtest --saveRankPerformanceDetails CSV (parse mdtest's stdout instead)"
    elif re.search(r"records (in|out)", head) and re.search(r"bytes .* copied", head):
        why = "dd output (not supported)"
    elif '"command_line"' in head and '"argv"' in head:
        why = "run metadata (*.meta.json), not benchmark output"
    elif re.search(r"^\S+: \(groupid=\d+", text, re.M):
        why = "fio normal (text) output; run fio with --output-format=json"
    elif re.match(r"Writing output to \S+", first_line):
        errors = _ior_error_lines(text)
        why = ("IOR stdout of a failed run: " + " | ".join(errors)) if errors else \
            "IOR stdout without results (they are in the JSON summary file it names)"
    elif head.startswith("{"):
        data, reason = _decode_json_object(text)
        why = reason if data is None else f"JSON of unknown kind (keys: {sorted(data)[:8]})"
    else:
        why = f"unrecognised content (first line: {first_line[:120]!r})"
    raise BenchmarkOutputError(f"{path}: {why}")
