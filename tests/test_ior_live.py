"""IOR run for real. IOR is in no package registry, so this file is collected only where an ``ior``
is on PATH (see conftest.py); everywhere, IOR's command lines and its output parser are tested as
units (test_tierbench.py, test_benchparse.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from conftest import require_tool
from cycleio.benchmarks import tierbench as tb
from cycleio.storage.tiers import Tier
from test_tierbench import MIB, settings


@pytest.mark.tool
def test_live_ior_runs_a_point_and_its_rows_parse(tmp_path):
    require_tool("mpiexec", "IOR runs under the MPI launcher")
    tier = Tier(name="disk", kind="posix", path=str(tmp_path / "tier"))
    pattern = tb.IOPattern(name="easy", transfer_size_bytes=MIB, block_size_bytes=2 * MIB)
    rows = pd.DataFrame(tb.run_point(settings("io", tier, pattern, tasks=2, repetitions=2, tool="ior"),
                                     tmp_path / "raw"))
    assert set(rows["tool"]) == {"ior"}
    assert len(rows[rows["aggregate"] == "rep"]) == 4
    assert set(rows[rows["aggregate"] != "rep"]["aggregate"]) == {"max", "min", "mean"}
