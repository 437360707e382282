"""(7) Soak: the smoke study under random SIGKILLs of the whole `make study`, each resumed by plain `make study`.

What a killed run (a lost node, an OOM killer, a Ctrl-\\ at 3 a.m.) must leave: nothing a plain
`make study` cannot resume, and no file that differs from its manifest. This runs the smoke study
(config/studies/smoke.yaml renamed `soak`, so no real study is touched) once without a kill to learn
its wall time T, then again from fresh results: `make study` is started in a session of its own and
its whole process group (make, Snakemake, the jobs, the MPI ranks) gets SIGKILL after a random delay
within T; the next plain `make study` resumes it, and may be killed in turn. When a `make study` ends
before its kill, the study is complete: every manifest's files are re-read against their checksums
(`cycleio verify`'s code), the manifests are compared with the unkilled run's, and every tier's study
folder (and results/soak) is searched for temporaries (`.NAME.tmp-PID`), job scratch folders
(`.job.*`) and benchmark data (`<tier>/soak/bench/`, which each benchmark job removes when done).
Then the study starts again from fresh results, until N kills (10) have happened; the last study
is finished by a `make study` without a kill and checked alike. A kill survived when the
study it interrupted completed with every file verified and nothing left behind; a `make study` that
ends with an error fails every kill of its study.

Rows: kills survived (of N, goal all), files verified (of those the unkilled run listed, goal all),
temporaries left (goal none). The delays are drawn from --seed, so a run can be repeated.
--quick: 2 kills, benchmarks off.

Run alone: .venv/bin/python bench/bench_soak.py [--quick] [--kills N] [--seed S]
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from bench_study import study_folders
from common import BENCH_TIERS, REPO, row, standalone

sys.path.insert(0, str(REPO / "scripts"))
from cycleio.fsutil import is_temporary  # noqa: E402
from cycleio.storage.checksums import verify_manifest  # noqa: E402

BENCHMARK = "soak"
STUDY = "soak"
KILLS, QUICK_KILLS = 10, 2


@dataclass
class Check:
    """What one completed study left: manifests, files matched and what is wrong."""

    manifests: set[str] = field(default_factory=set)
    matched: int = 0
    problems: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)


class Soak:
    def __init__(self, quick: bool):
        layer = yaml.safe_load((REPO / "config" / "studies" / "smoke.yaml").read_text())
        layer["study"] = STUDY
        if quick:
            layer.setdefault("benchmarks", {})["enabled"] = False
        BENCH_TIERS.mkdir(parents=True, exist_ok=True)
        self.study_file = BENCH_TIERS / f"{STUDY}.yaml"
        self.study_file.write_text(yaml.safe_dump(layer))
        config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
        self.folders = study_folders(config, STUDY)  # results/soak and the study's folder on every tier
        self.log = BENCH_TIERS / f"{STUDY}.log"
        self.log.write_text("")
        self.env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
        # the jobs import this checkout's package, whichever venv runs them
        self.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "scripts"), os.environ.get("PYTHONPATH")]))
        self.argv = ["make", "-C", str(REPO), "study", f"STUDY={self.study_file}"]

    def fresh(self) -> None:
        for folder in self.folders:
            shutil.rmtree(folder, ignore_errors=True)

    def start(self) -> subprocess.Popen:
        with open(self.log, "a") as out:
            out.write(f"\n===== {time.strftime('%H:%M:%S')} {' '.join(self.argv)}\n")
            out.flush()
            return subprocess.Popen(self.argv, cwd=REPO, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)

    def manifests(self) -> list[Path]:
        return sorted((REPO / "results" / STUDY / "arms").rglob("*.manifest.json"))

    def check(self) -> Check:
        found = Check()
        for manifest in self.manifests():
            found.manifests.add(manifest.relative_to(REPO / "results" / STUDY).as_posix())
            matched, problems = verify_manifest(manifest)
            found.matched += matched
            found.problems += problems
        results, *tiers = self.folders
        for folder in self.folders:
            for path in folder.rglob("*") if folder.exists() else []:
                benchmark_data = folder in tiers and path.is_file() and path.relative_to(folder).parts[0] == "bench"
                if is_temporary(path.name) or path.name.startswith(".job.") or benchmark_data:
                    found.leftovers.append(str(path))
        return found

    def log_tail(self, lines: int = 15) -> str:
        return "\n".join(self.log.read_text().splitlines()[-lines:])


def run(args) -> list[dict]:
    kills_wanted = getattr(args, "kills", 0) or (QUICK_KILLS if args.quick else KILLS)
    seed = getattr(args, "seed", 1)
    rng = random.Random(seed)
    soak = Soak(args.quick)
    soak.fresh()
    try:
        t0 = time.perf_counter()
        if soak.start().wait():
            raise RuntimeError(f"the unkilled `make study` failed; last lines of {soak.log}:\n{soak.log_tail()}")
        expected_s = time.perf_counter() - t0
        reference = soak.check()
        if reference.problems or reference.leftovers or not reference.manifests:
            raise RuntimeError(f"the unkilled study does not verify: {reference.problems[:5]} {reference.leftovers[:5]}")
        print(f"   unkilled study: {expected_s:.0f} s, {len(reference.manifests)} manifests, "
              f"{reference.matched} files verified", flush=True)

        kills: list[str] = []  # one line per kill: when, and how far its study had got
        pending = 0  # kills of the study under way
        survived, matched, studies, lost, leftovers = 0, 0, 0, [], []
        soak.fresh()
        while True:
            process = soak.start()
            killing = len(kills) < kills_wanted
            delay = rng.uniform(0.02, 1.0) * expected_s if killing else 5 * expected_s + 120
            try:
                code = process.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                if not killing:  # a resume that hangs is as bad as one that fails
                    code = f"killed after {delay:.0f} s without finishing"
                else:
                    kills.append(f"kill {len(kills) + 1} at {delay:.1f} s ({len(soak.manifests())} of "
                                 f"{len(reference.manifests)} manifests there)")
                    print(f"   {kills[-1]}", flush=True)
                    pending += 1
                    continue
            studies += 1
            found = soak.check()
            wrong = ([f"`make study` failed ({code}): {soak.log_tail(5)}"] if code else []) + found.problems + [
                f"manifest missing: {m}" for m in sorted(reference.manifests - found.manifests)]
            matched += found.matched
            lost += wrong
            leftovers += found.leftovers
            if not wrong and not found.leftovers:
                survived += pending
            print(f"   study {studies} complete after {pending} kills: {found.matched} files verified, "
                  f"{len(wrong)} problems, {len(found.leftovers)} temporaries", flush=True)
            for line in (wrong + found.leftovers)[:10]:
                print(f"     {line}", flush=True)
            pending = 0
            soak.fresh()
            if len(kills) >= kills_wanted:
                break
    finally:
        soak.fresh()
        soak.study_file.unlink(missing_ok=True)

    print(f"   kills survived: {survived}/{len(kills)}; lost: {len(lost)} "
          f"({'; '.join(lost[:5]) or 'nothing'}); temporaries left: {len(leftovers)}", flush=True)
    expected_files = studies * reference.matched
    notes = (f"`make study STUDY={soak.study_file.name}` (the smoke study{', benchmarks off' if args.quick else ''}); "
             f"unkilled run {expected_s:.0f} s; {studies} studies, seed {seed}; " + "; ".join(kills))
    return [
        row(BENCHMARK, "kills survived (resumed by plain make study, verified)", "kills survived", "kills",
            [survived], [len(kills)], [survived / len(kills)], 1.0, notes=notes),
        row(BENCHMARK, "files verified against their manifests", "files verified", "files", [matched],
            [expected_files], [matched / expected_files], 1.0,
            notes=f"{reference.matched} files per study x {studies} studies; lost: {'; '.join(lost[:10]) or 'nothing'}"),
        row(BENCHMARK, "temporaries and job folders left on the tiers", "files left", "files", [len(leftovers)], [0],
            [len(leftovers)], 0.0, higher_is_better=False,
            notes="the goal is none, so the ratio is the count; " + ("; ".join(leftovers[:10]) or "none")),
    ]


def options(parser) -> None:
    parser.add_argument("--kills", type=int, default=0, help=f"how many SIGKILLs (default {KILLS}, --quick {QUICK_KILLS})")
    parser.add_argument("--seed", type=int, default=1, help="seed of the random delays")


if __name__ == "__main__":
    sys.exit(standalone(run, __doc__, options))
