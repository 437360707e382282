"""Read a Darshan log (pydarshan), refuse what cannot be replayed, and describe what the job did.

``read_log`` checks, in this order, and raises DarshanLogError (a ValueError: one line naming the log and what
is expected) before anything else happens: the file exists; it starts with Darshan's header (a version string,
then the magic number 6567223); darshan-util parses it and every module's region holds the records its header
announces (a log cut short parses "successfully" with modules missing); it has POSIX, MPI-IO or STDIO records
of files (not only a heatmap, APMPI, or the standard streams).

``file_table`` is one row per module, file and direction (what ``cycleio darshan inspect --out`` writes);
``rank_times`` the time each rank spent in reads, writes and metadata, as the log counted them.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd

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
STREAMS = ("<STDIN>", "<STDOUT>", "<STDERR>")


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

    def dxt_partial(self, module: str = "POSIX") -> bool:
        name = DXT_MODULES.get(module, "")
        return bool(self.modules.get(name, {}).get("partial"))

    def has_dxt(self, module: str = "POSIX") -> bool:
        return bool(self.dxt.get(DXT_MODULES.get(module, "")))


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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


def read_log(path: str | os.PathLike) -> JobLog:
    """The log at ``path``, checked (see the module's docstring); DarshanLogError otherwise."""
    import darshan

    path = Path(path)
    check_header(path)
    messages: list[str] = []
    try:
        with _captured_stderr() as messages:
            try:
                report = darshan.DarshanReport(str(path), read_all=True)
            finally:
                gc.collect()  # a failed report's handle is closed (and complained about) here, not later
    except Exception as err:  # darshan-util's RuntimeError, or anything its parsing raised
        said = " ".join(messages).replace("\n", " ")[:300]
        raise DarshanLogError(f"{path}: cannot be parsed as a Darshan log ({err}{'; ' + said if said else ''}); "
                              f"expected a complete log written by darshan-runtime 3.x") from None
    said = " ".join(messages).replace("\n", " ")
    modules = {name: {"records": len(report.records.get(name, [])), "bytes": int(info.get("len", 0)),
                      "partial": bool(info.get("partial_flag")), "announced": int(info.get("num_records", 0))}
               for name, info in report.modules.items()}
    cut = [name for name, info in modules.items() if info["bytes"] > 0 and info["records"] < max(info["announced"], 1)]
    if cut:
        util = f"; darshan-util: {said[:200]}" if said else ""
        raise DarshanLogError(f"{path}: cannot be parsed: module{'s' if len(cut) > 1 else ''} {', '.join(cut)} "
                              f"announce data the file does not hold (a log cut short?{util}); "
                              f"expected a complete Darshan log")
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
                 darshan_messages=said)
    check_file_records(log)
    return log


def check_file_records(log: JobLog) -> None:
    """DarshanLogError when the log has no POSIX, MPI-IO or STDIO record of a file (the standard streams left out)."""
    if not any(len(files_of(log, module)) for module in FILE_MODULES):
        present = ", ".join(log.modules) or "none"
        raise DarshanLogError(f"{log.path}: no POSIX, MPI-IO or STDIO records of files (modules in the log: "
                              f"{present}); expected a log of a job with file I/O, recorded with darshan-runtime's "
                              f"POSIX, MPI-IO "
                              f"or STDIO module")


def files_of(log: JobLog, module: str) -> pd.DataFrame:
    """The module's records of files: the standard streams left out (they are the terminal, not storage)."""
    table = log.counters.get(module)
    if table is None:
        return pd.DataFrame()
    return table[~table["file"].isin(STREAMS)]


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


def rank_times(log: JobLog) -> pd.DataFrame:
    """Seconds each of the job's ranks spent in reads, writes and metadata (POSIX and STDIO: MPI-IO's time holds
    the POSIX calls beneath it). A shared file's record (rank -1) is every rank's together: its time is dealt
    evenly over the job's ranks."""
    nprocs = max(log.nprocs, 1)
    times = np.zeros((nprocs, 3))
    for module in ("POSIX", "STDIO"):
        table = files_of(log, module)
        if table.empty:
            continue
        for column, what in enumerate(("read", "write", "meta")):
            seconds = seconds_of(table, module, what).to_numpy()
            ranks = table["rank"].to_numpy()
            times[:, column] += seconds[ranks == -1].sum() / nprocs
            mine = ranks >= 0
            np.add.at(times[:, column], ranks[mine] % nprocs, seconds[mine])
    return pd.DataFrame(times, columns=["read_s", "write_s", "meta_s"]).rename_axis("rank")


def slowest_rank(times: pd.DataFrame) -> dict[str, float]:
    """The slowest rank's read, write and metadata seconds, and their sum (Darshan's I/O-time estimate)."""
    total = times.sum(axis=1)
    if total.empty:
        return {"rank": -1, "read_s": 0.0, "write_s": 0.0, "meta_s": 0.0, "io_s": 0.0}
    rank = int(total.idxmax())
    return {"rank": rank, **{k: float(v) for k, v in times.loc[rank].items()}, "io_s": float(total.max())}
