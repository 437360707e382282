"""Read a Darshan log (pydarshan), refuse what cannot be replayed, and describe what the job did.

``read_log`` checks, in this order, and raises DarshanLogError (a ValueError: one line naming the log and what
is expected) before anything else happens: the file exists; it starts with Darshan's header (a version string,
then the magic number 6567223); the regions the header announces (the file names, each module's records) lie
within the file (a log cut short does not hold them); darshan-util parses it; it has POSIX, MPI-IO or STDIO
records of files (not only a heatmap, APMPI, the standard streams, pipes or devices). What darshan-parser reads
and pydarshan cannot decode (a mount table entry, a file name, a module) costs a warning (``JobLog.warnings``), not
the log (reader.py).

Files that are not storage (the standard streams, pipes, sockets, devices, /proc and /sys) are set apart
(``set_apart``): not replayed, not in the job's I/O time, and named where the log is described.

``file_table`` is one row per module, file and direction (what ``cycleio darshan inspect --out`` writes);
``rank_times`` the time each rank spent in reads, writes and metadata, as the log counted them, and its I/O time:
their sum, bounded by the union of its records' windows (calls on different files overlap), never more than the
run.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import re
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd

from ..intervals import covered_per_group

DARSHAN_MAGIC_NR = 6567223
# The modules whose records are files with bytes, calls and times; MPI-IO sits above POSIX.
FILE_MODULES = ("POSIX", "MPI-IO", "STDIO")
PREFIX = {"POSIX": "POSIX", "MPI-IO": "MPIIO", "STDIO": "STDIO"}
DXT_MODULES = {"POSIX": "DXT_POSIX", "MPI-IO": "DXT_MPIIO"}
DIRECTIONS = ("read", "write")
# Darshan's access-size histogram: (counter suffix, smallest size, largest size), bounds inclusive as
# darshan-runtime bins them (a 100-byte access is in 0_100, 101 in 100_1K).
SIZE_BINS = (("0_100", 0, 100), ("100_1K", 101, 1024), ("1K_10K", 1025, 10240), ("10K_100K", 10241, 102400),
             ("100K_1M", 102401, 1048576), ("1M_4M", 1048577, 4194304), ("4M_10M", 4194305, 10485760),
             ("10M_100M", 10485761, 104857600), ("100M_1G", 104857601, 1073741824),
             ("1G_PLUS", 1073741825, 2**62))
# What is not storage, by name (Darshan does not record a file's type): the standard streams, what the kernel names
# an open pipe, socket or other anonymous inode, devices (not /dev/shm: memory-backed files), /proc and /sys, and
# named pipes (FIFOs) named as such (a COMPSs worker's pipe_NNN).
SET_APART = (("stream", re.compile(r"^<(STDIN|STDOUT|STDERR)>$")),
             ("pipe", re.compile(r"^pipe:\[\d+\]$")),
             ("socket", re.compile(r"^socket:\[\d+\]$")),
             ("anonymous inode", re.compile(r"^anon_inode:")),
             ("device", re.compile(r"^/dev/(?!shm/)")),
             ("/proc or /sys", re.compile(r"^/(proc|sys)/")),
             ("named pipe", re.compile(r"(^|/)(pipe|fifo)([_.-][^/]*)?$|\.(pipe|fifo)$", re.IGNORECASE)))
# The log's header (darshan-log-format.h): version string (8 bytes), magic number (int64), compression type, partial
# flag, then the (offset, length) pairs of the file names' region and of each module slot's region, then each slot's
# version. From log format 3.41 (darshan 3.4) the flag is 64 bits and there are 64 slots, before 32 bits and 16.
HEADER_LAYOUT = {True: (32, 64), False: (24, 16)}  # format >= 3.41: (offset of the names' pair, module slots)
# The module in each slot, log format 3.41 and later.
MODULE_SLOTS = ("NULL", "POSIX", "MPI-IO", "H5F", "H5D", "PNETCDF_FILE", "PNETCDF_VAR", "BG/Q", "LUSTRE", "STDIO",
                "DXT_POSIX", "DXT_MPIIO", "MDHIM", "APXC", "APMPI", "HEATMAP", "DFS", "DAOS")


class DarshanLogError(ValueError):
    """A log that cannot be inspected or replayed: the message names the log and what is expected."""


@dataclass
class JobLog:
    """What the replay and inspect need of one log."""

    path: Path
    sha256: str
    exe: str
    nprocs: int
    run_time_s: float
    jobid: int
    log_version: str
    modules: dict[str, dict]                       # every module: {records, bytes, partial}
    counters: dict[str, pd.DataFrame]              # FILE_MODULES present: counters and fcounters, plus `file`
    dxt: dict[str, list[dict]] = field(default_factory=dict)  # DXT_POSIX / DXT_MPIIO records
    darshan_messages: str = ""
    warnings: list[str] = field(default_factory=list)  # what darshan-parser reads and pydarshan could not decode

    def dxt_partial(self, module: str = "POSIX") -> bool:
        name = DXT_MODULES.get(module, "")
        return bool(self.modules.get(name, {}).get("partial"))


def sha256_of(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def check_header(path: Path) -> None:
    """DarshanLogError unless ``path`` is a readable file that starts with Darshan's header."""
    if not path.is_file():
        raise DarshanLogError(f"{path}: no such file; expected a Darshan log (*.darshan)")
    try:
        with open(path, "rb") as handle:
            head = handle.read(16)
    except OSError as err:
        raise DarshanLogError(f"{path}: cannot be read ({err.strerror}); expected a readable Darshan log") from None
    magic = head[8:16]
    version = head[:8].split(b"\0")[0]
    if len(head) < 16 or magic not in (struct.pack("<q", DARSHAN_MAGIC_NR), struct.pack(">q", DARSHAN_MAGIC_NR)) \
            or not version[:1].isdigit():
        raise DarshanLogError(f"{path}: not a Darshan log (expected a Darshan header: a version string such as 3.21, "
                              f"then the magic number {DARSHAN_MAGIC_NR}; the file starts with {head[:16]!r})")


def check_whole(path: Path) -> None:
    """DarshanLogError when the regions ``path``'s header announces reach past its end (a log cut short: copied
    while darshan-runtime wrote it, or a transfer that stopped)."""
    size, past = cut_regions(path)
    if past and past[0][0] == "header":
        raise DarshanLogError(f"{path}: cut short: {size:,} bytes, fewer than its header's {past[0][1]:,}; expected a "
                              f"complete Darshan log (darshan-runtime writes it whole when the job ends)")
    if past:
        named = ", ".join(f"{name} (to byte {end:,})" for name, end in past[:4]) + (" ..." if len(past) > 4 else "")
        raise DarshanLogError(f"{path}: cut short: its header announces {named} but the file ends at byte {size:,}; "
                              f"expected a complete Darshan log (darshan-runtime writes it whole when the job ends)")


def cut_regions(path: Path) -> tuple[int, list[tuple[str, int]]]:
    """The file's length, and the regions its header announces that reach past it: (name, end byte) each (the header
    itself is the region ``header``; a module slot is named by its module from log format 3.41 on)."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        head = handle.read(1328)
    version = head[:8].split(b"\0")[0]
    try:
        newer = tuple(int(part) for part in version.decode("ascii").split(".")) >= (3, 41)
    except ValueError:
        newer = True
    endian = "<" if head[8:16] == struct.pack("<q", DARSHAN_MAGIC_NR) else ">"
    at, slots = HEADER_LAYOUT[newer]
    header_len = at + 16 * (slots + 1) + 4 * slots
    if size < header_len:
        return size, [("header", header_len)]
    known = MODULE_SLOTS if newer else ()  # older formats numbered their modules otherwise
    names = ["file names"] + [known[slot] if slot < len(known) else f"module slot {slot}" for slot in range(slots)]
    regions = [struct.unpack_from(f"{endian}QQ", head, at + 16 * i) for i in range(slots + 1)]
    return size, [(name, offset + length) for name, (offset, length) in zip(names, regions)
                  if length and offset + length > size]


@contextlib.contextmanager
def _captured_stderr() -> Iterator[list[str]]:
    """darshan-util prints its errors on file descriptor 2 (C's stderr): keep them for the message."""
    out: list[str] = []
    with tempfile.TemporaryFile(mode="w+b") as sink:
        saved = os.dup(2)
        try:
            os.dup2(sink.fileno(), 2)
            yield out
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            out.append(sink.read().decode(errors="replace").strip())


def read_log(path: str | os.PathLike, require_files: bool = True) -> JobLog:
    """The log at ``path``, checked (see the module's docstring); DarshanLogError otherwise. ``require_files``
    false: a log without file records (a process that touched none) is read too."""
    from .reader import LenientReport

    path = Path(path)
    check_header(path)
    check_whole(path)
    messages: list[str] = []
    report = None
    try:
        with _captured_stderr() as messages:
            try:
                report = LenientReport(str(path))
            finally:
                if report is None:  # not after every log: a collection costs 0.1-0.2 s in a process of many objects
                    gc.collect()  # a failed report's handle is closed (and complained about) here, not later
    except Exception as err:  # darshan-util's RuntimeError, or anything its parsing raised
        said = " ".join(messages).replace("\n", " ")[:300]
        raise DarshanLogError(f"{path}: cannot be parsed as a Darshan log ({err}{'; ' + said if said else ''}); "
                              f"expected a complete log written by darshan-runtime 3.x") from None
    said = " ".join(messages).replace("\n", " ")
    warnings = list(report.warnings)
    modules = {name: {"records": report.decoded(name), "bytes": int(info.get("len", 0)),
                      "partial": bool(info.get("partial_flag"))}
               for name, info in report.modules.items()}
    for name, info in modules.items():
        if info["bytes"] and not info["records"] and not any(f"module {name}:" in w for w in warnings):
            util = f"; darshan-util said: {said[:160]}" if said else ""
            warnings.append(f"module {name}: pydarshan decoded none of its records ({info['bytes']:,} bytes in the "
                            f"log{util}): left out")
    counters = {}
    for module in FILE_MODULES:
        if module not in report.records or not len(report.records[module]):
            continue
        frames = report.records[module].to_df()
        table = frames["counters"].merge(frames["fcounters"], on=["id", "rank"], how="left")
        table.insert(0, "file", [report.name_records.get(int(i), str(i)) for i in table["id"]])
        table["rank"] = table["rank"].astype(int)
        counters[module] = table
    dxt = {name: list(report.records[name].to_df()) for name in DXT_MODULES.values()
           if name in report.records and len(report.records[name])}
    for records in dxt.values():
        for record in records:
            record["file"] = report.name_records.get(int(record["id"]), str(record["id"]))
    job = report.metadata["job"]
    log = JobLog(path=path.resolve(), sha256=sha256_of(path), exe=str(report.metadata.get("exe", "")).strip(),
                 nprocs=int(job["nprocs"]), run_time_s=float(job.get("run_time", 0.0)), jobid=int(job.get("jobid", 0)),
                 log_version=str(job.get("log_ver", "")), modules=modules, counters=counters, dxt=dxt,
                 darshan_messages=said, warnings=warnings)
    if require_files:
        check_file_records(log)
    return log


COUNTED_MODULES = ("POSIX", "STDIO")  # MPI-IO's bytes reach storage through POSIX calls, counted there


def counts_under(log: JobLog, roots: list[str]) -> dict[str, int]:
    """The bytes and calls the log counted in files below any of ``roots`` (folders, absolute), per direction, over
    the modules that meet storage (POSIX and STDIO): ``{read_bytes, read_calls, write_bytes, write_calls}``."""
    prefixes = tuple(root.rstrip("/") + "/" for root in roots)
    counts = {f"{d}_{what}": 0 for d in DIRECTIONS for what in ("bytes", "calls")}
    for module in COUNTED_MODULES:
        table = files_of(log, module)
        if table.empty:
            continue
        mine = table[table["file"].str.startswith(prefixes)]
        for direction in DIRECTIONS:
            counts[f"{direction}_bytes"] += int(bytes_of(mine, module, direction).sum())
            counts[f"{direction}_calls"] += int(ops_of(mine, module, direction).sum())
    return counts


def check_file_records(log: JobLog) -> None:
    """DarshanLogError when the log has no POSIX, MPI-IO or STDIO record of a file (what is set apart left out)."""
    if not any(len(files_of(log, module)) for module in FILE_MODULES):
        present = ", ".join(log.modules) or "none"
        apart = set_apart(log)
        besides = (f"; set apart as not storage: {', '.join(sorted(set(apart['kind'])))}" if len(apart) else "")
        raise DarshanLogError(f"{log.path}: no POSIX, MPI-IO or STDIO records of files (modules in the log: "
                              f"{present}{besides}); expected a log of a job with file I/O, recorded with "
                              f"darshan-runtime's POSIX, MPI-IO or STDIO module")


def not_storage(name: str) -> str | None:
    """What ``name`` is when it is not a file on storage (``SET_APART``'s kinds), else None."""
    for kind, pattern in SET_APART:
        if pattern.search(name):
            return kind
    return None


def _kinds(table: pd.DataFrame) -> pd.Series:
    names = table["file"].unique()
    return table["file"].map(dict(zip(names, (not_storage(str(n)) for n in names))))


def files_of(log: JobLog, module: str) -> pd.DataFrame:
    """The module's records of files on storage: what is set apart (``set_apart``) left out."""
    table = log.counters.get(module)
    if table is None:
        return pd.DataFrame()
    return table[_kinds(table).isna().to_numpy()]


def set_apart(log: JobLog) -> pd.DataFrame:
    """One row per module and file the log recorded that is not storage (streams, pipes, sockets, devices, /proc,
    /sys): ``module, file, kind, bytes_read, bytes_written, ops, meta_s``. None of it is replayed or timed."""
    columns = ["module", "file", "kind", "bytes_read", "bytes_written", "ops", "meta_s"]
    parts = []
    for module in FILE_MODULES:
        table = log.counters.get(module)
        if table is None:
            continue
        kinds = _kinds(table)
        apart = table[kinds.notna().to_numpy()]
        if apart.empty:
            continue
        # each record's measures, then summed per file (a log may hold thousands of records of streams and pipes)
        per_record = pd.DataFrame({"file": apart["file"], "kind": kinds[apart.index],
                                   "bytes_read": bytes_of(apart, module, "read"),
                                   "bytes_written": bytes_of(apart, module, "write"),
                                   "ops": sum(ops_of(apart, module, d) for d in DIRECTIONS),
                                   "meta_s": seconds_of(apart, module, "meta")})
        per_file = per_record.groupby("file", sort=True).agg(
            kind=("kind", "first"), bytes_read=("bytes_read", "sum"), bytes_written=("bytes_written", "sum"),
            ops=("ops", "sum"), meta_s=("meta_s", "sum")).reset_index()
        parts.append(per_file.assign(module=module).astype(
            {"bytes_read": "int64", "bytes_written": "int64", "ops": "int64", "meta_s": float}))
    return pd.concat(parts, ignore_index=True)[columns] if parts else pd.DataFrame(columns=columns)


def set_apart_note(log: JobLog) -> str:
    """One line naming what the log recorded that is not storage, or '' when nothing is."""
    apart = set_apart(log)
    if apart.empty:
        return ""
    files = apart.drop_duplicates("file")
    kinds = files.groupby("kind", sort=True)["file"].apply(list)
    shown = "; ".join(f"{len(names)} {kind}{'s' if len(names) > 1 else ''} ({', '.join(names[:3])}"
                      f"{', ...' if len(names) > 3 else ''})" for kind, names in kinds.items())
    return (f"set apart as not storage (not replayed, not in the job's I/O time): {shown}; "
            f"{int(apart['bytes_read'].sum()):,} bytes read, {int(apart['bytes_written'].sum()):,} written, "
            f"{apart['meta_s'].sum():.4g} s of metadata")


def _num(table: pd.DataFrame, column: str) -> pd.Series:
    if column in table:
        return table[column].fillna(0).clip(lower=0)
    return pd.Series(0, index=table.index, dtype=float)


def ops_of(table: pd.DataFrame, module: str, direction: str) -> pd.Series:
    """Read or write calls of each record."""
    if module == "MPI-IO":
        kinds = ("INDEP", "COLL", "SPLIT", "NB")
        verb = "READS" if direction == "read" else "WRITES"
        return sum(_num(table, f"MPIIO_{kind}_{verb}") for kind in kinds)
    return _num(table, f"{PREFIX[module]}_{'READS' if direction == 'read' else 'WRITES'}")


def bytes_of(table: pd.DataFrame, module: str, direction: str) -> pd.Series:
    return _num(table, f"{PREFIX[module]}_BYTES_{'READ' if direction == 'read' else 'WRITTEN'}")


def seconds_of(table: pd.DataFrame, module: str, what: str) -> pd.Series:
    """Seconds of ``what`` (read, write, meta) of each record."""
    return _num(table, f"{PREFIX[module]}_F_{what.upper()}_TIME")


def histogram_of(table: pd.DataFrame, module: str, direction: str) -> pd.DataFrame:
    """The access-size histogram's counts (columns: SIZE_BINS' suffixes); none for STDIO, which has none."""
    verb = "READ" if direction == "read" else "WRITE"
    middle = "_AGG" if module == "MPI-IO" else ""
    return pd.DataFrame({name: _num(table, f"{PREFIX[module]}_SIZE_{verb}{middle}_{name}") for name, _, _ in SIZE_BINS},
                        index=table.index)


def common_sizes(table: pd.DataFrame, module: str) -> dict[int, int]:
    """The records' most common access sizes (reads and writes together, as Darshan counts them) -> calls."""
    prefix = PREFIX[module]
    out: dict[int, int] = {}
    for slot in range(1, 5):
        sizes, counts = f"{prefix}_ACCESS{slot}_ACCESS", f"{prefix}_ACCESS{slot}_COUNT"
        if sizes not in table:
            return {}
        for size, count in zip(table[sizes], table[counts]):
            if count > 0 and size >= 0:
                out[int(size)] = out.get(int(size), 0) + int(count)
    return dict(sorted(out.items(), key=lambda item: -item[1]))


def dxt_segments(log: JobLog, module: str = "POSIX") -> dict[str, int]:
    """Per file, the operations DXT traced (reads and writes, every rank)."""
    out: dict[str, int] = {}
    for record in log.dxt.get(DXT_MODULES.get(module, ""), []):
        out[record["file"]] = out.get(record["file"], 0) + len(record["read_segments"]) + len(record["write_segments"])
    return out


def file_table(log: JobLog) -> pd.DataFrame:
    """One row per module, file and direction the job moved bytes or made calls in (inspect's CSV)."""
    rows = []
    for module in FILE_MODULES:
        table = files_of(log, module)
        if table.empty:
            continue
        traced = dxt_segments(log, module)
        by_file = table.groupby("file", sort=False)
        shared = by_file["rank"].min() == -1
        nranks = by_file["rank"].nunique()
        calls = sum(ops_of(table, module, d) for d in DIRECTIONS).groupby(table["file"], sort=False).sum()
        meta = seconds_of(table, module, "meta").groupby(table["file"], sort=False).sum()
        few = len(by_file) <= 200  # the common sizes per file: worth it for a readable table, not for 2,048 files
        for direction in DIRECTIONS:
            values = pd.DataFrame({"bytes": bytes_of(table, module, direction), "ops": ops_of(table, module, direction),
                                   "seconds": seconds_of(table, module, direction)})
            values = pd.concat([values, histogram_of(table, module, direction)], axis=1)
            sums = values.groupby(table["file"], sort=False).sum()
            for name, row in sums.iterrows():
                if not row["bytes"] and not row["ops"]:
                    continue
                if name in traced:
                    dxt = "partial" if log.dxt_partial(module) or traced[name] < calls[name] else "yes"
                else:
                    dxt = "no"
                common = common_sizes(by_file.get_group(name), module) if few else {}
                shown = " ".join(f"{s}x{c}" for s, c in list(common.items())[:4])
                rows.append({"module": module, "file": name, "direction": direction, "bytes": int(row["bytes"]),
                             "ops": int(row["ops"]), "seconds": float(row["seconds"]), "meta_s": float(meta[name]),
                             "shared": bool(shared[name]), "ranks": log.nprocs if shared[name] else int(nranks[name]),
                             "dxt": dxt, "common_sizes_bytes": shown,
                             **{f"size_{bin_}": int(row[bin_]) for bin_, _, _ in SIZE_BINS}})
    return pd.DataFrame(rows)


def _windows(table: pd.DataFrame, module: str, run_time_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Each record's window: from its first call's start to its last call's end of any kind (open, read, write,
    close), as the log's timestamps (seconds from the job's start) say. Its read, write and metadata calls all lie
    within it (a sync counts as write time and comes after the last write, before the close). A record without
    timestamps (a file only stat'ed) gets the whole run."""
    prefix = PREFIX[module]
    kinds = ("OPEN", "READ", "WRITE", "CLOSE")
    starts = table[[c for k in kinds if (c := f"{prefix}_F_{k}_START_TIMESTAMP") in table]]
    stops = table[[c for k in kinds if (c := f"{prefix}_F_{k}_END_TIMESTAMP") in table]]
    start = starts.where(starts > 0).min(axis=1).to_numpy(dtype=float)
    stop = stops.max(axis=1).to_numpy(dtype=float) if len(stops.columns) else np.full(len(table), np.nan)
    unknown = np.isnan(start) | ~(stop > 0) | ~(stop >= start)
    whole = max(run_time_s, float(np.nanmax(stop, initial=0.0)))
    return np.where(unknown, 0.0, start), np.where(unknown, whole, stop)


def rank_times(log: JobLog) -> pd.DataFrame:
    """Per rank of the job, the seconds it spent in reads, writes and metadata (POSIX and STDIO: MPI-IO's time holds
    the POSIX calls beneath it), and its I/O time ``io_s``.

    A shared file's record (rank -1) is every rank's together: its seconds are dealt evenly over the job's ranks.
    Calls on different files overlap (threads; a pipe's open waiting for its writer while other files are read), so
    a rank's seconds of each kind are at most the time covered by the union of the windows (``_windows``) of its
    records with time of that kind, and its I/O time the sum of the three, at most the union of all its records'
    windows: never more than the job's run. (Darshan already counts overlapping calls on one record once.)"""
    nprocs = max(log.nprocs, 1)
    busy = np.zeros((nprocs, 3))
    parts: dict[str, list] = {"rank": [], "kind": [], "start": [], "stop": []}
    for module in ("POSIX", "STDIO"):
        table = files_of(log, module)
        if table.empty:
            continue
        ranks = table["rank"].to_numpy()
        mine = ranks >= 0
        start, stop = _windows(table, module, log.run_time_s)
        for column, what in enumerate(("read", "write", "meta")):
            seconds = seconds_of(table, module, what).to_numpy()
            busy[:, column] += seconds[ranks == -1].sum() / nprocs
            np.add.at(busy[:, column], ranks[mine] % nprocs, seconds[mine])
            active = seconds > 0
            parts["rank"].append(np.where(mine, ranks % nprocs, -1)[active])
            parts["kind"].append(np.full(int(active.sum()), column))
            parts["start"].append(start[active])
            parts["stop"].append(stop[active])
    covered = _covered(parts, nprocs)
    times = np.minimum(busy, covered[:, :3])
    io = np.minimum(times.sum(axis=1), covered[:, 3])
    if log.run_time_s > 0:
        io = np.minimum(io, log.run_time_s)
    out = pd.DataFrame(times, columns=["read_s", "write_s", "meta_s"]).rename_axis("rank")
    out["io_s"] = io
    return out


def _covered(parts: dict[str, list], nprocs: int) -> np.ndarray:
    """Per rank, the time covered by its windows of each kind (read, write, meta) and of all kinds together
    (columns 0-3). A shared record's window (rank -1) is every rank's: it joins each rank that has windows of its
    own, and once more the ranks that have none (they all cover the same)."""
    if not parts["rank"]:
        return np.zeros((nprocs, 4))
    rank, kind, start, stop = (np.concatenate(parts[key]) for key in ("rank", "kind", "start", "stop"))
    own = np.unique(rank[rank >= 0])
    slot = np.full(nprocs, len(own))  # the ranks without windows of their own share the last slot
    slot[own] = np.arange(len(own))
    shared = rank < 0
    n_slots = len(own) + 1
    group = np.concatenate([slot[rank[~shared]], np.repeat(np.arange(n_slots), shared.sum())])
    kinds = np.concatenate([kind[~shared], np.tile(kind[shared], n_slots)])
    starts = np.concatenate([start[~shared], np.tile(start[shared], n_slots)])
    stops = np.concatenate([stop[~shared], np.tile(stop[shared], n_slots)])
    per_slot = np.zeros((n_slots, 4))
    for column in range(3):
        chosen = kinds == column
        per_slot[:, column] = covered_per_group(group[chosen], starts[chosen], stops[chosen], n_slots)
    per_slot[:, 3] = covered_per_group(group, starts, stops, n_slots)
    return per_slot[slot]


def slowest_rank(times: pd.DataFrame) -> dict[str, float]:
    """The rank with the most I/O time (``rank_times``): its read, write and metadata seconds and its I/O time."""
    if times.empty:
        return {"rank": -1, "read_s": 0.0, "write_s": 0.0, "meta_s": 0.0, "io_s": 0.0}
    rank = int(times["io_s"].idxmax())
    return {"rank": rank, **{k: float(v) for k, v in times.loc[rank].items()}}
