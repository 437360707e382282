"""The tidy row every benchmark output parser returns (benchmarks.rows): the real outputs of tests/data/ior and
tests/data/fio, parsed, make one tidy DataFrame of the row schema's columns."""

from __future__ import annotations

import math

from conftest import FIO_JSON, IOR_JSON, IOR_TEXT, MDTEST
from cycleio.benchmarks import benchparse as bp


def test_rows_make_a_tidy_dataframe() -> None:
    import pandas as pd  # a dependency of the package: never skipped
    rows: list[dict] = []
    for path in IOR_JSON + IOR_TEXT + MDTEST + FIO_JSON:
        rows += bp.parse_any(path)
    df = pd.DataFrame(rows)
    assert list(df.columns) == list(bp.ROW_KEYS)
    assert set(df["tool"]) == {"ior", "mdtest", "fio"}
    assert set(df["aggregate"]) == {"rep", "max", "min", "mean", "job", "group"}
    assert not df.duplicated(["source", "job", "operation", "aggregate", "repetition"]).any()
    # note: df.aggregate is a DataFrame method; use df["aggregate"]
    ior_reps = df[(df["tool"] == "ior") & (df["aggregate"] == "rep")]
    assert len(ior_reps) == 6 * (len(IOR_JSON) + len(IOR_TEXT))
    fio_row = df[df["source"] == "fio-seqwrite-1m-direct-2job-disk.json"]
    assert math.isclose(fio_row["bw_MiB_per_s"].iloc[0], 1801580241 / 2**20)
