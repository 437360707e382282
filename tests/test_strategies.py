"""The forecast's write strategies as a registry (cycleio.surrogates.forecast.strategies), without MPI.

The schema offers what the registry holds, the layout asks each strategy for its writer ranks and
description, and the registry loads no numpy or MPI (the layout reads it at DAG time); that the report lists arms
in the registry's order is test_writefigures'. tests/test_launcher.py runs the strategies under mpiexec.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cycleio.config.schema import load_schema
from cycleio.surrogates.forecast.layout import RankLayout
from cycleio.surrogates.forecast.strategies import STRATEGIES, WriteStrategy

REPO = Path(__file__).resolve().parents[1]


def test_the_schema_offers_the_registered_strategies():
    enum = load_schema()["properties"]["write_strategies"]["items"]["enum"]
    assert sorted(enum) == sorted(STRATEGIES)


def test_every_strategy_has_its_hooks():
    for name, strategy in STRATEGIES.items():
        assert issubclass(strategy, WriteStrategy), name
        assert strategy.output is not WriteStrategy.output, f"{name} has no output of its own"
        if strategy.writer_ranks(RankLayout.from_settings(name, {})):
            assert strategy.writer_loop is not WriteStrategy.writer_loop, f"{name} has writer ranks but no loop"


def test_each_strategy_sizes_and_describes_its_layout():
    component = {"ranks": 3, "write_groups": 2, "write_tasks_per_group": 2, "combine_per_rank": True}
    layouts = {name: RankLayout.from_settings(name, component) for name in STRATEGIES}
    assert {name: layout.ntasks for name, layout in layouts.items()} == {
        "serial": 3, "diskless": 3, "per_rank": 3, "parallel": 3, "quilt": 7, "quilt_parallel": 7}
    assert layouts["serial"].describe() == "serial, 3 compute ranks"
    assert layouts["quilt"].describe() == "quilt, 3 compute ranks + 2 write groups x 2 tasks"
    assert layouts["per_rank"].describe() == "per_rank, 3 compute ranks, pieces combined at the end"
    assert RankLayout.from_settings("per_rank", {}).describe().endswith("pieces combined after each hour")
    assert layouts["parallel"].describe() == "parallel, 3 compute ranks, MPI-IO collective"
    assert layouts["quilt_parallel"].describe() == "quilt_parallel, 3 compute ranks + 2 write groups x 2 tasks, MPI-IO collective"


def test_the_shared_file_strategies_are_the_mpiio_ones():
    from cycleio.config.settings import SHARED_FILE_STRATEGIES

    assert SHARED_FILE_STRATEGIES == ("parallel", "quilt_parallel")
    assert list(STRATEGIES) == ["serial", "diskless", "per_rank", "parallel", "quilt", "quilt_parallel"]


def test_the_registry_and_the_layout_load_no_numpy_or_mpi():
    program = ("import json, sys; import cycleio.surrogates.forecast.layout; "
               "print(json.dumps(sorted(sys.modules)))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "scripts"),
                                                                     os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, check=True)
    loaded = set(json.loads(result.stdout))
    assert "cycleio.surrogates.forecast.strategies.quilt" in loaded
    assert not loaded & {"numpy", "mpi4py", "netCDF4", "h5py", "cycleio.surrogates.forecast.rank"}
