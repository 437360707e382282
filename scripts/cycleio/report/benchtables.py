"""Benchmark points to tidy tables: ``benchmarks`` (every tier x pattern x tasks x operation x
repetition, with max/min/mean over repetitions) and ``efficiency`` (the surrogates' MiB/s over the
benchmarks' MiB/s on the same tier)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from ..benchmarks.threshold import TimedThreshold
from ..intervals import covered_per_group
from ..fsutil import write_table
from .aggregate import group_codes
from .closeness import AT_SPEED, FASTER, NOT_FAIR, NOT_TIMED, SLOWER, WITHIN_NOISE
from .pairedreference import fresh_written_MiB, reference_fair, reference_for, reference_repetitions, step_fresh_share
from ..storage.pagecache import memory_backed
from ..records import cycle_records, replay_records
from ..benchmarks.common import COLUMNS
from ..units import MiB

_BOOL_COLUMNS = ("file_per_proc", "random", "direct_io", "fsync", "cache_risk")
_INT_COLUMNS = ("repetition", "repetitions", "tasks", "nodes", "transfer_size_bytes", "block_size_bytes", "segments",
                "bytes", "host_cores")
_FLOAT_COLUMNS = ("stonewall_s", "bw_MiB_per_s", "ops_per_s", "latency_s", "seconds", "t_start")
# The point files' columns and types (tierbench.write_rows writes them as CSV; an empty cell is null).
POINT_SCHEMA = pa.schema([(name, pa.bool_() if name in _BOOL_COLUMNS else pa.int64() if name in _INT_COLUMNS
                           else pa.float64() if name in _FLOAT_COLUMNS else pa.string()) for name in COLUMNS])
_PANDAS_TYPES = {pa.bool_(): pd.BooleanDtype(), pa.int64(): pd.Int64Dtype(), pa.string(): pd.StringDtype()}
AGGREGATE_ORDER = {"rep": 0, "max": 1, "min": 2, "mean": 3}
EFFICIENCY_COLUMNS = (
    "study", "arm", "tier", "step", "activity", "surrogate_jobs", "surrogate_bytes", "surrogate_summed_s",
    "surrogate_covered_s", "surrogate_MiB_per_s", "surrogate_cached_fraction", "surrogate_fresh_share",
    "jobs_unmatched", "reference",
    "reference_benchmark", "reference_pattern", "reference_operation", "reference_tool", "reference_tasks",
    "reference_from_cache",
    "reference_MiB_per_s", "efficiency", "reference_repetitions", "reference_s", "efficiency_low", "efficiency_high",
    "timed", "verdict",
)


def read_points(path: str | Path) -> pa.Table:
    """One point file as a table of POINT_SCHEMA (columns it lacks, from older versions, are null)."""
    # integers are read as floats and rounded: a tool may print a count as 4.0
    read_types = {f.name: pa.float64() if f.type == pa.int64() else f.type for f in POINT_SCHEMA}
    table = pa_csv.read_csv(path, convert_options=pa_csv.ConvertOptions(
        column_types=read_types, include_columns=list(COLUMNS), include_missing_columns=True,
        true_values=["True", "true", "1"], false_values=["False", "false", "0"], null_values=[""],
        strings_can_be_null=True))
    columns = [pc.round(column).cast(pa.int64()) if field.type == pa.int64() else column.cast(field.type)
               for field, column in zip(POINT_SCHEMA, table.columns)]
    return pa.Table.from_arrays(columns, schema=POINT_SCHEMA)


def load_points(paths: list[str | Path]) -> pd.DataFrame:
    """The rows of every benchmark point's file, in nullable pandas types."""
    tables = [read_points(path) for path in paths]
    table = pa.concat_tables(tables) if tables else POINT_SCHEMA.empty_table()
    return table.to_pandas(types_mapper=_PANDAS_TYPES.get)


POINT_KEYS = ["tier", "benchmark", "pattern", "api", "nodes", "tasks", "operation", "source", "job"]


def mark_timed(bench: pd.DataFrame, timing: TimedThreshold) -> pd.Series:
    """``timed`` of every benchmarks row (:meth:`TimedThreshold.enough`): a repetition by its own bytes and seconds
    (a metadata point, without bytes, by its seconds alone; a phase bounded by time, ``stonewall_s`` > 0, by its
    seconds and any bytes; a row without seconds counts as timed, there is nothing to judge it by); the max, min
    and mean rows of a point when every repetition of it is."""
    if bench.empty:
        return pd.Series([], dtype=bool, index=bench.index)
    nbytes = pd.to_numeric(bench["bytes"], errors="coerce").astype(float).fillna(math.inf)
    seconds = pd.to_numeric(bench["seconds"], errors="coerce").astype(float).fillna(math.inf)
    stonewall = bench["stonewall_s"] if "stonewall_s" in bench else pd.Series(0.0, index=bench.index)
    bounded = pd.to_numeric(stonewall, errors="coerce").fillna(0.0) > 0
    own = pd.Series(timing.enough(nbytes, seconds, bounded), index=bench.index).astype(bool)
    reps = bench["aggregate"] == "rep"
    keys = [k for k in POINT_KEYS if k in bench.columns]
    # a point's rows by their keys as values: a blank key (mdtest rows have no job, IOR's summary rows no
    # repetition) is a key like any other, not a row without a point
    point = bench.groupby(keys, dropna=False, sort=False).ngroup()
    every_rep = own[reps].groupby(point[reps]).all()
    aggregate = point.map(every_rep).fillna(own).astype(bool)
    return own.where(reps, aggregate & own).astype(bool)


def benchmark_table(points: pd.DataFrame, timing: TimedThreshold = TimedThreshold()) -> pd.DataFrame:
    order = points["aggregate"].map(AGGREGATE_ORDER).fillna(9)
    keys = ["tier", "benchmark", "pattern", "api", "nodes", "tasks", "operation"]
    table = (points.assign(_order=order).sort_values([*keys, "_order", "repetition"], kind="stable")
             .drop(columns="_order").reset_index(drop=True))
    table["timed"] = mark_timed(table, timing)
    return table


def verdict(efficiency: float, low: float, high: float, timed: bool, tolerance: float) -> str:
    """A row's verdict: ``not timed``; ``at the tier's speed`` within 1 +/- ``tolerance``; else ``within noise``
    when the band (``low``, ``high``) still holds 1.0; else slower or faster."""
    if not timed or pd.isna(efficiency):
        return NOT_TIMED
    if abs(efficiency - 1.0) <= tolerance:
        return AT_SPEED
    if not (pd.isna(low) or pd.isna(high)) and low <= 1.0 <= high:
        return WITHIN_NOISE
    return SLOWER if efficiency < 1.0 else FASTER


def _io_rows(events: pd.DataFrame) -> pd.DataFrame:
    io = events[events["op"].isin(["read", "write", "copy"]) & (events["bytes"] > 0)].copy()
    for column in ("cached_fraction", "fresh_MiB"):  # tables of records from before these were kept
        io[column] = io[column].astype(float) if column in io else float("nan")
    for column in ("n_files", "nranks"):  # tables of records from before these were kept
        if column not in io:
            io[column] = 1
    io["cached_bytes"] = io["cached_fraction"] * io["bytes"]
    io["measured_bytes"] = io["bytes"].where(io["cached_fraction"].notna(), 0)
    return io


def _per_job(io: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per ``keys`` (a job's step and activity): bytes, summed and covered seconds (overlaps once), files."""
    groups = io.groupby(keys, sort=True)
    jobs = groups.agg(bytes=("bytes", "sum"), summed_s=("seconds", "sum"), cached_bytes=("cached_bytes", "sum"),
                      measured_bytes=("measured_bytes", "sum"), files=("n_files", "sum"))
    jobs["covered_s"] = covered_per_group(group_codes(groups), io["t_start"].to_numpy(),
                                          (io["t_start"] + io["seconds"]).to_numpy(), len(jobs))
    return jobs


# The phases a paired replay repeats: a step's run, and the archive job's reads and writes (surrogates.archivejob)
REPLAYED_PHASES = ("run", "archive")


def paired_jobs(events: pd.DataFrame) -> pd.DataFrame:
    """One row per paired job's step, direction and replay repetition: the step's run-phase bytes and covered
    seconds beside its replay's (records phase ``replay``, benchmarks.paired) bytes and seconds, and the fresh
    pages each met (``step_fresh_MiB``, ``replay_fresh_MiB``: pairedreference). A paired job
    (one with a replay ``wall`` record) whose reads or writes were too little to replay has one row for them,
    its replay columns blank."""
    keys = ["study", "arm", "tier", "step", "cycle", "op"]
    every = replay_records(events)
    replays = every[every["op"].isin(["read", "write"])]
    if every.empty:
        return pd.DataFrame(columns=[*keys, "repetition", "step_bytes", "step_covered_s", "step_summed_s",
                                     "step_files", "step_cached_fraction", "step_fresh_MiB",
                                     "memory_tier", "nranks", "phase", "replay_bytes", "replay_s",
                                     "replay_cached_fraction", "replay_files", "replay_fresh_MiB"])
    run = _io_rows(cycle_records(events))
    run = run[run["phase"].isin(REPLAYED_PHASES) & run["op"].isin(["read", "write"])]
    steps = _per_job(run, keys)
    steps["phase"] = run.groupby(keys, sort=True)["phase"].first()
    steps["nranks"] = run.groupby(keys, sort=True)["nranks"].max()
    # MiB of the step's writes that found fresh pages, each file as its probe found them (pairedreference)
    steps["step_fresh_MiB"] = pd.Series({key: fresh_written_MiB(group) for key, group in run.groupby(keys, sort=True)},
                                        dtype=float).reindex(steps.index)
    kinds = [run[column] if column in run else pd.Series("", run.index) for column in ("tier_kind", "fs_type")]
    steps["memory_tier"] = pd.Series([memory_backed(k, f) for k, f in zip(*kinds)], run.index).groupby(
        [run[k] for k in keys], sort=True).any()
    steps = steps.rename(columns={"bytes": "step_bytes", "covered_s": "step_covered_s", "summed_s": "step_summed_s",
                                  "files": "step_files"})
    steps["step_cached_fraction"] = (steps["cached_bytes"] / steps["measured_bytes"]).where(steps["measured_bytes"] > 0)
    replays = replays.assign(cached_bytes=replays["cached_fraction"].astype(float).fillna(0) * replays["bytes"],
                             file=replays["file"] if "file" in replays else None,
                             fresh_MiB=replays["fresh_MiB"].astype(float) if "fresh_MiB" in replays else float("nan"))
    reps = replays.groupby([*keys, "repetition"], sort=True).agg(
        replay_bytes=("bytes", "sum"), replay_s=("seconds", "sum"), cached_bytes=("cached_bytes", "sum"),
        replay_files=("file", "first"), replay_fresh_MiB=("fresh_MiB", "first"))
    reps["replay_cached_fraction"] = reps.pop("cached_bytes") / reps["replay_bytes"]
    paired = every[keys[:-1]].drop_duplicates()
    steps = steps.drop(columns=["cached_bytes", "measured_bytes"]).reset_index().merge(paired, on=keys[:-1])
    return steps.merge(reps.reset_index(), on=keys, how="left")


def _paired_rows(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per arm, tier, step and direction: the step over its paired replays (the efficiency table's ``replay`` rows);
    the reference is the step's bytes over the seconds its replays say the tier takes for them in the page state
    the step met (pairedreference.reference_for), summed over the paired jobs; the band spans every
    repetition of every paired job."""
    keys = ["study", "arm", "tier", "step", "op"]
    pairs = pairs.assign(ratio=(pairs["step_bytes"] / pairs["step_covered_s"]) / (pairs["replay_bytes"] / pairs["replay_s"]))
    rows = []
    for key, group in pairs.groupby(keys, sort=True):
        reference = reference_for(group[group["replay_s"].notna()], key[4])  # jobs whose I/O was enough to replay
        # not fair where no replay could be: writes to a memory tier of a machine that hands memory back are not
        # replayed (benchmarks.paired), and their row says why
        fair = reference.fair and reference_fair(group.drop_duplicates("cycle"), key[4])
        met = reference.met
        jobs = (reference.jobs if not reference.jobs.empty else group).drop_duplicates("cycle")
        group = reference.jobs
        nbytes, covered = jobs["step_bytes"].sum(), jobs["step_covered_s"].sum()
        surrogate = nbytes / MiB / covered if covered > 0 else float("nan")
        reference_s = reference.seconds
        measured = jobs["step_cached_fraction"].notna()
        probed = jobs["step_fresh_MiB"].notna() & (key[4] == "write")  # pages a write fills: pairedreference
        rows.append({**dict(zip(keys, key)), "phase": jobs["phase"].iloc[0] if "phase" in jobs else "run",
                     "surrogate_jobs": len(jobs), "surrogate_bytes": nbytes,
                     "surrogate_summed_s": jobs["step_summed_s"].sum(), "surrogate_covered_s": covered,
                     "surrogate_MiB_per_s": surrogate,
                     "surrogate_cached_fraction": (jobs["step_cached_fraction"] * jobs["step_bytes"])[measured].sum()
                     / jobs["step_bytes"][measured].sum() if measured.any() else float("nan"),
                     "surrogate_fresh_share": float((step_fresh_share(jobs) * jobs["step_bytes"])[probed].sum()
                                                    / jobs["step_bytes"][probed].sum()) if probed.any() else float("nan"),
                     "reference_fair": fair,
                     "jobs_unmatched": int((~met).sum()),
                     "reference": "replay", "reference_benchmark": "replay", "reference_pattern": key[3],
                     "reference_operation": key[4], "reference_tool": "fio", "reference_tasks": 1,
                     "reference_from_cache": bool(key[4] == "read" and group["replay_cached_fraction"].mean() > 0.5),
                     "reference_MiB_per_s": float(nbytes / MiB / reference_s) if reference_s > 0 else float("nan"),
                     "reference_repetitions": int(group["repetition"].nunique()),
                     # the replay's own seconds, to judge whether it was long enough to time
                     "reference_s": float(reference_repetitions(group).groupby("repetition")["replay_s"].sum().median())
                     / max(1, group["cycle"].nunique()),
                     "efficiency_low": float(group["ratio"].min()), "efficiency_high": float(group["ratio"].max())})
    out = pd.DataFrame(rows)
    if not out.empty:
        out["activity"] = out.pop("phase") + ":" + out.pop("op")
    return out


def one_node(bench: pd.DataFrame) -> pd.DataFrame:
    """The rows of points on one client node (a blank ``nodes``, from a table before nodes were swept, is one)."""
    if "nodes" not in bench:
        return bench
    return bench[pd.to_numeric(bench["nodes"], errors="coerce").fillna(1).astype(float) <= 1]


def _references(bench: pd.DataFrame) -> pd.DataFrame:
    """Per tier and operation, the IOR/fio patterns a step compares with besides its replay: every io pattern
    at 1 task (the surrogates' one writer) and at its best task count (what the tier can do), with the
    fastest and slowest repetition of that point for the band. Points on one node only: a step's job is
    compared with what one node's tasks can do."""
    aggregates = one_node(bench[(bench["benchmark"] == "io") & bench["bw_MiB_per_s"].notna()])
    point = ["tier", "pattern", "operation", "tasks"]
    spread = aggregates.pivot_table(index=point, columns="aggregate", values="bw_MiB_per_s", aggfunc="first")
    counts = aggregates[aggregates["aggregate"] == "rep"].groupby(point).size()
    refs = []
    means = aggregates[aggregates["aggregate"] == "mean"]
    for (tier, pattern, operation), group in means.groupby(["tier", "pattern", "operation"], sort=True):
        picks = []
        single = group[group["tasks"] == 1]
        if not single.empty:
            picks.append((f"{pattern}, 1 task", single.iloc[0]))
        picks.append((f"{pattern}, best", group.loc[group["bw_MiB_per_s"].idxmax()]))
        for label, row in picks:
            at = (tier, pattern, operation, row["tasks"])
            refs.append({"tier": tier, "reference": label, "reference_benchmark": "io",
                         "reference_pattern": pattern, "reference_operation": operation,
                         "reference_tool": row["tool"], "reference_tasks": row["tasks"],
                         "reference_from_cache": row["cache_risk"], "reference_MiB_per_s": row["bw_MiB_per_s"],
                         "reference_repetitions": int(counts.get(at, 1)),
                         "reference_max_MiB_per_s": spread.loc[at].get("max", row["bw_MiB_per_s"]),
                         "reference_min_MiB_per_s": spread.loc[at].get("min", row["bw_MiB_per_s"]),
                         "reference_timed": bool(row["timed"]) if "timed" in row and pd.notna(row["timed"]) else True})
    return pd.DataFrame(refs, columns=["tier", "reference", "reference_benchmark", "reference_pattern",
                                       "reference_operation", "reference_tool", "reference_tasks",
                                       "reference_from_cache", "reference_MiB_per_s", "reference_repetitions",
                                       "reference_max_MiB_per_s", "reference_min_MiB_per_s", "reference_timed"])


def _judge(table: pd.DataFrame, timing: TimedThreshold) -> pd.DataFrame:
    """``timed`` and ``verdict`` of every row (see :class:`TimedThreshold` and :func:`verdict`); a row against a
    benchmark point that was itself too small to time is not timed."""
    jobs = table["surrogate_jobs"].clip(lower=1)
    reference_s = table["reference_s"].fillna(table["surrogate_bytes"] / jobs / MiB / table["reference_MiB_per_s"])
    # a benchmark point too small to time is no reference either (benchmarks.csv's ``timed``)
    reference_timed = table["reference_timed"].fillna(True).astype(bool) if "reference_timed" in table else True
    step_timed = pd.Series(timing.enough(table["surrogate_bytes"] / jobs, table["surrogate_covered_s"] / jobs),
                           index=table.index).astype(bool)
    table["timed"] = (step_timed & (reference_s >= timing.min_seconds) & reference_timed
                      & table["efficiency"].notna()).astype(bool)
    table["verdict"] = [verdict(e, lo, hi, t, timing.tolerance) for e, lo, hi, t in
                        zip(table["efficiency"], table["efficiency_low"], table["efficiency_high"], table["timed"])]
    if "reference_fair" in table:  # no ratio where the reference is not fair (pairedreference.reference_fair)
        # a step long enough to time whose reference is not fair (blank on the pattern rows), replayed or not (a
        # write to a memory tier of a machine that hands memory back is not): timed, without a ratio
        unfair = step_timed & table["reference_fair"].eq(False)
        table.loc[unfair, "timed"] = True
        table.loc[unfair, ["efficiency", "efficiency_low", "efficiency_high"]] = float("nan")
        table.loc[unfair, "verdict"] = NOT_FAIR
    return table


def efficiency_table(bench: pd.DataFrame, events: pd.DataFrame,
                     timing: TimedThreshold = TimedThreshold()) -> pd.DataFrame:
    """One row per arm x tier x step x I/O activity x reference: the step's MiB/s over the reference's.

    Reference ``replay``: the run phase of the paired jobs only, over their paired replays (:func:`paired_jobs`):
    the median of the repetitions' MiB/s, and the band from the fastest to the slowest repetition of any paired
    job (the replay against itself). Other references: the IOR/fio patterns on the tier (:func:`_references`),
    against every job of the step, their band from the point's slowest and fastest repetition. A step's seconds
    are those of step_summary: per job, the time its events of the activity cover, overlapping events (parallel
    copies, ranks writing at once) once, summed over the jobs (``surrogate_covered_s``); ``surrogate_summed_s``
    adds every event's seconds up. Reads compare with reads; writes and staging copies (timed on the tier they
    land on) with writes. ``timed`` and ``verdict``: :func:`_judge`.
    """
    io = _io_rows(cycle_records(events))
    if io.empty:
        return pd.DataFrame(columns=list(EFFICIENCY_COLUMNS))
    io["activity"] = io["phase"] + ":" + io["op"]
    keys = ["study", "arm", "tier", "step", "activity"]
    jobs = _per_job(io, [*keys, "cycle"])
    jobs["surrogate_jobs"] = 1
    surrogate = jobs.groupby(level=keys, sort=True).sum().reset_index()
    surrogate = surrogate.rename(columns={"bytes": "surrogate_bytes", "summed_s": "surrogate_summed_s",
                                          "covered_s": "surrogate_covered_s"})
    # reads: the share of their bytes the page cache held as they began (blank where not measured)
    surrogate["surrogate_cached_fraction"] = (surrogate["cached_bytes"] / surrogate["measured_bytes"]).where(
        surrogate["measured_bytes"] > 0)
    surrogate["surrogate_MiB_per_s"] = (surrogate["surrogate_bytes"] / MiB / surrogate["surrogate_covered_s"]).where(
        surrogate["surrogate_covered_s"] > 0)
    surrogate["reference_operation"] = surrogate["activity"].map(lambda a: "read" if a.endswith(":read") else "write")
    patterns = surrogate.merge(_references(bench), on=["tier", "reference_operation"], how="inner")
    patterns["efficiency_low"] = patterns["surrogate_MiB_per_s"] / patterns.pop("reference_max_MiB_per_s")
    patterns["efficiency_high"] = patterns["surrogate_MiB_per_s"] / patterns.pop("reference_min_MiB_per_s")
    merged = pd.concat([frame for frame in (_paired_rows(paired_jobs(events)), patterns) if not frame.empty],
                       ignore_index=True) if not patterns.empty or not replay_records(events).empty else pd.DataFrame()
    if merged.empty:
        return pd.DataFrame(columns=list(EFFICIENCY_COLUMNS))
    merged["efficiency"] = merged["surrogate_MiB_per_s"] / merged["reference_MiB_per_s"]
    merged["reference_tasks"] = merged["reference_tasks"].astype("Int64")
    merged["reference_repetitions"] = merged["reference_repetitions"].astype("Int64")
    if "reference_s" not in merged:
        merged["reference_s"] = float("nan")
    merged = _judge(merged, timing)
    return merged.reindex(columns=list(EFFICIENCY_COLUMNS)).sort_values(
        ["arm", "tier", "step", "activity", "reference"], kind="stable").reset_index(drop=True)


IO_GAP_COLUMNS = (
    "study", "arm", "tier", "step", "direction", "jobs", "files_per_job", "bytes_per_job", "step_s", "replay_s",
    "replay_s_low", "replay_s_high", "best_reference", "best_tool", "best_MiB_per_s", "tier_best_s", "pattern_s",
    "pattern_s_low", "pattern_s_high", "cycleio_s", "cycleio_s_low", "cycleio_s_high", "timed",
)


def _best_point(bench: pd.DataFrame, tier: str, operation: str, tasks: int) -> pd.Series | None:
    """The tier's best pattern for a job of ``tasks`` tasks: the io pattern named ``easy`` (else every pattern),
    the fastest of its points with at most the job's tasks (a job can always write with fewer), else the one
    with the fewest tasks; timed points only (a point too small to time is no tier's best), on one node."""
    means = one_node(bench)
    means = means[(means["benchmark"] == "io") & (means["aggregate"] == "mean") & (means["tier"] == tier)
                  & (means["operation"] == operation) & means["bw_MiB_per_s"].notna()]
    if "timed" in means:
        means = means[means["timed"].fillna(True).astype(bool)]
    if means.empty:
        return None
    if (means["pattern"] == "easy").any():
        means = means[means["pattern"] == "easy"]
    within = means[means["tasks"] <= tasks]
    within = within if not within.empty else means[means["tasks"] == means["tasks"].min()]
    return within.loc[within["bw_MiB_per_s"].idxmax()]


def io_gap_table(bench: pd.DataFrame, events: pd.DataFrame, timing: TimedThreshold = TimedThreshold()) -> pd.DataFrame:
    """Where a paired step's run-phase I/O seconds go, per job (means over the paired jobs): what the tier's
    best pattern would take for its bytes (``tier_best_s``), what the step's own file pattern adds (its
    replay, at the replay's rate for the step's bytes, minus that: ``pattern_s``), and what cycleio adds (the
    step minus its replay: ``cycleio_s``); ``_low``/``_high`` from the replay's fastest and slowest repetition."""
    pairs = paired_jobs(events)
    pairs = pairs[pairs["replay_s"].notna()]
    keys = ["study", "arm", "tier", "step", "op"]
    # the jobs the efficiency table sets against their replay, and per row whether any job's page state met
    # the reference, for the step's bytes: pairedreference (a replay's own bytes say what share fresh pages held)
    references = {key: reference_for(group, key[4]) for key, group in pairs.groupby(keys, sort=True)}
    if references:
        pairs = pd.concat([reference.jobs for reference in references.values()])
    # a replay may cover fewer bytes than its step (benchmarks.replay.max_files caps each size class): its seconds
    # at the replay's own rate for the step's bytes, so that step, replay and tier are set against the same bytes
    pairs = pairs.assign(replay_s=(pairs["replay_s"] * pairs["step_bytes"] / pairs["replay_bytes"])
                         .where(pairs["replay_bytes"] > 0))
    rows = []
    for (study, arm, tier, step, op), group in pairs.groupby(keys, sort=True):
        jobs = group.drop_duplicates("cycle")
        n = len(jobs)
        per_rep = group.groupby("repetition")["replay_s"].sum() / n
        step_s, nbytes = jobs["step_covered_s"].sum() / n, jobs["step_bytes"].sum() / n
        reference = references[(study, arm, tier, step, op)]
        replay_s = reference.seconds / n
        low, high = float(per_rep.min()), float(per_rep.max())
        best = _best_point(bench, tier, op, int(jobs["nranks"].max()))
        best_s = nbytes / MiB / best["bw_MiB_per_s"] if best is not None else float("nan")
        tasks = int(best["tasks"]) if best is not None else 0
        rows.append({"study": study, "arm": arm, "tier": tier, "step": step, "direction": op, "jobs": n,
                     "files_per_job": jobs["step_files"].sum() / n, "bytes_per_job": nbytes, "step_s": step_s,
                     "replay_s": replay_s, "replay_s_low": low, "replay_s_high": high,
                     "best_reference": f"{best['pattern']}, {tasks} task{'s' if tasks != 1 else ''}" if best is not None else "",
                     "best_tool": best["tool"] if best is not None else "",
                     "best_MiB_per_s": best["bw_MiB_per_s"] if best is not None else float("nan"),
                     "tier_best_s": best_s, "pattern_s": replay_s - best_s, "pattern_s_low": low - best_s,
                     "pattern_s_high": high - best_s, "cycleio_s": step_s - replay_s, "cycleio_s_low": step_s - high,
                     "cycleio_s_high": step_s - low,
                     # no split against a reference that is not fair (pairedreference.reference_fair)
                     "timed": bool(timing.enough(nbytes, step_s) and replay_s >= timing.min_seconds
                                   and reference.fair)})
    return pd.DataFrame(rows, columns=list(IO_GAP_COLUMNS))


def write_benchmark_tables(point_files: list[str | Path], events_path: Path, *, benchmarks_csv: Path,
                           benchmarks_parquet: Path, efficiency: Path, io_gap: Path,
                           timing: TimedThreshold = TimedThreshold()) -> None:
    """The benchmarks table (CSV and Parquet), the efficiency table and the I/O gap table, where the caller
    names them."""
    bench = benchmark_table(load_points(point_files), timing)
    events = pd.read_parquet(events_path)
    for path, frame in ((benchmarks_parquet, bench), (benchmarks_csv, bench),
                        (efficiency, efficiency_table(bench, events, timing)), (io_gap, io_gap_table(bench, events, timing))):
        write_table(frame, Path(path))
