"""The study's numbers for the report's captions (report/*.rst are Jinja templates; Snakemake renders them with
the ``snakemake`` object, whose ``params.answer`` is the dict made here from the summary's table).

Every value is a ready sentence or number as text, so a template never formats; a missing file (before the
study ran) gives the same keys with "not measured yet".
"""

from __future__ import annotations

import math
from pathlib import Path

MISSING = "not measured yet"


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
    """Keys: best, arms (one sentence per arm, joined by '; '), efficiency, strategies, fits, plan.

    The rules import this module when Snakemake parses them: pandas is imported here, when a caption asks."""
    import pandas as pd

    from .answers import best_arm_line
    numbers = {key: MISSING for key in ("best", "arms", "efficiency", "strategies", "fits", "plan")}
    if summary_csv and Path(summary_csv).exists():
        table = pd.read_csv(summary_csv)
        if not table.empty:
            numbers["best"] = best_arm_line(table)
            numbers["arms"] = "; ".join(_arm_sentence(row) for row in table.itertuples()) + "."
            eff = table.dropna(subset=["median_efficiency_vs_replay"])
            if not eff.empty:
                numbers["efficiency"] = ", ".join(f"{r.arm} {r.median_efficiency_vs_replay:.2f}"
                                                  for r in eff.itertuples())
            writes = table.dropna(subset=["effective_write_s"])
            if not writes.empty:
                numbers["strategies"] = "; ".join(
                    f"{r.strategy} ({r.arm}): compute ranks wait {r.effective_write_s:.2f} s, writers write "
                    f"{r.actual_write_s:.2f} s per forecast" for r in writes.itertuples()) + "."
    if fits_csv and Path(fits_csv).exists() and Path(fits_csv).stat().st_size > 1:
        from .scaling import fit_lines

        fits = pd.read_csv(fits_csv, dtype={"tasks_measured": str})
        if not fits.empty:
            numbers["fits"] = "; ".join(fit_lines(fits)) + "."
    if capacity_csv and Path(capacity_csv).exists() and Path(capacity_csv).stat().st_size > 1:
        from .scaling import plan_lines

        plan = pd.read_csv(capacity_csv)
        if not plan.empty:
            numbers["plan"] = "; ".join(plan_lines(plan)) + "."
    return numbers
