"""(2) Staging: cycleio's staging engine against `cp`, `cp+sync` and the tiers' limit, in the same run.

Staging copies a job's files between a scratch tier and the persistent tier, durably and verified.
The question is whether that costs more than the plain tools would, and how close it gets to what
the two tiers allow. Each repeat copies the same source files with:

  cp         `cp -r` (not durable when it returns: context only, no goal)
  cp+sync    `cp -r` then `sync -f` on the target: durable, unverified. Goal: engine >= 1.0 x this
  cycleio    cycleio.storage.staging.copy_and_verify with the study's defaults (4 streams, durable): checksum
             while copying, sync, re-read and verify every file, rename
and measures the tier limit with fio: the lower of a sequential read of the same number and size of
files on the source folder and a sequential write of them (fsync at the end) on the target folder.
Goal: engine >= 0.85 x the limit.

Cases: one large file (512 MiB; --quick 64 MiB) and many small files (1000 x 128 KiB; --quick 200),
from node-local disk ($TMPDIR or /tmp) and from /dev/shm, to results/bench-tiers/ (ext4, the
embedded "lustre" tier). Methods are interleaved and their order rotated between repeats (the
disk is mounted with discard: a run that lands on freshly trimmed blocks is slow whatever it is);
the target is emptied and synced, and as root the page cache dropped, before every run.
Ratios are rates (bytes/s) paired within a repeat.

Run alone: .venv/bin/python bench/bench_staging.py [--quick] [--target FOLDER]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import BENCH_TIERS, REPO, MiB, drop_caches, fio_rate, row, standalone

sys.path.insert(0, str(REPO / "scripts"))
from cycleio.storage.staging import copy_and_verify  # noqa: E402
from cycleio.storage.stagingtypes import StagingOptions  # noqa: E402

BENCHMARK = "staging"


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


def measure_case(source_root: Path, target_root: Path, count: int, size: int, repeats: int) -> dict[str, list[float]]:
    """MiB/s per method and repeat, plus the fio read (source) and write (target) rates."""
    source = source_root / "src"
    make_files(source, count, size)
    mib = count * size / MiB
    methods = {"cp": lambda d: cp(source, d, False), "cp+sync": lambda d: cp(source, d, True),
               "cycleio": lambda d: engine(source, d),
               "fio read": lambda d: fio_rate(source_root / "fio", "read", size, count),
               "fio write": lambda d: fio_rate(d, "write", size, count)}
    rates: dict[str, list[float]] = {name: [] for name in methods}
    names = list(methods)
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:  # interleaved, order rotated between repeats
            dest = target_root / "dest"
            for folder in (dest, source_root / "fio"):
                shutil.rmtree(folder, ignore_errors=True)
            drop_caches()
            t0 = time.perf_counter()
            result = methods[name](dest)
            seconds = time.perf_counter() - t0
            rates[name].append(result if name.startswith("fio") else mib / seconds)
            if not name.startswith("fio"):
                landed = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file())
                if landed != count * size:
                    raise RuntimeError(f"{name} landed {landed} of {count * size} bytes")
    shutil.rmtree(source_root / "fio", ignore_errors=True)
    shutil.rmtree(target_root / "dest", ignore_errors=True)
    shutil.rmtree(source, ignore_errors=True)
    return rates


def run(args) -> list[dict]:
    repeats = 1 if args.quick else 3
    cases = {"large": (1, (64 if args.quick else 512) * MiB), "small": (200 if args.quick else 1000, 128 * 1024)}
    sources = {"node-local": Path(os.environ.get("TMPDIR") or "/tmp"), "shm": Path("/dev/shm")}
    target_parent = Path(getattr(args, "target", None) or BENCH_TIERS)
    target_parent.mkdir(parents=True, exist_ok=True)
    cache = "page cache dropped before each run" if os.geteuid() == 0 else "page cache NOT dropped (not root)"
    rows = []
    for source_name, parent in sources.items():
        for case, (count, size) in cases.items():
            source_root = Path(tempfile.mkdtemp(prefix="cycleio-bench-staging-", dir=parent))
            target_root = Path(tempfile.mkdtemp(prefix="staging-", dir=target_parent))
            try:
                rates = measure_case(source_root, target_root, count, size, repeats)
            finally:
                shutil.rmtree(source_root, ignore_errors=True)
                shutil.rmtree(target_root, ignore_errors=True)
            label = f"{source_name} -> disk, {count} x {size // 1024} KiB" if count > 1 else \
                f"{source_name} -> disk, 1 x {size // MiB} MiB"
            ours = rates["cycleio"]
            limit = [min(r, w) for r, w in zip(rates["fio read"], rates["fio write"])]
            fio_note = (f"fio read {min(rates['fio read']):.0f}-{max(rates['fio read']):.0f}, "
                        f"write+fsync {min(rates['fio write']):.0f}-{max(rates['fio write']):.0f} MiB/s")
            for baseline, values, goal, note in (
                    ("cp+sync", rates["cp+sync"], 1.0, "durable, unverified"),
                    ("cp", rates["cp"], None, "not durable: context only"),
                    ("tier limit", limit, 0.85, fio_note)):
                rows.append(row(BENCHMARK, f"{label}: vs {baseline}", "copy rate", "MiB/s", ours, values,
                                [a / b for a, b in zip(ours, values)], goal,
                                notes=f"baseline {baseline}: {note}" + (f"; {cache}" if goal == 0.85 else "")))
    return rows


def options(parser) -> None:
    parser.add_argument("--target", type=Path, help=f"folder to stage into (default {BENCH_TIERS})")


if __name__ == "__main__":
    sys.exit(standalone(run, __doc__, options))
