"""A step's paired replay: right after the step ran, inside its job, fio does the step's reads and writes
again on the same tier, a few times, so the efficiency table compares the step with the storage doing
the same work in the same conditions, and the repetitions give each ratio its band.

What "the same" means (benchmarks.pairedspecs.replay_specs): the step's files in size classes (count, mean
size, the step's own transfer size), fsync per written file as the step lands them; reads read the step's own
input files where they still are (pairedspecs.own_read_files: the same pages, nothing to lay out), else files fio
lays out once per job and reads once (not timed: the step's inputs had been read once too, by staging's verify or
by the job that wrote them); each repetition reads from the page cache where the step's reads found their files
cached, else from storage (the files' pages dropped just before: _evict_cold).

Writes alternate between two page states, because on a VM they differ by up to seven times: even
repetitions write new files beside everything else, as the step did (pages from the free pool, which a VM
with free page reporting has partly handed back to its host: first touches, slow), odd ones first delete
the files of the repetition before and write where they were (pages the kernel just freed: fast).
bench/RESULTS.md has both on the README's VM ("fresh pages over reused"). Before each file of the step and each
write repetition the job measures the fresh pages there are (hostmemory, kept in the records); a new-file
repetition meets no more of them than its step did, the rest held while it runs (_page_state), and a write
row's reference is its replay at the step's share of them (report.pairedreference); its band spans every
repetition. On a machine whose memory does not go back to a host nothing is probed, the two states
agree and the band is the replay's own noise.

The replay's results are records (phase ``replay``, tool ``fio``, one per repetition and operation),
so they travel with the job's records; no table of the cycle's I/O counts them (records.cycle_records),
and a job's wall time leaves them out (aggregate.step_summary).
"""

from __future__ import annotations

import contextlib
import logging
import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from ..intervals import covered_seconds
from ..config.schema import schema_default
from ..config.tierspec import TierError
from ..hostmemory import fresh_MiB, fresh_pages_held, fresh_pages_measurable
from ..storage.tiers import TierSite
from ..units import MiB
from .common import parse_run, run_tool, time_limit
from .pairedspecs import make_room, own_read_files, replay_specs, replay_totals
from .specs import ReplaySpec
from .threshold import TimedThreshold
from .tools import fio, find_tool

log = logging.getLogger("cycleio")

# What a write repetition's record names in its ``file`` field: the two page states (the module's docstring)
NEW_FILES, REWRITTEN_FILES = "new files", "rewritten files"


MAX_READ_LOOPS = 8
# a new-file repetition holds the fresh pages above its step's share by more than this (hostmemory.fresh_pages_held):
# report.pairedreference takes the reference within 0.25 of the shares its repetitions met
HOLD_MARGIN = 0.1
# a replay lasts about this many times benchmarks.replay.min_seconds (read_loops gives the reason)
REPLAY_SPAN = 4


def write_copies(step_s: float, min_seconds: float) -> int:
    """How many times over a write replay writes a step's files, each time as new files of the same sizes: enough for
    about ``REPLAY_SPAN`` times ``min_seconds`` (at most ``MAX_READ_LOOPS``), for the reason read_loops gives. A step
    that wrote 100 MiB in 0.12 s is long enough to time, and fio's replay of it, as fast, would not be."""
    if step_s <= 0:
        return 1
    return max(1, min(MAX_READ_LOOPS, math.ceil(REPLAY_SPAN * min_seconds / step_s)))


def read_loops(plan: dict, step_s: float, min_seconds: float) -> int:
    """How many times the replay reads a step's files that were in memory (a memory tier's, or warm pages): enough
    for about ``REPLAY_SPAN`` times ``min_seconds``, at most ``MAX_READ_LOOPS``. fio reports whole milliseconds and
    pays its buffer's first page faults in each job, so a reference read of 0.08 s is off by more than the tolerance,
    where the step, timed per file into a buffer it touched beforehand, is not; read again, pages in memory give the
    same rate, so the repeats time the tier, not fio's start. Reads from storage are read once: a second pass would
    read memory."""
    if plan.get("cold") or step_s <= 0:
        return 1
    return max(1, min(MAX_READ_LOOPS, math.ceil(REPLAY_SPAN * min_seconds / step_s)))


@dataclass(frozen=True)
class PairedReplay:
    """A job's replay settings (config benchmarks.replay; ArmSettings.replay holds them for a paired job)."""

    repetitions: int = 2
    # reads of each job (None: every repetition); config.settings.paired_replay: the full paired cycles share a read's band
    read_repetitions: int | None = None
    transfer_size_bytes: int = 0  # 0: each size class's own mean transfer (the schema's auto)
    max_files: int = schema_default("benchmarks.replay.max_files")
    fio_path: str = ""
    # a step's reads or writes with less than this, or covering fewer seconds, cannot be timed: not replayed
    min_bytes: int = TimedThreshold.min_bytes
    min_seconds: float = TimedThreshold.min_seconds

    @property
    def reads(self) -> int:
        """How many times each job reads (writes: ``repetitions``)."""
        return min(self.repetitions, self.read_repetitions or self.repetitions)

    @classmethod
    def from_settings(cls, settings: dict) -> "PairedReplay | None":
        """None for a job that is not paired (its settings' ``replay`` is empty)."""
        return cls(**settings) if settings else None

    def run(self, step: str, records, scratch: TierSite, folder: Path, raw_dir: Path, label: str, phase: str = "run",
            ops: tuple[str, ...] = ("read", "write")) -> None:
        """Replay ``step``'s run-phase reads and writes (its records so far in ``records``, a RecordLog) in
        ``folder`` on ``scratch``, ``repetitions`` times, adding a record per repetition and operation; reads or
        writes too small or too short to time (``min_bytes``, ``min_seconds``) are not replayed. The archive job
        replays its ``phase`` ``archive`` reads on the persistent tier and its writes on the archive tier apart
        (``ops``)."""
        if "write" in ops and scratch.is_memory and fresh_pages_measurable():
            # no fair reference (report.pairedreference.reference_fair: the step's row says so), so none is measured
            log.info("%s %s write: on a memory tier of a machine that hands freed memory to its host a replay is no "
                     "fair reference for writes: not replayed", label, step)
            ops = tuple(op for op in ops if op != "write")
        runs = [r for r in records.records if r.step == step and r.phase == phase and r.op in ops]
        timeable = {op for op in ops if self._timeable([r for r in runs if r.op == op], label, step, op)}
        own = [r for r in runs if r.op in timeable]
        # the whole replay, fio's start-up and the read files' layout included: the job's wall time leaves it out;
        # a paired job has this record even when none of its I/O could be timed
        with records.timed(step=step, phase="replay", op="wall", n_files=0, tool="fio", **scratch.fields()):
            if own:
                try:
                    self._replay(own, step, records, scratch, folder, raw_dir, label, phase)
                except (TierError, fio.IologNameError) as err:  # the step's data are fine: only the instrument failed
                    records.records[:] = [r for r in records.records if not (r.step == step and r.phase == "replay")]
                    log.warning("%s no paired replay of %s, its rows stay not timed: %s", label, step, err)

    def _timeable(self, mine: list, label: str, step: str, op: str) -> bool:
        """Whether a step's reads (or writes), ``mine``, are enough to time (min_bytes, min_seconds)."""
        if not mine:
            return False
        nbytes = sum(r.bytes for r in mine)
        seconds = covered_seconds([r.t_start for r in mine], [r.t_start + r.seconds for r in mine])
        enough = TimedThreshold(min_bytes=self.min_bytes, min_seconds=self.min_seconds).enough(nbytes, seconds)
        if not enough:
            log.info("%s %s %s: %.1f MiB in %.3f s is too little to time (benchmarks.replay.min_bytes, min_seconds): "
                     "not replayed", label, step, op, nbytes / MiB, seconds)
        return enough

    def _replay(self, own: list, step: str, records, scratch: TierSite, folder: Path, raw_dir: Path,
                label: str, phase: str = "run") -> None:
        import pandas as pd

        events = pd.DataFrame([{"arm": r.arm, "cycle": r.cycle, "step": r.step, "phase": r.phase, "op": r.op,
                                "tier": r.tier, "bytes": r.bytes, "transfers": r.transfers, "file": r.file,
                                "cached_fraction": r.cached_fraction} for r in own])
        spec = ReplaySpec(transfer_size_bytes=self.transfer_size_bytes, max_files=self.max_files)
        plans = {plan["op"]: plan for plan in replay_specs(events, scratch.tier.name, spec, phase)}
        step_s = {op: covered_seconds([r.t_start for r in own if r.op == op],
                                      [r.t_start + r.seconds for r in own if r.op == op]) for op in plans}
        plans = self._fitted(plans, step_s, folder.parent)  # the step's files: relative to its folder
        path = find_tool("fio", self.fio_path)
        if not path:
            raise RuntimeError(f"{label} the paired replay needs fio: not found on PATH and benchmarks.fio_path is "
                               f"{self.fio_path!r}; install fio or set benchmarks.replay.enabled: false")
        raw_dir.mkdir(parents=True, exist_ok=True)
        kept: list[Path] = []
        share = step_fresh_share([r for r in own if r.op == "write"])
        t0 = time.perf_counter()
        try:
            for rep in range(self.repetitions):
                for op in ("read", "write"):  # in the step's order
                    if op in plans and (op == "write" or rep < self.reads):
                        loops = read_loops(plans[op], step_s[op], self.min_seconds) if op == "read" else 1
                        self._once(path, plans[op], rep, records, scratch, folder, raw_dir, kept, step, loops,
                                   share)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        reps = {"read": self.reads, "write": self.repetitions}
        log.info("%s replay of %s: %s in %.1f s", label, step,
                 ", ".join(f"{op} {p['files']} files {p['bytes'] / MiB:.1f} MiB x {reps[op]}" for op, p in plans.items()),
                 time.perf_counter() - t0)

    def _fitted(self, plans: dict, step_s: dict, root: Path) -> dict:
        """The plans as this job replays them: a short step's writes written over until long enough to time
        (write_copies), its reads from its own files under ``root`` where they still are (own_read_files)."""
        plans = dict(plans)
        if "write" in plans:
            write, copies = plans["write"], write_copies(step_s["write"], self.min_seconds)
            plans["write"] = {**write, "files": write["files"] * copies, "bytes": write["bytes"] * copies,
                              "classes": [{**c, "files": c["files"] * copies} for c in write["classes"]]}
        own_files = own_read_files(plans["read"], root) if "read" in plans else None
        if own_files is not None:
            plans["read"] = {**plans["read"], "classes": own_files, "own_files": True,
                             "bytes": sum(c["files"] * c["file_bytes"] for c in own_files)}
        return plans

    @staticmethod
    def _once(path: str, plan: dict, rep: int, records, scratch: TierSite, folder: Path, raw_dir: Path,
              kept: list[Path], step: str, loops: int = 1, step_share: float | None = None) -> None:
        op, classes = plan["op"], plan["classes"]
        rewrite = op == "write" and rep % 2 == 1
        if rewrite:  # into the pages the last repetition's files held: see the module's docstring
            last = folder / f"write.rep{rep - 1}"
            shutil.rmtree(last, ignore_errors=True)
            if last in kept:  # make_room may have let it go already, on a tier short of room
                kept.remove(last)
        # a read's files are laid out once and read by every repetition (fio drops a cold class's pages before each
        # read, and a warm class's stay cached): writing them again for each would only add their fsyncs to the job
        target = folder / (f"{op}.rep{rep}" if op == "write" else "read")
        name = f"{step}-{op}.rep{rep}"
        calls = sum(c["files"] * c["file_bytes"] / c["transfer_bytes"] for c in classes)
        limit = time_limit(plan["bytes"] * (1 + loops if op == "read" else 1), calls * loops)
        if not plan.get("own_files") and not target.exists():  # the step's own files need no layout
            make_room(kept, plan["bytes"], folder.parent, scratch.is_memory)
            scratch.require_space(plan["bytes"], f"the paired replay of {step}")
            target.mkdir(parents=True)
            kept.append(target)
            if op == "read":  # not timed
                layout = fio.replay_layout_command(path, classes, target, raw_dir / f"{name}.layout.json")
                parse_run(fio.parse, raw_dir / f"{name}.layout.json", "fio",
                          run_tool("fio", layout.argv, raw_dir, f"{name}.layout", limit, cwd=layout.cwd))
        if plan.get("own_files"):
            replay = fio.replay_own_read_command(path, classes, raw_dir / f"{name}.json", loops)
        else:
            replay = fio.replay_command(path, classes, target, raw_dir / f"{name}.json", op, loops)
        if op == "read":
            _evict_cold(classes, target, plan.get("own_files", False), records, step, scratch)
        with _page_state(op, rewrite, plan["bytes"], step_share) as fresh:  # the pages a write meets (hostmemory)
            t_start = time.time()
            run = run_tool("fio", replay.argv, raw_dir, name, limit, cwd=replay.cwd)
        rows = [r for r in replay_totals(parse_run(fio.parse, raw_dir / f"{name}.json", "fio", run), plan)
                if r["operation"] == op]
        cold = op == "read" and all(c["cold"] for c in classes)
        if op == "write":
            what = REWRITTEN_FILES if rewrite else NEW_FILES
        else:
            what = "files from storage" if cold else "files in memory"
        for row in rows:
            records.add(step=step, phase="replay", op=op, tool="fio", n_files=plan["files"], bytes=int(row["bytes"]),
                        file=what, t_start=t_start, seconds=float(row["seconds"]), transfers=int(round(calls * loops)),
                        cached_fraction=(0.0 if cold else 1.0) if op == "read" else None, repetition=rep,
                        fresh_MiB=fresh, **scratch.fields())


def _evict_cold(classes: list[dict], target: Path, own_files: bool, records, step: str, scratch: TierSite) -> None:
    """Drop the pages of a read's cold classes' files before fio starts, as the step's inputs were dropped before
    its run (storage.tiers.TierSite.drop_pages), so that neither side's timed reads include the drop (fio's own
    ``invalidate=1`` would drop each file as it opens it, inside its runtime: a cached 125 MiB file took 3-33 ms
    here). A memory tier's pages are its storage: nothing is dropped there."""
    scratch.drop_pages(cold_paths(classes, target, own_files), records, step)


def cold_paths(classes: list[dict], target: Path, own_files: bool) -> list[Path]:
    """The files of a read's cold classes: the step's own (each class's ``paths``) or those laid out in ``target``."""
    return [Path(p) for index, group in enumerate(classes) if group.get("cold")
            for p in (group["paths"] if own_files else sorted(target.glob(f"replay.{index}.*")))]


def fresh_found_MiB(files) -> float | None:
    """MiB of written files' bytes that found fresh pages: of each probed file, given as (bytes, fresh MiB its
    probe found; None or NaN where not probed), its bytes up to what its probe found. None where none was probed
    (a machine that keeps its memory, files under 2 MiB)."""
    probed = [(nbytes, found) for nbytes, found in files if found is not None and not math.isnan(found)]
    return sum(min(found, nbytes / MiB) for nbytes, found in probed) if probed else None


def step_fresh_share(writes: list) -> float | None:
    """The share of a step's written bytes (its write records) that found fresh pages (fresh_found_MiB), as
    report.pairedreference counts it; None where no file was probed."""
    found = fresh_found_MiB((r.bytes, r.fresh_MiB) for r in writes)
    total = sum(r.bytes for r in writes)
    return None if found is None or total <= 0 else min(1.0, found / (total / MiB))


@contextlib.contextmanager
def _page_state(op: str, rewrite: bool, nbytes: int, step_share: float | None):
    """Around one repetition: for a write, the fresh MiB it meets (None for a read or where not measurable). A
    new-file repetition meets its step's share of fresh pages, the excess held while it runs
    (hostmemory.fresh_pages_held: the reads just before it dropped their files' pages, which would otherwise give
    it the fast pages its step did not have); a rewrite meets the pages its delete just freed."""
    if op != "write":
        yield None
    elif rewrite or step_share is None:
        yield fresh_MiB()
    else:
        with fresh_pages_held(nbytes, step_share, HOLD_MARGIN) as fresh:
            yield fresh
