"""IOR run for real. IOR is in no package registry: where no ``ior`` is on PATH the test is reported as
skipped, and in CI (which installs from the registries only) deselected with a line naming it
(conftest.pytest_collection_modifyitems); everywhere, IOR's command lines and its output parser are
tested as units (test_tierbench.py, test_benchparse.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from conftest import point_settings, require_tool
from cycleio.benchmarks import tierbench as tb
from cycleio.config.tierspec import Tier

MIB = 2**20


@pytest.mark.tool
@pytest.mark.ior
def test_live_ior_runs_a_point_and_its_rows_parse(tmp_path):
    require_tool("ior", "IOR is in no package registry: build it (github.com/hpc/ior) and put it on PATH")
    require_tool("mpiexec", "IOR runs under the MPI launcher")
    tier = Tier(name="disk", kind="posix", path=str(tmp_path / "tier"))
    pattern = tb.IOPattern(name="easy", transfer_size_bytes=MIB, block_size_bytes=2 * MIB)
    rows = pd.DataFrame(tb.run_point(point_settings("io", tier, pattern, tasks=2, repetitions=2, tool="ior"),
                                     tmp_path / "raw"))
    assert set(rows["tool"]) == {"ior"}
    assert len(rows[rows["aggregate"] == "rep"]) == 4
    assert set(rows[rows["aggregate"] != "rep"]["aggregate"]) == {"max", "min", "mean"}
