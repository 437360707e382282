"""IOR: its command lines (a bandwidth pattern, a replay), its outputs (the JSON summary, the text
output) to rows, and what ``cycleio parse`` needs to recognise them.

IOR notes: ``tests[].Results`` is a flat list (write, read, write, read, ...)
with no repetition index; the repetition of an entry is the number of earlier
entries with the same ``access`` (IOR 3.x nested lists are also accepted).  IOR
rounds the JSON ``latency`` to 4 decimals; when it reads 0.0 the latency is
estimated as wrRdTime / (blockSize / transferSize * segmentCount).  A failed
IOR run leaves an empty or truncated JSON summary and prints its error on
stdout: the error names the file and quotes IOR's ``ERROR`` line.
"""

from __future__ import annotations

import math
import re
import shlex
from pathlib import Path
from typing import Any

from ...units import size_or_none
from ..common import launcher_argv
from ..rows import MiB, BenchmarkOutputError, as_bool, as_int, decode_json_object, make_row, num, read_text
from ..specs import IOPattern

NAME = "ior"
LABEL = "IOR"
APIS = ("POSIX", "MPIIO", "HDF5", "NCMPI", "MMAP")
REORDERS = ("none", "constant", "random")  # which task reads what another wrote: -C -Q 1 (constant), -Z (random)
WORD_BYTES = 8  # IOR moves 8-byte words: transfer (and so block) sizes must be multiples of it


def spell_size(nbytes: int) -> str:
    """IOR's spelling of a size: 1m, 256m, 4k, or plain bytes (47008)."""
    for unit, suffix in ((2**30, "g"), (2**20, "m"), (2**10, "k")):
        if nbytes % unit == 0:
            return f"{nbytes // unit}{suffix}"
    return str(nbytes)


def command(ior: str, pattern: IOPattern, tasks: int, repetitions: int, test_file: Path,
            summary_file: Path, launcher: str) -> list[str]:
    """IOR's argv (behind the launcher): write then read, JSON summary to ``summary_file``.

    Options come in the order of the IOR 4.0.0 runs in tests/data, so those command lines are
    reproduced exactly.
    """
    argv = [*launcher_argv(launcher, tasks), ior, "-a", pattern.api]
    if pattern.file_per_proc:
        argv.append("-F")
    if pattern.random:
        argv.append("-z")
    argv += ["-w", "-r", "-t", spell_size(pattern.transfer_size_bytes), "-b", spell_size(pattern.block_size_bytes)]
    if pattern.segments != 1:
        argv += ["-s", str(pattern.segments)]
    if pattern.fsync:
        argv.append("-e")
    if pattern.reorder == "constant":
        argv += ["-C", "-Q", "1"]
    elif pattern.reorder == "random":
        argv.append("-Z")
    if pattern.stonewall_s > 0:
        # IOR reads -D as whole seconds (0.3 would be 0: no bound); the wear-out makes every task move what the
        # one that moved most did, and the read phase read what the write phase wrote
        argv += ["-D", str(stonewall_seconds(pattern.stonewall_s)), "-O", "stoneWallingWearOut=1"]
    argv += ["-i", str(repetitions)]
    if pattern.direct_io:
        argv.append("--posix.odirect")
    argv += ["-o", str(test_file), "-O", "summaryFormat=JSON", "-O", f"summaryFile={summary_file}"]
    return argv


def stonewall_seconds(stonewall_s: float) -> int:
    """IOR's -D for a time bound: whole seconds, rounded up."""
    return max(1, math.ceil(stonewall_s - 1e-9))


def replay_command(ior: str, files: int, file_bytes: int, transfer: int, test_file: Path, summary_file: Path,
                   launcher: str, read: bool = False) -> list[str]:
    """IOR's replay: one task, one file per repetition (-m), fsync after writing; -r to read back."""
    return [*launcher_argv(launcher, 1), ior, "-a", "POSIX", "-w", *(["-r"] if read else []),
            "-t", spell_size(transfer), "-b", spell_size(file_bytes), "-e", "-m", "-i", str(files),
            "-o", str(test_file), "-O", "summaryFormat=JSON", "-O", f"summaryFile={summary_file}"]


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
            flags["stonewall_s"] = num(argv[i + 1])
        elif arg == "-i":
            flags["repetitions"] = as_int(argv[i + 1])
    if "stonewall_s" not in flags:
        flags["stonewall_s"] = 0.0
    return flags


def _ior_reorder(constant: Any, random: Any) -> str | None:
    """IOR reorderTasks/reorderTasksRandom -> "constant"/"random"/"none"."""
    if constant is None and random is None:
        return None
    if as_bool(random):
        return "random"
    if as_bool(constant):
        return "constant"
    return "none"


def _ior_test_params(test: dict[str, Any], flags: dict[str, Any]) -> dict[str, Any]:
    """Row parameters of one IOR JSON test (Parameters + Options + command line)."""
    params = test.get("Parameters") or {}
    options = test.get("Options") or {}
    fsync: bool | None = None
    if "fsync" in params or "fsyncperwrite" in params:
        fsync = bool(as_bool(params.get("fsync")) or as_bool(params.get("fsyncperwrite")))
    else:
        fsync = flags.get("fsync")
    stonewall = num(params.get("deadlineForStonewall"))
    return {
        "api": params.get("api") or options.get("api"),
        "job": f"test{test.get('TestID', params.get('testID', 0))}",
        "repetitions": as_int(params.get("repetitions", options.get("repetitions"))),
        "tasks": as_int(options.get("tasks", params.get("numTasks"))),
        "nodes": as_int(params.get("nodes", options.get("nodes"))),
        "file_per_proc": as_bool(params.get("filePerProc"))
        if "filePerProc" in params
        else (options["access"] == "file-per-process" if options.get("access") else None),
        "random": as_bool(params.get("randomOffset"))
        if "randomOffset" in params else flags.get("random"),
        "transfer_size_bytes": as_int(params.get("transferSize")) or size_or_none(options.get("xfersize")),
        "block_size_bytes": as_int(params.get("blockSize")) or size_or_none(options.get("blocksize")),
        "segments": as_int(params.get("segmentCount", options.get("segments"))),
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


# Where a summary line of IOR's JSON and of its text output holds each aggregate's bandwidth and
# operations, the mean's seconds and the MiB moved.
JSON_SUMMARY_KEYS = {"max": ("bwMaxMIB", "OPsMax"), "min": ("bwMinMIB", "OPsMin"), "mean": ("bwMeanMIB", "OPsMean"),
                     "seconds": "MeanTime", "MiB": "xsizeMiB"}
TEXT_SUMMARY_KEYS = {"max": ("Max(MiB)", "Max(OPs)"), "min": ("Min(MiB)", "Min(OPs)"),
                     "mean": ("Mean(MiB)", "Mean(OPs)"), "seconds": "Mean(s)", "MiB": "aggs(MiB)"}


def _summary_rows(entry: dict[str, Any], keys: dict, params: dict[str, Any], source: str, version: str | None,
                  operation: str) -> list[dict[str, Any]]:
    """One summary line of IOR's (JSON or text) as its max, min and mean rows."""
    moved = num(entry.get(keys["MiB"]))
    return [make_row(source=source, tool="ior", tool_version=version, **params, operation=operation, aggregate=agg,
                     repetition=None, bw_MiB_per_s=num(entry.get(keys[agg][0])), ops_per_s=num(entry.get(keys[agg][1])),
                     seconds=num(entry.get(keys["seconds"])) if agg == "mean" else None,
                     bytes=int(round(moved * MiB)) if moved is not None else None)
            for agg in ("max", "min", "mean")]


def parse_json(path: str | Path, stdout_path: str | Path | None = None) -> list[dict[str, Any]]:
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
    text = read_text(path)
    if not text.strip():
        raise BenchmarkOutputError(
            f"{path}: IOR JSON summary is empty (IOR failed before writing results); "
            + _ior_failure_detail(path, stdout_path))
    data, reason = decode_json_object(text)
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
            latency = num(res.get("latency"))
            wrrd = num(res.get("wrRdTime"))
            if latency == 0.0 and wrrd and per_task:
                latency = wrrd / per_task  # JSON latency rounded to 0.0000
            block_kib = num(res.get("blockKiB"))
            bytes_moved = None
            if (p["stonewall_s"] or 0) > 0 and num(res.get("bwMiB")) and num(res.get("totalTime")):
                # a phase the deadline ended moved less than its blocks: what IOR's bandwidth says it moved
                bytes_moved = int(round(num(res["bwMiB"]) * MiB * num(res["totalTime"])))
            elif block_kib is not None:
                bytes_moved = int(round(block_kib * 1024 * (p["segments"] or 1) * (p["tasks"] or 1)))
            rows.append(make_row(
                source=source, tool="ior", tool_version=version, **p,
                operation=str(res.get("access")), aggregate="rep", repetition=rep,
                bw_MiB_per_s=num(res.get("bwMiB")), ops_per_s=num(res.get("iops")),
                latency_s=latency, seconds=num(res.get("totalTime")), bytes=bytes_moved,
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
            "api": entry.get("API"), "tasks": as_int(entry.get("numTasks")),
            "repetitions": as_int(entry.get("repetitions")),
            "file_per_proc": as_bool(entry.get("filePerProc")),
            "transfer_size_bytes": as_int(entry.get("transferSize")),
            "block_size_bytes": as_int(entry.get("blockSize")),
            "segments": as_int(entry.get("segmentCount")),
            "reorder": _ior_reorder(entry.get("reorderTasks"), entry.get("reorderTasksRandom")),
        }
        for key, value in fallback.items():
            if p.get(key) is None:
                p[key] = value
        for key in ("nodes", "random", "direct_io", "fsync", "stonewall_s"):
            p.setdefault(key, flags.get(key))
        rows += _summary_rows(entry, JSON_SUMMARY_KEYS, p, source, version, str(entry.get("operation")))
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


def parse_text(path: str | Path) -> list[dict[str, Any]]:
    """Parse IOR's human-readable stdout into rows (same schema as parse_json).

    Uses the per-iteration "Results:" table (``aggregate="rep"``, repetition
    from its ``iter`` column) if present and the "Summary of all tests:" table
    (max/min/mean rows).  Parameters come from the "Options:" block, the
    summary table and the command line (fsync, direct I/O are only there).
    """
    path = Path(path)
    text = read_text(path)
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
                if len(tokens) != len(header) or num(tokens[1]) is None:
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
        stonewall = num(options.get("stonewallingTime"))
        p: dict[str, Any] = {
            "api": options.get("api"), "job": f"test{test_id}",
            "repetitions": as_int(options.get("repetitions")) or flags.get("repetitions"),
            "tasks": as_int(options.get("tasks")), "nodes": as_int(options.get("nodes")),
            "file_per_proc": (options["access"] == "file-per-process") if "access" in options else None,
            "random": (ordering == "random") if ordering else flags.get("random"),
            "transfer_size_bytes": size_or_none(options.get("xfersize")),
            "block_size_bytes": size_or_none(options.get("blocksize")),
            "segments": as_int(options.get("segments")),
            "direct_io": flags.get("direct_io"), "fsync": flags.get("fsync"), "reorder": reorder,
            "stonewall_s": stonewall if stonewall is not None else flags.get("stonewall_s"),
        }
        for s in summary:  # exact values from the summary table override rounded text
            if as_int(s.get("Test#")) == test_id:
                exact = {
                    "api": s.get("API"), "tasks": as_int(s.get("#Tasks")), "repetitions": as_int(s.get("reps")),
                    "file_per_proc": as_bool(s.get("fPP")),
                    "reorder": _ior_reorder(s.get("reord"), s.get("reordrand")),
                    "segments": as_int(s.get("segcnt")), "block_size_bytes": as_int(s.get("blksiz")),
                    "transfer_size_bytes": as_int(s.get("xsize")),
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
            rep = as_int(rep_row.get("iter"))
            if rep is None:
                rep = seen.get(access, 0)
            seen[access] = seen.get(access, 0) + 1
            latency = num(rep_row.get("Latency(s)"))
            wrrd = num(rep_row.get("wr/rd(s)"))
            if latency == 0.0 and wrrd and per_task:
                latency = wrrd / per_task
            block_kib = num(rep_row.get("block(KiB)"))
            rows.append(make_row(
                source=source, tool="ior", tool_version=version, **p,
                operation=access, aggregate="rep", repetition=rep,
                bw_MiB_per_s=num(rep_row.get("bw(MiB/s)")), ops_per_s=num(rep_row.get("IOPS")),
                latency_s=latency, seconds=num(rep_row.get("total(s)")),
                bytes=int(round(block_kib * 1024 * (p["segments"] or 1) * (p["tasks"] or 1)))
                if block_kib is not None else None,
            ))
    options_by_id = {t["id"]: t["options"] for t in tests}
    for s in summary:
        test_id = as_int(s.get("Test#")) or 0
        p = params_for(test_id, options_by_id.get(test_id, {}))
        rows += _summary_rows(s, TEXT_SUMMARY_KEYS, p, source, version, s["Operation"])
    return rows


def parse(path: str | Path, stdout_path: str | Path | None = None) -> list[dict[str, Any]]:
    """Rows of an IOR JSON summary, or of IOR's text output."""
    path = Path(path)
    text = read_text(path)
    if _is_text_output(text):
        return parse_text(path)
    return parse_json(path, stdout_path=stdout_path)


def _is_text_output(text: str) -> bool:
    return bool(re.search(r"^IOR-\S+: MPI Coordinated Test", text, re.M)) or "Summary of all tests:" in text


def guess_can_open(path: str | Path, text: str | None = None) -> bool:
    """IOR's JSON summary or text output, judged by content; an empty ``.json`` beside the stdout of a
    failed IOR run is IOR's too (so that its error is reported)."""
    path = Path(path)
    text = read_text(path) if text is None else text
    head = text.lstrip()[:4000]
    if not head:
        return path.name.endswith(".json") and _ior_failure_detail(path, None).startswith("IOR reported")
    return (('"tests"' in head and ('"Version"' in head or '"Command line"' in head))
            or ('"summary"' in head and '"bwMaxMIB"' in text) or _is_text_output(text))


def unsupported(text: str) -> str | None:
    """What an IOR file that has no results is, or None: the stdout of a run whose results went to JSON."""
    first_line = text.lstrip().splitlines()[0] if text.strip() else ""
    if not re.match(r"Writing output to \S+", first_line):
        return None
    errors = _ior_error_lines(text)
    return (("IOR stdout of a failed run: " + " | ".join(errors)) if errors
            else "IOR stdout without results (they are in the JSON summary file it names)")


def version(path: str) -> str | None:
    """None: IOR has no option that prints its version; every output carries it (rows' tool_version)."""
    return None
