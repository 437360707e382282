"""(4) Peak memory of the surrogates against resolution: one forecast output hour, C48 to C768.

Each point runs in a fresh process and writes one output hour's history (atmf and sfcf) with the
write component's compression for that resolution (none up to C192, zlib 1 and BitRound from C384),
either in process (the writers of anal, post, prep and the cold start) or as the serial MPI forecast
with two compute ranks (peak of the largest rank). Data move in blocks bounded by the 64 MiB buffer,
so the peak should stay flat, far under the goal of 2 GiB, while the files grow 256-fold. The
baseline is the same process importing everything and writing nothing.

Levels default to 8 (the peak does not depend on them: a block holds at most the buffer's worth of
levels) to keep C768's compression short; --levels 127 checks that.

Run alone: .venv/bin/python bench/bench_memory.py [--quick] [--levels 8]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOAL_MIB = 2048

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from cycleio.config.settings import ArmSettings, default_compression
from cycleio.surrogates.grid import Grid
from cycleio.surrogates.inventory import history_files
from cycleio.surrogates.context import WriteContext
from cycleio.surrogates.writers import write_file
from cycleio.config.tierspec import Tier
mode, resolution, levels, folder = sys.argv[2], sys.argv[3], int(sys.argv[4]), Path(sys.argv[5])
sizes, t0 = [], time.perf_counter()
if mode != "baseline":
    compression = default_compression(resolution, None, None)
    ctx = WriteContext(Grid(resolution, levels), 1, "2026010100", compression)
    specs = history_files("2026010100", 3)[:2]
    if mode == "in-process":
        for spec in specs:
            sizes.append(write_file(folder / spec.path, spec, ctx).bytes)
    else:
        from cycleio.surrogates.forecast.launcher import run_forecast_mpi
        tier = Tier("bench", "posix", str(folder))
        arm = ArmSettings(study="bench", arm="mpi", start="2026010100", seed=1, resolution=resolution, levels=levels,
                          persistent=tier, scratch=tier, strategy="serial", compression=compression,
                          write_component={"ranks": 2})
        run_forecast_mpi(arm, "2026010100", folder, specs, ctx)
        sizes = [(folder / spec.path).stat().st_size for spec in specs]
    for spec in specs:
        (folder / spec.path).unlink()
usage = resource.RUSAGE_SELF if mode != "mpi" else resource.RUSAGE_CHILDREN
print(json.dumps({"peak_rss_MiB": resource.getrusage(usage).ru_maxrss / 1024, "bytes": sizes,
                  "seconds": time.perf_counter() - t0}))
"""


def point(mode: str, resolution: str, levels: int, folder: Path) -> dict:
    result = subprocess.run([sys.executable, "-c", CHILD, str(REPO / "scripts"), mode, resolution, str(levels),
                             str(folder)], capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"{mode} {resolution}: {result.stderr.strip()[-800:]}")
    return json.loads(result.stdout)


def run(args) -> list[dict]:
    resolutions = ["C48", "C192"] if args.quick else ["C48", "C96", "C192", "C384", "C768"]
    levels = getattr(args, "levels", None) or 8
    rows = []
    (REPO / "results").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=REPO / "results") as tmp:
        base = point("baseline", "C48", levels, Path(tmp))["peak_rss_MiB"]
        for mode in ("in-process", "mpi"):
            for resolution in resolutions:
                p = point(mode, resolution, levels, Path(tmp))
                rows.append({
                    "benchmark": "peak memory", "case": f"{resolution} L{levels} {mode}", "metric": "peak RSS",
                    "unit": "MiB", "value": p["peak_rss_MiB"], "baseline": GOAL_MIB,
                    "ratio": p["peak_rss_MiB"] / GOAL_MIB, "min": p["peak_rss_MiB"] / GOAL_MIB,
                    "median": p["peak_rss_MiB"] / GOAL_MIB, "max": p["peak_rss_MiB"] / GOAL_MIB, "repeats": 1,
                    "goal": 1.0, "higher_is_better": False,
                    "notes": (f"files {sum(p['bytes']) / 2**20:.0f} MiB in {p['seconds']:.1f} s; imports alone "
                              f"{base:.0f} MiB; baseline column is the 2 GiB goal"
                              + ("; largest MPI rank" if mode == "mpi" else "")),
                })
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="C48 and C192 only")
    parser.add_argument("--levels", type=int, default=8)
    for row in run(parser.parse_args()):
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
