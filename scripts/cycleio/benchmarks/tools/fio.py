"""fio: the command lines that stand for IOR and mdtest where they are absent (a bandwidth pattern,
a metadata pattern, a replay), its JSON output to rows, its version, and what ``cycleio parse``
needs to recognise its outputs.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...units import size_or_none
from ...process import run_command
from ..rows import MiB, BenchmarkOutputError, as_bool, as_int, make_row, num, read_json_object, read_text
from ..specs import IOPattern, MetadataPattern

NAME = "fio"
LABEL = "fio"
ENGINES = {"POSIX": "psync", "MMAP": "mmap"}  # the IOR APIs fio can stand for


# A writing job leaves the file's pages alone. fio's default (invalidate=1) drops the pages of a job's whole region as
# it opens the file; on a file another job is writing (one shared file) that walk follows the other job's new pages
# and holds the opening job until the other stops: of two jobs writing a shared file on ext4 for 0.3 s, one wrote
# 600 MiB and the other one block in half the runs, so the phase timed one writer.
WRITE_NO_INVALIDATE = "--invalidate=0"


def io_command(fio: str, pattern: IOPattern, tasks: int, directory: Path, json_out: Path) -> list[str]:
    """fio's equivalent of the IOR pattern bounded by bytes: ``tasks`` jobs write, then (stonewall) read back.

    File per process: each job its own file of block x segments bytes. Shared file: job k writes
    IOR's layout, block k of every segment (fio zones: a block, then skip the other tasks' blocks).
    A pattern bounded by time runs its phases apart: :func:`io_write_command`, :func:`io_read_command`.
    """
    argv = _io_argv(fio, pattern, tasks, directory, json_out) + _layout(pattern, tasks, pattern.bytes_per_task)
    if pattern.stonewall_s > 0:
        argv.append(f"--runtime={_milliseconds(pattern.stonewall_s)}")
    rw_write, rw_read = _rw(pattern)
    argv += ["--name=write", f"--rw={rw_write}", WRITE_NO_INVALIDATE] + (["--end_fsync=1"] if pattern.fsync else [])
    # IOR's reordering makes a task read what another wrote, so reads miss the writer's page cache
    # (on other nodes); fio stands for it by dropping the files' pages before reading
    argv += ["--name=read", "--stonewall", f"--rw={rw_read}", f"--invalidate={int(reads_from_storage(pattern))}"]
    return argv


def io_write_command(fio: str, pattern: IOPattern, tasks: int, directory: Path, json_out: Path) -> list[str]:
    """The write phase of a pattern bounded by time: each job writes until ``stonewall_s`` is up (or its bytes,
    block x segments, are written), its file fsynced at the end. The jobs report one by one (no group
    reporting), so that the read phase reads what each wrote (:func:`written_per_job`, :func:`io_read_command`);
    :func:`group_jobs` adds them up."""
    argv = [word for word in _io_argv(fio, pattern, tasks, directory, json_out) if word != "--group_reporting"]
    argv += _layout(pattern, tasks, pattern.bytes_per_task)
    argv += [f"--runtime={_milliseconds(pattern.stonewall_s)}", "--name=write", f"--rw={_rw(pattern)[0]}",
             WRITE_NO_INVALIDATE]
    return argv + (["--end_fsync=1"] if pattern.fsync else [])


# Passes a time-bounded read may make over what was written; the time ends it long before.
READ_PASSES = 1_000_000


def io_read_command(fio: str, pattern: IOPattern, directory: Path, json_out: Path, written: list[int]) -> list[str]:
    """The read phase of a pattern bounded by time: job k reads what job k of the write phase wrote (``written``,
    bytes per job), in its layout, pass after pass until ``stonewall_s`` is up. One job section per task, as
    their sizes differ (reported together); never more than was written, or fio would first lay out (write) a
    file shorter than its job's size. Where the reads come from storage (:func:`reads_from_storage`) fio drops
    the files' pages as it opens them for each pass."""
    n, block, transfer = len(written), pattern.block_size_bytes, pattern.transfer_size_bytes
    argv = [word for word in _io_argv(fio, pattern, 1, directory, json_out) if word != "--numjobs=1"]
    argv += [f"--runtime={_milliseconds(pattern.stonewall_s)}", f"--loops={READ_PASSES}", f"--rw={_rw(pattern)[1]}",
             f"--invalidate={int(reads_from_storage(pattern))}"]
    for job, nbytes in enumerate(written):
        blocks = nbytes // block
        if nbytes < transfer:
            continue  # a job the others crowded out: nothing of its own to read
        argv.append("--name=read")
        if pattern.file_per_proc:
            argv += [f"--filename=cycleio.{job}", f"--size={nbytes // transfer * transfer}"]
        elif n == 1 or blocks == 0:
            argv += ["--filename=shared.dat", f"--offset={job * block}", f"--size={nbytes // transfer * transfer}"]
        else:  # its blocks of IOR's segments: a block, then the other tasks' blocks
            argv += ["--filename=shared.dat", f"--offset={job * block}", f"--size={(blocks - 1) * n * block + block}",
                     f"--io_size={blocks * block}", "--zonemode=strided", f"--zonerange={block}",
                     f"--zonesize={block}", f"--zoneskip={(n - 1) * block}"]
    return argv


CROWDED_OUT = 0.5  # a job of a write phase that wrote less than this share of the busiest job's bytes


def io_fill_command(fio: str, pattern: IOPattern, directory: Path, json_out: Path,
                    written: list[int], target: int | None = None) -> list[str] | None:
    """The wear-out of a write phase bounded by time, untimed (IOR's ``-O stoneWallingWearOut=1``): each job that
    wrote less than the job that wrote most (``written``, bytes per job) writes on, in its own layout, up to as
    much, fsynced as the pattern is; None when no job was crowded out (wrote less than ``CROWDED_OUT`` of the
    busiest). The read phase reads each job's region pass after pass until its time is up, so regions of
    somewhat different sizes read alike; but a job the others crowded out of a shared file (a tier that serves
    its writers unevenly) would leave the reads to one task. The write phase's rows
    stay what the time bounded; the fill's output only shows that it was done. Over several nodes the busiest
    job of them all sets ``target`` (:func:`fill_target` of each node's jobs, the largest), as IOR's wear-out
    spans every rank: each node fills its own jobs, in its own folder."""
    n, block, transfer = len(written), pattern.block_size_bytes, pattern.transfer_size_bytes
    target = fill_target(pattern, written) if target is None else target
    short = [(job, nbytes // transfer * transfer) for job, nbytes in enumerate(written) if nbytes < target]
    if not written or not any(nbytes < CROWDED_OUT * target for nbytes in written):
        return None
    argv = [word for word in _io_argv(fio, pattern, 1, directory, json_out) if word != "--numjobs=1"]
    # opened as they are: fio would lay out (rewrite from zero) a file shorter than a job's region
    argv += [f"--rw={_rw(pattern)[0]}", "--create_on_open=1", WRITE_NO_INVALIDATE] + (
        ["--end_fsync=1"] if pattern.fsync else [])
    target_blocks = target // block
    for job, done in short:
        argv.append("--name=fill")
        if pattern.file_per_proc:
            argv += [f"--filename=cycleio.{job}", f"--offset={done}", f"--size={target - done}"]
        elif target_blocks == 0:  # every job within its one block
            argv += ["--filename=shared.dat", f"--offset={job * block + done}", f"--size={target - done}"]
        else:  # its blocks of IOR's segments from the first it did not write whole
            first = done // block
            blocks = target_blocks - first
            argv += ["--filename=shared.dat", f"--offset={job * block + first * n * block}",
                     f"--size={(blocks - 1) * n * block + block}", f"--io_size={blocks * block}",
                     "--zonemode=strided", f"--zonerange={block}", f"--zonesize={block}", f"--zoneskip={(n - 1) * block}"]
    return argv


def filled(pattern: IOPattern, written: list[int], target: int | None = None) -> list[int]:
    """Bytes per job once :func:`io_fill_command` ran (not None): every job as much as the one that wrote most."""
    target = fill_target(pattern, written) if target is None else target
    return [max(nbytes, target) for nbytes in written]


def fill_target(pattern: IOPattern, written: list[int]) -> int:
    """What every job has once filled: the busiest job's whole transfers; in IOR's blocks of a shared file, its
    whole blocks (a job's region there is whole blocks apart), unless it wrote less than one."""
    most = max(written, default=0)
    block = pattern.block_size_bytes
    if not pattern.file_per_proc and len(written) > 1 and most >= block:
        return most // block * block
    return most // pattern.transfer_size_bytes * pattern.transfer_size_bytes


def written_per_job(path: Path) -> list[int]:
    """Bytes each job of a write phase (:func:`io_write_command`'s output) wrote, in job order."""
    data = read_json_object(Path(path), "fio")
    return [int((job.get("write") or {}).get("io_bytes") or 0) for job in data.get("jobs") or []]


def group_jobs(rows: list[dict]) -> dict:
    """Rows of jobs that reported one by one (:func:`io_write_command`) as fio's group report has them: their
    bytes and I/Os added up over the seconds of the longest job, latency the mean over every I/O."""
    seconds = max(row["seconds"] for row in rows)
    nbytes = sum(row["bytes"] for row in rows)
    ios = [(row["ops_per_s"] or 0) * row["seconds"] for row in rows]
    latencies = [(row["latency_s"], n) for row, n in zip(rows, ios) if row["latency_s"] is not None]
    weight = sum(n for _, n in latencies)
    return {**rows[0], "aggregate": "group", "tasks": len(rows), "bytes": nbytes, "seconds": seconds,
            "bw_MiB_per_s": nbytes / MiB / seconds if seconds else None,
            "ops_per_s": sum(ios) / seconds if seconds else None,
            "latency_s": sum(lat * n for lat, n in latencies) / weight if weight else None}


def _io_argv(fio: str, pattern: IOPattern, tasks: int, directory: Path, json_out: Path) -> list[str]:
    # clock_gettime: fio's default clock (the CPU's) is calibrated first, 70 ms of every run on the README's VM,
    # and a pattern bounded by time runs fio twice per repetition
    argv = [fio, "--output-format=json", f"--output={json_out}", f"--directory={directory}",
            f"--ioengine={ENGINES[pattern.api]}", f"--bs={pattern.transfer_size_bytes}", f"--numjobs={tasks}",
            "--group_reporting", "--fallocate=none", "--clocksource=clock_gettime"]
    return argv + (["--direct=1"] if pattern.direct_io else [])


def _layout(pattern: IOPattern, n: int, bytes_per_task: int) -> list[str]:
    """Where each of ``n`` jobs writes or reads its ``bytes_per_task``: its own file, or IOR's blocks of a shared
    file."""
    block = pattern.block_size_bytes
    if pattern.file_per_proc:
        return ["--filename_format=cycleio.$jobnum", f"--size={bytes_per_task}"]
    segments = bytes_per_task // block
    if n == 1:
        return ["--filename=shared.dat", f"--size={bytes_per_task}"]
    if segments <= 1:
        return ["--filename=shared.dat", f"--size={min(bytes_per_task, block)}", f"--offset_increment={block}"]
    return ["--filename=shared.dat", f"--size={(segments - 1) * n * block + block}", f"--io_size={segments * block}",
            f"--offset_increment={block}", "--zonemode=strided", f"--zonerange={block}", f"--zonesize={block}",
            f"--zoneskip={(n - 1) * block}"]


def _rw(pattern: IOPattern) -> tuple[str, str]:
    return ("randwrite", "randread") if pattern.random else ("write", "read")


def _milliseconds(seconds: float) -> str:
    return f"{int(round(seconds * 1000))}ms"


def reads_from_storage(pattern: IOPattern) -> bool:
    """Whether fio's reads of an io pattern come from storage: the pattern reorders tasks (IOR's -C or
    -Z, emulated by dropping the page cache) or bypasses the cache (O_DIRECT)."""
    return pattern.reorder != "none" or pattern.direct_io


def metadata_command(fio: str, pattern: MetadataPattern, tasks: int, directory: Path, json_out: Path) -> list[str]:
    """fio's equivalent of mdtest on files: create, then stat, then remove every file. The stat and remove jobs
    open nothing ahead (``--create_on_open=1``): else fio lays the files out again before each, at ``filesize``
    and fsynced one by one (the create job leaves them empty, as mdtest does), seconds of untimed work per point."""
    name_format = "d$jobnum/f.$filenum" if pattern.unique_dir else "f.$jobnum.$filenum"
    return [fio, "--output-format=json", f"--output={json_out}", f"--directory={directory}", f"--numjobs={tasks}",
            "--group_reporting", f"--nrfiles={pattern.files_per_task}", "--filesize=4k", "--bs=4k",
            "--openfiles=1", f"--filename_format={name_format}",
            "--name=create", "--ioengine=filecreate", "--rw=write", "--create_on_open=1", "--fallocate=none",
            "--name=stat", "--stonewall", "--ioengine=filestat", "--rw=read", "--create_on_open=1",
            "--name=remove", "--stonewall", "--ioengine=filedelete", "--rw=read", "--create_on_open=1"]


# fio reads an iolog's file names with sscanf("%256s"): at most 256 characters, none of them white space
IOLOG_NAME_LIMIT = 256


class IologNameError(ValueError):
    """A file a replay would name in fio's iolog that the iolog cannot name."""


@dataclass(frozen=True)
class ReplayRun:
    """One fio job that replays a step's files in turn from an iolog (``iolog``, written by the command's function):
    fio runs in ``cwd``, which the iolog's file names are relative to."""

    argv: list[str]
    cwd: Path
    iolog: Path


def replay_command(fio: str, classes: list[dict], directory: Path, json_out: Path, op: str = "write",
                   loops: int = 1) -> ReplayRun:
    """One task writes (``op`` write) the files of each size class in turn (``classes``: files,
    file_bytes, transfer_bytes, cold), fsync before close, as the steps land files; or reads (``op`` read)
    files laid out before (``replay_layout_command``) in the same order: from the page cache as a step
    reads what an earlier step just wrote, or from storage where the caller dropped a ``cold`` class's pages
    before (see pairedspecs.replay_specs). ``loops``: reads of pages in memory read every file that many times
    over (see paired.read_loops). One fio job replays it all from an iolog (:func:`_replay_run`)."""
    return _replay_run(fio, [(op, _class_files(classes))] * (loops if op == "read" else 1), Path(directory), json_out)


def replay_own_read_command(fio: str, classes: list[dict], json_out: Path, loops: int = 1) -> ReplayRun:
    """Reads, as ``replay_command`` does, files that exist already: each class's ``paths``
    (pairedspecs.own_read_files), each file whole, never creating or extending one."""
    paths = [(Path(path).absolute(), group["transfer_bytes"]) for group in classes for path in group["paths"]]
    root = Path(os.path.commonpath([path.parent for path, _ in paths]))
    files = [(os.path.relpath(path, root), path.stat().st_size, transfer) for path, transfer in paths]
    return _replay_run(fio, [("read", files)] * loops, root, json_out)


def replay_layout_command(fio: str, classes: list[dict], directory: Path, json_out: Path) -> ReplayRun:
    """Writes the files a read replay reads, fsynced (so a cold class's pages can be dropped), then reads the warm
    classes' files once: none of it is timed.

    The read pass is there because a step's inputs were read once before it reads them (staging's verify
    checksums them, or the job that wrote them did), and the first read of pages just written is not like
    later ones: on the README's VM 2 GB/s against 9 to 17 GB/s (ext4, files in the page cache)."""
    warm = [group if not group.get("cold") else {**group, "files": 0} for group in classes]
    return _replay_run(fio, [("write", _class_files(classes)), ("read", _class_files(warm))], Path(directory),
                       json_out)


def _class_files(classes: list[dict]) -> list[tuple[str, int, int]]:
    """The replay's files of each size class, in turn: (name, bytes, bytes per call)."""
    return [(f"replay.{index}.{number}", group["file_bytes"], group["transfer_bytes"])
            for index, group in enumerate(classes) for number in range(group["files"])]


def _replay_run(fio: str, passes: list[tuple[str, list[tuple[str, int, int]]]], cwd: Path,
                json_out: Path) -> ReplayRun:
    """fio doing ``passes`` (an operation and its files: name relative to ``cwd``, bytes, bytes per call) one file
    after the other from a version 2 iolog beside ``json_out``: each file opened, read or written whole in calls
    of its transfer (the last one what is left), fsynced when written, closed. One job, where one fio job per
    size class, one after another, made fio wait about 0.3 s to start each (its 100 ms polls): a replay of
    three size classes took half again as long as its timed I/O. From the log the same files write at the same
    rate (bench/FINDINGS.md)."""
    names = {name for _, files in passes for name, _, _ in files}
    lines = ["fio version 2 iolog"]
    for name in sorted(names):
        if len(name) > IOLOG_NAME_LIMIT or any(char.isspace() for char in name):
            raise IologNameError(f"fio's iolog cannot name {name!r} (at most {IOLOG_NAME_LIMIT} characters, no "
                                 f"white space), relative to {cwd}")
        lines.append(f"{name} add")
    for op, files in passes:
        for name, size, transfer in files:
            lines.append(f"{name} open")
            lines += [f"{name} {op} {offset} {min(transfer, size - offset)}" for offset in range(0, size, transfer)]
            lines += [f"{name} sync 0 0"] if op == "write" else []
            lines.append(f"{name} close")
    json_out = Path(json_out).absolute()
    iolog = json_out.with_suffix(".iolog")
    iolog.write_text("\n".join(lines) + "\n")
    # a written file's pages stay, as the step keeps its files' (fio drops a file's pages at open unless told not
    # to); a read from storage finds its pages dropped by the caller, outside fio's timed run
    argv = [fio, "--output-format=json", f"--output={json_out}", "--name=replay", "--ioengine=psync",
            f"--read_iolog={iolog}", "--replay_no_stall=1", "--invalidate=0", "--fallocate=none"]
    writes = any(op == "write" for op, _ in passes)
    return ReplayRun(argv + ([] if writes else ["--allow_file_create=0"]), cwd, iolog)


def _mean_call(io_bytes: int | None, calls: int | None) -> int | None:
    """Bytes per call of a job that gives no ``bs`` (one replaying an iolog: each call its own length)."""
    return io_bytes // calls if io_bytes and calls else None


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


_FIO_META_ENGINES = {
    "filecreate": "create", "filestat": "stat", "filedelete": "remove",
    "dircreate": "dir_create", "dirstat": "dir_stat", "dirdelete": "dir_remove",
}


def _fio_latency_s(op: dict[str, Any]) -> float | None:
    """Mean latency (s) of a fio op: lat_ns (total) if sampled, else clat_ns."""
    for key in ("lat_ns", "clat_ns"):
        stats = op.get(key)
        if isinstance(stats, dict) and (stats.get("N") or 0) > 0 and num(stats.get("mean")):
            return float(stats["mean"]) / 1e9
    for key, scale in (("lat", 1e6), ("clat", 1e6)):  # fio < 3: microseconds
        stats = op.get(key)
        if isinstance(stats, dict) and num(stats.get("mean")):
            return float(stats["mean"]) / scale
    return None


def parse(path: str | Path) -> list[dict[str, Any]]:
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
    data = read_json_object(path, "fio")
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
        if as_int(job.get("error")):
            code = as_int(job["error"]) or 0
            raise BenchmarkOutputError(
                f"{path}: fio job {name!r} failed with error {code} ({os.strerror(code)})")
        numjobs = as_int(opts.get("numjobs")) or 1
        siblings = sum(1 for j in jobs if isinstance(j, dict)
                       and j.get("jobname") == name and j.get("groupid") == job.get("groupid"))
        grouped = numjobs > 1 and siblings < numjobs
        engine = opts.get("ioengine")
        rw = str(opts.get("rw", opts.get("readwrite", "read")))
        meta_op = _FIO_META_ENGINES.get(str(engine)) if engine else None
        fsync = any(as_bool(opts.get(k)) for k in ("end_fsync", "fsync", "fdatasync", "fsync_on_close"))
        direct = as_bool(opts.get("direct"))
        if direct is None and "buffered" in opts:
            direct = not as_bool(opts.get("buffered"))
        for op_name in ("read", "write", "trim"):
            op = job.get(op_name)
            if not isinstance(op, dict):
                continue
            io_bytes = as_int(op.get("io_bytes"))
            if io_bytes is None:
                io_kib = num(op.get("io_kbytes"))
                io_bytes = int(io_kib * 1024) if io_kib is not None else None
            if not io_bytes and not as_int(op.get("total_ios")):
                continue
            bw_bytes = num(op.get("bw_bytes"))
            if bw_bytes is None and num(op.get("bw")) is not None:
                bw_bytes = float(op["bw"]) * 1024  # fio's bw is KiB/s
            runtime_ms = num(op.get("runtime"))
            rows.append(make_row(
                source=path.name, tool="fio", tool_version=version, api=engine, job=name,
                operation=meta_op or op_name, aggregate="group" if grouped else "job", repetition=0,
                tasks=numjobs if grouped else 1, nodes=1,
                file_per_proc="filename" not in opts,
                random=rw.startswith("rand"),
                transfer_size_bytes=_fio_bs_for(opts.get("bs", opts.get("blocksize")), op_name)
                or _mean_call(io_bytes, as_int(op.get("total_ios"))),
                block_size_bytes=size_or_none(opts.get("size")),
                direct_io=bool(direct), fsync=fsync,
                stonewall_s=_fio_seconds(opts.get("runtime")),
                bw_MiB_per_s=None if meta_op else (bw_bytes / MiB if bw_bytes is not None else None),
                ops_per_s=num(op.get("iops")),
                latency_s=_fio_latency_s(op),
                seconds=runtime_ms / 1000.0 if runtime_ms is not None else None,
                bytes=None if meta_op else io_bytes,
            ))
    if not rows:
        raise BenchmarkOutputError(f"{path}: fio JSON output has no job with I/O done")
    return rows


def guess_can_open(path: str | Path, text: str | None = None) -> bool:
    """fio's JSON output (``--output-format=json``), judged by content."""
    text = read_text(Path(path)) if text is None else text
    head = text.lstrip()[:4000]
    return '"fio version"' in head or bool(re.search(r'"jobs"\s*:\s*\[', head) and '"job options"' in text)


def unsupported(text: str) -> str | None:
    """What a fio file that this package does not read is, or None."""
    if re.search(r"^\S+: \(groupid=\d+", text, re.M):
        return "fio normal (text) output; run fio with --output-format=json"
    return None


def version(path: str) -> str:
    """``fio --version`` without its ``fio-`` prefix, e.g. 3.33."""
    result = run_command([path, "--version"], timeout=60, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True)
    return result.stdout.strip().removeprefix("fio-")
