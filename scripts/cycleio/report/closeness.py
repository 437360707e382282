"""How close the steps come to the storage, in words: the efficiency table's replay rows read as verdicts, and
the io_gap table's split of a step's seconds (the tier at its best, the file pattern, cycleio).

Only timed rows count: a row whose volume or duration is too small to time (``timed`` false) still carries a
ratio, but it never enters a median, a count of verdicts or a sentence except in the list "not timed: ...".
A row whose reference is not fair (verdict ``reference not fair``: report.pairedreference) gives no ratio and
counts nowhere either; the sentences name it apart.
A table without ``timed`` and ``verdict`` (one an older cycleio wrote) reads as not timed throughout.
"""

from __future__ import annotations

import math

import pandas as pd

from ..config.calendar import step_rank
from ..units import MiB, format_seconds

AT_SPEED, WITHIN_NOISE, SLOWER, FASTER, NOT_FAIR, NOT_TIMED = (
    "at the tier's speed", "within noise", "slower than the tier", "faster than the replay", "reference not fair",
    "not timed")
VERDICTS = (AT_SPEED, WITHIN_NOISE, SLOWER, FASTER, NOT_FAIR, NOT_TIMED)
CLOSE = (AT_SPEED, WITHIN_NOISE)  # the verdicts that say the step runs as fast as its replay
DIRECTIONS = ("read", "write")


def direction(activity) -> str:
    return "read" if str(activity).endswith("read") else "write"


def as_flag(values: pd.Series) -> pd.Series:
    """A bool column as read back from CSV (True/False, or text where blanks made it object); blank is false."""
    return values.map(lambda v: str(v).strip().lower() in ("true", "1", "1.0")).astype(bool)


def replay_rows(efficiency: pd.DataFrame | None) -> pd.DataFrame:
    """The rows against the replay, with ``direction``, ``timed`` as bool, a ``verdict`` of VERDICTS (``not timed``
    wherever ``timed`` is false) and the band columns (blank where the table has none), in step order. A row whose
    reference is not fair keeps that verdict and counts as not timed here: it has no ratio to read."""
    columns = ["arm", "tier", "step", "activity", "direction", "surrogate_bytes", "efficiency", "efficiency_low",
               "efficiency_high", "reference_repetitions", "timed", "verdict"]
    if efficiency is None or efficiency.empty or "reference" not in efficiency:
        return pd.DataFrame(columns=columns)
    rows = efficiency[efficiency["reference"] == "replay"].copy()
    for column in ("surrogate_bytes", "efficiency_low", "efficiency_high", "reference_repetitions"):
        if column not in rows:
            rows[column] = math.nan
    rows["timed"] = as_flag(rows["timed"]) if "timed" in rows else False
    if "verdict" not in rows:
        rows["verdict"] = NOT_TIMED
    rows["verdict"] = rows["verdict"].where(rows["timed"], NOT_TIMED).fillna(NOT_TIMED)
    rows["timed"] &= rows["verdict"] != NOT_FAIR
    rows["direction"] = rows["activity"].map(direction)
    rows["_rank"] = rows["step"].map(step_rank)
    rows = rows.sort_values(["arm", "tier", "_rank", "direction"], kind="stable")
    return rows.reindex(columns=columns).reset_index(drop=True)


def _names(rows: pd.DataFrame) -> list[str]:
    """``fcst write`` per row; ``fcst write on lustre`` when the rows span several tiers."""
    several = rows["tier"].nunique() > 1
    return [f"{r.step} {r.direction}" + (f" on {r.tier}" if several else "") for r in rows.itertuples()]


def ratio_text(value, low, high) -> str:
    """``0.71, band 0.65-0.78`` (the band left out when not measured)."""
    if pd.isna(low) or pd.isna(high):
        return f"{value:.2f}"
    return f"{value:.2f}, band {low:.2f}-{high:.2f}"


def verdict_counts(rows: pd.DataFrame) -> dict[str, int]:
    """How many rows of each verdict (of replay_rows: not-timed rows only under ``not timed``)."""
    counts = rows["verdict"].value_counts()
    return {v: int(counts.get(v, 0)) for v in VERDICTS}


def verdict_sentence(rows: pd.DataFrame, arm: str | None = None) -> str:
    """One arm's verdicts over its timed rows (of replay_rows), e.g. ``lustre: 5 of 6 timed rows at the tier's
    speed or within noise; fcst write slower than the tier (0.71, band 0.65-0.78); not timed: prep read``."""
    if arm is not None:
        rows = rows[rows["arm"] == arm]
    head = f"{arm}: " if arm is not None else ""
    if rows.empty:
        return f"{head}no step was replayed"
    names = dict(zip(rows.index, _names(rows)))
    timed = rows[rows["timed"]]
    parts = []
    if timed.empty and (rows["verdict"] == NOT_FAIR).any():
        parts.append("no timed row has a fair reference")
    elif timed.empty:
        parts.append("no row moved enough bytes or lasted long enough to time")
    else:
        close = int(timed["verdict"].isin(CLOSE).sum())
        parts.append(f"{close} of {len(timed)} timed row{'s' if len(timed) != 1 else ''} at the tier's speed or "
                     "within noise")
        parts += [f"{names[i]} {r.verdict} ({ratio_text(r.efficiency, r.efficiency_low, r.efficiency_high)})"
                  for i, r in zip(timed.index, timed.itertuples()) if r.verdict != AT_SPEED]
    for verdict in (NOT_FAIR, NOT_TIMED):
        named = [names[i] for i in rows.index if rows.loc[i, "verdict"] == verdict]
        if named:
            parts.append(f"{verdict}: " + ", ".join(named))
    return head + "; ".join(parts)


def timed_median(rows: pd.DataFrame) -> tuple[float, float, float]:
    """Median over the timed rows of the efficiency and of each band edge (NaN when none is timed)."""
    timed = rows[rows["timed"]]
    if timed.empty:
        return math.nan, math.nan, math.nan
    return tuple(float(timed[c].median()) if timed[c].notna().any() else math.nan
                 for c in ("efficiency", "efficiency_low", "efficiency_high"))


# ------------------------------------------------------------------------------------------------ io gap

def io_gap_rows(io_gap: pd.DataFrame | None) -> pd.DataFrame:
    """The io_gap table's timed rows, in arm, step and direction order."""
    if io_gap is None or io_gap.empty:
        return pd.DataFrame(columns=[] if io_gap is None else io_gap.columns)
    rows = io_gap[as_flag(io_gap["timed"])].copy()
    rows["_rank"] = rows["step"].map(step_rank)
    return rows.sort_values(["arm", "_rank", "direction"], kind="stable").drop(columns="_rank").reset_index(drop=True)


def _with_band(value: float, low, high) -> str:
    """``0.4 s (0.1-0.7)``; no band when it rounds to the value alone or was not measured."""
    text = format_seconds(value)
    if pd.notna(low) and pd.notna(high) and format_seconds(low, "") != format_seconds(high, ""):
        text += f" ({format_seconds(low, '')}{' to ' if low < 0 else '-'}{format_seconds(high, '')})"
    return text


def _part(value: float, low, high, what: str) -> str:
    """One part of the split: ``0.4 s (0.1-0.7) cycleio``; where the value is below zero but its band is not
    wholly (gap_sentence says the rest), ``cycleio within noise`` with the band."""
    if value < 0 and pd.notna(low) and pd.notna(high):  # below zero, but the band reaches above it
        return f"{what} within noise ({format_seconds(low, '')} to {format_seconds(high)})"
    return f"{_with_band(value, low, high)} {what}"


def _files_text(row) -> str:
    files = int(round(row.files_per_job))
    text = f"{row.bytes_per_job / MiB:,.0f} MiB in {files:,} file{'s' if files != 1 else ''}"
    return text + (" with an fsync each" if row.direction == "write" else "")  # every file lands by fsync, rename


def gap_sentence(row) -> str:
    """One io_gap row in the issue's words: ``of fcst's 6.0 s of writes, 3.5 s is the tier at its best, 2.1 s the
    file pattern (1,265 MiB in 38 files with an fsync each), 0.4 s cycleio``."""
    head = f"of {row.step}'s {format_seconds(row.step_s)} of {row.direction}s"
    if pd.isna(row.replay_s):
        return head + ": no replay measured"
    if pd.notna(row.cycleio_s_high) and row.cycleio_s_high < 0:  # the step beat its replay, band and all
        return _beaten_sentence(head, row)
    cycleio = _part(row.cycleio_s, row.cycleio_s_low, row.cycleio_s_high, "cycleio")
    if pd.isna(row.tier_best_s):
        replay = _with_band(row.replay_s, row.replay_s_low, row.replay_s_high)
        return (f"{head}, {replay} is the replay of its {_files_text(row)} (the tier's best pattern was not "
                f"measured), {cycleio}")
    if pd.notna(row.pattern_s_high) and row.pattern_s_high < 0:  # the replay beat the best pattern measured
        best = getattr(row, "best_reference", "") or "easy"
        replay = _with_band(row.replay_s, row.replay_s_low, row.replay_s_high)
        return (f"{head}, {replay} is the tier at its best: its replay of the {_files_text(row)}, "
                f"{format_seconds(-row.pattern_s)} faster than the best pattern measured ({best}), {cycleio}")
    pattern = _part(row.pattern_s, row.pattern_s_low, row.pattern_s_high, f"the file pattern ({_files_text(row)})")
    return f"{head}, {format_seconds(row.tier_best_s)} is the tier at its best, {pattern}, {cycleio}"


def _beaten_sentence(head: str, row) -> str:
    """Where the step beat its replay, band and all, none of its seconds are cycleio's and no split of them into
    the tier and the pattern adds up: the sentence gives the replay's seconds and the best pattern's instead."""
    replay = _with_band(row.replay_s, row.replay_s_low, row.replay_s_high)
    best = ("the tier's best pattern was not measured" if pd.isna(row.tier_best_s)
            else f"the tier's best pattern would take {format_seconds(row.tier_best_s)}")
    return (f"{head}, none is cycleio's: its replay of the {_files_text(row)} took {replay}, "
            f"{format_seconds(-row.cycleio_s)} more than the step ({best})")


def arm_gap_sentence(io_gap: pd.DataFrame, arm: str) -> str | None:
    """The arm's io_gap sentence for its step and direction with the most storage seconds among timed rows, or
    None when the arm has no timed row."""
    rows = io_gap_rows(io_gap)
    rows = rows[(rows["arm"] == arm) & rows["step_s"].notna()] if not rows.empty else rows
    if rows.empty:
        return None
    return gap_sentence(next(rows.loc[[rows["step_s"].idxmax()]].itertuples()))


# ------------------------------------------------------------------------------------------ the answer's goals

GOAL_MEDIAN = (0.85, 1.15)  # the median step/replay ratio over the timed rows of a direction
GOAL_RANGE = (0.75, 1.33)  # a timed row's ratio, unless its band holds 1.0
GOAL_SHARE = 0.80  # of the timed rows, in GOAL_RANGE or holding 1.0 in their band


def efficiency_goals(efficiency: pd.DataFrame | None) -> dict:
    """How a study's efficiency table meets the answer's goals (docs/performance.md): per direction, the timed
    rows, their median ratio and whether it lies in GOAL_MEDIAN (reads need three timed rows to be judged), and
    over all timed rows the share in GOAL_RANGE or holding 1.0 in their band."""
    rows = replay_rows(efficiency)
    timed = rows[rows["timed"]]
    out: dict = {}
    for name in DIRECTIONS:
        mine = timed[timed["direction"] == name]["efficiency"]
        median = float(mine.median()) if len(mine) else math.nan
        judged = len(mine) >= (3 if name == "read" else 1)
        out[name] = {"timed_rows": len(mine), "median": median,
                     "median_ok": (GOAL_MEDIAN[0] <= median <= GOAL_MEDIAN[1]) if judged else None}
    inside = timed["efficiency"].between(*GOAL_RANGE) | ((timed["efficiency_low"] <= 1) & (timed["efficiency_high"] >= 1))
    share = float(inside.mean()) if len(timed) else math.nan
    out["rows"] = {"timed_rows": len(timed), "share_close": share, "share_ok": bool(share >= GOAL_SHARE) if len(timed)
                   else None, "outside": [f"{r.arm} {r.step} {r.direction} {r.efficiency:.2f}"
                                          for r in timed[~inside].itertuples()]}
    return out


def bands_agree(first: pd.DataFrame | None, second: pd.DataFrame | None) -> dict:
    """Row by row, whether two runs of a study agree within their bands: every row timed in both whose bands
    overlap (each band widened to its own ratio where it lacks one)."""
    keys = ["arm", "tier", "step", "direction"]
    a, b = (replay_rows(t) for t in (first, second))
    both = a[a["timed"]].merge(b[b["timed"]], on=keys, suffixes=("_1", "_2"))
    def band(side: str):
        low = both[f"efficiency_low_{side}"].fillna(both[f"efficiency_{side}"])
        high = both[f"efficiency_high_{side}"].fillna(both[f"efficiency_{side}"])
        return low, high
    (low1, high1), (low2, high2) = band("1"), band("2")
    agree = (low1 <= high2) & (low2 <= high1)
    return {"rows": len(both), "agree": int(agree.sum()),
            "disagree": [f"{r.arm} {r.step} {r.direction}: {r.efficiency_1:.2f} ({r.efficiency_low_1:.2f}-"
                         f"{r.efficiency_high_1:.2f}) against {r.efficiency_2:.2f} ({r.efficiency_low_2:.2f}-"
                         f"{r.efficiency_high_2:.2f})" for r in both[~agree].itertuples()]}
