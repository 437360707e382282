"""The summary's first lines: each of the study's questions answered in one sentence, from the tables the
rest of the summary details (summary.csv's rows per arm, the capacity plan, the write strategies' times).

A question the study could not answer says why in its sentence (no full cycle, nothing timed, no benchmark
fit), never a number that was not measured."""

from __future__ import annotations

import pandas as pd

from ..units import format_seconds

# Where docs/performance.md explains a machine that hands the memory it frees to its host (a heading of it)
PAGE_REPORTING_DOC = "docs/performance.md, What the machine's memory does to writes"

# How the summary names each question, in the order a user asks them
CYCLE_IO, CLOSENESS, STAGING, CAPACITY, STRATEGIES = (
    "A cycle's I/O", "How close to the storage", "What staging buys", "Capacity plan", "Write strategies")


def _band(value: float, low: float, high: float) -> str:
    if pd.isna(low) or pd.isna(high):
        return f"{value:.2f}"
    return f"{value:.2f} (band {low:.2f}-{high:.2f})"


def cycle_io_sentence(table: pd.DataFrame, full_cycles: bool = True) -> str:
    """Per arm, a full (or half) cycle's I/O seconds (staging included) of its wall seconds."""
    if table.empty:
        return "no full cycle finished, so no cycle's I/O time to give."
    parts = [f"{row.arm} {format_seconds(row.cycle_io_s)} of {format_seconds(row.cycle_wall_s)} ({row.io_share:.0%})"
             for row in table.itertuples() if not pd.isna(row.cycle_io_s)]
    cycles = int(table["n_cycles"].min())
    kind = "full" if full_cycles else "half"
    return (f"a {kind} cycle's I/O (run reads and writes, staging and verification) takes {', '.join(parts)} of its "
            f"wall time, " + (f"the mean of {cycles} cycles per arm." if cycles != 1 else "one cycle per arm."))


def closeness_sentence(table: pd.DataFrame) -> str:
    """Over every arm's timed rows against the replay: how many are close, and each arm's median with its band."""
    if "timed_rows" not in table or table["timed_rows"].isna().all():
        return ("no paired replay ran (benchmarks.enabled or benchmarks.replay.enabled is off), so this study "
                "does not say.")
    if table["timed_rows"].fillna(0).sum() == 0:
        return ("no step's reads or writes were both large and long enough to time against a replay of its own "
                "files, so this study does not say (benchmarks.replay.min_bytes, min_seconds).")
    timed, close = int(table["timed_rows"].fillna(0).sum()), int(table["close_rows"].fillna(0).sum())
    medians = [f"{row.arm} {_band(row.timed_median_efficiency, row.timed_median_efficiency_low, row.timed_median_efficiency_high)}"
               for row in table.itertuples() if not pd.isna(row.timed_median_efficiency)]
    return (f"{close} of {timed} timed step rows run at the tier's speed or within noise of a replay of their own "
            f"files on the same tier; the median step/replay MiB/s ratio per arm: {', '.join(medians)}.")


def staging_sentence(table: pd.DataFrame) -> str:
    """Each staged arm's paired saving against its baseline, with its spread and verdict."""
    staged = table[~table["verdict"].isin(["baseline", "no baseline arm"])] if not table.empty else table
    if staged.empty:
        return "no arm stages against a baseline on its persistent tier, so this study does not say."
    parts = []
    for row in staged.itertuples():
        spread = "" if pd.isna(row.saved_se_s) else f" ± {row.saved_se_s:.2f}"
        saved = "no common cycle" if pd.isna(row.saved_s) else f"{row.saved_s:+.2f}{spread} s per cycle"
        parts.append(f"{row.arm} {saved} against {row.baseline_arm} ({row.verdict})")
    wins = staged[staged["verdict"] == "faster"]
    lead = (f"staging pays on {', '.join(wins['arm'])}" if not wins.empty
            else "staging does not pay beyond the noise on any arm")
    flags = staged["free_page_reporting"] if "free_page_reporting" in staged else pd.Series(dtype=object)
    caveat = ("; on this machine, which hands the memory it frees to its host, a stage-out runs as fast as the memory "
              "it lands in, which moves between runs: compare two runs before trusting a verdict of a few seconds "
              f"({PAGE_REPORTING_DOC})") if flags.astype(str).eq("True").any() else ""  # bool, or read back from CSV
    return f"{lead}: {'; '.join(parts)}{caveat}."


def capacity_sentence(capacity: pd.DataFrame | None) -> str:
    """The target's need and, per measured tier, how many units give it."""
    if capacity is None or capacity.empty:
        return "no capacity plan: the tier benchmarks did not run (benchmarks.enabled)."
    cycle = capacity[capacity["step"] == "cycle"]
    if cycle.empty:
        return "no capacity plan: no full cycle to scale."
    first = cycle.iloc[0]
    need = (f"{first['resolution']} every {first['interval_hours']:g} h moves {first['cycle_bytes'] / 2**30:.1f} GiB "
            f"per cycle and needs {first['needed_MiB_per_s']:.0f} MiB/s to keep its I/O within "
            f"{first['io_budget_fraction']:.0%} of the cycle")
    planned, unplanned = [], []
    for row in cycle.itertuples():
        if pd.isna(row.measured_plateau_MiB_per_s) or pd.isna(row.units_needed):
            unplanned.append(f"{row.tier} ({row.pattern})")
            continue
        bound = "" if row.plateau_reached else "at most "
        planned.append(f"{row.tier} ({row.pattern}) needs {bound}{_counted(row.units_needed, row.unit)} (plateau "
                       f"{row.measured_plateau_MiB_per_s:.0f} MiB/s on {_counted(row.units_measured, row.unit)})")
    said = f"; {', '.join(planned)}" if planned else ""
    missing = f"; too few timed points to plan {', '.join(unplanned)}" if unplanned else ""
    return need + said + missing + "."


def _counted(count, unit: str) -> str:
    """``1 client node``, ``3 client nodes``: the plan's units are named in the plural (report.scaling.UNIT_NAMES)."""
    return f"{count} {unit.replace('nodes', 'node', 1) if count == 1 else unit}"


def strategies_sentence(write_times: pd.DataFrame) -> str:
    """Which strategy hides the most of the forecast's writes: effective (what compute ranks wait) against actual
    seconds per forecast, per strategy, over the arms that ran it."""
    times = write_times.groupby("strategy")[["effective_write_s", "actual_write_s"]].mean().sort_values(
        "effective_write_s")
    if times.empty:
        return ""
    best, worst = times.index[0], times.index[-1]
    parts = [f"{name} {row.effective_write_s:.2f} s (writers {row.actual_write_s:.2f} s)"
             for name, row in times.iterrows()]
    forecasts = int(write_times["n_cycles"].min()) if "n_cycles" in write_times else 0
    noise = (" (one forecast per arm: no spread to tell a difference from noise)" if forecasts == 1
             else f" (mean of {forecasts} forecasts per arm)" if forecasts > 1 else "")
    return (f"{best} keeps the compute ranks waiting least per forecast, {worst} most; compute ranks wait "
            f"{', '.join(parts)}{noise}.")


def answer_lines(table: pd.DataFrame, capacity: pd.DataFrame | None = None, full_cycles: bool = True) -> list[str]:
    """The summary's leading section: one sentence per question. ``full_cycles``: whether ``table``'s rows are full
    cycles' (else the study ran only the half cycle, fcst and post, and the cycle's questions are its)."""
    lines = ["## The answers", ""]
    if not full_cycles:
        lines += ["This study runs only a half cycle (fcst and post): its numbers are those of that half cycle.", ""]
    lines.append(f"- **{CYCLE_IO}**: {cycle_io_sentence(table, full_cycles)}")
    lines.append(f"- **{CLOSENESS}**: {closeness_sentence(table)}")
    if len(table) > 1:
        lines.append(f"- **{STAGING}**: {staging_sentence(table)}")
    strategies = table.dropna(subset=["effective_write_s"]) if "effective_write_s" in table else table.iloc[0:0]
    if strategies["strategy"].nunique() > 1:
        lines.append(f"- **{STRATEGIES}**: {strategies_sentence(strategies)}")
    if capacity is not None:
        lines.append(f"- **{CAPACITY}**: {capacity_sentence(capacity)}")
    return lines + [""]

