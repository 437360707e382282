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

The goal of 300 s is on Snakemake's part (from its first to its last timestamp in the run's log); the
whole `make study` (config check, lock check, report) is reported beside it without a goal.

The same runs check the study's own answer (docs/performance.md), from each run's tables: the
efficiency rows with a verdict (timed, reference fair; goal 15 of the 24), over them the median
step/replay ratio of the writes and of the reads (goal 0.85-1.15), the share of timed rows in
0.75-1.33 or holding 1.0 in their band (goal 0.80), the tiers' fits (tables/scaling_fit.csv: goal
every tier x pattern x operation fitted); and, between the two runs (the second renamed
benchdefault2, as a user would rerun it), the share of rows timed in both whose bands overlap (goal
1.0) and the share of fits whose plateaus agree within their errors (goal 1.0).

--quick runs the smoke study (config/studies/smoke.yaml, renamed benchsmoke) instead, with the
same measurement and goals.

Run alone: .venv/bin/python bench/bench_study.py [--quick]
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from datetime import datetime
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


GOAL_VERDICTS = 15  # efficiency cells with a verdict in the default study (of 24)
SNAKEMAKE_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")


def snakemake_seconds(log_text: str) -> float | None:
    """Seconds from Snakemake's first to its last timestamp line in a `make study` log (its part of the run)."""
    stamps = [datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y") for line in log_text.splitlines()
              if (m := SNAKEMAKE_STAMP.match(line.strip()))]
    return (stamps[-1] - stamps[0]).total_seconds() if len(stamps) >= 2 else None


def run(args) -> list[dict]:
    rows: list[dict] = []
    tables, fits = [], []
    for index, name in enumerate(("benchsmoke", "benchsmoke2") if args.quick else ("benchdefault", "benchdefault2")):
        study_rows, efficiency, fit = run_study(args, name)
        rows += study_rows if index == 0 else []  # time and disk: the first run, from fresh results
        tables.append(efficiency)
        fits.append(fit)
    case = "smoke study (--quick)" if args.quick else "default study"
    return rows + efficiency_rows(tables, case, verdict_goal=None if args.quick else GOAL_VERDICTS) + fit_rows(fits, case)


def fit_rows(fits: list, case: str) -> list[dict]:
    """Per run, the share of tier x pattern x operation fitted; between the runs, the share of fits whose plateaus
    agree within their errors (each plateau +- its relative error)."""
    rows = []
    for index, fit in enumerate(fits, start=1):
        if fit is None or fit.empty:
            continue
        fitted = int((fit["fit"] == "fitted").sum())
        rows.append(row(BENCHMARK, f"{case} run {index}: tiers' fits", "share fitted", "", [fitted / len(fit)], [1.0],
                        [fitted / len(fit)], 1.0, notes=f"{fitted} of {len(fit)} tier x pattern x operation fitted"))
    if len(fits) == 2 and all(f is not None and not f.empty for f in fits):
        keys = ["tier", "pattern", "operation"]
        both = fits[0].merge(fits[1], on=keys, suffixes=("_1", "_2"))
        both = both[(both["fit_1"] == "fitted") & (both["fit_2"] == "fitted")]
        error = (both["plateau_MiB_per_s_1"] * both["relative_error_1"]
                 + both["plateau_MiB_per_s_2"] * both["relative_error_2"])
        agree = (both["plateau_MiB_per_s_1"] - both["plateau_MiB_per_s_2"]).abs() <= error
        if len(both):
            apart = [f"{r.tier} {r.pattern} {r.operation}: {r.plateau_MiB_per_s_1:.0f} against "
                     f"{r.plateau_MiB_per_s_2:.0f} MiB/s" for r in both[~agree].itertuples()]
            rows.append(row(BENCHMARK, f"{case}: plateaus of two runs agreeing within their errors", "share", "",
                            [agree.mean()], [1.0], [agree.mean()], 1.0,
                            notes=f"{int(agree.sum())} of {len(both)} fitted in both; apart: " + ("; ".join(apart) or "none")))
    return rows


def efficiency_rows(tables: list, case: str, verdict_goal: int | None = None) -> list[dict]:
    from cycleio.report.closeness import GOAL_MEDIAN, GOAL_SHARE, bands_agree, efficiency_goals

    rows = []
    for index, table in enumerate(tables, start=1):
        goals = efficiency_goals(table)
        close = goals["rows"]
        if verdict_goal:
            rows.append(row(BENCHMARK, f"{case} run {index}: efficiency cells with a verdict", "cells", "",
                            [close["timed_rows"]], [verdict_goal], [close["timed_rows"] / verdict_goal], 1.0,
                            notes=f"timed rows with a fair reference; goal {verdict_goal} of 24"))
        for direction in ("write", "read"):
            mine = goals[direction]
            if mine["timed_rows"]:
                rows.append(row(BENCHMARK, f"{case} run {index}: median {direction} efficiency (timed rows)",
                                "step / replay", "", [mine["median"]], [1.0], [mine["median"]], None,
                                notes=f"{mine['timed_rows']} timed {direction} rows; goal "
                                      f"{GOAL_MEDIAN[0]}-{GOAL_MEDIAN[1]}: "
                                      + {True: "met", False: "missed", None: "not judged"}[mine["median_ok"]]))
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
    efficiency = fit = snakemake_s = None
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
        tables = REPO / "results" / study / "tables"
        efficiency = pd.read_csv(tables / "efficiency.csv") if (tables / "efficiency.csv").exists() else None
        fit = pd.read_csv(tables / "scaling_fit.csv") if (tables / "scaling_fit.csv").exists() else None
        snakemake_s = snakemake_seconds(log.read_text())
    finally:
        sampler.stopping.set()
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
        study_file.unlink(missing_ok=True)
    case = "smoke study (--quick)" if args.quick else "default study"
    rows = [row(BENCHMARK, f"{case}: wall time, make study", "wall time", "s", [seconds], [GOAL_S], [seconds / GOAL_S],
                None, higher_is_better=False,
                notes=f"`make study STUDY={study_file.name}`, config check and report included; no goal")]
    if snakemake_s is not None:
        rows.append(row(BENCHMARK, f"{case}: wall time, Snakemake's part", "wall time", "s", [snakemake_s], [GOAL_S],
                        [snakemake_s / GOAL_S], 1.0, higher_is_better=False,
                        notes="Snakemake's first to last timestamp in the run's log; baseline = the 300 s goal"))
    for what, peak, note in (
            ("study folders", sampler.peak_folders, "allocated bytes under " + ", ".join(map(str, folders))),
            ("filesystems", sampler.peak_fs, "statvfs used bytes, summed growth on "
             + ", ".join(map(str, sampler.filesystems)) + ": includes anything else written there meanwhile")):
        rows.append(row(BENCHMARK, f"{case}: peak disk, {what}", "peak disk use", "GB", [peak / 1e9], [GOAL_GB],
                        [peak / 1e9 / GOAL_GB], 1.0, higher_is_better=False,
                        notes=f"{note}; baseline = the 10 GB goal"))
    return rows, efficiency, fit


if __name__ == "__main__":
    sys.exit(standalone(run, __doc__))
