"""The study's numbers for the report's captions (report/*.rst are Jinja templates; Snakemake renders them with
the ``snakemake`` object, whose ``params.answer`` is the dict made here from the summary's table).

Every value is a ready sentence or number as text, so a template never formats; a missing file (before the
study ran) gives the same keys with "not measured yet".
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from ..units import format_bytes, format_rate

MISSING = "not measured yet"


class Numbers(dict):
    """The numbers found; any other key reads "not measured yet" (a caption's ``params.x.key`` looks the key up
    when the attribute is not there). Only what was found shows in the report's record of the job's params."""

    def __missing__(self, key: str) -> str:
        return MISSING


def _arm_sentence(row) -> str:
    text = f"{row.arm}: {row.cycle_wall_s:.2f} s per cycle, {row.io_share:.0%} of it I/O"
    if row.cycle_staging_s > 0:
        text += f", {row.cycle_staging_s:.2f} s staging"
    if row.verdict == "baseline":
        return text + " (the baseline)"
    if isinstance(row.saved_s, float) and not math.isnan(row.saved_s):
        spread = "" if math.isnan(row.saved_se_s) else f" ± {row.saved_se_s:.2f}"
        text += f"; {row.saved_s:+.2f}{spread} s against {row.baseline_arm} ({row.verdict})"
    return text


def answer_numbers(summary_csv: str | Path | None, fits_csv: str | Path | None = None,
                   capacity_csv: str | Path | None = None) -> dict[str, str]:
    """Keys: best, arms (one sentence per arm, joined by '; '), efficiency, strategies (from the summary),
    fits and plan (the scaling fit's and the capacity plan's sentences, as :func:`table_numbers` gives them).

    The rules import this module when Snakemake parses them: pandas is imported here, when a caption asks."""
    tables = table_numbers(*(path for path in (fits_csv, capacity_csv) if path))
    numbers = Numbers({key: tables[name] for key, name in (("fits", "scaling_fit"), ("plan", "capacity"))
                       if name in tables})
    if summary_csv and Path(summary_csv).is_file():
        try:
            numbers.update(_summary_numbers(summary_csv))
        except UNREADABLE as err:  # a caption never stops the workflow
            numbers["best"] = numbers["arms"] = f"(could not read {Path(summary_csv).name}: {err})"
    return numbers


def _summary_numbers(summary_csv) -> dict[str, str]:
    import pandas as pd

    from .answers import best_arm_line

    table = pd.read_csv(summary_csv)
    if table.empty:
        return {}
    numbers = {"best": best_arm_line(table),
               "arms": "; ".join(_arm_sentence(row) for row in table.itertuples()) + "."}
    if "efficiency_verdicts" in table:
        said = [f"{r.arm}: {r.efficiency_verdicts}" for r in table.itertuples()
                if isinstance(r.efficiency_verdicts, str) and r.efficiency_verdicts]
        if said:
            numbers["efficiency"] = "; ".join(said) + "."
    writes = table.dropna(subset=["effective_write_s"])
    if not writes.empty:
        numbers["strategies"] = "; ".join(
            f"{r.strategy} ({r.arm}): compute ranks wait {r.effective_write_s:.2f} s, writers write "
            f"{r.actual_write_s:.2f} s per forecast" for r in writes.itertuples()) + "."
    return numbers


# what a table of another version or a damaged one raises while its sentence is made
UNREADABLE = (ValueError, KeyError, IndexError, AttributeError, TypeError, OSError)


def _step_summary(t) -> str:
    means = t.groupby(["arm", "step"])[["wall_s", "io_fraction"]].mean().reset_index()
    longest = means.loc[means.groupby("arm")["wall_s"].idxmax()]
    return "the longest step per arm (mean over cycles): " + ", ".join(
        f"{r.arm} {r.step} {r.wall_s:.2f} s ({r.io_fraction:.0%} I/O)" for r in longest.itertuples()) + "."


def _phase_throughput(t) -> str:
    parts = []
    for activity in ("run:write", "run:read", "stage_in:copy", "stage_out:copy"):
        rows = t[t["activity"] == activity]
        if not rows.empty:
            parts.append(f"{activity} " + ", ".join(f"{r.arm} {format_rate(r.MiB_per_s)}" for r in rows.itertuples()))
    return "; ".join(parts) + "." if parts else "no reads or writes recorded."


def _staging(t) -> str:
    if t.empty:
        return "no arm stages (every arm runs on the persistent tier)."
    rows = t.groupby(["arm", "phase"]).agg(bytes=("bytes", "sum"), rate=("MiB_per_s", "median")).reset_index()
    return "; ".join(f"{r.arm} {r.phase} {format_bytes(r.bytes)} in all, median {format_rate(r.rate)} per job"
                     for r in rows.itertuples()) + "."


def _tiers(t) -> str:
    rows = t.drop_duplicates("tier")
    return "; ".join(f"{r.tier} ({r.tier_kind}): {r.fs_type} at {r.path}, {format_bytes(r.free_bytes)} of "
                     f"{format_bytes(r.total_bytes)} free" for r in rows.itertuples()) + "."


def _retries(t) -> str:
    if t.empty:
        return "no job failed an attempt."
    later = t["succeeded_on_attempt"].notna().sum()
    return (f"{len(t)} failed attempts ({', '.join(sorted(set(t['step'].astype(str))))}); {later} of them "
            f"succeeded on a later attempt.")


def _inventory(t) -> str:
    per_cycle = t.groupby(["arm", "cycle"]).agg(files=("file", "size"), bytes=("expected_bytes", "sum"))
    arm = t["arm"].iloc[0]
    full = per_cycle.loc[arm].iloc[-1]
    return (f"{len(t):,} files in all; a full cycle of arm {arm} writes {int(full['files']):,} files, "
            f"{format_bytes(full['bytes'])}.")


def _timeline(t) -> str:
    waits = t[t["kind"] == "wait"]
    text = f"{len(t):,} rows"
    if not waits.empty:
        worst = waits.loc[waits["seconds"].idxmax()]
        text += (f"; the compute ranks waited {waits['seconds'].median():.2f} s for an output hour (median), "
                 f"at most {worst['seconds']:.2f} s ({worst['arm']}, cycle {worst['cycle']}, {worst['what']})")
    return text + "."


def _bandwidths(t, benchmark: str, how: str) -> str | None:
    """Per tier, each operation's MiB/s over the benchmark's timed mean rows (``how``: max or median), or None
    where the benchmark did not run. Points too small to time (``timed`` False) are counted, never quoted."""
    import pandas as pd

    rows = t[(t["benchmark"] == benchmark) & (t["aggregate"] == "mean")]
    if rows.empty:
        return None
    timed = rows["timed"].fillna(True).astype(bool) if "timed" in rows else pd.Series(True, index=rows.index)
    untimed = f"{int((~timed).sum())} of {len(rows)} points too small to time, not quoted" if (~timed).any() else ""
    rows = rows[timed]
    if rows.empty:
        return f"no point moved enough bytes for long enough to time ({untimed})."
    rates = rows.groupby(["tier", "operation"])["bw_MiB_per_s"].agg(how).unstack()
    return "; ".join(f"{tier} " + ", ".join(f"{op} {format_rate(rates.loc[tier, op])}" for op in rates.columns
                                            if not math.isnan(rates.loc[tier, op]))
                     for tier in rates.index) + (f" ({untimed})." if untimed else ".")


def _benchmarks(t) -> str:
    rates = _bandwidths(t, "io", "max")
    return "no bandwidth benchmark ran." if rates is None else (
        "best mean bandwidth per tier (any pattern and task count, timed points only): " + rates)


def _efficiency(t) -> str:
    from .closeness import NOT_TIMED, VERDICTS, replay_rows, verdict_counts

    replay = replay_rows(t)
    if replay.empty:
        return "no replay ran (benchmarks.replay.enabled false)."
    counts = verdict_counts(replay)
    timed = len(replay) - counts[NOT_TIMED]
    text = f"{timed} of {len(replay)} rows against the replay are timed"
    if timed:
        text += ": " + ", ".join(f"{counts[v]} {v}" for v in VERDICTS if v != NOT_TIMED and counts[v])
    untimed = replay[replay["verdict"] == NOT_TIMED]
    if not untimed.empty:
        text += "; not timed (too few bytes or too short to time, ratio not read): " + ", ".join(
            f"{r.arm} {r.step} {r.direction}" for r in untimed.itertuples())
    return text + "."


def _io_gap(t) -> str:
    from .closeness import arm_gap_sentence

    said = [(arm, arm_gap_sentence(t, arm)) for arm in dict.fromkeys(t["arm"])]
    said = [f"{arm}: {text}" for arm, text in said if text]
    return "; ".join(said) + "." if said else "no step moved enough to time."


def _fieldio(t) -> str:
    rates = _bandwidths(t, "fieldio", "median")
    return "field I/O did not run." if rates is None else "median over patterns (timed points only): " + rates


def _io_events(path: Path) -> str:
    import pyarrow.parquet as pq

    return f"{pq.ParquetFile(path).metadata.num_rows:,} timed events."


def _fits(t) -> str:
    from .scaling import fit_lines

    return "; ".join(fit_lines(t)) + "."


def _plan(t) -> str:
    from .scaling import plan_lines

    return "; ".join(plan_lines(t)) + "."


def _io_accounting(t) -> str:
    from .accounting import flagged_sentence

    return flagged_sentence(t)


# file name -> (key, sentence from its table); benchmarks.csv gives two
TABLE_SENTENCES = {
    "step_summary.csv": [("step_summary", _step_summary)],
    "phase_throughput.csv": [("phase_throughput", _phase_throughput)],
    "staging.csv": [("staging", _staging)],
    "tiers.csv": [("tiers", _tiers)],
    "retries.csv": [("retries", _retries)],
    "io_accounting.csv": [("io_accounting", _io_accounting)],
    "inventory.csv": [("inventory", _inventory)],
    "cycle_timeline.csv": [("cycle_timeline", _timeline)],
    "benchmarks.csv": [("benchmarks", _benchmarks), ("fieldio", _fieldio)],
    "efficiency.csv": [("efficiency", _efficiency)],
    "io_gap.csv": [("io_gap", _io_gap)],
    "scaling_fit.csv": [("scaling_fit", _fits)],
    "capacity.csv": [("capacity", _plan)],
}


TABLE_FILES = frozenset({*TABLE_SENTENCES, "io_events.parquet"})  # the tables a caption reads numbers from


def table_numbers(*paths) -> dict[str, str]:
    """One sentence of this study's numbers per table among ``paths`` (a rule's input and output), by key
    (see TABLE_SENTENCES, plus ``io_events``); "not measured yet" for a key whose table is not there.

    For params functions of rules that take ``output``: Snakemake counts such params as derived from
    files, so their change after the job ran does not make it run again.
    """
    import pandas as pd

    numbers = Numbers()
    # by name first: the aggregate's input is every job's records, thousands of paths in a long study's planning
    for path in (Path(p) for p in map(str, paths) if os.path.basename(p) in TABLE_FILES):
        if not path.is_file() or path.stat().st_size == 0:
            continue
        try:
            if path.name == "io_events.parquet":
                numbers["io_events"] = _io_events(path)
            elif path.name in TABLE_SENTENCES:
                table = pd.read_csv(path, dtype={"cycle": str, "tasks_measured": str})
                for key, sentence in TABLE_SENTENCES[path.name]:
                    if not table.empty or key in ("retries", "staging", "io_accounting", "io_gap"):  # empty, these say something
                        numbers[key] = sentence(table)
        except UNREADABLE as err:  # a caption never stops the workflow or the report
            for key, _ in TABLE_SENTENCES.get(path.name, [("io_events", None)]):
                numbers[key] = f"(could not read {path.name}: {err})"
    return numbers
