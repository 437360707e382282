"""(9) Darshan replay: a 1 GiB DXT replay's write MiB/s over fio writing the same bytes with the same sizes.

The replay is the instrument of a site's own job (docs/darshan.md), so its own overhead must stay below
the storage's: per tier (/dev/shm and the ext4 bench tier), a DXT trace of one rank writing 1 GiB in
1 MiB calls (ior_hdf5_example.darshan from the pydarshan wheel, its trace replaced by that pattern) is
replayed by `cycleio darshan replay` (one rank under the mpich wheel's mpiexec), and fio writes the same
file size with the same block size, psync, no preallocation and no fsync at the end, as the trace has
none; each side starts after a sync. Ratio = the replay's MiB/s (its bytes over its rank's window: open, calls, close) over fio's;
goal 0.9. Three repeats (--quick: one, with 256 MiB). A second row times planning a 100,000-call DXT
trace: ratio = seconds / 10 s, lower is better.

Run alone: .venv/bin/python bench/bench_darshan.py [--quick]
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from common import BENCH_TIERS, REPO, row, standalone

sys.path.insert(0, str(REPO / "scripts"))
import darshan  # noqa: E402

from cycleio.darshan.logs import read_log  # noqa: E402
from cycleio.darshan.plan import make_plan  # noqa: E402
from cycleio.darshan.replay import Target, replay  # noqa: E402

BENCHMARK = "darshan replay"
GOAL = 0.9
PLAN_GOAL_S = 10.0
MiB = 2**20
LOG = Path(darshan.__file__).parent / "examples" / "example_logs" / "ior_hdf5_example.darshan"
TIERS = {"shm": Path("/dev/shm") / "cycleio-bench-darshan", "disk": BENCH_TIERS / "darshan"}


def trace_job(calls: int, size: int, ranks: int = 1):
    """The wheel's 4-rank IOR log with its DXT trace replaced: ``ranks`` ranks each writing ``calls`` calls of
    ``size`` bytes, one after the other, into the shared file."""
    job = copy.deepcopy(read_log(LOG))
    for trace in job.dxt["DXT_POSIX"]:
        if trace["rank"] < ranks:
            start = np.arange(calls) * 1e-3
            trace["write_segments"] = pd.DataFrame({"offset": (trace["rank"] * calls + np.arange(calls)) * size,
                                                    "length": np.full(calls, size), "start_time": start,
                                                    "end_time": start + 5e-4})
        else:
            trace["write_segments"] = trace["write_segments"].iloc[:0]
        trace["read_segments"] = trace["read_segments"].iloc[:0]
    posix = job.counters["POSIX"]
    posix.loc[:, ["POSIX_WRITES", "POSIX_BYTES_WRITTEN"]] = [calls * ranks, calls * ranks * size]
    posix.loc[:, ["POSIX_READS", "POSIX_BYTES_READ", "POSIX_STATS", "POSIX_SEEKS", "POSIX_FSYNCS"]] = 0
    return job


def fio_write(folder: Path, nbytes: int, block: int) -> float:
    folder.mkdir(parents=True, exist_ok=True)
    argv = ["fio", "--name=darshan", f"--directory={folder}", "--rw=write", f"--bs={block}", f"--size={nbytes}",
            "--ioengine=psync", "--fallocate=none", "--end_fsync=0", "--output-format=json"]
    result = subprocess.run(argv, check=True, capture_output=True, text=True)
    shutil.rmtree(folder, ignore_errors=True)
    return json.loads(result.stdout[result.stdout.index("{"):])["jobs"][0]["write"]["bw_bytes"] / MiB


def run(args) -> list[dict]:
    if not shutil.which("fio"):
        raise RuntimeError("fio is not installed (Debian: apt-get install fio)")
    total = (256 if args.quick else 1024) * MiB
    job = trace_job(total // MiB, MiB)
    rows = []
    for tier, folder in TIERS.items():
        mine, theirs, ratios = [], [], []
        for _ in range(1 if args.quick else 3):
            os.sync()  # each side starts without the other's dirty pages to write back
            _, _, runs = replay(job, [Target(tier, folder)], nranks=1)
            rank = runs[0].ranks[0]
            moved = sum(rank["write_bytes"])
            if moved != total:
                raise RuntimeError(f"the replay wrote {moved} bytes, not {total}")
            mine.append(moved / rank["wall_s"] / MiB)
            os.sync()
            theirs.append(fio_write(folder / "fio", total, MiB))
            ratios.append(mine[-1] / theirs[-1])
        shutil.rmtree(folder, ignore_errors=True)
        rows.append(row(BENCHMARK, f"{tier} write {total // MiB} MiB in 1 MiB calls, 1 rank (vs fio)", "write",
                        "MiB/s", mine, theirs, ratios, GOAL))
    big = trace_job(25_000, 4096, ranks=4)
    seconds = []
    for _ in range(1 if args.quick else 3):
        t0 = time.perf_counter()
        plan = make_plan(big, 4, timing="logged")
        seconds.append(time.perf_counter() - t0)
    assert plan.n_ops >= 100_000
    rows.append(row(BENCHMARK, "plan a 100,000-call DXT trace (4 ranks)", "planning time", "s", seconds,
                    [PLAN_GOAL_S] * len(seconds), [s / PLAN_GOAL_S for s in seconds], 1.0, higher_is_better=False))
    return rows


if __name__ == "__main__":
    sys.exit(standalone(run, __doc__))
