"""(8) Shared-file write efficiency: the parallel strategies' MPI-IO MiB/s over fio's with the same tasks, shared file and transfer size.

The forecast's shared files (write strategies ``parallel`` and ``quilt_parallel``, netCDF-4 on parallel
HDF5 through MPI-IO, collective) are written by several ranks at once, so the replay of bench (1)
(fio writing each file from one job) is not their baseline. Here the baseline is what IOR's
shared-file pattern measures (the benchmark's ``hard``-like custom pattern, fio standing in where IOR is
absent): as many fio jobs as ranks wrote each file, one shared file of the same bytes, each job its
contiguous share, in the ranks' own transfer size (the bytes over the storage calls the records count:
a rank's band of a block of levels), fsync at the end. The surrogate's MiB/s is the shared files'
bytes over the time their write records cover (ranks writing at once count once), as in
efficiency.csv, plus the codec work where it is booked apart (serial's ``encode``: a shared file's
codec work runs inside its collective writes); the files written whole by one rank (logs,
coupler.res, fv_core.res.nc) are left out.

Cases: C48 and C96 L127 on disk (ext4 under results/) and /dev/shm, the forecast's history and
restart writes (one restart set) with 2 compute ranks (parallel) and 2 compute ranks + a write group
of 2 (quilt_parallel, 4 ranks on 2 cores), uncompressed as the default study below C384, and
compressed (zlib 1, BitRound 5 bits, as from C384) for parallel: what the collective filtered writes
cost. Serial (rank 0 writes, fio with one job) is the contrast. Compressed history is written in
fewer bytes, so its MiB/s is that of the bytes on storage, codec work included.
The ratio has no goal: on 2 cores HDF5's collective writes share the cores with the ranks' data
generation and MPI, and the forecast's files are small (C48: a few MiB per variable).

Needs the parallel-netCDF stack (scripts/bootstrap-parallel.sh, built here when missing).

Run alone: .venv/bin/python bench/bench_parallel.py [--quick]
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from common import MiB, REPO, row, standalone

sys.path.insert(0, str(REPO / "scripts"))
# As `make bench` runs it: the venv's mpiexec (the mpich wheel's) before Debian's Open MPI one, for the serial case.
os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])

from bench_efficiency import START, arm, tiers, warm_memory  # noqa: E402
from cycleio.intervals import covered_seconds  # noqa: E402
from cycleio.records import read_records  # noqa: E402
from cycleio.runner.job import run_step  # noqa: E402
from cycleio.runner.persistentjobs import run_coldstart  # noqa: E402
from cycleio.config.forecast import Compression  # noqa: E402

ZLIB = Compression(zlib_level=1, quantize_nsd=5)  # the history's compression from C384 up
CASES = [  # (label, strategy, write_component, compression); serial: one writer, the contrast
    ("serial", "serial", {"ranks": 2}, Compression()),
    ("parallel", "parallel", {"ranks": 2}, Compression()),
    ("quilt_parallel", "quilt_parallel", {"ranks": 2, "write_groups": 1, "write_tasks_per_group": 2}, Compression()),
    ("serial, zlib 1 + BitRound 5", "serial", {"ranks": 2}, ZLIB),
    ("parallel, zlib 1 + BitRound 5", "parallel", {"ranks": 2}, ZLIB),
]
# The decomposed files (history and restart tiles): those the ranks write together; the rest are written whole.
DECOMPOSED = ("atmf", "sfcf", ".tile")


def ensure_stack() -> None:
    result = subprocess.run(["bash", str(REPO / "scripts" / "bootstrap-parallel.sh")], capture_output=True, text=True,
                            stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        raise RuntimeError(f"the parallel-netCDF stack could not be built: {(result.stdout + result.stderr)[-1500:]}")


def shared_writes(records: list[dict]) -> dict:
    """The decomposed files' write records of a forecast: bytes, covered seconds, ranks per file, transfer size."""
    by_file = defaultdict(list)
    for r in records:
        if r["phase"] == "run" and r["op"] == "write" and any(key in r["file"] for key in DECOMPOSED):
            by_file[r["file"]].append(r)
    shared = [r for parts in by_file.values() for r in parts]
    if not shared:
        raise RuntimeError("the forecast wrote no history or restart file")
    ranks = statistics.median(len({p["rank"] for p in parts}) for parts in by_file.values())
    transfer = statistics.median(r["bytes"] / max(r["transfers"], 1) for r in shared)
    # serial's codec work is booked apart (``encode``, rank 0's); the shared files' happens inside their writes
    encode = sum(r["seconds"] for r in records if r["phase"] == "run" and r["op"] == "encode")
    return {"bytes": sum(r["bytes"] for r in shared),
            "seconds": encode + covered_seconds([r["t_start"] for r in shared],
                                                [r["t_start"] + r["seconds"] for r in shared]),
            "ranks": int(ranks), "transfer": max(8, int(transfer) // 8 * 8), "files": len(by_file)}


def fio_shared(folder: Path, tasks: int, total: int, transfer: int) -> float:
    """fio's MiB/s: ``tasks`` jobs writing one shared file of ``total`` bytes, each its contiguous share, in
    ``transfer``-byte calls, fsync at the end (IOR's shared-file pattern with one segment)."""
    folder.mkdir(parents=True, exist_ok=True)
    block = max(transfer, total // tasks // transfer * transfer)
    out = folder / "fio.json"
    subprocess.run(["fio", "--name=shared", f"--directory={folder}", "--filename=shared.dat", f"--numjobs={tasks}",
                    f"--size={block}", f"--offset_increment={block}", f"--bs={transfer}", "--rw=write",
                    "--ioengine=psync", "--fallocate=none", "--end_fsync=1", "--group_reporting",
                    "--output-format=json", f"--output={out}"], check=True, capture_output=True)
    rate = json.loads(out.read_text())["jobs"][0]["write"]["bw_bytes"] / MiB
    shutil.rmtree(folder, ignore_errors=True)
    return rate


def measure(resolution: str, tier_name: str, root: Path, work: Path, repeats: int) -> list[dict]:
    base = arm(resolution, tier_name, root)
    run_coldstart(base, work / "cold.jsonl", work / "cold.json")
    samples = []
    for rep in range(repeats):
        for label, strategy, component, compression in CASES:
            settings = replace(base, strategy=strategy, write_component=component, compression=compression)
            out = work / f"fcst.{rep}.{strategy}"
            run_step(settings, START, "fcst", Path(f"{out}.jsonl"), Path(f"{out}.json"))
            done = shared_writes(read_records(f"{out}.jsonl"))
            reference = fio_shared(root / ".fio", done["ranks"], done["bytes"], done["transfer"])
            samples.append({"case": label, "surrogate": done["bytes"] / MiB / done["seconds"], "fio": reference,
                            **done})
    return samples


def run(args) -> list[dict]:
    if not shutil.which("fio"):
        raise RuntimeError("fio is not installed (Debian: apt-get install fio)")
    ensure_stack()
    warm_memory()
    resolutions = getattr(args, "resolutions", None) or (["C48"] if args.quick else ["C48", "C96"])
    repeats = getattr(args, "repeats", None) or (1 if args.quick else 3)
    rows = []
    for resolution in resolutions:
        for tier_name, root in tiers(f"parallel-{os.getpid()}").items():
            work = root.parent / f"{root.name}-records"
            for folder in (root, work):
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir(parents=True)
            try:
                samples = measure(resolution, tier_name, root, work, repeats)
            finally:
                shutil.rmtree(root, ignore_errors=True)
                shutil.rmtree(work, ignore_errors=True)
            for label, *_ in CASES:
                mine = [s for s in samples if s["case"] == label]
                first = mine[0]
                rows.append(row(
                    "shared-file write efficiency", f"{resolution} {tier_name} fcst write ({label})", "write+codec MiB/s",
                    "MiB/s", [s["surrogate"] for s in mine], [s["fio"] for s in mine],
                    [s["surrogate"] / s["fio"] for s in mine], None,
                    notes=(f"fio: {first['ranks']} job(s), one shared file of {first['bytes'] / MiB:.0f} MiB, "
                           f"{first['transfer'] / MiB:.2f} MiB transfers, fsync; the forecast's {first['files']} "
                           f"history and restart files, {first['ranks']} writer rank(s) each; forecast "
                           f"{statistics.median(s['surrogate'] for s in mine):.0f} MiB/s of the bytes on storage")))
    return rows


def options(parser) -> None:
    parser.add_argument("--resolutions", nargs="+", help="instead of C48 and C96 (C48 with --quick)")
    parser.add_argument("--repeats", type=int, help="instead of 3 (1 with --quick)")


if __name__ == "__main__":
    sys.exit(standalone(run, __doc__, options))
