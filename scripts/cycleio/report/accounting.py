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
ACCOUNTING_COLUMNS = [
    *JOB_KEYS, "phase", "host", "t_start", "seconds",
    "records_read_bytes", "records_write_bytes", "records_read_calls", "records_write_calls",
    "kernel_read_bytes", "kernel_write_bytes", "kernel_read_calls", "kernel_write_calls",
    "kernel_storage_read_bytes", "kernel_storage_write_bytes", "kernel_excluded_read_bytes",
    "kernel_excluded_write_bytes", "cgroup_read_bytes", "cgroup_write_bytes",
    "records_over_kernel_read", "records_over_kernel_write", "flagged", "note",
]


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


def accounting_table(events: pd.DataFrame) -> pd.DataFrame:
    """One row per job and window (arm, cycle, step, phase): the records' bytes and calls against the kernel's.

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
    notes = [[] for _ in range(len(table))]
    flagged = np.zeros(len(table), dtype=bool)
    for direction in ("read", "write"):
        ratio, outside, judged = _judge(table[f"records_{direction}_bytes"], table[f"kernel_{direction}_bytes"])
        table[f"records_over_kernel_{direction}"] = ratio
        flagged |= outside.to_numpy(dtype=bool)
        for number in np.flatnonzero(~judged.to_numpy(dtype=bool)):
            notes[number].append(f"{direction}: under {MIN_JUDGED_BYTES // MiB} MiB, not judged")
        for number in np.flatnonzero(outside.to_numpy(dtype=bool)):
            notes[number].append(f"{direction}: records {_share(ratio.iloc[number])} of the kernel's count")
    table["flagged"] = flagged
    table["note"] = ["; ".join(parts) for parts in notes]
    return table.reindex(columns=ACCOUNTING_COLUMNS).sort_values(
        ["arm", "cycle", "t_start"], kind="stable").reset_index(drop=True)


def _share(ratio: float) -> str:
    return "with the kernel counting none" if np.isnan(ratio) else f"{ratio:.1%}"


def flagged_sentence(table: pd.DataFrame, most: int = 5) -> str:
    """For the report: how many jobs' phases were judged, and which were flagged (the first ``most``).

    ``table``: accounting_table's, or the same read back from its CSV (where an empty note reads as NaN)."""
    if table.empty:
        return "no job kept the kernel's counts."
    table = table.assign(note=table["note"].fillna(""), flagged=table["flagged"].astype(bool))
    judged = table[table["note"].str.count("not judged") < 2]  # moved enough to judge in one direction at least
    flagged = table[table["flagged"]]
    text = (f"{len(table)} job phases counted by the kernel, {len(judged)} moving {MIN_JUDGED_BYTES // MiB} MiB "
            f"or more in a direction; ")
    if flagged.empty:
        return text + f"the records account for all of them within {LOW:.0%} to {HIGH:.0%}."
    named = "; ".join(f"{r.arm} {r.cycle} {r.step} {r.phase} ({r.note})" for r in flagged.head(most).itertuples())
    more = f"; and {len(flagged) - most} more" if len(flagged) > most else ""
    return text + f"{len(flagged)} flagged, outside {LOW:.0%} to {HIGH:.0%}: {named}{more}."


def write_accounting(events_path: Path, out: Path) -> int:
    """io_accounting.csv from io_events.parquet; returns how many job phases are flagged."""
    from .aggregate import write_table

    try:
        events = pd.read_parquet(events_path)
    except (OSError, ValueError) as err:
        raise ValueError(f"{events_path}: cannot read the io_events table: {err}") from err
    missing = {"study", "arm", "cycle", "step", "phase", "op", "tool", "bytes", "t_start", "seconds"} - set(events)
    if missing:
        raise ValueError(f"{events_path}: no column {', '.join(sorted(missing))} (is it aggregate's io_events?)")
    table = accounting_table(events)
    write_table(table, Path(out))
    return int(table["flagged"].sum())
