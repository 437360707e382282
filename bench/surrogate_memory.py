"""Peak resident memory of writing one forecast output hour, against resolution.

Each point runs in a fresh process (so peaks do not carry over) that writes one atmf and one sfcf
file with the write component's compression for that resolution, and reports its peak RSS
(ru_maxrss) next to the file sizes. Baseline: the same process importing everything and writing
nothing. Fields are written one plane at a time, so the peak should stay near the baseline plus a
few planes (one C768 plane is 3072 x 1536 float32, 18 MiB) at any resolution.

Levels are fewer than the operational 127 by default to keep the run short; the peak does not depend
on the number of levels (one plane at a time), which the --levels option lets you check.

Run: .venv/bin/python bench/surrogate_memory.py [--resolutions C48 C96 C192 C384 C768] [--levels 16]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from cycleio.config import default_compression
from cycleio.grid import Grid
from cycleio.inventory import history_files
from cycleio.ncfiles import WriteContext, write_file
resolution, levels, folder = sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
sizes, t0 = [], time.perf_counter()
if resolution != "none":
    grid = Grid(resolution, levels)
    ctx = WriteContext(grid, 1, "2026010100", default_compression(resolution, None, None))
    for spec in history_files("2026010100", 3)[:2]:
        sizes.append(write_file(folder / spec.path, spec, ctx)[0])
        (folder / spec.path).unlink()
print(json.dumps({"peak_rss_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "bytes": sizes, "seconds": time.perf_counter() - t0}))
"""


def run(resolution: str, levels: int, folder: Path) -> dict:
    result = subprocess.run([sys.executable, "-c", CHILD, str(REPO / "scripts"), resolution, str(levels), str(folder)],
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--resolutions", nargs="+", default=["C48", "C96", "C192", "C384", "C768"])
    parser.add_argument("--levels", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=REPO / "results" if (REPO / "results").exists() else None) as tmp:
        base = run("none", args.levels, Path(tmp))
        print(f"baseline (imports only): peak RSS {base['peak_rss_MiB']:.0f} MiB")
        print(f"{'resolution':<11}{'levels':>7}{'plane MiB':>10}{'atmf MiB':>10}{'sfcf MiB':>10}{'peak RSS MiB':>13}"
              f"{'x baseline':>11}{'seconds':>9}")
        for resolution in args.resolutions:
            n = int(resolution[1:])
            point = run(resolution, args.levels, Path(tmp))
            atmf, sfcf = (b / 2**20 for b in point["bytes"])
            print(f"{resolution:<11}{args.levels:>7}{8 * n * n * 4 / 2**20:>10.1f}{atmf:>10.1f}{sfcf:>10.1f}"
                  f"{point['peak_rss_MiB']:>13.0f}{point['peak_rss_MiB'] / base['peak_rss_MiB']:>11.2f}"
                  f"{point['seconds']:>9.1f}")


if __name__ == "__main__":
    main()
