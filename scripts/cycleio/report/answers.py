"""The study's answer: per arm, what a full cycle costs, what staging buys over the baseline, how close
the steps come to the replay (in words: report.closeness), and the write strategies' effective and actual
write time.

Reads only the tables (step_summary, tiers, efficiency, io_gap) and the write times of writefigures.write_times.
A cycle's wall time is the sum of its jobs' wall times (``cycle_wall_s``): on a shared machine the
arms' jobs interleave, so the span from the first job's start to the last one's end would count waiting.
The saving against the baseline is paired by cycle (the same cycle of both arms), and its spread is the
standard error of the mean of those differences: a saving within twice that is called noise.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..benchmarks.threshold import TimedThreshold
from ..config.calendar import HALF_CYCLE_STEPS
from ..fsutil import write_table, write_text_atomic
from .archive import archive_rows, arm_keep_up, beside_archive, beside_sentence, keep_up_markdown, keep_up_table
from .critical import arm_critical_sentence, critical_path
from .closeness import CLOSE, arm_gap_sentence, replay_rows, timed_median, verdict_sentence
from .headlines import PAGE_REPORTING_DOC, answer_lines

NOISE_SIGMAS = 2.0  # a difference within this many standard errors of zero is noise
CYCLE_COLUMNS = ("wall_s", "io_s", "staging_s", "stage_in_s", "stage_out_s", "verify_s", "stage_out_verify_s",
                 "cleanup_s", "run_io_s", "compute_s", "generate_s", "codec_s", "metadata_s")
SUMMARY_COLUMNS = [
    "study", "arm", "host", "free_page_reporting", "scratch_tier", "persistent_tier", "strategy", "n_cycles",
    "cycle_wall_s", "cycle_wall_sd_s", "io_share", "cycle_io_s", "cycle_staging_s", "baseline_arm", "saved_s",
    "saved_se_s", "saved_percent", "verdict", "timed_rows", "close_rows", "timed_median_efficiency",
    "timed_median_efficiency_low", "timed_median_efficiency_high", "efficiency_verdicts", "io_gap",
    "effective_write_s", "actual_write_s", "archive_cycle_s", "archive_bytes_per_cycle", "archive_MiB_per_s",
    "archive_keeps_up", "archive_beside", "critical_path", "full_cycles",
]


def full_cycle_jobs(summary: pd.DataFrame) -> pd.DataFrame:
    """The jobs of full cycles: cycles with a job beyond the half cycle's fcst and post (cleanup jobs aside,
    which remove an older cycle's data and belong to no cycle's forecast, and archive jobs, which run beside the
    next cycle: report.archive tells whether they keep up)."""
    jobs = summary[~summary["step"].eq("cleanup") & ~archive_rows(summary)].astype({"cycle": str})
    beyond = jobs[~jobs["step"].isin(HALF_CYCLE_STEPS)].groupby("arm")["cycle"].unique()
    keep = [(arm in beyond.index) and (cycle in set(beyond[arm])) for arm, cycle in zip(jobs["arm"], jobs["cycle"])]
    return jobs[np.asarray(keep, dtype=bool)]


def answered_jobs(summary: pd.DataFrame) -> tuple[pd.DataFrame, bool]:
    """The jobs the study's answer is about, and whether they are full cycles': a study that ran only the half cycle
    (fcst and post, as the write strategies' study does) is answered by its half cycle."""
    jobs = full_cycle_jobs(summary)
    if not jobs.empty:
        return jobs, True
    return summary[summary["step"].isin(HALF_CYCLE_STEPS)].astype({"cycle": str}), False


def cycle_totals(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per arm x full cycle (or half cycle, in a study of only that: answered_jobs): the seconds of
    CYCLE_COLUMNS summed over the cycle's jobs."""
    jobs, _ = answered_jobs(summary)
    columns = [c for c in CYCLE_COLUMNS if c in jobs]
    return jobs.groupby(["study", "arm", "cycle"], sort=True)[columns].sum().reset_index()


def arm_roles(tiers: pd.DataFrame) -> pd.DataFrame:
    """Per arm: its scratch and persistent tier (from the tiers table)."""
    if tiers is None or tiers.empty:
        return pd.DataFrame(columns=["scratch_tier", "persistent_tier"])
    roles = tiers.pivot_table(index="arm", columns="role", values="tier", aggfunc="first")
    roles = roles.rename(columns={"scratch": "scratch_tier", "persistent": "persistent_tier"})
    for column in ("host", "free_page_reporting"):  # provenance: where the arm's jobs found their tiers
        if column in tiers:
            roles[column] = tiers.groupby("arm")[column].first()
    return roles


def baselines(roles: pd.DataFrame, strategies: dict[str, str], arms: list[str]) -> dict[str, str | None]:
    """Per arm, the arm that runs on its persistent tier without staging; of several, the one with the same
    write strategy, else the first by name."""
    unstaged = [a for a in sorted(roles.index) if roles.loc[a, "scratch_tier"] == roles.loc[a, "persistent_tier"]]
    out = {}
    for arm in arms:
        if arm not in roles.index:
            out[arm] = None
            continue
        same_tier = [b for b in unstaged if roles.loc[b, "persistent_tier"] == roles.loc[arm, "persistent_tier"]]
        same_strategy = [b for b in same_tier if strategies.get(b) == strategies.get(arm)]
        out[arm] = (same_strategy or same_tier or [None])[0]
    return out


def paired_saving(cycles: pd.DataFrame, arm: str, baseline: str) -> tuple[float, float, int]:
    """Mean over the cycles both arms ran of (baseline - arm) cycle wall seconds, its standard error and the
    number of cycles (NaN error below two cycles)."""
    wall = cycles.pivot_table(index="cycle", columns="arm", values="wall_s", aggfunc="sum")
    both = wall[[arm, baseline]].dropna() if {arm, baseline} <= set(wall.columns) else wall.iloc[0:0]
    diff = both[baseline] - both[arm]
    n = len(diff)
    if n == 0:
        return math.nan, math.nan, 0
    se = float(diff.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    return float(diff.mean()), se, n


def verdict(saved: float, se: float, n: int) -> str:
    if n == 0 or math.isnan(saved):
        return "no common cycles"
    if n < 2 or math.isnan(se):
        return "faster (one cycle, no spread)" if saved > 0 else "slower (one cycle, no spread)"
    if abs(saved) <= NOISE_SIGMAS * se:
        return "within noise"
    return "faster" if saved > 0 else "slower"


def arm_summary(summary: pd.DataFrame, tiers: pd.DataFrame, efficiency: pd.DataFrame | None = None,
                write_times: pd.DataFrame | None = None, strategies: dict[str, str] | None = None,
                io_gap: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per arm (SUMMARY_COLUMNS). ``strategies``: each arm's forecast write strategy (else from
    ``write_times``). Against the replay, over timed rows only: how many (``timed_rows``), how many at the tier's
    speed or within noise (``close_rows``), the median efficiency and of its band's edges, and the sentences
    ``efficiency_verdicts`` and ``io_gap`` (report.closeness)."""
    cycles = cycle_totals(summary)
    _, full_cycles = answered_jobs(summary)
    strategies = dict(strategies or {})
    if write_times is not None and not write_times.empty:
        strategies = {**write_times.groupby("arm")["strategy"].first().to_dict(), **strategies}
    arms = list(dict.fromkeys(cycles["arm"]))
    roles = arm_roles(tiers)
    base = baselines(roles, strategies, arms)
    replays = replay_rows(efficiency) if efficiency is not None else None
    archives = keep_up_table(summary)
    beside = beside_sentence(beside_archive(summary), NOISE_SIGMAS) or None  # the machine's: the same on every arm's row
    path = critical_path(summary)
    rows = []
    for arm in arms:
        mine = cycles[cycles["arm"] == arm]
        wall = mine["wall_s"]
        row = {
            "study": mine["study"].iloc[0], "arm": arm,
            "host": roles["host"].get(arm) if "host" in roles else None,
            "free_page_reporting": roles["free_page_reporting"].get(arm) if "free_page_reporting" in roles else None,
            "scratch_tier": roles["scratch_tier"].get(arm) if "scratch_tier" in roles else None,
            "persistent_tier": roles["persistent_tier"].get(arm) if "persistent_tier" in roles else None,
            "strategy": strategies.get(arm), "n_cycles": len(mine),
            "cycle_wall_s": float(wall.mean()),
            "cycle_wall_sd_s": float(wall.std(ddof=1)) if len(mine) > 1 else math.nan,
            "io_share": float(mine["io_s"].sum() / wall.sum()) if wall.sum() > 0 else math.nan,
            "cycle_io_s": float(mine["io_s"].mean()), "cycle_staging_s": float(mine["staging_s"].mean()),
            "baseline_arm": base.get(arm), "full_cycles": full_cycles,
        }
        if base.get(arm) is None or base[arm] == arm:
            row.update(saved_s=math.nan, saved_se_s=math.nan, saved_percent=math.nan,
                       verdict="baseline" if base.get(arm) == arm else "no baseline arm")
        else:
            saved, se, n = paired_saving(cycles, arm, base[arm])
            base_wall = cycles.loc[cycles["arm"] == base[arm], "wall_s"].mean()
            row.update(saved_s=saved, saved_se_s=se, saved_percent=100 * saved / base_wall if base_wall else math.nan,
                       verdict=verdict(saved, se, n))
        if replays is not None and not replays.empty:
            mine_replayed = replays[replays["arm"] == arm]
            timed = mine_replayed[mine_replayed["timed"]]
            median, low, high = timed_median(mine_replayed)
            row.update(timed_rows=len(timed), close_rows=int(timed["verdict"].isin(CLOSE).sum()),
                       timed_median_efficiency=median, timed_median_efficiency_low=low,
                       timed_median_efficiency_high=high, efficiency_verdicts=verdict_sentence(mine_replayed))
        if io_gap is not None and not io_gap.empty:
            row["io_gap"] = arm_gap_sentence(io_gap, arm)
        if write_times is not None and not write_times.empty:
            times = write_times[write_times["arm"] == arm]
            if not times.empty:
                row["effective_write_s"] = float(times["effective_s"].mean())
                row["actual_write_s"] = float(times["actual_s"].mean())
        row.update(arm_keep_up(archives, arm))
        if row.get("archive_keeps_up"):
            row["archive_beside"] = beside
        row["critical_path"] = arm_critical_sentence(summary, path, arm) or None
        rows.append(row)
    return pd.DataFrame(rows).reindex(columns=SUMMARY_COLUMNS)


def best_arm_line(table: pd.DataFrame) -> str:
    """One sentence: the arm with the shortest mean cycle, and by how much it beats its baseline."""
    if table.empty:
        return "No full cycle has finished: no answer yet."
    best = table.loc[table["cycle_wall_s"].idxmin()]
    head = f"Best arm: {best['arm']}, {best['cycle_wall_s']:.2f} s per cycle"
    if best["verdict"] == "baseline":
        return f"{head}; it is the baseline (no staging): staging does not pay in this study."
    if pd.isna(best["saved_s"]):
        return f"{head} ({best['verdict']})."
    spread = "" if pd.isna(best["saved_se_s"]) else f" ± {best['saved_se_s']:.2f} s"
    noise = (" - within the noise over cycles, so not a real win" if best["verdict"] == "within noise"
             else " (one cycle: no spread to tell it from noise)" if pd.isna(best["saved_se_s"]) else "")
    cycles = f"{best['n_cycles']} cycle" + ("s" if best["n_cycles"] != 1 else "")
    return (f"{head}, {best['saved_s']:.2f} s{spread} ({best['saved_percent']:.0f}%) faster than its baseline "
            f"{best['baseline_arm']} over {cycles}{noise}.")


def _fmt(value, spec: str = ".2f", suffix: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:{spec}}{suffix}"


# The summary's tables: cells written as the summary shows them (disable_numparse: "1.00" stays as written)
MARKDOWN = {"index": False, "tablefmt": "github", "disable_numparse": True}


def summary_markdown(table: pd.DataFrame, title: str, capacity: pd.DataFrame | None = None) -> str:
    """The summary as Markdown: the answers in a sentence each (report.headlines), then a table per arm, a table per
    write strategy, and the best arm's line."""
    hosts = sorted({str(h) for h in table.get("host", pd.Series(dtype=str)).dropna()})
    full = bool(table["full_cycles"].fillna(True).astype(bool).all()) if "full_cycles" in table else True
    lines = [f"# {title}", ""] + ([f"Measured on {', '.join(hosts)}.", ""] if hosts else [])
    lines += answer_lines(table, capacity, full) + ["## Per arm", ""] + [
             f"Per arm, over its {'full cycles' if full else 'half cycle'} (a cycle's wall time sums its jobs' wall "
             "times). Saved: the baseline "
             "arm's cycle minus this arm's, paired by cycle, ± its standard error; within "
             f"{NOISE_SIGMAS:g} standard errors of zero it is noise.", ""]
    arms = []
    for row in table.itertuples():
        saved = "-" if pd.isna(row.saved_s) else (
            f"{row.saved_s:+.2f}" + ("" if pd.isna(row.saved_se_s) else f" ± {row.saved_se_s:.2f}")
            + f" vs {row.baseline_arm}")
        wall = _fmt(row.cycle_wall_s) + ("" if pd.isna(row.cycle_wall_sd_s) else f" (sd {row.cycle_wall_sd_s:.2f})")
        arms.append([row.arm, row.scratch_tier or "-", row.n_cycles, wall, _fmt(row.io_share, ".0%"),
                     _fmt(row.cycle_staging_s), saved, row.verdict])
    lines.append(pd.DataFrame(arms, columns=["arm", "scratch", "cycles", "cycle wall [s]", "I/O share", "staging [s]",
                                             "saved vs baseline [s]", "verdict"]).to_markdown(**MARKDOWN))
    lines += closeness_markdown(table)
    if "archive_keeps_up" in table:
        lines += keep_up_markdown(table)
    critical = [row for row in table.itertuples() if isinstance(getattr(row, "critical_path", None), str)]
    if critical:
        lines += ["", "What decided when a cycle's products were ready: the chain of jobs back from its last step "
                  "(each job's dependency that finished last), with the seconds on it, and the jobs off it.", ""]
        lines += [f"- {row.arm}: {row.critical_path}" for row in critical]
    strategies = table.dropna(subset=["effective_write_s"]) if "effective_write_s" in table else table.iloc[0:0]
    if not strategies.empty:
        lines += ["", "Forecast write strategies: seconds per forecast, mean over cycles (effective: what compute "
                  "ranks wait; actual: what the writers spend).", "",
                  pd.DataFrame({"strategy": strategies["strategy"], "arm": strategies["arm"],
                                "effective write [s]": strategies["effective_write_s"].map("{:.3f}".format),
                                "actual write [s]": strategies["actual_write_s"].map("{:.3f}".format)})
                  .sort_values(["strategy", "arm"]).to_markdown(**MARKDOWN)]
    lines += ["", best_arm_line(table), ""]
    return "\n".join(lines)


def closeness_markdown(table: pd.DataFrame) -> list[str]:
    """The summary's lines on how close the steps come to the storage: per arm, its verdicts against the replay
    and where its largest step's storage seconds go (none when the benchmarks did not run)."""
    lines = []
    for row in table.itertuples():
        said = [text[0].upper() + text[1:] for text in (getattr(row, "efficiency_verdicts", None),
                                                        getattr(row, "io_gap", None))
                if isinstance(text, str) and text]
        if said:
            lines.append(f"- {row.arm}: " + ". ".join(said) + ".")
    if not lines:
        return []
    return ["", "How close to the storage: each step's MiB/s over a replay of its own files on the same tier, "
            "repeated so each ratio has a band (the replay against itself); rows too small or too short to time "
            "are named, never counted. Then, for each arm's step with the most storage seconds, what the tier "
            "at its best, the file pattern and cycleio take of them, per job.", "", *lines, *_reporting_note(table)]


def _reporting_note(table: pd.DataFrame) -> list[str]:
    """A line where the arms ran on a machine that hands freed memory to its host (cycleio.hostmemory)."""
    flags = table["free_page_reporting"] if "free_page_reporting" in table else pd.Series(dtype=object)
    arms = [row.arm for row, flag in zip(table.itertuples(), flags) if str(flag) == "True"]  # bool, or read back from CSV
    if not arms:
        return []
    named = f"arm {arms[0]}" if len(arms) == 1 else f"arms {', '.join(arms[:-1])} and {arms[-1]}"
    return ["", f"The machine the {named} ran on hands the memory it frees back to its host (free page reporting): "
            "a buffered write there runs as fast as the free pages it finds, so each write row's reference is its "
            "replay at the step's share of fresh pages, and a write row says when it has no fair reference "
            f"({PAGE_REPORTING_DOC})."]


def model_markdown(fits: pd.DataFrame | None, capacity: pd.DataFrame | None) -> str:
    """The tiers' linear-to-plateau fits and the capacity plan, as Markdown lines."""
    from .scaling import fit_lines, plan_lines

    lines = []
    if fits is not None and not fits.empty:
        lines += ["## The tiers' model (bandwidth = min(slope x tasks, plateau))", ""]
        lines += [f"- {line}" for line in fit_lines(fits)] + [""]
    if capacity is not None and not capacity.empty:
        lines += ["## Capacity plan", ""] + [f"- {line}" for line in plan_lines(capacity)] + [""]
    return "\n".join(lines)


def summary_table_from_tables(summary_csv: Path, tiers_csv: Path, events_parquet: Path,
                              efficiency_csv: Path | None, out_csv: Path,
                              io_gap_csv: Path | None = None) -> pd.DataFrame:
    """Read the tables and write summary.csv (one row per arm, SUMMARY_COLUMNS)."""
    from .writefigures import write_times

    summary = pd.read_csv(summary_csv, dtype={"cycle": str})
    tiers = pd.read_csv(tiers_csv) if Path(tiers_csv).stat().st_size > 1 else pd.DataFrame()
    events = pd.read_parquet(events_parquet, columns=["arm", "cycle", "step", "phase", "op", "rank", "file",
                                                      "seconds", "t_start", "strategy", "nranks"])
    fcst = events[events["step"] == "fcst"]
    strategies = fcst.dropna(subset=["strategy"]).groupby("arm")["strategy"].first().to_dict()
    efficiency = pd.read_csv(efficiency_csv) if efficiency_csv and Path(efficiency_csv).exists() else None
    io_gap = pd.read_csv(io_gap_csv) if io_gap_csv and Path(io_gap_csv).exists() else None
    table = arm_summary(summary, tiers, efficiency, write_times(events, summary), strategies, io_gap)
    write_table(table, out_csv)
    return table


def summary_markdown_from_csv(answers_csv: Path, out_md: Path, title: str, fits: Path | None = None,
                              capacity: Path | None = None, replays: Path | None = None,
                              timing: TimedThreshold | None = None) -> str:
    """summary.md from summary.csv, with the tiers' model and the capacity plan when given, and the replay jobs'
    answer (tables/replay_jobs.csv, report.darshananswer); returns the text."""
    from .darshananswer import replay_markdown

    table = pd.read_csv(answers_csv)
    plan = pd.read_csv(capacity) if capacity else None
    extra = model_markdown(pd.read_csv(fits, dtype={"tasks_measured": str}) if fits else None, plan)
    replayed = ("\n".join(replay_markdown(pd.read_csv(replays, dtype={"cycle": str}), timing or TimedThreshold()))
                if replays else "")
    text = summary_markdown(table, title, plan) + (f"{replayed}\n" if replayed else "") + (f"\n{extra}" if extra else "")
    write_text_atomic(out_md, text)
    return text
