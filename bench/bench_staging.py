"""(2) Staging: cycleio's staging engine against `cp`, `cp+sync` and the tiers' limit, in the same run.

Staging copies a job's files between a scratch tier and the persistent tier, durably and verified.
The question is whether that costs more than the plain tools would, and how close it gets to what
the two tiers allow. Each repeat copies the same source files with:

  cp         `cp -r` (not durable when it returns: context only, no goal)
  cp+sync    `cp -r` then `sync -f` on the target: durable, unverified. Goal: engine >= 1.0 x this
  cycleio    cycleio.storage.staging.copy_and_verify with the study's defaults (4 streams, durable): checksum
             while copying, write-behind, re-read and verify every file, one syncfs, rename
and measures the tier limit with fio (common.fio_copy_rate): a read job on the source folder and a
write job on the target folder at the same time, the same number and size of files, each written
file created by the job and fsynced (the same durability), the limit the bytes over the slower
job's time. Goal: engine >= 0.85 x the limit. The source and target tiers here are one virtual disk
for node-local -> disk, so a copy shares it between reading and writing; fio's read and write
measured apart (the limit before, the lower of the two) are kept as a context row.

Per node: N nodes staging out at once (N = 3, as tests/test_slurm_multinode.py runs), each with
its own source folder and its own target folder. On one machine that is N concurrent copy
processes (forked, started together), against cp+sync in N processes and fio with N readers and N
writers; the rate is all nodes' bytes over the time until the last one finished.

Cases: one large file (512 MiB; --quick 64 MiB) and many small files (1000 x 128 KiB; --quick 200),
from node-local disk ($TMPDIR or /tmp) and from /dev/shm, to results/bench-tiers/ (ext4, the
embedded "lustre" tier), on one node and per node. Methods are interleaved and their order
rotated between repeats (the disk is mounted with discard: a run that lands on freshly trimmed
blocks is slow whatever it is); the target is emptied and synced, and as root the page cache
dropped, before every run. Ratios are rates (bytes/s) paired within a repeat.

Run alone: .venv/bin/python bench/bench_staging.py [--quick] [--target FOLDER] [--nodes N]
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from common import BENCH_TIERS, REPO, MiB, drop_caches, fio_copy_rate, fio_rate, row, standalone

sys.path.insert(0, str(REPO / "scripts"))
from cycleio.storage.staging import copy_and_verify  # noqa: E402
from cycleio.storage.stagingtypes import StagingOptions  # noqa: E402

BENCHMARK = "staging"
NODES = 3


def make_files(folder: Path, count: int, size: int) -> None:
    """``count`` files of ``size`` random bytes (incompressible; one random MiB reused for speed)."""
    folder.mkdir(parents=True)
    block = os.urandom(MiB)
    for index in range(count):
        with open(folder / f"f{index:05d}.nc", "wb") as handle:
            for offset in range(0, size, MiB):
                shift = (index + offset // MiB) % 4093
                handle.write((block[shift:] + block[:shift])[: min(MiB, size - offset)])


def cp(source: Path, dest: Path, durable: bool) -> None:
    subprocess.run(["cp", "-r", str(source), str(dest)], check=True)
    if durable:
        subprocess.run(["sync", "-f", str(dest)], check=True)


def engine(source: Path, dest: Path) -> None:
    pairs = [(p, dest / p.relative_to(source)) for p in sorted(source.rglob("*")) if p.is_file()]
    copy_and_verify(pairs, StagingOptions())


def _node(copy: Callable[[Path, Path], None], source: Path, dest: Path, start, ends) -> None:
    start.wait()
    copy(source, dest)
    ends.put(time.perf_counter())


def on_nodes(copy: Callable[[Path, Path], None], sources: list[Path], dest: Path) -> float:
    """Seconds for ``copy`` of every node's source into its own folder under ``dest``: one process per node,
    forked first and started together, timed until the last one finished (CLOCK_MONOTONIC is system-wide)."""
    if len(sources) == 1:
        t0 = time.perf_counter()
        copy(sources[0], dest)
        return time.perf_counter() - t0
    context = multiprocessing.get_context("fork")
    start, ends = context.Event(), context.Queue()
    nodes = [context.Process(target=_node, args=(copy, source, dest / source.name, start, ends)) for source in sources]
    dest.mkdir(parents=True)
    for node in nodes:
        node.start()
    time.sleep(0.2)  # every node is waiting on the event
    t0 = time.perf_counter()
    start.set()
    for node in nodes:
        node.join()
    if any(node.exitcode for node in nodes):
        raise RuntimeError(f"a node's copy failed (exit codes {[node.exitcode for node in nodes]})")
    return max(ends.get() for _ in nodes) - t0


def measure_case(source_root: Path, target_root: Path, count: int, size: int, repeats: int,
                 nodes: int = 1) -> dict[str, list[float]]:
    """MiB/s per method and repeat (all nodes' bytes), and fio's copy limit; on one node also fio's read
    (source) and write (target) measured apart."""
    sources = [source_root / (f"node{n}" if nodes > 1 else "src") for n in range(nodes)]
    for source in sources:
        make_files(source, count, size)
    mib = nodes * count * size / MiB
    methods: dict[str, Callable[[Path], float]] = {
        "cp": lambda d: mib / on_nodes(lambda s, t: cp(s, t, False), sources, d),
        "cp+sync": lambda d: mib / on_nodes(lambda s, t: cp(s, t, True), sources, d),
        "cycleio": lambda d: mib / on_nodes(engine, sources, d),
        "fio": lambda d: fio_copy_rate(source_root / "fio", d, size, count, nodes)}
    if nodes == 1:
        methods["fio read"] = lambda d: fio_rate(source_root / "fio", "read", size, count)
        methods["fio write"] = lambda d: fio_rate(d, "write", size, count)
    rates: dict[str, list] = {name: [] for name in methods}
    names = list(methods)
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:  # interleaved, order rotated between repeats
            dest = target_root / "dest"
            for folder in (dest, source_root / "fio"):
                shutil.rmtree(folder, ignore_errors=True)
            drop_caches()
            rates[name].append(methods[name](dest))
            if not name.startswith("fio"):
                landed = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file())
                if landed != nodes * count * size:
                    raise RuntimeError(f"{name} landed {landed} of {nodes * count * size} bytes")
    shutil.rmtree(source_root / "fio", ignore_errors=True)
    shutil.rmtree(target_root / "dest", ignore_errors=True)
    for source in sources:
        shutil.rmtree(source, ignore_errors=True)
    return rates


def case_rows(label: str, rates: dict[str, list], cache: str) -> list[dict]:
    ours = rates["cycleio"]
    fio = rates["fio"]
    fio_note = (f"fio read and write+fsync at once: copy {min(f['copy'] for f in fio):.0f}-"
                f"{max(f['copy'] for f in fio):.0f} MiB/s (read {min(f['read'] for f in fio):.0f}-"
                f"{max(f['read'] for f in fio):.0f}, write {min(f['write'] for f in fio):.0f}-"
                f"{max(f['write'] for f in fio):.0f})")
    cases = [("cp+sync", rates["cp+sync"], 1.0, "durable, unverified"),
             ("cp", rates["cp"], None, "not durable: context only"),
             ("tier limit", [f["copy"] for f in fio], 0.85, f"{fio_note}; {cache}")]
    if "fio read" in rates:
        apart = [min(r, w) for r, w in zip(rates["fio read"], rates["fio write"])]
        fio_itself = statistics.median(f["copy"] / a for f, a in zip(fio, apart))
        cases.append(("fio read, write apart", apart, None,
                      f"the lower of fio read {min(rates['fio read']):.0f}-{max(rates['fio read']):.0f} and write+fsync "
                      f"{min(rates['fio write']):.0f}-{max(rates['fio write']):.0f} MiB/s, measured one after the "
                      f"other (the limit before): context only; fio reading and writing at once reached "
                      f"{fio_itself:.2f} of it (median)"))
    return [row(BENCHMARK, f"{label}: vs {baseline}", "copy rate", "MiB/s", ours, values,
                [a / b for a, b in zip(ours, values)], goal, notes=f"baseline {baseline}: {note}")
            for baseline, values, goal, note in cases]


def run(args) -> list[dict]:
    repeats = 3 if args.quick else 5
    cases = {"large": (1, (64 if args.quick else 512) * MiB), "small": (200 if args.quick else 1000, 128 * 1024)}
    sources = {"node-local": Path(os.environ.get("TMPDIR") or "/tmp"), "shm": Path("/dev/shm")}
    target_parent = Path(getattr(args, "target", None) or BENCH_TIERS)
    target_parent.mkdir(parents=True, exist_ok=True)
    cache = "page cache dropped before each run" if os.geteuid() == 0 else "page cache NOT dropped (not root)"
    rows = []
    for nodes in sorted({1, getattr(args, "nodes", NODES)}):
        for source_name, parent in sources.items():
            for case, (count, size) in cases.items():
                source_root = Path(tempfile.mkdtemp(prefix="cycleio-bench-staging-", dir=parent))
                target_root = Path(tempfile.mkdtemp(prefix="staging-", dir=target_parent))
                try:
                    rates = measure_case(source_root, target_root, count, size, repeats, nodes)
                finally:
                    shutil.rmtree(source_root, ignore_errors=True)
                    shutil.rmtree(target_root, ignore_errors=True)
                files = f"{count} x {size // 1024} KiB" if count > 1 else f"1 x {size // MiB} MiB"
                label = f"{source_name} -> disk, {files}" if nodes == 1 else \
                    f"{nodes} nodes at once: {source_name} -> disk, {files} each"
                rows += case_rows(label, rates, cache)
    return rows


def options(parser) -> None:
    parser.add_argument("--target", type=Path, help=f"folder to stage into (default {BENCH_TIERS})")
    parser.add_argument("--nodes", type=int, default=NODES, help=f"nodes staging at once (default {NODES})")


if __name__ == "__main__":
    sys.exit(standalone(run, __doc__, options))
