"""Field I/O on a tier, as ECMWF's FDB stores weather fields: every field an object under a key.

Each task (an MPI rank) writes fields of a fixed size and reads them back through one of two
layouts:

- ``file_per_field``: a field is a file named by its key, landed by write, (fsync), rename, so a
  reader sees a whole version or the previous one (an object store's put);
- ``appended``: a task appends its fields to its own data file and a line ``key offset length``
  to its own index file (FDB's data and index files); a read looks the key up in the writer's index
  and reads that range.

Access patterns (seed 004, ECMWF's DAOS assessment for FDB):

- ``0A``: every task writes N fields to one shared key;
- ``0B``: every task writes N fields, each to its own key;
- ``1``: every task writes N fields to its own keys, barrier, then reads those N fields back;
- ``2B``: half the tasks write one key each N times while the other half read the same keys N
  times, at the same time (each key is written once before the timed part).

Every operation is timed (the library call, open to close: its latency); the global bandwidth of
an operation is all tasks' bytes over the time from the first call's start to the last call's end,
with times taken from a barrier every task leaves together. Rank 0 writes everything to one JSON
file (the raw output, with each operation's latency), parsed by
:func:`parse_fieldio_json`.
"""

from __future__ import annotations

import json
import contextlib
import logging
import os
import re
import shutil
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from ..fsutil import landing
from ..process import RankProgram, rank_program, say_ranks_started
from .common import BenchmarkError, launcher_argv, run_tool, time_limit, tool_failure
from .rows import MiB, BenchmarkOutputError, as_int, make_row, read_json_object, read_text

log = logging.getLogger("cycleio")
PATTERNS = ("0A", "0B", "1", "2B")
TOOL = "cycleio-fieldio"


def tool_version() -> str:
    try:
        from importlib.metadata import version

        return version("cycleio")
    except Exception:  # not installed: running from the source tree
        return "0.1.0"


class FieldStore:
    """Write and read fields by key under ``root``; one instance per task."""

    def __init__(self, root: Path, rank: int, fsync: bool):
        self.root, self.rank, self.fsync = root, rank, fsync

    def write(self, key: str, data: bytes) -> int:
        raise NotImplementedError

    def read(self, key: str, owner: int) -> int:
        raise NotImplementedError

    def close(self) -> None:
        pass


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_all(fd: int, length: int | None = None, offset: int = 0) -> int:
    """Read to the end (or ``length`` bytes from ``offset``); return the bytes read."""
    total, chunk = 0, 4 * MiB
    while length is None or total < length:
        want = chunk if length is None else min(chunk, length - total)
        data = os.pread(fd, want, offset + total)
        if not data:
            break
        total += len(data)
    return total


class FilePerField(FieldStore):
    def path(self, key: str) -> Path:
        return self.root / f"{key}.field"

    def write(self, key: str, data: bytes) -> int:
        final = self.path(key)
        tmp = final.with_name(f".{final.name}.{self.rank}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, data)
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)
        return len(data)

    def read(self, key: str, owner: int) -> int:
        fd = os.open(self.path(key), os.O_RDONLY)
        try:
            return _read_all(fd)
        finally:
            os.close(fd)


class Appended(FieldStore):
    def __init__(self, root: Path, rank: int, fsync: bool):
        super().__init__(root, rank, fsync)
        self.data_fd = os.open(self.data_path(rank), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.index_fd = os.open(self.index_path(rank), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = os.fstat(self.data_fd).st_size

    def data_path(self, rank: int) -> Path:
        return self.root / f"data.{rank}.bin"

    def index_path(self, rank: int) -> Path:
        return self.root / f"index.{rank}.txt"

    def write(self, key: str, data: bytes) -> int:
        offset = self.size
        _write_all(self.data_fd, data)
        if self.fsync:
            os.fsync(self.data_fd)
        self.size += len(data)
        _write_all(self.index_fd, f"{key} {offset} {len(data)}\n".encode())  # the index entry follows its data
        if self.fsync:
            os.fsync(self.index_fd)
        return len(data)

    def lookup(self, key: str, owner: int) -> tuple[int, int]:
        entry = None
        with open(self.index_path(owner), "rb") as index:
            for line in index:
                if line.endswith(b"\n"):  # a line still being written is not an entry yet
                    name, offset, length = line.split()
                    if name.decode() == key:
                        entry = (int(offset), int(length))
        if entry is None:
            raise KeyError(f"field {key!r} is not in the index of task {owner} ({self.index_path(owner)})")
        return entry

    def read(self, key: str, owner: int) -> int:
        offset, length = self.lookup(key, owner)  # the writer's index is read on every call, as a reader must
        fd = os.open(self.data_path(owner), os.O_RDONLY)
        try:
            got = _read_all(fd, length, offset)
        finally:
            os.close(fd)
        if got != length:
            raise OSError(f"short read of field {key!r}: {got} of {length} bytes")
        return got

    def close(self) -> None:
        os.close(self.data_fd)
        os.close(self.index_fd)


# The layouts (config key benchmarks.fieldio.layouts) and the store that writes each.
STORES: dict[str, type[FieldStore]] = {"file_per_field": FilePerField, "appended": Appended}
LAYOUTS = tuple(STORES)


def make_store(layout: str, root: Path, rank: int, fsync: bool) -> FieldStore:
    if layout not in STORES:
        raise ValueError(f"unknown field layout {layout!r}; expected one of: {', '.join(STORES)}")
    return STORES[layout](root, rank, fsync)


def plan(pattern: str, rank: int, size: int, fields: int) -> tuple[list, list[list[tuple[str, str, int]]]]:
    """(untimed setup writes, timed phases) of one task: lists of (op, key, owner rank).

    Phases are separated by barriers.
    """
    own = [f"t{rank}.f{i:05d}" for i in range(fields)]
    if pattern == "0A":
        return [], [[("write", "shared", rank)] * fields]
    if pattern == "0B":
        return [], [[("write", key, rank) for key in own]]
    if pattern == "1":
        return [], [[("write", key, rank) for key in own], [("read", key, rank) for key in own]]
    if pattern == "2B":
        half = size // 2
        if half == 0:
            raise ValueError("access pattern 2B needs at least 2 tasks (half write while half read)")
        if rank < half:
            return [("write", f"pair{rank}", rank)], [[("write", f"pair{rank}", rank)] * fields]
        if rank < 2 * half:
            writer = rank - half
            return [], [[("read", f"pair{writer}", writer)] * fields]
        return [], [[]]  # an odd task out sits this pattern out
    raise ValueError(f"unknown access pattern {pattern!r}; expected one of: {', '.join(PATTERNS)}")


def payload(rank: int, nbytes: int) -> bytes:
    """Seeded bytes per task (incompressible, so no filesystem shortcut)."""
    import numpy as np

    return np.random.default_rng(20211119 + rank).bytes(nbytes)


def run_ranks(directory: Path, patterns: list[str], layouts: list[str], fields: int, field_bytes: int,
              fsync: bool, repetitions: int, out: Path) -> None:
    """The MPI program (every rank runs it): all runs of patterns x layouts x repetitions."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    say_ranks_started(comm)  # the launcher stops waiting for a hung start-up
    rank, size = comm.Get_rank(), comm.Get_size()
    data = payload(rank, field_bytes)
    hosts = comm.gather(socket.gethostname(), root=0)
    runs = []
    for layout in layouts:
        for pattern in patterns:
            setup, phases = plan(pattern, rank, size, fields)
            for rep in range(repetitions):
                root = directory / f"{pattern}-{layout}-rep{rep}"
                if rank == 0:
                    shutil.rmtree(root, ignore_errors=True)
                    root.mkdir(parents=True)
                comm.Barrier()
                store = make_store(layout, root, rank, fsync)
                for _, key, _ in setup:
                    store.write(key, data)
                ops = []
                comm.Barrier()
                t0 = time.perf_counter()
                for index, phase in enumerate(phases):
                    if index:
                        comm.Barrier()
                    for op, key, owner in phase:
                        start = time.perf_counter()
                        nbytes = store.write(key, data) if op == "write" else store.read(key, owner)
                        end = time.perf_counter()
                        if nbytes != field_bytes:
                            raise OSError(f"task {rank}: {op} of field {key!r} moved {nbytes} of {field_bytes} bytes")
                        ops.append((rank, op, key, nbytes, start - t0, end - start))
                store.close()
                gathered = comm.gather(ops, root=0)
                comm.Barrier()
                if rank == 0:
                    rows = [op for task_ops in gathered for op in task_ops]
                    runs.append({
                        "pattern": pattern, "layout": layout, "repetition": rep,
                        "ops": {name: [row[i] for row in rows] for i, name in
                                enumerate(("rank", "op", "key", "bytes", "start_s", "seconds"))},
                    })
                    shutil.rmtree(root, ignore_errors=True)
    if rank == 0:
        result = {
            "tool": TOOL, "version": tool_version(), "tasks": size, "nodes": len(set(hosts)), "hosts": sorted(set(hosts)),
            "directory": str(directory), "fields_per_task": fields, "field_size_bytes": field_bytes, "fsync": fsync,
            "repetitions": repetitions, "patterns": patterns, "layouts": layouts, "runs": runs,
        }
        with landing(out) as tmp:
            tmp.write_text(json.dumps(result) + "\n")


def _rank() -> int:
    try:
        from mpi4py import MPI

        return MPI.COMM_WORLD.Get_rank()
    except Exception:  # noqa: BLE001 - only for the error message
        return 0


def rank_main(args) -> int:
    """Entry of ``cycleio fieldio-rank``: run, and on any error abort every rank with the reason."""
    try:
        run_ranks(Path(args.dir), args.patterns, args.layouts, args.fields, args.field_size, args.fsync,
                  args.repetitions, Path(args.out))
    except BaseException as err:  # noqa: BLE001 - one failed rank must not leave the others at a barrier
        traceback.print_exc(file=sys.stderr)
        message = f"cycleio fieldio: error: task {_rank()}: {err}"
        print(message, file=sys.stderr, flush=True)
        # also in a file: the launcher may stop forwarding the ranks' output once one aborts
        with contextlib.suppress(OSError):
            rank_error_file(Path(args.out), _rank()).write_text(message + "\n")
        from mpi4py import MPI

        if MPI.COMM_WORLD.Get_size() > 1:
            MPI.COMM_WORLD.Abort(1)
        return 1
    return 0


def rank_error_file(out: Path, rank: int) -> Path:
    return out.with_name(f"{out.name}.rank{rank}.error.txt")


def started_file(out: Path) -> Path:
    """What rank 0 touches once every rank is past MPI's start-up (process.say_ranks_started)."""
    return out.with_name(f"{out.name}.started")


def rank_command(launcher: list[str], directory: Path, patterns, layouts, fields: int, field_bytes: int,
                 fsync: bool, repetitions: int, out: Path) -> RankProgram:
    program = rank_program("cycleio", "fieldio-rank", "--dir", str(directory), "--patterns", *map(str, patterns),
                           "--layouts", *layouts, "--fields", str(fields), "--field-size", str(field_bytes),
                           "--fsync" if fsync else "--no-fsync", "--repetitions", str(repetitions), "--out", str(out),
                           started=started_file(out))
    return RankProgram(argv=[*launcher, *program.argv], env=program.env)


def run_fieldio(directory: Path, spec, tasks: int, repetitions: int, launcher: str, raw_dir: Path, name: str,
                label: str = "[fieldio]") -> list[dict]:
    """Launch the field-I/O program on ``tasks`` ranks through the launcher; return parsed rows."""
    directory.mkdir(parents=True, exist_ok=True)
    out = raw_dir / f"{name}.json"
    command = rank_command(launcher_argv(launcher, tasks), directory, spec.patterns, spec.layouts,
                           spec.fields_per_task, spec.field_size_bytes, spec.fsync, repetitions, out)
    log.info("%s patterns %s, layouts %s: %d fields of %d bytes per task, fsync %s, %d repetitions", label,
             ",".join(spec.patterns), ",".join(spec.layouts), spec.fields_per_task, spec.field_size_bytes,
             spec.fsync, repetitions)
    calls = 2 * tasks * spec.fields_per_task * len(spec.patterns) * len(spec.layouts) * repetitions  # writes, reads
    started = started_file(out)
    started.unlink(missing_ok=True)  # an earlier run's
    try:
        run = run_tool("field I/O", command.argv, raw_dir, name, time_limit(calls * spec.field_size_bytes, calls),
                       env=command.env, ranks=(tasks, started))
    finally:
        started.unlink(missing_ok=True)
    if run.returncode != 0:
        errors = sorted(out.parent.glob(rank_error_file(out, 0).name.replace(".rank0.", ".rank*.")))
        raise tool_failure("field I/O", run, output=errors[0] if errors else None)
    try:
        rows = parse_fieldio_json(out)
    except BenchmarkOutputError as err:
        raise BenchmarkError(str(err)) from None
    for row in rows:
        rate = f"{row['bw_MiB_per_s']:.1f} MiB/s" if row["bw_MiB_per_s"] is not None else "-"
        log.info("%s %s %s rep %d: %s %s, mean latency %.3f ms", label, row["job"], row["api"], row["repetition"],
                 row["operation"], rate, (row["latency_s"] or 0) * 1e3)
    return rows


def parse_fieldio_json(path: str | Path) -> list[dict[str, Any]]:
    """Parse the JSON output of ``cycleio fieldio`` into rows.

    One ``aggregate="rep"`` row per run (access pattern x layout x repetition) and operation:
    ``job`` is the access pattern ("0A", "0B", "1", "2B"), ``api`` the layout
    ("file_per_field", "appended"), ``bw_MiB_per_s`` the global bandwidth (all tasks' bytes over
    the first call's start to the last call's end), ``ops_per_s`` calls per second over the same
    time, ``latency_s`` the mean time of one call, ``seconds`` that global time, ``bytes`` all
    tasks' bytes.  Each call's own latency stays in the file.
    """
    path = Path(path)
    data = read_json_object(path, "field I/O", " (the run failed before writing results)")
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
            rows.append(make_row(
                source=path.name, tool=TOOL, tool_version=data.get("version"),
                api=run.get("layout"), job=str(run.get("pattern")), operation=operation, aggregate="rep",
                repetition=as_int(run.get("repetition")), repetitions=as_int(data.get("repetitions")),
                tasks=as_int(data.get("tasks")), nodes=as_int(data.get("nodes")), file_per_proc=None, random=False,
                transfer_size_bytes=as_int(data.get("field_size_bytes")),
                block_size_bytes=as_int(data.get("field_size_bytes")),
                segments=as_int(data.get("fields_per_task")), direct_io=False, fsync=bool(data.get("fsync")),
                reorder=None, stonewall_s=None,
                bw_MiB_per_s=nbytes / MiB / wall if wall > 0 else None,
                ops_per_s=len(picked) / wall if wall > 0 else None,
                latency_s=sum(ops["seconds"][i] for i in picked) / len(picked),
                seconds=wall, bytes=nbytes,
            ))
    if not rows:
        raise BenchmarkOutputError(f"{path}: field I/O output has no operations")
    return rows


parse = parse_fieldio_json


def guess_can_open(path: str | Path, text: str | None = None) -> bool:
    """The JSON that ``cycleio fieldio`` writes, judged by content."""
    text = read_text(Path(path)) if text is None else text
    return bool(re.search(r'"tool"\s*:\s*"cycleio-fieldio"', text.lstrip()[:4000]))
