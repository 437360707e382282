"""(1) Surrogate efficiency: each step's storage MiB/s over a replay of the same bytes on the same tier.

The question every figure of a study must survive is "is this the tier or is this our overhead?".
Here each surrogate step runs as the study runs it (cycleio.runner.job, unstaged, so it reads and writes
on the tier under test), and right after each step fio replays what it did: the files of the
step (in size classes: count, mean size), the same transfer size (bytes over the storage calls the records count),
fsync per file; reads read such files back in the page-cache state the step's reads met (each read
record's ``cached_fraction``): from memory on /dev/shm, from the disk on ext4, where the benchmark
drops the tier's files from the page cache before each step (fio: ``--invalidate=1``).
The ratio is the step's bytes over its storage seconds (records ``read``/``write``: codec work,
netCDF metadata building and data generation are records of their own; the time they cover, so
ranks writing at once count once, as in efficiency.csv), over the replay's MiB/s.

Cases: C48 and C96 at L127 (the default study's grid and the next), on disk (ext4 under results/,
the embedded "lustre") and on /dev/shm; the serial forecast and the in-process writers of prep,
anal and post for every cycle; per_rank, quilt and diskless forecasts once per repeat. Goals: 0.90
for the serial and in-process writers, 0.80 for the other strategies.

This machine is a VM whose memory is backed on first touch (writing to never-touched memory ran at
a quarter of the speed of reused memory here): the benchmark touches most free memory first, so the
tmpfs and page-cache numbers of surrogate and replay are measured on equal terms. Its kernel also
pages out file data left untouched for about 30 s (DAMON reclaim), so whether a step's input was
still cached depended on how long ago it was written: hence the dropped pages on ext4, which make
every disk read a read from the disk.

After the repeats, one more cycle per resolution and tier runs its serial forecast, then fio's replay of
its writes, under strace: the profile rows compare the rate inside their write calls and per second
of fsync, and the notes put the step's recorded write seconds beside its seconds in those calls, so a
write ratio below the goal says whether the time went to the kernel or to cycleio.

Run alone: .venv/bin/python bench/bench_efficiency.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from cycleio.benchmarks import benchparse  # noqa: E402
from cycleio.config.calendar import shift_cycle  # noqa: E402
from cycleio.config.settings import ArmSettings  # noqa: E402
from cycleio.intervals import covered_seconds  # noqa: E402
from cycleio.surrogates.grid import Grid  # noqa: E402
from cycleio.config.forecast import ForecastSettings  # noqa: E402
from cycleio.runner.job import run_step  # noqa: E402
from cycleio.runner.persistentjobs import run_arrival, run_cleanup, run_coldstart  # noqa: E402
from cycleio.records import read_records  # noqa: E402
from cycleio.benchmarks.paired import cold_paths  # noqa: E402
from cycleio.benchmarks.pairedspecs import TIMED_BYTES, make_room, replay_specs, replay_totals  # noqa: E402
from cycleio.benchmarks.specs import ReplaySpec  # noqa: E402
from cycleio.benchmarks.tools.fio import replay_command as fio_replay_command  # noqa: E402
from cycleio.benchmarks.tools.fio import replay_layout_command as fio_replay_layout_command  # noqa: E402
from cycleio.storage.pagecache import evict  # noqa: E402
from cycleio.config.tierspec import Tier  # noqa: E402

MiB = 2**20
START = "2026010100"
GOAL = {"serial": 0.90, "per_rank": 0.80, "quilt": 0.80, "diskless": 0.80}
NOISE = "fio against itself"  # the replay run twice in a row: the spread any ratio here can have


WARM_CHILD = """
import numpy as np, sys
held = []
for _ in range(int(sys.argv[1])):
    block = np.empty(2**30, np.uint8)
    block[::4096] = 1
    held.append(block)
"""


def warm_memory(fraction: float = 0.8) -> float:
    """Touch most of the free memory once, so no later write is the first to touch a page.

    In a child process: a process's peak RSS passes to the programs it starts (Linux keeps it across
    exec), so touching it here would inflate every later peak-RSS measurement of this run.
    """
    available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", WARM_CHILD, str(int(available * fraction) // 2**30)], check=True)
    return time.perf_counter() - t0


def evict_tree(root: Path) -> None:
    for folder, _, names in os.walk(root):
        for name in names:
            evict(Path(folder) / name)


def tiers(tag: str) -> dict[str, Path]:
    return {"disk": REPO / "results" / "bench-tiers" / f"efficiency-{tag}",
            "shm": Path("/dev/shm") / f"cycleio-bench-efficiency-{tag}"}


def arm(resolution: str, tier_name: str, root: Path, strategy: str = "serial") -> ArmSettings:
    tier = Tier(tier_name, "memory" if tier_name == "shm" else "posix", str(root))
    n = Grid(resolution, 127).n
    return ArmSettings(study="bench", arm=tier_name, start=START, seed=1, resolution=resolution, levels=127,
                       persistent=tier, scratch=tier, strategy=strategy,
                       forecast=ForecastSettings(obs_scale=(n / 768) ** 2))


def step_rates(records: list[dict]) -> dict[tuple[str, str], dict]:
    """Per (step, op): bytes, storage seconds and cached share of the run phase's reads and writes.

    The seconds are the time the records cover, as in efficiency.csv: ranks writing at once (per_rank,
    quilt) count once, so the rate is the step's aggregate MiB/s."""
    out: dict[tuple[str, str], dict] = {}
    for r in records:
        if r["phase"] == "run" and r["op"] in ("read", "write") and r["bytes"] > 0:
            entry = out.setdefault((r["step"], r["op"]), {"bytes": 0, "intervals": [], "cached_bytes": 0.0})
            entry["bytes"] += r["bytes"]
            entry["intervals"].append((r["t_start"], r["t_start"] + r["seconds"]))
            entry["cached_bytes"] += (r.get("cached_fraction") or 0.0) * r["bytes"]
    for entry in out.values():
        entry["cached"] = entry.pop("cached_bytes") / entry["bytes"]
        starts, stops = zip(*entry.pop("intervals"))
        entry["seconds"] = covered_seconds(starts, stops)
    return out


def replay(records: list[dict], tier_name: str, root: Path, raw: Path, fio: str, kept: list[Path],
           run: int = 0, prefix: list[str] | None = None, ops: tuple[str, ...] = ("read", "write"),
           ) -> dict[tuple[str, str], float]:
    """fio's MiB/s for each (step, op) of these records: the same files (size classes), bytes and transfer sizes.

    Each replay lands new files in folders of its own under ``root/.replay``, kept (in ``kept``, for
    the caller to remove) while the tier has room (pairedspecs.make_room), as the step's own files stay:
    writing where files were deleted a moment before reuses the pages the kernel just freed, which
    on this VM ran at three times the speed of new ones.
    """
    events = pd.DataFrame(records)
    events["arm"], events["cycle"] = events.get("arm", "a"), events["cycle"]
    out = {}
    for plan in replay_specs(events, tier_name, ReplaySpec()):
        if plan["op"] not in ops:
            continue
        make_room(kept, plan["bytes"], root, tier_name == "shm")
        folder = root / ".replay" / f"{plan['step']}-{plan['op']}.{run}"
        folder.mkdir(parents=True)
        kept.append(folder)
        json_out = raw / f"replay-{plan['step']}-{plan['op']}.json"
        if plan["op"] == "read":
            layout = fio_replay_layout_command(fio, plan["classes"], folder, raw / "replay-layout.json")
            subprocess.run(layout.argv, cwd=layout.cwd, check=True, capture_output=True)
            if tier_name != "shm":  # cold classes from storage, dropped before fio starts as the study's replay does
                for path in cold_paths(plan["classes"], folder, own_files=False):
                    evict(path)
        replay = fio_replay_command(fio, plan["classes"], folder, json_out, plan["op"])
        subprocess.run([*(prefix or []), *replay.argv], cwd=replay.cwd, check=True, capture_output=True)
        rows = [r for r in replay_totals(benchparse.parse_fio_json(json_out), plan) if r["operation"] == plan["op"]]
        out[(plan["step"], plan["op"])] = rows[0]["bw_MiB_per_s"]
    return out


def run_cycle(settings: ArmSettings, cycle: str, work: Path, steps=None, replay_on: tuple | None = None) -> list[dict]:
    """Run a cycle's steps; with ``replay_on`` (tier name, root, fio), replay each step right after it
    ran, so step and replay meet the same state of the machine, and return those samples."""
    from cycleio.config.forecast import cycle_steps

    samples = []
    for step in steps or cycle_steps(cycle, START, settings.forecast):
        out = work / f"{cycle}.{step}.{settings.strategy}"
        if settings.persistent.kind != "memory":
            evict_tree(Path(settings.persistent.path))  # see the module's docstring: reads from storage, as the replay
        run_step(settings, cycle, step, Path(f"{out}.jsonl"), Path(f"{out}.json"))
        if replay_on is None:
            continue
        records = read_records(f"{out}.jsonl")
        kept: list[Path] = []
        reference = replay(records, *replay_on[:2], work, replay_on[2], kept)
        # the serial steps' replays run twice: how far fio strays from itself is the noise floor of every ratio
        again = replay(records, *replay_on[:2], work, replay_on[2], kept, run=1) if settings.strategy == "serial" else {}
        shutil.rmtree(Path(replay_on[1]) / ".replay", ignore_errors=True)
        for (step_, op), rate in step_rates(records).items():
            if (step_, op) in reference:
                samples.append({"strategy": settings.strategy, "step": step_, "op": op, "bytes": rate["bytes"],
                                "cached": rate["cached"],
                                "surrogate": rate["bytes"] / MiB / rate["seconds"],
                                "replay": reference[(step_, op)]})
            if (step_, op) in again:
                samples.append({"strategy": NOISE, "step": step_, "op": op, "bytes": rate["bytes"],
                                "cached": rate["cached"], "surrogate": again[(step_, op)],
                                "replay": reference[(step_, op)]})
    return samples


def measure(resolution: str, tier_name: str, root: Path, repeats: int, fio: str, work: Path,
            profile: list[dict] | None = None) -> list[dict]:
    """Samples of (strategy, step, op, surrogate MiB/s, replay MiB/s), one per cycle and strategy; with
    ``profile``, one more cycle whose forecast writes and their replay run under strace (its rows)."""
    settings = arm(resolution, tier_name, root)
    run_coldstart(settings, work / "cold.jsonl", work / "cold.json")
    run_cycle(settings, START, work)  # the half cycle: the next cycle's analysis reads its forecast
    samples = []
    for rep in range(repeats):
        cycle = shift_cycle(START, 6 * (rep + 1))
        run_arrival(settings, cycle, "dump", work / f"dump{rep}.jsonl", work / f"dump{rep}.json")
        samples += run_cycle(settings, cycle, work, replay_on=(tier_name, root, fio))
        for strategy in ("per_rank", "quilt", "diskless"):
            samples += run_cycle(arm(resolution, tier_name, root, strategy), cycle, work, ["fcst"],
                                 replay_on=(tier_name, root, fio))
        for done in (shift_cycle(cycle, -12), shift_cycle(cycle, -6)):  # as cycles.keep 1: the tier holds two cycles
            run_cleanup(settings, done, work / f"cleanup{done}.jsonl", work / f"cleanup{done}.json")
    if profile is not None:
        profile.extend(write_call_profile(settings, shift_cycle(START, 6 * (repeats + 1)), work, root, tier_name, fio))
    return samples


def run(args) -> list[dict]:
    fio = shutil.which("fio")
    if not fio:
        raise RuntimeError("fio is not installed (Debian: apt-get install fio)")
    if not STRACE:
        raise RuntimeError("strace is not installed (Debian: apt-get install strace); the write profile needs it")
    warm_s = warm_memory()
    resolutions = ["C48"] if args.quick else ["C48", "C96"]
    repeats = {"C48": 1 if args.quick else 3, "C96": 2}  # C96 moves four times the bytes of C48
    rows = []
    for resolution in resolutions:
        for tier_name, root in tiers(str(os.getpid())).items():
            work = root.parent / f"{root.name}-records"
            for folder in (root, work):
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir(parents=True)
            profile: list[dict] = []
            try:
                samples = measure(resolution, tier_name, root, repeats[resolution], fio, work,
                                  None if args.quick else profile)
            finally:
                shutil.rmtree(root, ignore_errors=True)
                shutil.rmtree(work, ignore_errors=True)
            frame = pd.DataFrame(samples)
            for (strategy, step, op), group in frame.groupby(["strategy", "step", "op"], sort=True):
                ratios = (group["surrogate"] / group["replay"]).tolist()
                timed = group["bytes"].median() >= TIMED_BYTES
                rows.append({
                    "benchmark": "surrogate efficiency",
                    "case": (f"{resolution} {tier_name} {step} {op}"
                             + ("" if strategy == "serial" else f" ({strategy})")),
                    "metric": "storage MiB/s", "unit": "MiB/s",
                    "value": statistics.median(group["surrogate"]), "baseline": statistics.median(group["replay"]),
                    "ratio": statistics.median(ratios), "min": min(ratios), "median": statistics.median(ratios),
                    "max": max(ratios), "repeats": len(ratios), "goal": GOAL.get(strategy) if timed else None,
                    "higher_is_better": True,
                    "notes": (("a second fio replay over the first, no goal: the noise floor; " if strategy == NOISE
                               else "fio replay of the same files, bytes and transfer size; ")
                              + f"{group['bytes'].median() / MiB:.1f} MiB per job"
                              + (f"; {100 * group['cached'].median():.0f}% of the bytes cached as the step read them"
                                 if op == "read" else "")
                              + ("" if timed else ": too little to time reliably, no goal")),
                })
            rows += [{**r, "case": f"{resolution} {tier_name} {r['case']}"} for r in profile]
    rows.append(read_call_size_row(fio, Path("/dev/shm") / f"cycleio-bench-calls-{os.getpid()}", 3 if args.quick else 5))
    for tier_name, root in tiers(f"pages-{os.getpid()}").items():
        rows.append(fresh_pages_row(fio, tier_name, root, 2 if args.quick else 3))
        rows.append(first_read_row(fio, tier_name, root, 2 if args.quick else 3))
        if tier_name == "disk":  # tmpfs has no O_DIRECT
            rows.append(page_cache_row(fio, tier_name, root, 3 if args.quick else 5))
    return rows


STRACE = shutil.which("strace")
WRITE_CALLS = ("write", "pwrite64", "writev", "pwritev", "pwritev2")


def syscall_totals(prefix: Path) -> dict[str, float]:
    """From ``strace -ff -T`` files (one per process and thread): bytes and seconds of the write calls,
    seconds of fsync (files' and folders'), over every process."""
    totals = {"bytes": 0.0, "write_s": 0.0, "calls": 0, "fsync_s": 0.0, "fsyncs": 0}
    pattern = re.compile(r"^(\w+)\(.*\)\s+=\s+(-?\d+).*<([\d.]+)>$")
    for path in prefix.parent.glob(prefix.name + ".*"):
        for line in path.read_text(errors="replace").splitlines():
            found = pattern.match(line)
            if not found:
                continue
            call, result, seconds = found.group(1), int(found.group(2)), float(found.group(3))
            if call in ("fsync", "fdatasync"):
                totals["fsync_s"] += seconds
                totals["fsyncs"] += 1
            elif call in WRITE_CALLS and result > 0:
                totals["bytes"] += result
                totals["write_s"] += seconds
                totals["calls"] += 1
    return totals


def write_call_profile(settings: ArmSettings, cycle: str, work: Path, root: Path, tier_name: str,
                       fio: str) -> list[dict]:
    """Where a forecast write ratio below 1 goes: the serial forecast of one more cycle, then fio's replay
    of its writes, each under strace (only write, pwrite64 and fsync stop the traced process), and the
    rate inside their write calls (the copy into the page cache) and per second of fsync. The same
    rate inside the write calls of both says the time is the kernel's, not cycleio's; a lower one in
    the step's says that copy cost more there (on a VM: pages the host had to back first)."""
    from cycleio.config.forecast import cycle_steps

    run_arrival(settings, cycle, "dump", work / "profile-dump.jsonl", work / "profile-dump.json")
    steps = list(cycle_steps(cycle, START, settings.forecast))
    run_cycle(settings, cycle, work, steps[:steps.index("fcst")])
    if settings.persistent.kind != "memory":
        evict_tree(Path(settings.persistent.path))
    trace = ["strace", "-ff", "-qq", "-T", "--seccomp-bpf", "-e", f"trace={','.join(WRITE_CALLS)},fsync,fdatasync"]
    step_trace, fio_trace = work / "strace" / "step", work / "strace" / "fio"
    step_trace.parent.mkdir(parents=True, exist_ok=True)
    out = work / f"{cycle}.fcst.profile"
    subprocess.run([*trace, "-o", str(step_trace), sys.executable, "-m", "cycleio", "step", "--arm-settings",
                    settings.to_json(), "--cycle", cycle, "--step", "fcst", "--records", f"{out}.jsonl",
                    "--manifest", f"{out}.json"], check=True, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(REPO / "scripts")})
    records = read_records(f"{out}.jsonl")
    storage_s = step_rates(records)[("fcst", "write")]["seconds"]
    kept: list[Path] = []
    replay(records, tier_name, root, work, fio, kept, run=9, prefix=[*trace, "-o", str(fio_trace)], ops=("write",))
    shutil.rmtree(root / ".replay", ignore_errors=True)
    step, base = syscall_totals(step_trace), syscall_totals(fio_trace)
    shutil.rmtree(step_trace.parent, ignore_errors=True)
    if not step["calls"] or not base["calls"]:
        return []
    into_cache = (step["bytes"] / MiB / step["write_s"], base["bytes"] / MiB / base["write_s"])
    per_fsync = (step["bytes"] / MiB / max(step["fsync_s"], 1e-9), base["bytes"] / MiB / max(base["fsync_s"], 1e-9))
    detail = (f"step: write records {storage_s:.2f} s, {step['bytes'] / MiB:,.0f} MiB in {step['calls']} write calls, "
              f"{step['write_s']:.2f} s in them, "
              f"{step['fsync_s']:.2f} s in {step['fsyncs']} fsyncs (files and folders); fio: {base['bytes'] / MiB:,.0f} "
              f"MiB in {base['calls']} calls, {base['write_s']:.2f} s, {base['fsync_s']:.2f} s in {base['fsyncs']} fsyncs")
    note = "a profile, no goal (strace, one cycle): "
    return [
        {"benchmark": "surrogate efficiency", "case": "fcst write: inside the write calls (profile)",
         "metric": "MiB/s inside write calls", "unit": "MiB/s", "value": into_cache[0], "baseline": into_cache[1],
         "ratio": into_cache[0] / into_cache[1], "min": into_cache[0] / into_cache[1],
         "median": into_cache[0] / into_cache[1], "max": into_cache[0] / into_cache[1], "repeats": 1, "goal": None,
         "higher_is_better": True, "notes": note + detail},
        {"benchmark": "surrogate efficiency", "case": "fcst write: per second of fsync (profile)",
         "metric": "MiB per fsync second", "unit": "MiB/s", "value": per_fsync[0], "baseline": per_fsync[1],
         "ratio": per_fsync[0] / per_fsync[1], "min": per_fsync[0] / per_fsync[1],
         "median": per_fsync[0] / per_fsync[1], "max": per_fsync[0] / per_fsync[1], "repeats": 1, "goal": None,
         "higher_is_better": True, "notes": note + "the bytes written over the seconds the processes spent in fsync (the step also syncs "
                                  "each file's folder after its rename, booked as rename in its records)"},
    ]


def fio_rate(argv: list[str], out: Path, op: str) -> float:
    """Run fio (``argv``, JSON output) into ``out``; the first job's MiB/s for ``op`` (read or write)."""
    subprocess.run([*argv, f"--output={out}"], check=True, capture_output=True)
    return json.loads(out.read_text())["jobs"][0][op]["bw"] / 1024


def first_read_row(fio: str, tier_name: str, folder: Path, repeats: int) -> dict:
    """Why the paired replay reads its laid-out files once before it times a read: fio reading files it has just
    written and fsynced (12 x 20 MB, all in the page cache), the first time over the second. A step's inputs have
    been read once before it reads them (staging's verify, or the checksums of the job that wrote them)."""
    rates: dict[str, list[float]] = {"first": [], "second": []}
    files = ["--nrfiles=12", "--filesize=20m", "--size=240m", "--bs=1m", "--ioengine=psync", "--output-format=json",
             "--filename_format=r.$filenum", "--file_service_type=sequential", "--openfiles=1"]
    try:
        for _ in range(repeats):
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            subprocess.run([fio, "--name=lay", "--rw=write", "--fsync_on_close=1", "--create_on_open=1", *files,
                            f"--directory={folder}", f"--output={folder / 'lay.json'}"], check=True, capture_output=True)
            for state in rates:
                rates[state].append(fio_rate([fio, "--name=r", "--rw=read", "--invalidate=0", *files,
                                              f"--directory={folder}"], folder / f"{state}.json", "read"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return profile_row(f"{tier_name} read: first read of new files over the second (fio)", "read MiB/s",
                       rates["first"], rates["second"],
                       "a profile, no goal: 240 MB of files fio just wrote and fsynced, read from the page cache the "
                       "first time over the second; below 1: why the paired replay reads its laid-out files once, "
                       "untimed, as a step's inputs were read once (by staging's verify) before the step reads them")


def profile_row(case: str, metric: str, measured: list[float], baseline: list[float], notes: str) -> dict:
    """A row without a goal: the measured rates over the baseline's, paired by repeat."""
    ratios = [m / b for m, b in zip(measured, baseline)]
    return {"benchmark": "surrogate efficiency", "case": case, "metric": metric, "unit": "MiB/s",
            "value": statistics.median(measured), "baseline": statistics.median(baseline),
            "ratio": statistics.median(ratios), "min": min(ratios), "median": statistics.median(ratios),
            "max": max(ratios), "repeats": len(ratios), "goal": None, "higher_is_better": True, "notes": notes}


FRESH_PAGES_WAIT_S = 10  # this VM reports freed memory to its host within seconds (page_reporting)


def fresh_pages_row(fio: str, tier_name: str, folder: Path, repeats: int) -> dict:
    """Why a write ratio can fall far below 1 on a VM: fio writing 1 GiB of new files (8 x 128 MiB,
    fsync) into memory left idle for a while, over the same written again at once into the pages the
    first write's files just freed (deleted). On physical memory the ratio is about 1; on a host that
    backs guest memory on first touch the first write pays for every page. A step writes into fresh
    pages, and so does the replay, which lands new files beside those it wrote before."""
    rates: dict[str, list[float]] = {"fresh": [], "reused": []}
    job = ["--name=w", "--rw=write", "--bs=8m", "--nrfiles=8", "--filesize=128m", "--size=1g", "--ioengine=psync",
           "--fsync_on_close=1", "--create_on_open=1", "--invalidate=0", "--fallocate=none", "--output-format=json"]
    try:
        for _ in range(repeats):
            for state in rates:
                if state == "fresh":
                    shutil.rmtree(folder, ignore_errors=True)
                    time.sleep(FRESH_PAGES_WAIT_S)
                else:
                    for path in folder.iterdir():
                        if path.name.startswith("w."):
                            path.unlink()
                folder.mkdir(parents=True, exist_ok=True)
                rates[state].append(fio_rate([fio, *job, f"--directory={folder}"], folder / f"{state}.json", "write"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return profile_row(f"{tier_name} write: fresh pages over reused pages (fio)", "write MiB/s", rates["fresh"],
                       rates["reused"],
                       f"a profile, no goal: 1 GiB of new files after {FRESH_PAGES_WAIT_S} s idle, over the same "
                       "rewritten at once after deleting them; below 1: the host's cost of fresh guest pages (or "
                       "whatever else idle time changes on the host): the study's paired replay writes in both states "
                       "(docs/performance.md)")


def page_cache_row(fio: str, tier_name: str, folder: Path, repeats: int) -> dict:
    """What sets a buffered write's rate on a VM with free page reporting (cycleio.hostmemory): fio writing 40 new
    files of 20 MiB with an fsync each through the page cache, over the same with O_DIRECT (straight to the device),
    one after the other in each repeat, the order alternating. Far below 1 where the page cache's pages cost a host
    fault each (pages the guest handed back); about 1 where memory is the guest's own."""
    rates: dict[str, list[float]] = {"buffered": [], "direct": []}
    job = ["--name=w", "--rw=write", "--bs=4m", "--nrfiles=40", "--filesize=20m", "--size=800m", "--ioengine=psync",
           "--file_service_type=sequential", "--openfiles=1", "--fsync_on_close=1", "--create_on_open=1",
           "--invalidate=0", "--fallocate=none", "--output-format=json"]
    try:
        for index in range(repeats):
            for state in (("buffered", "direct") if index % 2 == 0 else ("direct", "buffered")):
                target = folder / f"{state}.{index}"
                target.mkdir(parents=True)
                rates[state].append(fio_rate([fio, *job, f"--direct={int(state == 'direct')}", f"--directory={target}"],
                                             folder / f"{state}.{index}.json", "write"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return profile_row(f"{tier_name} write: page cache over direct to the device (fio)", "write MiB/s",
                       rates["buffered"], rates["direct"],
                       "a profile, no goal: 800 MiB of new files (20 MiB each, fsync each) buffered over O_DIRECT, "
                       "nothing deleted in between; far below 1: the device is not what limits a buffered write, "
                       "the guest's free pages are (free page reporting: docs/performance.md); about 1 on a machine "
                       "whose memory is its own")


def read_call_size_row(fio: str, folder: Path, repeats: int) -> dict:
    """Why the readers move at most 8 MiB per call: fio reading one cached 512 MiB file in 64 MiB calls
    over the same in 8 MiB calls, alternated (the copy's destination outgrows the CPU's caches)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "file"
    rates: dict[str, list[float]] = {"8m": [], "64m": []}
    try:
        subprocess.run([fio, "--name=make", f"--filename={path}", "--rw=write", "--bs=8m", "--size=512m",
                        "--output-format=json", "--output=/dev/null"], check=True, capture_output=True)
        for _ in range(repeats):
            for bs in rates:
                out = folder / f"read-{bs}.json"
                subprocess.run([fio, "--name=read", f"--filename={path}", "--rw=read", f"--bs={bs}", "--size=512m",
                                "--ioengine=psync", "--invalidate=0", "--loops=2", "--output-format=json",
                                f"--output={out}"], check=True, capture_output=True)
                rates[bs].append(json.loads(out.read_text())["jobs"][0]["read"]["bw"] / 1024)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    ratios = [big / small for big, small in zip(rates["64m"], rates["8m"])]
    return {"benchmark": "surrogate efficiency", "case": "shm read: 64 MiB calls over 8 MiB calls (fio)",
            "metric": "read MiB/s", "unit": "MiB/s", "value": statistics.median(rates["64m"]),
            "baseline": statistics.median(rates["8m"]), "ratio": statistics.median(ratios), "min": min(ratios),
            "median": statistics.median(ratios), "max": max(ratios), "repeats": len(ratios), "goal": None,
            "higher_is_better": True,
            "notes": "a profile, no goal: why the readers move at most 8 MiB per call (512 MiB in the page cache)"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="C48 only, one repeat")
    for row in run(parser.parse_args()):
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
