"""report.accounting: the kernel's count of each job phase set against the records that began in it."""

from __future__ import annotations

import pandas as pd
import pytest

from cycleio.report.accounting import ACCOUNTING_COLUMNS, MIN_JUDGED_BYTES, accounting_table, flagged_sentence
from cycleio.units import MiB


def event(op, phase, t_start, nbytes=0, step="fcst", tool="cycleio", seconds=0.1, transfers=0, **extra):
    return {"study": "s", "arm": "a", "cycle": "2026010100", "step": step, "phase": phase, "op": op, "tool": tool,
            "host": "h", "bytes": nbytes, "t_start": t_start, "seconds": seconds, "transfers": transfers, **extra}


def kernel_window(phase, t_start, seconds, read, write, step="fcst", storage=(0, 0)):
    return [event("kernel_read", phase, t_start, read, step, "kernel", seconds, transfers=7),
            event("kernel_write", phase, t_start, write, step, "kernel", seconds, transfers=3),
            event("kernel_storage_read", phase, t_start, storage[0], step, "kernel", seconds),
            event("kernel_storage_write", phase, t_start, storage[1], step, "kernel", seconds)]


def fixed_events() -> pd.DataFrame:
    rows = [
        # stage_in: a 10 MiB copy (read on one tier, written on the other) and its verify: all accounted
        *kernel_window("stage_in", 100.0, 5.0, 20 * MiB + 3000, 10 * MiB, storage=(0, 10 * MiB)),
        event("copy", "stage_in", 100.5, 10 * MiB, transfers=10), event("sync", "stage_in", 101.0),
        event("checksum", "verify", 102.0, 10 * MiB),
        # run: records read 10 MiB of the 11 the kernel saw; the write restated by write_effective is not counted
        *kernel_window("run", 110.0, 5.0, 11 * MiB, 10 * MiB),
        event("read", "run", 110.5, 10 * MiB, transfers=5), event("write", "run", 111.0, 10 * MiB, transfers=2),
        event("write_effective", "run", 111.0, 10 * MiB), event("generate", "run", 111.0),
        # cleanup: too little to judge
        *kernel_window("cleanup", 120.0, 1.0, 130, 0),
        event("remove", "cleanup", 120.1),
        # the replay, outside every window, and a job without kernel records
        event("read", "replay", 116.0, 50 * MiB),
        event("read", "run", 110.5, 10 * MiB, step="post"),
    ]
    return pd.DataFrame(rows)


def test_accounting_sets_each_window_against_the_records_that_began_in_it():
    table = accounting_table(fixed_events())
    assert list(table.columns) == ACCOUNTING_COLUMNS
    assert list(table["phase"]) == ["stage_in", "run", "cleanup"] and set(table["step"]) == {"fcst"}
    stage_in, run, cleanup = (table.iloc[i] for i in range(3))
    assert stage_in["records_read_bytes"] == 20 * MiB and stage_in["records_write_bytes"] == 10 * MiB
    assert stage_in["kernel_storage_write_bytes"] == 10 * MiB and stage_in["kernel_read_calls"] == 7
    assert stage_in["records_over_kernel_write"] == 1.0 and not stage_in["flagged"] and stage_in["note"] == ""
    assert run["records_read_bytes"] == 10 * MiB and run["records_write_bytes"] == 10 * MiB
    assert run["records_read_calls"] == 5 and run["records_write_calls"] == 2
    assert run["records_over_kernel_read"] == pytest.approx(10 / 11)
    assert run["flagged"] and run["note"] == "read: records 90.9% of the kernel's count"
    assert not cleanup["flagged"] and "under 1 MiB, not judged" in cleanup["note"]
    assert pd.isna(stage_in["cgroup_read_bytes"])
    sentence = flagged_sentence(table)
    assert "1 flagged" in sentence and "a 2026010100 fcst run (read: records 90.9%" in sentence


def test_records_claiming_bytes_the_kernel_did_not_see_are_flagged():
    rows = [*kernel_window("run", 0.0, 1.0, 0, 0), event("write", "run", 0.5, 2 * MiB)]
    [row] = accounting_table(pd.DataFrame(rows)).itertuples()
    assert row.flagged and "with the kernel counting none" in row.note
    assert MIN_JUDGED_BYTES <= 2 * MiB


def test_no_kernel_records_gives_an_empty_table_with_its_columns():
    table = accounting_table(fixed_events().query("tool != 'kernel'"))
    assert table.empty and list(table.columns) == ACCOUNTING_COLUMNS
    assert flagged_sentence(table) == "no job kept the kernel's counts."
