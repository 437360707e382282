"""docs/outputs.md, the page alone: every table it documents lists its columns once, the file list names and links
each, it lists exactly the columns of the smoke study's tables as committed in tests/data/outputs-columns.json
(test_workflow checks the real tables against that file), and the comparison with a study's tables
(conftest.mismatches, which test_workflow runs on the smoke study's real tables) finds what differs."""

from __future__ import annotations

import functools
import re

import pandas as pd
import pytest
from conftest import (COLUMNS_NOT_IN_SMOKE, NOT_IN_SMOKE, OUTPUTS_COLUMNS, OUTPUTS_PAGE, REPO, column_mismatches,
                      documented_tables, mismatches, snapshot_columns)


@functools.cache
def code_columns() -> dict[str, list[str]]:
    """The tables whose columns the code names in one list, and that list: the page must list exactly these, the
    tables the smoke study does not write (replay_jobs, surrogate_vs_log) included."""
    from cycleio.benchmarks.common import COLUMNS as POINT_COLUMNS
    from cycleio.records import RECORD_FIELDS
    from cycleio.report.accounting import ACCOUNTING_COLUMNS
    from cycleio.report.aggregate import RETRY_COLUMNS
    from cycleio.report.answerfigures import TIMELINE_COLUMNS
    from cycleio.report.answers import SUMMARY_COLUMNS
    from cycleio.report.benchtables import EFFICIENCY_COLUMNS, IO_GAP_COLUMNS
    from cycleio.report.darshananswer import REPLAY_COLUMNS
    from cycleio.report.scaling import CAPACITY_COLUMNS, FIT_COLUMNS
    from cycleio.report.surrogatelog import COLUMNS as SURROGATE_LOG_COLUMNS

    events = [*RECORD_FIELDS, "MiB", "MiB_per_s", "t_end"]  # aggregate.load_events adds the last three
    benchmarks = [*POINT_COLUMNS, "timed"]  # benchtables adds timed
    return {
        "summary.csv": SUMMARY_COLUMNS, "capacity.csv": CAPACITY_COLUMNS,
        "tables/io_events.parquet": events, "tables/io_events.csv": events,
        "tables/io_accounting.csv": ACCOUNTING_COLUMNS, "tables/retries.csv": RETRY_COLUMNS,
        "tables/cycle_timeline.csv": TIMELINE_COLUMNS,
        "tables/benchmarks.csv": benchmarks, "tables/benchmarks.parquet": benchmarks,
        "tables/scaling_fit.csv": FIT_COLUMNS, "tables/efficiency.csv": EFFICIENCY_COLUMNS,
        "tables/io_gap.csv": IO_GAP_COLUMNS, "tables/replay_jobs.csv": REPLAY_COLUMNS,
        "tables/surrogate_vs_log.csv": SURROGATE_LOG_COLUMNS,
    }


# ------------------------------------------------------------------------------------------------ the page alone


def test_every_table_lists_its_columns_once():
    tables = documented_tables()
    assert len(tables) >= 15
    for name, columns in tables.items():
        assert columns, f"{name}: no columns listed"
        doubled = sorted({c for c in columns if columns.count(c) > 1})
        assert not doubled, f"{name}: columns listed twice: {doubled}"
        assert all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", c) for c in columns), f"{name}: {columns}"


def test_the_lists_of_what_the_smoke_study_lacks_name_documented_tables_and_columns():
    tables = documented_tables()
    assert set(NOT_IN_SMOKE) <= set(tables)
    for name, column in COLUMNS_NOT_IN_SMOKE:
        assert column in tables[name], (name, column)


def test_the_file_list_links_every_documented_table():
    """The page's first table names every documented table (test_docs checks that its links reach the sections)."""
    text = OUTPUTS_PAGE.read_text()
    overview = text.split("\n## ", 1)[0]
    for name in documented_tables():
        assert f"`{name}`" in overview or f"`{name.rsplit('.', 1)[0]}." in overview or \
            f"`.{name.rsplit('.', 1)[1]}`" in overview, f"the file list misses {name}"


def test_the_page_lists_exactly_the_columns_of_the_smoke_study_s_tables():
    """Both ways, in seconds: every table and column of the smoke study's tables (the committed snapshot, which
    test_workflow holds to a real run) is on the page, and every table and column on the page is in them, but those
    conftest lists as not in the smoke study, with why."""
    problems = column_mismatches(snapshot_columns(), NOT_IN_SMOKE, COLUMNS_NOT_IN_SMOKE)
    assert not problems, f"docs/outputs.md and {OUTPUTS_COLUMNS.name} differ:\n" + "\n".join(problems)


def test_the_comparison_finds_a_missing_an_extra_and_an_undocumented_column(tmp_path):
    """mismatches on a made-up study: every documented table written with its columns, then one column dropped,
    one added and one table the page does not know."""
    results = tmp_path / "results" / "s"
    for name, columns in documented_tables().items():
        if name in NOT_IN_SMOKE:
            continue
        path = results / name
        path.parent.mkdir(parents=True, exist_ok=True)
        frame = pd.DataFrame(columns=[c for c in columns if (name, c) not in COLUMNS_NOT_IN_SMOKE])
        frame.to_parquet(path) if path.suffix == ".parquet" else frame.to_csv(path, index=False)
    assert mismatches(results, NOT_IN_SMOKE, COLUMNS_NOT_IN_SMOKE) == []
    pd.DataFrame(columns=["study", "arm", "role", "new_column"]).to_csv(results / "tables" / "tiers.csv", index=False)
    pd.DataFrame({"a": [1]}).to_csv(results / "tables" / "new.csv", index=False)
    (results / "bench" / "t" / "io").mkdir(parents=True)
    pd.DataFrame({"a": [1]}).to_csv(results / "bench" / "t" / "io" / "easy.n1.csv", index=False)
    problems = mismatches(results, NOT_IN_SMOKE, COLUMNS_NOT_IN_SMOKE)
    assert "tables/new.csv: written by the study, not documented on docs/outputs.md" in problems
    assert "tables/tiers.csv: has `new_column`, which docs/outputs.md does not list" in problems
    assert "tables/tiers.csv: documents `host`, which the file does not have" in problems
    assert not any("lfs_getstripe" in p or "bench/" in p for p in problems)


@pytest.mark.parametrize("table", sorted(code_columns()))
def test_a_table_whose_columns_the_code_lists_has_exactly_those_on_the_page(table):
    listed, made = documented_tables()[table], list(code_columns()[table])
    assert sorted(listed) == sorted(made), (f"{table}: docs/outputs.md lists {sorted(set(listed) - set(made))} "
                                            f"that the code does not make, misses {sorted(set(made) - set(listed))}")


@functools.cache
def source_names() -> str:
    package = REPO / "scripts" / "cycleio"
    return "\n".join(p.read_text() for p in [*package.rglob("*.py"), *(REPO / "rules").glob("*.smk")])


def other_columns() -> list[tuple[str, str]]:
    """(table, column) of the tables without one column list in the code (their columns are built by grouping and
    assigning): test_workflow checks them against the smoke study's tables, this test in seconds."""
    return [(table, column) for table, columns in documented_tables().items() if table not in code_columns()
            for column in columns]


@pytest.mark.parametrize("table,column", other_columns())
def test_every_other_column_the_page_lists_is_made_by_the_code(table, column):
    """A column is made where the code writes it: a quoted name or a keyword (DataFrame.assign(name=...))."""
    assert re.search(rf"[\"']{column}[\"']|\b{column}=", source_names()), \
        f"docs/outputs.md lists `{column}` in {table}, which no module of scripts/cycleio nor rule writes"
