"""One replay rank (``python -m cycleio.darshan.rank --plan DIR`` under the MPI launcher).

It reads its operations (``rankN.npz`` of the plan's folder: file, kind, offset, length, gap_s), waits for
every rank, then issues them in order: reads with ``preadv`` into one buffer, writes with ``pwrite`` from
it, opens (a reopen: the file's descriptor is closed and opened again), stats, seeks and fsyncs; a gap
(timing ``logged``) is slept before its call, as the job's compute. Each call is timed alone. The kernel's
counters of this process (/proc/self/io) are read right before the first call and right after the
files are closed, so they count what the replay did and nothing of the start-up. Rank 0 logs progress
every 10 s (one write each, left out of the kernel's count) and writes every rank's counts to
``result.json`` of the plan's folder, landed atomically.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from .runtime import preload_rank
from ..fsutil import write_json_atomic
from ..kernelio import read_proc_io
from ..process import say_ranks_started
from .plan import FSYNC, OPEN, READ, SEEK, STAT, WRITE

PROGRESS_S = 10.0
MAX_IO = 0x7FFFF000  # Linux moves at most this much in one read or write call


def replay_rank(spec: dict, arrays: dict[str, np.ndarray], rank: int, say=None, comm=None) -> dict:
    """Issue one rank's operations; return its counts per file and direction, its metadata, and the kernel's.

    The files of the MPI-IO layer (``spec["mpiio"]``; ``comm`` is then the MPI communicator) are replayed after
    the others, one at a time: opened by every rank together, each rank's independent calls, then its collective
    calls in rounds (a rank without a call in a round joins it with an empty one), per direction in the order
    the job began them, then closed together."""
    root = Path(spec["dir"])
    paths = [str(root / f["path"]) for f in spec["files"]]
    nfiles = len(paths)
    mpiio = {int(k): v for k, v in spec.get("mpiio", {}).items()}
    through_mpiio = np.isin(arrays["file"], list(mpiio)) if mpiio else np.zeros(len(arrays["file"]), dtype=bool)
    collective_ops = {f: arrays["coll"][arrays["file"] == f] for f in mpiio} if mpiio else {}
    mpiio_ops = {f: {k: arrays[k][arrays["file"] == f] for k in ("kind", "offset", "length", "gap_s")}
                 for f in mpiio}
    arrays = {k: v[~through_mpiio] for k, v in arrays.items()}
    files, kinds, offsets = arrays["file"].tolist(), arrays["kind"].tolist(), arrays["offset"].tolist()
    lengths, gaps = arrays["length"].tolist(), arrays["gap_s"].tolist()
    largest = max([0, *lengths, *(int(o["length"].max()) for o in mpiio_ops.values() if len(o["length"]))])
    buffer = bytearray(min(largest, MAX_IO) or 1)
    buffer[:] = (bytes(range(256)) * (len(buffer) // 256 + 1))[:len(buffer)]
    view = memoryview(buffer)
    done = {READ: [0] * nfiles, WRITE: [0] * nfiles}
    calls = {READ: [0] * nfiles, WRITE: [0] * nfiles}
    seconds = {READ: [0.0] * nfiles, WRITE: [0.0] * nfiles}
    meta_calls, meta_s, gap_s = 0, 0.0, 0.0
    said_bytes, said_calls = 0, 0  # the progress lines: the kernel counts them as writes, the window leaves them out
    progress_s = float(spec.get("progress_s", PROGRESS_S))
    fds: dict[int, int] = {}
    flags = os.O_RDWR | os.O_CREAT
    clock = time.perf_counter
    n = len(kinds)
    baseline = read_proc_io()
    before = read_proc_io()  # what reading the counters costs (a few bytes and calls) is this minus baseline
    t_start = time.time()
    t0 = last_said = clock()
    for i in range(n):
        if gaps[i] > 0:
            time.sleep(gaps[i])
            gap_s += gaps[i]
        kind, f = kinds[i], files[i]
        t = clock()
        if kind == WRITE or kind == READ:
            fd = fds.get(f)
            if fd is None:
                fd = fds[f] = os.open(paths[f], flags, 0o644)
                meta_calls += 1
            left, offset, moved = lengths[i], offsets[i], 0
            while True:
                piece = min(left, MAX_IO)
                if kind == WRITE:
                    got = os.pwrite(fd, view[:piece], offset)
                else:
                    got = os.preadv(fd, [view[:piece]], offset)
                moved += got
                left -= got
                offset += got
                if left <= 0 or got <= 0:
                    break
            dt = clock() - t
            done[kind][f] += moved
            calls[kind][f] += 1
            seconds[kind][f] += dt
        else:
            if kind == OPEN:
                if f in fds:
                    os.close(fds.pop(f))
                fds[f] = os.open(paths[f], flags, 0o644)
            elif kind == STAT:
                try:
                    os.stat(paths[f])
                except FileNotFoundError:  # a stat the job made before the file was there: a call all the same
                    pass
            elif kind == SEEK:
                fd = fds.get(f)
                if fd is None:
                    fd = fds[f] = os.open(paths[f], flags, 0o644)
                os.lseek(fd, offsets[i], os.SEEK_SET)
            elif kind == FSYNC:
                fd = fds.get(f)
                if fd is None:
                    fd = fds[f] = os.open(paths[f], flags, 0o644)
                os.fsync(fd)
            meta_calls += 1
            meta_s += clock() - t
        if say is not None and t - last_said >= progress_s:
            last_said = t
            said_bytes += say(f"rank {rank}: {i + 1:,} of {n:,} operations in {t - t0:.0f} s")
            said_calls += 1
    t = clock()
    for fd in fds.values():
        os.close(fd)
    meta_s += clock() - t
    for f, how in sorted(mpiio.items()):
        ops = mpiio_ops[f]
        meta, slept = _mpiio_file(comm, paths[f], how, ops, collective_ops[f], view, done, calls, seconds, f)
        meta_s += meta
        meta_calls += 2
        gap_s += slept
    wall = clock() - t0
    after = read_proc_io()
    kernel = None
    if baseline is not None and before is not None and after is not None:
        kernel = (after - before - (before - baseline)).as_dict()
        kernel["wchar"] -= said_bytes
        kernel["syscw"] -= said_calls
    return {"rank": rank, "t_start": t_start, "wall_s": wall, "gap_s": gap_s, "meta_ops": meta_calls + len(fds),
            "meta_s": meta_s, "kernel": kernel,
            # the process's counts as its work began (Python's and MPI's start-up): a job's kernel window leaves them out
            "started": baseline.as_dict() if baseline is not None else None,
            "read_bytes": done[READ], "read_ops": calls[READ], "read_s": seconds[READ],
            "write_bytes": done[WRITE], "write_ops": calls[WRITE], "write_s": seconds[WRITE]}


def _mpiio_file(comm, path: str, how: dict, ops: dict, coll: np.ndarray, view, done, calls, seconds, f: int):
    """One MPI-IO file's calls on this rank (see replay_rank); returns (metadata seconds, seconds slept)."""
    from mpi4py import MPI

    clock = time.perf_counter
    t = clock()
    handle = MPI.File.Open(comm, path, MPI.MODE_RDWR | MPI.MODE_CREATE)
    meta = clock() - t
    slept = 0.0
    status = MPI.Status()
    for direction in how["order"]:
        kind = READ if direction == "read" else WRITE
        mine = ops["kind"] == kind
        for together in (0, 1):
            picked = np.flatnonzero(mine & (coll == together))
            rounds = int(how["rounds"][direction]) if together else len(picked)
            for k in range(rounds):
                if k < len(picked):
                    i = picked[k]
                    if ops["gap_s"][i] > 0:
                        time.sleep(ops["gap_s"][i])
                        slept += ops["gap_s"][i]
                    offset, buffer = int(ops["offset"][i]), [view[: int(ops["length"][i])], MPI.BYTE]
                else:
                    offset, buffer = 0, [view[:0], MPI.BYTE]  # this rank's part of a round it has no call in
                t = clock()
                if kind == WRITE:
                    (handle.Write_at_all if together else handle.Write_at)(offset, buffer, status)
                else:
                    (handle.Read_at_all if together else handle.Read_at)(offset, buffer, status)
                dt = clock() - t
                if k < len(picked):
                    done[kind][f] += status.Get_count(MPI.BYTE)
                    calls[kind][f] += 1
                    seconds[kind][f] += dt
    t = clock()
    handle.Close()
    return meta + clock() - t, slept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="one rank of `cycleio darshan replay`")
    parser.add_argument("--plan", required=True)
    args = parser.parse_args(argv)
    preload_rank("replay")  # in a job under Darshan: this rank too, before MPI starts
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    say_ranks_started(comm)  # the launcher stops waiting for a hung start-up
    rank, size = comm.Get_rank(), comm.Get_size()
    plan = Path(args.plan)
    error = None
    result = None
    try:
        spec = json.loads((plan / "spec.json").read_text())
        if size != spec["nranks"]:
            raise RuntimeError(f"started with {size} ranks, the plan is for {spec['nranks']}")
        with np.load(plan / f"rank{rank}.npz") as data:
            arrays = {k.removeprefix("op_"): data[k] for k in data.files}
    except Exception as err:  # every rank must reach the barrier, or the others wait for ever
        error = f"{type(err).__name__}: {err}"
    errors = comm.allgather(error)
    if any(errors):
        if rank == 0:
            print(f"replay rank {errors.index(next(e for e in errors if e))}: {next(e for e in errors if e)}",
                  file=sys.stderr, flush=True)
        return 1
    comm.Barrier()

    def say(text: str) -> int:  # one write on stdout, which the parent sends to its log as the replay goes
        line = f"{time.strftime('%Y-%m-%d %H:%M:%S')} INFO replay {text}\n".encode()
        os.write(1, line)
        return len(line)

    try:
        result = replay_rank(spec, arrays, rank, say if rank == 0 else None, comm)
    except (OSError, MPI.Exception) as err:
        error = f"rank {rank}: {err}"
    results = comm.gather(result if error is None else {"error": error}, root=0)
    if rank == 0:
        failed = [r["error"] for r in results if "error" in r]
        if failed:
            print(f"replay failed: {failed[0]}", file=sys.stderr, flush=True)
            return 1
        write_json_atomic(plan / "result.json", {"ranks": results})
    return 0 if error is None else 1


if __name__ == "__main__":
    sys.exit(main())
