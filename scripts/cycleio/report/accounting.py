"""The records against the kernel's count: do a job's records account for the bytes it moved?

Each job counts what the kernel saw its process (and the children it reaped) read and write over each
of its phases (cycleio.kernelio: records of tool ``kernel``, one set per window). A window holds the
records of its job (study, arm, cycle, step) that began inside it; their bytes read and written are
set against the kernel's ``rchar`` and ``wchar`` (bytes through read and write calls, whatever served
them). What a record's bytes mean (surrogates/steps.py, runner/stagefiles.py):

- ``read`` (run): a file read whole, its size; ``write`` and ``combine`` (run): a file written, its size;
- ``copy`` (stage_in, stage_out): a file copied, read from one tier and written to another: both;
- ``checksum`` (verify, and a tool copy's source): a file read whole.

Other records move no bytes of their own (``sync``, ``rename``, ``remove``, the CPU work) or restate
others (the forecast's ``write_effective``); the replay and any record outside a window are left out.
A direction in which neither side moved ``MIN_JUDGED_BYTES`` is not judged (``note``): the job's
logging and the counters' own reads are a few KiB. Outside [``LOW``, ``HIGH``] it is ``flagged``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..kernelio import CGROUP_OPS, CGROUP_TOOL, EXCLUDED_OPS, KERNEL_OPS, KERNEL_TOOL
from ..units import MiB

READ_OPS = ("read", "copy", "checksum")
WRITE_OPS = ("write", "copy", "combine")
LOW, HIGH = 0.99, 1.01
MIN_JUDGED_BYTES = 1 * MiB
JOB_KEYS = ["study", "arm", "cycle", "step"]
MANIFEST_SUFFIX = ".manifest.json"
WINDOW_KEYS = [*JOB_KEYS, "phase", "t_start"]
KERNEL_COLUMNS = {  # record op -> (bytes column, calls column)
    "kernel_read": ("kernel_read_bytes", "kernel_read_calls"),
    "kernel_write": ("kernel_write_bytes", "kernel_write_calls"),
    "kernel_storage_read": ("kernel_storage_read_bytes", None),
    "kernel_storage_write": ("kernel_storage_write_bytes", None),
    "kernel_excluded_read": ("kernel_excluded_read_bytes", None),
    "kernel_excluded_write": ("kernel_excluded_write_bytes", None),
    "cgroup_read": ("cgroup_read_bytes", "cgroup_read_ios"),
    "cgroup_write": ("cgroup_write_bytes", "cgroup_write_ios"),
}
assert set(KERNEL_COLUMNS) == set(KERNEL_OPS) | set(EXCLUDED_OPS) | set(CGROUP_OPS), "a kernel or cgroup op without its columns"
DARSHAN_COLUMNS = ["darshan_read_bytes", "darshan_write_bytes", "darshan_read_calls", "darshan_write_calls"]
ACCOUNTING_COLUMNS = [
    *JOB_KEYS, "phase", "host", "t_start", "seconds",
    "records_read_bytes", "records_write_bytes", "records_read_calls", "records_write_calls",
    "kernel_read_bytes", "kernel_write_bytes", "kernel_read_calls", "kernel_write_calls",
    "kernel_storage_read_bytes", "kernel_storage_write_bytes", "kernel_excluded_read_bytes",
    "kernel_excluded_write_bytes", "cgroup_read_bytes", "cgroup_write_bytes",
    "records_over_kernel_read", "records_over_kernel_write",
    *DARSHAN_COLUMNS, "records_over_darshan_read", "records_over_darshan_write", "darshan_logs",
    "flagged", "note",
]
JOB_PHASE = "job"  # a job's row beside its windows' where Darshan counted the job (instruments.darshan)


def _windows(kernel: pd.DataFrame) -> pd.DataFrame:
    """One row per window: the kernel's (and the cgroup's) counts side by side."""
    rows = kernel.pivot_table(index=[*WINDOW_KEYS, "host", "seconds"], columns="op",
                              values=["bytes", "transfers"], aggfunc="sum")
    out = pd.DataFrame(index=rows.index)
    for op, (bytes_column, calls_column) in KERNEL_COLUMNS.items():
        present = ("bytes", op) in rows.columns
        out[bytes_column] = rows[("bytes", op)] if present else np.nan
        if calls_column:
            out[calls_column] = rows[("transfers", op)] if present else np.nan
    return out.astype("Int64").reset_index()  # blank: not counted (a window without the cgroup, or nothing left out)


def _assign(records: pd.DataFrame, windows: pd.DataFrame) -> pd.Series:
    """Each record's window (row number in ``windows``), the window of its job that it began in; -1 if none."""
    found = pd.Series(-1, index=records.index, dtype="int64")
    ends = windows["t_start"] + windows["seconds"]
    by_job = {key: group.index for key, group in windows.groupby(JOB_KEYS, sort=False)}
    for key, group in records.groupby(JOB_KEYS, sort=False):
        job_windows = by_job.get(key)
        if job_windows is None:
            continue
        starts = windows.loc[job_windows, "t_start"].to_numpy()
        order = np.argsort(starts)
        starts, numbers = starts[order], job_windows.to_numpy()[order]
        at = np.searchsorted(starts, group["t_start"].to_numpy(), side="right") - 1
        inside = at >= 0
        candidate = numbers[np.clip(at, 0, None)]
        inside &= group["t_start"].to_numpy() <= ends.loc[candidate].to_numpy()
        found.loc[group.index] = np.where(inside, candidate, -1)
    return found


def _judge(records: pd.Series, kernel: pd.Series) -> tuple[pd.Series, pd.Series, pd.Series]:
    """(ratio, outside the band, judged) for one direction."""
    records, kernel = records.astype(float), kernel.astype(float)
    ratio = (records / kernel).where(kernel > 0)
    judged = (records >= MIN_JUDGED_BYTES) | (kernel >= MIN_JUDGED_BYTES)
    outside = judged & ~ratio.between(LOW, HIGH)  # a NaN ratio (kernel saw nothing) is outside
    return ratio, outside, judged


def _judged_against(table: pd.DataFrame, counter: str, who: str) -> None:
    """Each row's records set against ``counter``'s bytes (columns ``<counter>_read_bytes``, ...) in each direction:
    ``records_over_<counter>_<direction>``, ``flagged`` and a ``note`` naming what was not judged or is outside."""
    notes = [[] for _ in range(len(table))]
    flagged = np.zeros(len(table), dtype=bool)
    for direction in ("read", "write"):
        ratio, outside, judged = _judge(table[f"records_{direction}_bytes"], table[f"{counter}_{direction}_bytes"])
        table[f"records_over_{counter}_{direction}"] = ratio
        flagged |= outside.to_numpy(dtype=bool)
        for number in np.flatnonzero(~judged.to_numpy(dtype=bool)):
            notes[number].append(f"{direction}: under {MIN_JUDGED_BYTES // MiB} MiB, not judged")
        for number in np.flatnonzero(outside.to_numpy(dtype=bool)):
            share = f"with {who} counting none" if np.isnan(ratio.iloc[number]) else f"{ratio.iloc[number]:.1%}"
            notes[number].append(f"{direction}: records {share} of {who}'s count")
    table["flagged"] = flagged
    table["note"] = ["; ".join(parts) for parts in notes]


def accounting_table(events: pd.DataFrame, darshan: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per job and window (arm, cycle, step, phase): the records' bytes and calls against the kernel's;
    and where Darshan counted a job (``darshan``: :func:`darshan_counts`), a row of phase ``job`` with its windows
    summed against Darshan's count.

    ``events``: io_events (every record, the kernel's included). A job without kernel records (recorded
    before they existed, or where /proc/self/io could not be read) has no row.
    """
    kernel = events[events["tool"].isin([KERNEL_TOOL, CGROUP_TOOL]) & events["op"].isin(list(KERNEL_COLUMNS))]
    if kernel.empty:
        return pd.DataFrame(columns=ACCOUNTING_COLUMNS)
    windows = _windows(kernel)
    own = events[~events.index.isin(kernel.index) & events["op"].isin(sorted(set(READ_OPS) | set(WRITE_OPS)))]
    own = own.assign(window=_assign(own, windows))
    own = own[own["window"] >= 0]
    calls = own["transfers"] if "transfers" in own else pd.Series(0, index=own.index)
    reads, writes = own["op"].isin(READ_OPS), own["op"].isin(WRITE_OPS)
    by_window = pd.DataFrame({
        "records_read_bytes": own["bytes"].where(reads, 0),
        "records_write_bytes": own["bytes"].where(writes, 0),
        # a copy's calls are those of one side; a record without a count (0) says nothing of the calls
        "records_read_calls": calls.where(reads & (own["op"] != "copy"), 0),
        "records_write_calls": calls.where(writes & (own["op"] != "copy"), 0),
        "window": own["window"],
    }).groupby("window").sum()
    table = windows.join(by_window).fillna({column: 0 for column in by_window.columns})
    for column in by_window.columns:
        table[column] = table[column].astype("int64")
    _judged_against(table, "kernel", "the kernel")
    if darshan is not None and not darshan.empty:
        table = pd.concat([table, _job_rows(table, darshan)], ignore_index=True)
    return table.reindex(columns=ACCOUNTING_COLUMNS).sort_values(
        ["arm", "cycle", "t_start", "phase"], kind="stable", key=_job_last).reset_index(drop=True)


def _job_last(column: pd.Series) -> pd.Series:
    """Sort key: a job's own row after its windows (which start where it does)."""
    return column.eq(JOB_PHASE) if column.name == "phase" else column


def _job_rows(windows: pd.DataFrame, darshan: pd.DataFrame) -> pd.DataFrame:
    """Per job that Darshan counted: its windows summed, set against Darshan's bytes (same flag rule)."""
    summed = [c for c in windows if c.endswith(("_bytes", "_calls"))]
    ends = windows["t_start"] + windows["seconds"]
    jobs = windows.assign(t_end=ends).groupby(JOB_KEYS, sort=False).agg(
        host=("host", "first"), t_start=("t_start", "min"), t_end=("t_end", "max"),
        **{c: (c, lambda v: v.sum(min_count=1)) for c in summed}).reset_index()
    jobs = jobs.merge(darshan, on=JOB_KEYS, how="inner")
    jobs["phase"] = JOB_PHASE
    jobs["seconds"] = jobs.pop("t_end") - jobs["t_start"]
    _judged_against(jobs, "darshan", "Darshan")
    return jobs


def darshan_counts(manifest_files: list[Path]) -> pd.DataFrame:
    """Per job that ran under Darshan (instruments.darshan): the bytes and calls its logs (darshan.runtime.job_logs:
    the job's process and its ranks) counted in files on its tiers (the manifest's), and the job's own log.

    Whole jobs, not windows: a log counts each file over the process's life. A file a job wrote under a temporary
    name and renamed is counted under the temporary name, on the same tier; only its totals are compared."""
    from ..darshan.logs import counts_under, read_log
    from ..darshan.runtime import RECORDS_SUFFIX, job_logs

    rows = []
    for path in map(Path, manifest_files):
        manifest = json.loads(path.read_text())
        records = path.with_name(path.name.removesuffix(MANIFEST_SUFFIX) + RECORDS_SUFFIX)
        logs = job_logs(records)
        if not logs:
            continue
        roots = [tier["path"] for tier in manifest.get("provenance", {}).get("tiers", {}).values()]
        row = {key: manifest[key] for key in JOB_KEYS} | {column: 0 for column in DARSHAN_COLUMNS}
        for log_path in logs:
            for key, value in counts_under(read_log(log_path, require_files=False), roots).items():
                row[f"darshan_{key}"] += value
        row["darshan_logs"] = " ".join(str(log_path) for log_path in logs)
        rows.append(row)
    return pd.DataFrame(rows, columns=[*JOB_KEYS, *DARSHAN_COLUMNS, "darshan_logs"])


def flagged_sentence(table: pd.DataFrame, most: int = 5) -> str:
    """For the report: how many jobs' phases were judged, and which were flagged (the first ``most``).

    ``table``: accounting_table's, or the same read back from its CSV (where an empty note reads as NaN)."""
    if table.empty:
        return "no job kept the kernel's counts."
    table = table.assign(note=table["note"].fillna(""), flagged=table["flagged"].astype(bool))
    jobs, table = table[table["phase"] == JOB_PHASE], table[table["phase"] != JOB_PHASE]
    return _kernel_sentence(table, most) + (" " + _darshan_sentence(jobs, most) if len(jobs) else "")


def _darshan_sentence(jobs: pd.DataFrame, most: int) -> str:
    """Of the jobs darshan-runtime logged (instruments.darshan): how many, and which disagree with the records."""
    flagged = jobs[jobs["flagged"]]
    text = (f"Darshan logged {len(jobs)} jobs (each job's logs beside its records, arms/<arm>/<cycle>/<step>.darshan "
            f"and its ranks' <step>.<program>.rank<N>.darshan: column darshan_logs); ")
    if flagged.empty:
        return text + f"their records account for what Darshan counted on the tiers within {LOW:.0%} to {HIGH:.0%}."
    return text + f"{len(flagged)} outside {LOW:.0%} to {HIGH:.0%} of Darshan's count: {_named(flagged, most, False)}."


def _kernel_sentence(table: pd.DataFrame, most: int) -> str:
    judged = table[table["note"].str.count("not judged") < 2]  # moved enough to judge in one direction at least
    flagged = table[table["flagged"]]
    text = (f"{len(table)} job phases counted by the kernel, {len(judged)} moving {MIN_JUDGED_BYTES // MiB} MiB "
            f"or more in a direction; ")
    if flagged.empty:
        return text + f"the records account for all of them within {LOW:.0%} to {HIGH:.0%}."
    return text + f"{len(flagged)} flagged, outside {LOW:.0%} to {HIGH:.0%}: {_named(flagged, most, True)}."


def _named(flagged: pd.DataFrame, most: int, phase: bool) -> str:
    """The first ``most`` flagged rows, each with its note (and its phase), and how many more."""
    named = "; ".join(f"{r.arm} {r.cycle} {r.step}{' ' + r.phase if phase else ''} ({r.note})"
                      for r in flagged.head(most).itertuples())
    return named + (f"; and {len(flagged) - most} more" if len(flagged) > most else "")


def write_accounting(events_path: Path, out: Path, manifest_files: list[Path] = ()) -> int:
    """io_accounting.csv from io_events.parquet (and, for jobs under Darshan, the logs beside the manifests' records);
    returns how many job phases are flagged."""
    from ..fsutil import write_table

    try:
        events = pd.read_parquet(events_path)
    except (OSError, ValueError) as err:
        raise ValueError(f"{events_path}: cannot read the io_events table: {err}") from err
    missing = {"study", "arm", "cycle", "step", "phase", "op", "tool", "bytes", "t_start", "seconds"} - set(events)
    if missing:
        raise ValueError(f"{events_path}: no column {', '.join(sorted(missing))} (is it aggregate's io_events?)")
    table = accounting_table(events, darshan_counts(list(manifest_files)))
    write_table(table, Path(out))
    return int(table["flagged"].sum())
