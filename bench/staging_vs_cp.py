"""Staging throughput of cycleio's copy engine against `cp` of the same files, in the same run.

Cases: one large file and many small files, from node-local disk and from /dev/shm to the
persistent tier: a folder under results/ (as the embedded `lustre` tier), or any folder given with
--persistent (a GlusterFS mount from ci/gluster/up.sh: a real network filesystem). Every case
copies the same source files with each method, the methods interleaved and their order rotated
between repeats (this machine's disk is mounted with discard, so a run that lands on freshly
trimmed blocks is slow whichever method it is); the destination is emptied and synced between
runs. With root, the page cache is also dropped before each run.

Methods:
  cp            `cp -r` of the folder (one process, no fsync: not durable when it returns)
  cp+sync       `cp -r` then `sync -f` on the destination (durable on local filesystems; on FUSE,
                syncfs may not reach the daemon, so this row is a lower bound there)
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
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--persistent", type=Path, default=REPO / "results",
                        help="folder to stage into (default: results/, the embedded lustre tier)")
    parser.add_argument("--sources", nargs="+", default=["node_local", "shm"], choices=["node_local", "shm"])
    args = parser.parse_args()

    persistent_parent = args.persistent
    persistent_parent.mkdir(exist_ok=True)
    parents = {"node_local": os.environ.get("TMPDIR", "/tmp"), "shm": "/dev/shm"}
    sources = {tier: Path(tempfile.mkdtemp(prefix="cycleio-bench-", dir=parents[tier])) for tier in args.sources}
    persistent = Path(tempfile.mkdtemp(prefix="bench-staging-", dir=persistent_parent))
    print(f"host {os.uname().nodename}, {os.cpu_count()} cores, root={os.geteuid() == 0} "
          f"(page cache dropped between runs: {os.geteuid() == 0})")
    target = filesystem_type(persistent)
    print(f"persistent: {persistent} ({target})")
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
                for repeat in range(args.repeat):
                    shift = repeat % len(methods)
                    for name, run in methods[shift:] + methods[:shift]:  # interleaved and rotated
                        dest = persistent / "dest"
                        reset(dest)
                        times[name].append(run(source, dest))
                        if folder_bytes(dest) != nbytes:
                            raise SystemExit(f"{name} copied {folder_bytes(dest)} of {nbytes} bytes")
                for name, _ in methods:
                    median, best = statistics.median(times[name]), min(times[name])
                    rows.append((f"{tier}->{target}", case, name, nbytes / MiB, median, best,
                                 statistics.median(times["cp"]) / median, statistics.median(times["cp+sync"]) / median,
                                 min(times["cp"]) / best, min(times["cp+sync"]) / best))
                print(f"  {case}: " + ", ".join(f"{name} {' '.join(f'{t:.2f}' for t in ts)}" for name, ts in times.items()),
                      flush=True)
            shutil.rmtree(root, ignore_errors=True)
    finally:
        shutil.rmtree(persistent, ignore_errors=True)
        for root in sources.values():
            shutil.rmtree(root, ignore_errors=True)
    print(f"\n{args.repeat} runs per method; ratio = cp seconds / method seconds (higher is faster), of the medians "
          "and of the best runs")
    print(f"{'route':<28}{'case':<7}{'method':<13}{'MiB':>6}{'median s':>10}{'best s':>8}{'MiB/s':>7}"
          f"{'x cp':>7}{'x cp+sync':>11}{'best x cp':>11}{'best x cp+sync':>16}")
    for route, case, name, mib, median, best, ratio, ratio_sync, best_ratio, best_ratio_sync in rows:
        print(f"{route:<28}{case:<7}{name:<13}{mib:>6.0f}{median:>10.2f}{best:>8.2f}{mib / median:>7.0f}"
              f"{ratio:>7.2f}{ratio_sync:>11.2f}{best_ratio:>11.2f}{best_ratio_sync:>16.2f}")

if __name__ == "__main__":
    main()
