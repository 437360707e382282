"""Per-node stage-in on ci/slurm/start.sh --nodes 3, two ways (docs/staging.md, "Staging on every node of a job").

Run inside an allocation of every node, from a folder every node sees:
    salloc -N3 --ntasks-per-node=1 .venv/bin/python ci/slurm/node_staging.py many   # 200 x 128 KiB (or: one, 1 x 64 MiB)

Three repetitions each of the same files from a folder of the shared file system into every node's /tmp:
one copy task per node (runner.nodes, what a job over several nodes does: copy and verify on each node) and
``sbcast`` (one call per file, nothing verified), then sbcast followed by a verification pass on every node.
Prints seconds per repetition.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from cycleio.config.settings import ArmSettings
from cycleio.config.tierspec import Tier
from cycleio.records import RecordLog
from cycleio.runner.nodes import Allocation, NodeStaging
from cycleio.storage.stagingtypes import StagingFaults
from cycleio.surrogates.inventory import FileSpec

VERIFY = ("import glob, pathlib\nfrom cycleio.storage.checksums import checksum_file\n"
          "from cycleio.storage.stagingtypes import StagingOptions\n"
          "[checksum_file(pathlib.Path(p), StagingOptions()) for p in glob.glob('/tmp/node-staging-sb/{case}/*')]")


def on_nodes(*argv: str) -> None:
    subprocess.run(["srun", "-N3", "--ntasks-per-node=1", "--overlap", *argv], check=True)


def main(case: str) -> None:
    count, size = (200, 128 * 1024) if case == "many" else (1, 64 * 2**20)
    base = Path.cwd() / "results" / "node-staging"
    persistent = Tier("lustre", "lustre", str(base / "lustre"))
    scratch = Tier("node_local", "node_local", "/tmp/node-staging/${SLURM_JOB_ID}", persistent=False, shared=False)
    settings = ArmSettings(study="b", arm="a", start="2026010100", seed=1, resolution="C12", levels=4,
                           persistent=persistent, scratch=scratch)
    source = base / "lustre" / "b" / "a"
    (source / case).mkdir(parents=True, exist_ok=True)
    files = []
    for index in range(count):
        path = source / case / f"f{index:04d}"
        if not path.exists() or path.stat().st_size != size:
            path.write_bytes(os.urandom(size))
        files.append(FileSpec(f"{case}/f{index:04d}", ""))
    allocation = Allocation.of_job()
    seconds: dict[str, list[float]] = {}
    for _ in range(3):
        records = RecordLog(study="b", arm="a", cycle="c", step="fcst", strategy="serial", attempt=1)
        staging = NodeStaging(settings, allocation, base / f"control-{os.getpid()}", records, "[bench]")
        workdir = Path(f"/tmp/node-staging/{allocation.job_id}/b/a/.job")
        t0 = time.perf_counter()
        staging.stage_in(files, source, workdir, "fcst", StagingFaults())
        seconds.setdefault("copy_task_per_node_s", []).append(round(time.perf_counter() - t0, 2))
        staging.cleanup(workdir, "fcst")
        staging.close()
        on_nodes("mkdir", "-p", f"/tmp/node-staging-sb/{case}")
        t0 = time.perf_counter()
        for spec in files:
            subprocess.run(["sbcast", "-f", str(source / spec.path), f"/tmp/node-staging-sb/{spec.path}"], check=True)
        sbcast = time.perf_counter() - t0
        on_nodes(sys.executable, "-c", VERIFY.format(case=case))
        seconds.setdefault("sbcast_s", []).append(round(sbcast, 2))
        seconds.setdefault("sbcast_then_verify_s", []).append(round(time.perf_counter() - t0, 2))
        on_nodes("rm", "-rf", "/tmp/node-staging-sb", "/tmp/node-staging")
    print(case, f"{count} x {size} bytes", json.dumps(seconds))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "many")
