"""Staging throughput of cycleio's copy engine against `cp` of the same files, in the same run.

Cases: one large file and many small files, from node-local disk and from /dev/shm to the
persistent tier (a folder under results/, as the embedded `lustre` tier). Every case copies the
same source files with each method; the source is re-read from the page cache by every method
(the files were just written), and the destination is emptied and synced between runs. With
root, the page cache is also dropped before each run.

Methods:
  cp            `cp -r` of the folder (one process, no fsync: not durable when it returns)
  cp+sync       `cp -r` then `sync -f` on the destination (durable)
  cycleio       the staging engine with N streams: checksum while copying, fsync, rename,
                then every landed file re-read and its checksum verified (durable and verified)

Run: .venv/bin/python bench/staging_vs_cp.py [--large-mib 1024] [--small-files 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

from cycleio.staging import StagingOptions, copy_and_verify, drop_page_cache  # noqa: E402
from cycleio.tiers import filesystem_type  # noqa: E402

MiB = 2**20


def make_sources(root: Path, large_mib: int, small_files: int, small_kib: int) -> dict[str, Path]:
    large, small = root / "large", root / "small"
    large.mkdir(parents=True)
    small.mkdir()
    block = os.urandom(MiB)
    with open(large / "gdas.t00z.atmf006.nc", "wb") as handle:
        for index in range(large_mib):
            handle.write(block[index % 7:] + block[: index % 7])
    for index in range(small_files):
        (small / f"obs{index:05d}.bufr_d").write_bytes(os.urandom(small_kib * 1024))
    return {"large": large, "small": small}


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def reset(dest: Path) -> None:
    shutil.rmtree(dest, ignore_errors=True)
    os.sync()
    drop_page_cache()


def run_cp(source: Path, dest: Path, durable: bool) -> float:
    t0 = time.perf_counter()
    subprocess.run(["cp", "-r", str(source), str(dest)], check=True)
    if durable:
        subprocess.run(["sync", "-f", str(dest)], check=True)
    return time.perf_counter() - t0


def run_engine(source: Path, dest: Path, streams: int) -> float:
    pairs = [(p, dest / p.relative_to(source)) for p in sorted(source.rglob("*")) if p.is_file()]
    t0 = time.perf_counter()
    copy_and_verify(pairs, StagingOptions(streams=streams))
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--large-mib", type=int, default=1024)
    parser.add_argument("--small-files", type=int, default=2000)
    parser.add_argument("--small-kib", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 4])
    args = parser.parse_args()

    persistent_parent = REPO / "results"
    persistent_parent.mkdir(exist_ok=True)
    sources = {
        "node_local": Path(tempfile.mkdtemp(prefix="cycleio-bench-", dir=os.environ.get("TMPDIR", "/tmp"))),
        "shm": Path(tempfile.mkdtemp(prefix="cycleio-bench-", dir="/dev/shm")),
    }
    persistent = Path(tempfile.mkdtemp(prefix="bench-staging-", dir=persistent_parent))
    print(f"host {os.uname().nodename}, {os.cpu_count()} cores, root={os.geteuid() == 0} "
          f"(page cache dropped between runs: {os.geteuid() == 0})")
    print(f"persistent: {persistent} ({filesystem_type(persistent)})")
    methods = [("cp", lambda s, d: run_cp(s, d, False)), ("cp+sync", lambda s, d: run_cp(s, d, True))]
    methods += [(f"cycleio x{n}", (lambda n: lambda s, d: run_engine(s, d, n))(n)) for n in args.streams]
    rows = []
    try:
        for tier, root in sources.items():
            print(f"source {tier}: {root} ({filesystem_type(root)})")
            cases = make_sources(root / "src", args.large_mib, args.small_files, args.small_kib)
            for case, source in cases.items():
                nbytes = folder_bytes(source)
                times: dict[str, list[float]] = {name: [] for name, _ in methods}
                for _ in range(args.repeat):
                    for name, run in methods:  # interleaved, so drift hits every method alike
                        dest = persistent / "dest"
                        reset(dest)
                        times[name].append(run(source, dest))
                        if folder_bytes(dest) != nbytes:
                            raise SystemExit(f"{name} copied {folder_bytes(dest)} of {nbytes} bytes")
                base = statistics.median(times["cp"])
                base_sync = statistics.median(times["cp+sync"])
                for name, _ in methods:
                    median = statistics.median(times[name])
                    rows.append((f"{tier}->lustre", case, name, nbytes / MiB, median, nbytes / MiB / median,
                                 base / median, base_sync / median))
            shutil.rmtree(root, ignore_errors=True)
    finally:
        shutil.rmtree(persistent, ignore_errors=True)
        for root in sources.values():
            shutil.rmtree(root, ignore_errors=True)
    print(f"\nmedian of {args.repeat} runs; ratio = cp seconds / method seconds (higher is faster)")
    print(f"{'route':<18}{'case':<7}{'method':<13}{'MiB':>8}{'seconds':>9}{'MiB/s':>9}{'x cp':>7}{'x cp+sync':>11}")
    for route, case, name, mib, seconds, rate, ratio, ratio_sync in rows:
        print(f"{route:<18}{case:<7}{name:<13}{mib:>8.0f}{seconds:>9.2f}{rate:>9.0f}{ratio:>7.2f}{ratio_sync:>11.2f}")


if __name__ == "__main__":
    main()
