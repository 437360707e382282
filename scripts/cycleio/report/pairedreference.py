"""A paired step's reference: what its replay's repetitions say the tier takes for the step's bytes, in the page
state the step met. The tables ask it through one call, :func:`reference_for`; on a machine that does not hand
free pages to its host nothing is probed (hostmemory.fresh_pages_measurable), and the reference is the plain one:
none of the page-state reasoning below runs.

On a VM that hands freed memory back to its host (hostmemory), a buffered write runs fast into pages freed a
moment before and slow into pages the host took back: 1.4-1.7 GB/s against 330-400 MiB/s on this repository's
VM, the disk itself behind both. The replay writes both ways (benchmarks.paired: new files, rewritten files).
A paired step probes, before each file it writes, how many MiB of fresh pages that file can fill
(``fresh_MiB`` of its write record: hostmemory.fresh_before_write), so pages freed while the step runs (by a
job beside it, by the step itself) count where they were met; each write repetition of the replay probes as
it begins (over in 1-3 s, before the host takes them back). A step's share of fresh pages is what they held of
its bytes, a repetition's what they could hold of its own. A write's reference is then taken at the step's
share: each repetition is a point, its share against its seconds per MiB, and the reference lies on the
straight line through them (least squares) at the step's share, held within the shares the repetitions met
(no line is drawn beyond what was measured). Where the repetitions' shares lie closer than ``MIN_SHARE_SPAN``,
where nothing was probed, on a memory tier (tmpfs takes 4 KiB pages, which the huge-page probe does not see)
and for reads, the reference is the median of the new-file repetitions (writes) or of every repetition (reads).
A job whose step's share lies well outside every share its repetitions met has no reference at all
(:func:`page_state_met`): its row leaves it out (``jobs_unmatched``), and a row left with none says so.
docs/performance.md ("The reference at the step's page state") has the measurements behind it.

On a memory tier of such a machine no reference is fair yet (:func:`reference_fair`): there the forecasts wrote
at 0.5-2.8 GB/s while the replay's new files went at 370-740 MiB/s and its rewrites at 0.6-2.4 GB/s, whatever
the probe found, so a ratio would measure the page state, not the step; such a row says so instead of giving one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..benchmarks.paired import NEW_FILES, fresh_found_MiB
from ..units import MiB

# the repetitions' shares of fresh pages must span this much for a line through them to say anything: the
# new-file repetitions met 0-0.1, the rewrites 0.7-1.0 on this repository's VM
MIN_SHARE_SPAN = 0.25
# how far outside the shares its repetitions met a step's share may lie for the replay to be its reference: the
# measure's resolution, as above (page_state_met)
SHARE_TOLERANCE = 0.25


def reference_repetitions(replayed: pd.DataFrame) -> pd.DataFrame:
    """The repetitions a step is compared with when its page state is not taken into account (rows of
    report.benchtables.paired_jobs): for writes, those that wrote new files, as the step did (the others rewrite
    files just deleted, into pages the kernel has just freed); else all of them."""
    new = replayed["replay_files"] == NEW_FILES if "replay_files" in replayed else pd.Series(False, replayed.index)
    return replayed[new] if new.any() else replayed


def fresh_share(fresh_MiB, nbytes):
    """The share of ``nbytes`` that ``fresh_MiB`` of fresh pages could hold, between 0 and 1."""
    return (fresh_MiB / (nbytes / MiB)).clip(lower=0.0, upper=1.0)


def fresh_written_MiB(io: pd.DataFrame) -> float:
    """MiB of a step's writes ``io`` (its write records: ``bytes``, ``fresh_MiB``) that found fresh pages: each
    file's bytes up to what its probe found (benchmarks.paired.fresh_found_MiB; NaN where no file was probed)."""
    if "fresh_MiB" not in io:
        return float("nan")
    found = fresh_found_MiB(zip(io["bytes"].astype(float), io["fresh_MiB"].astype(float)))
    return float("nan") if found is None else float(found)


def step_fresh_share(jobs: pd.DataFrame) -> pd.Series:
    """Per paired job (rows of paired_jobs): the share of the step's bytes that found fresh pages."""
    return fresh_share(jobs["step_fresh_MiB"].astype(float), jobs["step_bytes"])


def _page_shares(reps: pd.DataFrame) -> tuple[float, pd.DataFrame, np.ndarray] | None:
    """One paired job's write repetitions with their time (rows of paired_jobs): the step's share of fresh pages,
    the repetitions that were probed and their shares; None where nothing tells page states apart (reads, a
    memory tier, nothing probed)."""
    if reps.empty or "replay_fresh_MiB" not in reps:
        return None
    step = reps.iloc[0]
    if step["op"] != "write" or bool(step.get("memory_tier", False)):
        return None
    step_share = step_fresh_share(reps.iloc[[0]]).iloc[0]
    probed = reps[reps["replay_fresh_MiB"].notna()]
    if pd.isna(step_share) or probed.empty:
        return None
    return step_share, probed, fresh_share(probed["replay_fresh_MiB"].astype(float), probed["replay_bytes"]).to_numpy()


def _timed_repetitions(job: pd.DataFrame) -> pd.DataFrame:
    return job[job["replay_s"].notna() & (job["replay_bytes"] > 0)]


def seconds_per_MiB(job: pd.DataFrame, page_states: bool = True) -> float:
    """Seconds per MiB of one paired job's reference for its step (rows of paired_jobs of one job and direction,
    its repetitions): at the step's share of fresh pages where that can be told (the module's docstring), else
    the reference repetitions' median seconds over their median bytes (always without ``page_states``)."""
    reps = _timed_repetitions(job)
    if reps.empty:
        return float("nan")
    ref = reference_repetitions(reps)
    plain = float(ref["replay_s"].median() / (ref["replay_bytes"].median() / MiB))
    placed = _page_shares(reps) if page_states else None
    if placed is None:
        return plain
    step_share, probed, shares = placed
    if len(probed) < 2 or shares.max() - shares.min() < MIN_SHARE_SPAN:
        return plain
    per_MiB = (probed["replay_s"] / (probed["replay_bytes"] / MiB)).to_numpy(dtype=float)
    slope, intercept = np.polyfit(shares, per_MiB, 1)
    return float(intercept + slope * min(max(step_share, shares.min()), shares.max()))


def page_state_met(job: pd.DataFrame) -> bool:
    """Whether one paired job's replay met the page state its step met (rows of paired_jobs of one job and
    direction): the step's share of fresh pages lies within its write repetitions' shares, give or take
    ``SHARE_TOLERANCE``. Always where nothing tells the two apart: reads, a memory tier, nothing probed.

    A job whose replay did not (on this repository's VM: an analysis whose files found fresh pages for 28 % of
    their bytes, every repetition for all of theirs) has no reference for its step: no line through the
    repetitions reaches the step's share, and the repetitions' own rates say nothing of it."""
    placed = _page_shares(_timed_repetitions(job))
    if placed is None:
        return True
    step_share, _, shares = placed
    return bool(shares.min() - SHARE_TOLERANCE <= step_share <= shares.max() + SHARE_TOLERANCE)


def met_jobs(pairs: pd.DataFrame) -> pd.Series:
    """Per paired job (``cycle``) of one step and direction: whether its replay met its step's page state."""
    return pairs.groupby("cycle", sort=True).apply(page_state_met, include_groups=False).astype(bool)


def reference_fair(jobs: pd.DataFrame, op: str) -> bool:
    """Whether a row's replay is a fair reference for its step: not for writes on a memory tier of a machine that
    hands freed memory to its host (its jobs were probed: ``step_fresh_MiB``), the module's docstring."""
    if op != "write" or "memory_tier" not in jobs or "step_fresh_MiB" not in jobs:
        return True
    return not (jobs["memory_tier"].astype(bool).any() and jobs["step_fresh_MiB"].notna().any())


def reference_seconds(pairs: pd.DataFrame, page_states: bool = True) -> pd.Series:
    """Per paired job (``cycle``) of one step and direction: the reference's seconds for the step's bytes."""
    jobs = pairs.drop_duplicates("cycle").set_index("cycle")
    per_MiB = pairs.groupby("cycle").apply(seconds_per_MiB, page_states, include_groups=False)
    return jobs["step_bytes"] / MiB * per_MiB.reindex(jobs.index)


def page_states_probed(pairs: pd.DataFrame) -> bool:
    """Whether any step or repetition of ``pairs`` (rows of paired_jobs) was probed for fresh pages: only on a
    machine that hands free pages to its host (hostmemory.fresh_pages_measurable). Elsewhere none of the page-state
    reasoning runs."""
    return any(column in pairs and pairs[column].notna().any() for column in ("step_fresh_MiB", "replay_fresh_MiB"))


@dataclass(frozen=True)
class Reference:
    """What the efficiency tables ask of one row's paired replays (rows of paired_jobs of one arm, tier, step and
    direction): the jobs set against their replay, per job (``cycle``) whether its replay met its step's page
    state, whether the reference is fair, and its seconds for the kept jobs' step bytes."""

    jobs: pd.DataFrame
    met: pd.Series
    fair: bool
    seconds: float


def reference_for(pairs: pd.DataFrame, op: str) -> Reference:
    """The reference of one row's replayed paired jobs (``pairs``, their ``replay_s`` set). Where nothing was probed
    (:func:`page_states_probed`) it is the plain one: every job kept, every job met, fair, the median repetitions'
    seconds. Else the jobs whose replay met their step's page state (all of them where none did: the reference is
    then not fair), each at its step's share of fresh pages."""
    if pairs.empty:
        return Reference(pairs, pd.Series(dtype=bool), True, float("nan"))
    if not page_states_probed(pairs):
        met = pd.Series(True, index=sorted(pairs["cycle"].unique()))
        return Reference(pairs, met, True, float(reference_seconds(pairs, page_states=False).sum()))
    met = met_jobs(pairs)
    kept = pairs[pairs["cycle"].isin(met.index[met])] if met.any() else pairs
    fair = reference_fair(kept.drop_duplicates("cycle"), op) and bool(met.any())
    return Reference(kept, met, fair, float(reference_seconds(kept).sum()))
