"""Two studies side by side (``cycleio compare A B``): before and after a tier, stripe or strategy change.

Aligns the studies' step_summary tables by arm, step and activity (the seconds columns), and per full
cycle (step ``cycle``: the sum of a cycle's jobs). Per key: each study's mean over cycles, standard
deviation and count, the difference B - A, its standard error (Welch: the two studies' cycles are
independent), and a verdict: within NOISE_SIGMAS standard errors of zero it is noise, not a change.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib
import matplotlib.patches

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ..config.calendar import step_rank  # noqa: E402
from .answers import NOISE_SIGMAS, cycle_totals  # noqa: E402
from .figsave import save_figure  # noqa: E402
from ..fsutil import write_table  # noqa: E402

ACTIVITIES = ("wall_s", "io_s", "run_io_s", "staging_s", "stage_in_s", "stage_out_s", "verify_s", "compute_s",
              "generate_s", "codec_s", "metadata_s")
FIGURE_ACTIVITIES = ("wall_s", "io_s", "staging_s")
COMPARE_COLUMNS = ["arm", "step", "activity", "a_study", "b_study", "a_n", "b_n", "a_mean_s", "b_mean_s", "a_sd_s",
                   "b_sd_s", "diff_s", "diff_se_s", "change_percent", "verdict"]


def _long(summary: pd.DataFrame) -> pd.DataFrame:
    """Per arm, step, cycle and activity: seconds; the steps of every job but cleanups, plus ``cycle`` rows."""
    jobs = summary[summary["step"] != "cleanup"].astype({"cycle": str})
    cycles = cycle_totals(summary).assign(step="cycle")
    both = pd.concat([jobs, cycles], ignore_index=True)
    columns = [c for c in ACTIVITIES if c in both]
    return both.melt(id_vars=["study", "arm", "step", "cycle"], value_vars=columns, var_name="activity",
                     value_name="seconds").dropna(subset=["seconds"])


def _stats(long: pd.DataFrame) -> pd.DataFrame:
    return long.groupby(["arm", "step", "activity"], sort=False).agg(
        study=("study", "first"), n=("seconds", "size"), mean_s=("seconds", "mean"),
        sd_s=("seconds", lambda s: s.std(ddof=1) if len(s) > 1 else math.nan)).reset_index()


def _verdict(diff: float, se: float) -> str:
    if math.isnan(se):
        return "no spread (one cycle)"
    if abs(diff) <= NOISE_SIGMAS * se:
        return "within noise"
    return "B faster" if diff < 0 else "B slower"


def compare_tables(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """COMPARE_COLUMNS for the keys both step_summary tables share; ``attrs['only_a']``/``['only_b']`` the arms
    found in one study only."""
    sa, sb = _stats(_long(a)), _stats(_long(b))
    merged = sa.merge(sb, on=["arm", "step", "activity"], suffixes=("_a", "_b"), how="inner")
    table = pd.DataFrame({
        "arm": merged["arm"], "step": merged["step"], "activity": merged["activity"],
        "a_study": merged["study_a"], "b_study": merged["study_b"], "a_n": merged["n_a"], "b_n": merged["n_b"],
        "a_mean_s": merged["mean_s_a"], "b_mean_s": merged["mean_s_b"], "a_sd_s": merged["sd_s_a"],
        "b_sd_s": merged["sd_s_b"],
    })
    table["diff_s"] = table["b_mean_s"] - table["a_mean_s"]
    table["diff_se_s"] = np.sqrt(table["a_sd_s"] ** 2 / table["a_n"] + table["b_sd_s"] ** 2 / table["b_n"])
    table["change_percent"] = (100 * table["diff_s"] / table["a_mean_s"]).where(table["a_mean_s"] > 0)
    table["verdict"] = [_verdict(d, se) for d, se in zip(table["diff_s"], table["diff_se_s"])]
    steps = {s: i for i, s in enumerate([*sorted(set(table["step"]), key=step_rank), "cycle"])}
    acts = {a: i for i, a in enumerate(ACTIVITIES)}
    table = table.assign(_s=table["step"].map(steps), _a=table["activity"].map(acts)).sort_values(
        ["arm", "_s", "_a"], kind="stable").drop(columns=["_s", "_a"]).reset_index(drop=True)
    table = table[COMPARE_COLUMNS].copy()
    table.attrs["only_a"] = sorted(set(a["arm"]) - set(b["arm"]))
    table.attrs["only_b"] = sorted(set(b["arm"]) - set(a["arm"]))
    return table


def compare_lines(table: pd.DataFrame) -> list[str]:
    """Per arm, the full cycle's wall time before and after, in words, then the jobs (steps, and the archive job,
    which the cycle's sum leaves out) whose wall time changed by more than the noise."""
    rows = table[(table["step"] == "cycle") & (table["activity"] == "wall_s")]
    lines = []
    for r in rows.itertuples():
        spread = "" if math.isnan(r.diff_se_s) else f" ± {r.diff_se_s:.2f}"
        lines.append(f"{r.arm}: a cycle took {r.a_mean_s:.2f} s in {r.a_study} and {r.b_mean_s:.2f} s in {r.b_study}: "
                     f"{r.diff_s:+.2f}{spread} s ({r.change_percent:+.0f}%), {r.verdict}")
        jobs = table[(table["arm"] == r.arm) & (table["step"] != "cycle") & (table["activity"] == "wall_s")
                     & table["verdict"].isin(["B faster", "B slower"])]
        changed = [f"{j.step} {j.a_mean_s:.2f} -> {j.b_mean_s:.2f} s ({j.diff_s:+.2f} ± {j.diff_se_s:.2f} s, "
                   f"{j.change_percent:+.0f}%)" for j in jobs.itertuples()]
        lines.append(f"  jobs whose wall time changed beyond noise: {'; '.join(changed)}" if changed else
                     "  no job's wall time changed beyond noise")
    for side in ("only_a", "only_b"):
        if table.attrs.get(side):
            lines.append(f"arms only in study {side[-1].upper()}: {', '.join(table.attrs[side])}")
    return lines


COLORS = {"B faster": "#55A868", "B slower": "#C44E52", "within noise": "#BBBBBB", "no spread (one cycle)": "#8172B3"}


def compare_figure(table: pd.DataFrame, paths, title: str) -> None:
    """Per activity (wall, I/O, staging), B - A seconds per arm and step with 2 standard errors; grey bars are
    within the noise."""
    activities = [a for a in FIGURE_ACTIVITIES if a in set(table["activity"])]
    keys = list(dict.fromkeys(zip(table["arm"], table["step"])))
    fig, axes = plt.subplots(1, max(len(activities), 1), figsize=(4.6 * max(len(activities), 1) + 1.5,
                                                                   0.28 * max(len(keys), 4) + 2.4),
                             squeeze=False, sharey=True)
    axes = axes[0]
    if not activities:
        axes[0].text(0.5, 0.5, "no common arm and step", ha="center", va="center", transform=axes[0].transAxes)
    index = {key: i for i, key in enumerate(keys)}
    for ax, activity in zip(axes, activities):
        rows = table[table["activity"] == activity]
        y = [index[(a, s)] for a, s in zip(rows["arm"], rows["step"])]
        err = (NOISE_SIGMAS * rows["diff_se_s"]).fillna(0)
        ax.barh(y, rows["diff_s"], xerr=err, color=[COLORS[v] for v in rows["verdict"]], capsize=2, height=0.7)
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set(xlabel=f"B - A [s] ({activity.removesuffix('_s').replace('_', ' ')})")
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(range(len(keys)), [f"{arm} / {step}" for arm, step in keys], fontsize=8)
    axes[0].set_ylim(len(keys) - 0.5, -0.5)
    handles = [matplotlib.patches.Patch(color=c, label=v) for v, c in COLORS.items()
               if v in set(table["verdict"])]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles) or 1, fontsize="small", frameon=False)
    fig.suptitle(f"{title}\nbars: mean over cycles; whiskers: {NOISE_SIGMAS:g} standard errors")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    save_figure(fig, paths)


def compare_results(a_dir: Path, b_dir: Path, *, out_csv: Path, figures=()) -> pd.DataFrame:
    """Compare results/<A> with results/<B> (their tables/step_summary.csv); write the table and figures."""
    tables = []
    for folder in (a_dir, b_dir):
        path = Path(folder) / "tables" / "step_summary.csv"
        if not path.exists():
            raise ValueError(f"{path} not found: give a study's results folder (results/<study>)")
        tables.append(pd.read_csv(path, dtype={"cycle": str}))
    table = compare_tables(*tables)
    if table.empty:
        raise ValueError(f"{a_dir} and {b_dir} share no arm and step to compare")
    write_table(table, out_csv)
    if figures:
        studies = f"{table['a_study'].iloc[0]} (A) against {table['b_study'].iloc[0]} (B)"
        compare_figure(table, figures, f"cycleio compare: {studies}")
    table.attrs["lines"] = compare_lines(table)
    return table
