"""(6) Default study: wall time and peak disk use of `make study` from fresh results.

What a new user meets first: `make study` must finish in minutes (goal 300 s) and fit on a laptop
(goal 10 GB at the peak). This runs `make study STUDY=<file>` with a study file laid over
config/config.yaml that only renames the study (`study: benchdefault`), so its results and tier
folders are fresh and no real study is touched. While it runs, a thread samples every second
(a) the bytes allocated under the study's folders (results/<study> and <tier>/<study> on every
tier) and (b) the used bytes (statvfs) of the filesystems holding them (results/, $TMPDIR or /tmp,
/dev/shm), whose increases over the start are summed; each gives a peak disk use. (a) counts only
the study; (b) also counts its temporaries elsewhere, and anything else written there meanwhile.
Baselines are the absolute goals: ratio = measured / goal, lower is better. Afterwards the study's
results and tier folders go.

The same runs check the study's own efficiency answer (issue 28, docs/performance.md), from each
run's tables/efficiency.csv: over its timed rows, the median step/replay ratio of the writes (goal
0.85-1.15; reads only where three or more are timed), the share of timed rows in 0.75-1.33 or
holding 1.0 in their band (goal 0.80), and, between the two runs (the second renamed
benchdefault2, as a user would rerun it), the share of rows timed in both whose bands overlap
(goal 1.0).

--quick runs the smoke study (config/studies/smoke.yaml, renamed benchsmoke) instead, with the
same measurement and goals.

Run alone: .venv/bin/python bench/bench_study.py [--quick]
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

from common import BENCH_TIERS, REPO, row, standalone

sys.path.insert(0, str(REPO / "scripts"))
from cycleio.config.tierspec import expand_tier_path  # noqa: E402

BENCHMARK = "default study"
GOAL_S, GOAL_GB = 300.0, 10.0


def used_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def allocated_bytes(folder: Path) -> int:
    """Bytes allocated to the files under ``folder`` (du), tolerant of files vanishing meanwhile."""
    total, stack = 0, [folder]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(Path(entry.path))
                        else:
                            total += entry.stat(follow_symlinks=False).st_blocks * 512
                    except OSError:
                        pass
        except OSError:
            pass
    return total


class DiskSampler(threading.Thread):
    """Every second: the study's folders (du) and the growth of used bytes on their filesystems.

    Keeps the peak of each sum. The folders count only the study; the filesystems count everything
    written there meanwhile, by the study (temporaries anywhere) or by anyone else.
    """

    def __init__(self, filesystems: list[Path], folders: list[Path]):
        super().__init__(daemon=True)
        by_device: dict[int, Path] = {}
        for path in filesystems:
            by_device.setdefault(os.stat(path).st_dev, path)
        self.filesystems, self.folders = list(by_device.values()), folders
        self.start_used = [used_bytes(p) for p in self.filesystems]
        self.peak_fs = self.peak_folders = 0
        self.stopping = threading.Event()

    def sample(self) -> None:
        grown = sum(used_bytes(p) - u for p, u in zip(self.filesystems, self.start_used))
        self.peak_fs = max(self.peak_fs, grown)
        self.peak_folders = max(self.peak_folders, sum(allocated_bytes(f) for f in self.folders))

    def run(self) -> None:
        while not self.stopping.wait(1.0):
            self.sample()

    def stop(self) -> None:
        self.sample()
        self.stopping.set()
        self.join()


def study_folders(config: dict, study: str) -> list[Path]:
    """The study's results folder and its folder on every tier, as `make -C REPO study` resolves them."""
    with contextlib.chdir(REPO):  # the {workdir} placeholder names the folder the study runs from
        tiers = [REPO / expand_tier_path(name, spec["path"], study) / study for name, spec in config["tiers"].items()]
    return [REPO / "results" / study, *tiers]


def run(args) -> list[dict]:
    rows: list[dict] = []
    tables = []
    for index, name in enumerate(("benchsmoke", "benchsmoke2") if args.quick else ("benchdefault", "benchdefault2")):
        study_rows, efficiency = run_study(args, name)
        rows += study_rows if index == 0 else []  # time and disk: the first run, from fresh results
        tables.append(efficiency)
    return rows + efficiency_rows(tables, "smoke study (--quick)" if args.quick else "default study")


def efficiency_rows(tables: list, case: str) -> list[dict]:
    from cycleio.report.closeness import GOAL_MEDIAN, GOAL_SHARE, bands_agree, efficiency_goals

    rows = []
    for index, table in enumerate(tables, start=1):
        goals = efficiency_goals(table)
        writes, close = goals["write"], goals["rows"]
        if writes["timed_rows"]:
            rows.append(row(BENCHMARK, f"{case} run {index}: median write efficiency (timed rows)", "step / replay",
                            "", [writes["median"]], [1.0], [writes["median"]], None,
                            notes=f"{writes['timed_rows']} timed write rows; goal {GOAL_MEDIAN[0]}-{GOAL_MEDIAN[1]}: "
                                  + ("met" if writes["median_ok"] else "missed")))
        if close["timed_rows"]:
            rows.append(row(BENCHMARK, f"{case} run {index}: timed rows close to 1", "share", "",
                            [close["share_close"]], [1.0], [close["share_close"]], GOAL_SHARE,
                            notes="in 0.75-1.33 or holding 1.0 in their band; outside: "
                                  + (", ".join(close["outside"]) or "none")))
    agree = bands_agree(*tables)
    if agree["rows"]:
        share = agree["agree"] / agree["rows"]
        rows.append(row(BENCHMARK, f"{case}: rows of two runs agreeing within their bands", "share", "", [share],
                        [1.0], [share], 1.0, notes=f"{agree['agree']} of {agree['rows']} rows timed in both; apart: "
                                                   + ("; ".join(agree["disagree"]) or "none")))
    return rows


def run_study(args, study: str):
    """One `make study` from fresh results: its rows (wall time, peak disk) and its efficiency table."""
    import pandas as pd

    layer = yaml.safe_load((REPO / "config" / "studies" / "smoke.yaml").read_text()) if args.quick else {}
    layer["study"] = study
    BENCH_TIERS.mkdir(parents=True, exist_ok=True)
    study_file = BENCH_TIERS / f"{study}.yaml"
    study_file.write_text(yaml.safe_dump(layer))
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    folders = study_folders(config, study)
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
    log = BENCH_TIERS / f"{study}.log"
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    argv = ["make", "-C", str(REPO), "study", f"STUDY={study_file}"]
    sampler = DiskSampler([REPO / "results", Path(os.environ.get("TMPDIR") or "/tmp"), Path("/dev/shm")], folders)
    efficiency = None
    try:
        sampler.start()
        t0 = time.perf_counter()
        with open(log, "w") as out:
            result = subprocess.run(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
        seconds = time.perf_counter() - t0
        sampler.stop()
        if result.returncode:
            raise RuntimeError(f"`{' '.join(argv)}` failed ({result.returncode}); last lines of {log}:\n"
                               + "\n".join(log.read_text().splitlines()[-15:]))
        table = REPO / "results" / study / "tables" / "efficiency.csv"
        efficiency = pd.read_csv(table) if table.exists() else None
    finally:
        sampler.stopping.set()
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
        study_file.unlink(missing_ok=True)
    case = "smoke study (--quick)" if args.quick else "default study"
    rows = [row(BENCHMARK, f"{case}: wall time", "wall time", "s", [seconds], [GOAL_S], [seconds / GOAL_S], 1.0,
                higher_is_better=False, notes=f"`make study STUDY={study_file.name}`; baseline = the 300 s goal")]
    for what, peak, note in (
            ("study folders", sampler.peak_folders, "allocated bytes under " + ", ".join(map(str, folders))),
            ("filesystems", sampler.peak_fs, "statvfs used bytes, summed growth on "
             + ", ".join(map(str, sampler.filesystems)) + ": includes anything else written there meanwhile")):
        rows.append(row(BENCHMARK, f"{case}: peak disk, {what}", "peak disk use", "GB", [peak / 1e9], [GOAL_GB],
                        [peak / 1e9 / GOAL_GB], 1.0, higher_is_better=False,
                        notes=f"{note}; baseline = the 10 GB goal"))
    return rows, efficiency


if __name__ == "__main__":
    sys.exit(standalone(run, __doc__))
