"""IOR's whole path in CI, where there is no IOR: real IOR 4.0.0 and mdtest outputs (tests/data/ior, their
exact command lines in tests/data/ior-runs) go through the benchmark rule's code (``cycleio bench``, which
builds IOR's command and runs it), the benchmark table and its timed marks, the scaling fits, the figures and
the capacity plan.

The ``ior`` and ``mdtest`` the points run are tests/data/ior-runs/replay_recorded_run.py: a stand-in that
replays the recorded run whose command line it is given and measures nothing (test_ior_live.py runs a
real IOR where one is installed)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from conftest import assert_png_drawn, with_changes
from cycleio.benchmarks import tierbench as tb
from cycleio.cli import main
from cycleio.config.settings import validate_config
from cycleio.report.scaling import FITTED, TOO_FEW

RECORDED = Path(__file__).parent / "data" / "ior-runs"
MIB = 2**20


@pytest.fixture
def recorded_tools(tmp_path) -> dict[str, str]:
    """``ior`` and ``mdtest`` that replay the real recorded runs (links to replay_recorded_run.py)."""
    folder = tmp_path / "recorded-tools"
    folder.mkdir()
    for name in ("ior", "mdtest"):
        os.symlink(RECORDED / "replay_recorded_run.py", folder / name)
    return {name: str(folder / name) for name in ("ior", "mdtest")}


def recorded_study(tmp_path: Path, tools: dict[str, str], default_config: dict) -> dict:
    """The recorded runs' patterns (1 task, 1 MiB transfers, 256 MiB blocks, fsync, constant reordering, three
    repetitions; mdtest 1000 files) on two tiers whose folder names are the recorded runs' tiers."""
    recorded_pattern = {"transfer_size": "1m", "block_size": "256m", "segments": 1, "fsync": True,
                        "reorder": "constant", "stonewall_s": 0.0, "direct_io": False, "random": False}
    config = with_changes(
        default_config, study="recorded", launcher="env RECORDED_TASKS={ntasks}",
        tiers={"disk": {"kind": "posix", "path": str(tmp_path / "disk")},
               "shm": {"kind": "memory", "path": str(tmp_path / "shm")}},
        persistent_tier="disk", scratch_tiers=["disk", "shm"],
        benchmarks__tool="ior", benchmarks__ior_path=tools["ior"], benchmarks__mdtest_path=tools["mdtest"],
        benchmarks__tasks=[1], benchmarks__repetitions=3, benchmarks__io_patterns=["easy", "ssf"],
        benchmarks__patterns={"easy": {**recorded_pattern, "file_per_proc": True},
                              "ssf": {**recorded_pattern, "file_per_proc": False}},
        benchmarks__metadata_patterns=["easy"],
        benchmarks__metadata={"easy": {"files_per_task": 1000, "file_size": 0, "tasks": [1], "repetitions": 1}},
        benchmarks__fieldio__enabled=False, benchmarks__replay__enabled=False)
    return validate_config(config)


def test_real_ior_and_mdtest_outputs_go_through_the_whole_chain(tmp_path, recorded_tools, default_config,
                                                                drawn_figures):
    plan = tb.BenchmarkPlan.from_config(recorded_study(tmp_path, recorded_tools, default_config))
    points = []
    for kind, tier, pattern, tasks in plan.points:  # the benchmark rule's command, point by point
        out = tmp_path / "bench" / tier / kind / f"{pattern}.n{tasks}.csv"
        assert main(["bench", "--settings", plan.point_json(kind, tier, pattern, tasks), "--out", str(out),
                     "--raw", str(out.with_suffix(".raw"))]) == 0, f"{tier} {kind} {pattern}"
        points.append(str(out))
    assert len(points) == 6  # 2 tiers x (2 io patterns + 1 metadata pattern) at 1 task
    # what the stand-in was given is the recorded real command line, paths apart
    meta = json.loads((tmp_path / "bench" / "disk" / "io" / "easy.n1.raw" / "easy.n1.meta.json").read_text())
    recorded = json.loads((RECORDED / "posix-fpp-1rank-disk.meta.json").read_text())["command_line"]
    assert meta["command_line"].split(" -o ")[0].endswith(recorded.split(" -o ")[0].removeprefix("mpiexec -n 1 ior"))

    events = pd.DataFrame({
        "study": ["recorded"] * 2, "arm": ["disk"] * 2, "cycle": ["2026010100"] * 2, "step": ["fcst", "anal"],
        "phase": ["run", "run"], "op": ["write", "read"], "tier": ["disk", "disk"], "bytes": [64 * MIB, 64 * MIB],
        "seconds": [0.5, 0.25], "cached_fraction": [None, 0.0], "t_start": [1_800_000_000.0, 1_800_000_001.0]})
    events.to_parquet(tmp_path / "io_events.parquet")
    tables, figures = tmp_path / "tables", tmp_path / "figures"
    assert main(["bench-tables", "--events", str(tmp_path / "io_events.parquet"),
                 "--benchmarks", str(tables / "benchmarks.csv"),
                 "--benchmarks-parquet", str(tables / "benchmarks.parquet"),
                 "--efficiency", str(tables / "efficiency.csv"), "--io-gap", str(tables / "io_gap.csv"),
                 "--min-seconds", "0.1", *points]) == 0
    bench = pd.read_csv(tables / "benchmarks.csv")
    io = bench[bench["benchmark"] == "io"]
    assert set(bench["tool"]) == {"ior", "mdtest"} and set(bench["tool_version"]) == {"4.0.0"}
    assert len(io[io["aggregate"] == "rep"]) == 2 * 2 * 2 * 3  # tiers x patterns x operations x repetitions
    # IOR's own numbers, as recorded: the disk's first file-per-process write
    first = io[(io["tier"] == "disk") & (io["pattern"] == "easy") & (io["aggregate"] == "rep")
               & (io["operation"] == "write") & (io["repetition"] == 0)]
    assert first["bw_MiB_per_s"].item() == 1403.3016 and first["bytes"].item() == 256 * MIB
    # as recorded, against a 0.1 s threshold: 256 MiB written to disk in 0.15-0.21 s can be timed; read back from the
    # page cache in 0.03-0.07 s, or written to /dev/shm in 0.09 s (but one repetition), cannot (the reason the default
    # points are bounded by time)
    timed = io[io["aggregate"] == "rep"].groupby(["tier", "operation"])["timed"].sum()
    assert timed.to_dict() == {("disk", "read"): 0, ("disk", "write"): 6, ("shm", "read"): 0, ("shm", "write"): 1}
    metadata = bench[bench["benchmark"] == "metadata"]
    assert {"file_creation", "file_stat", "file_removal"} <= set(metadata["operation"]) and metadata["timed"].all()

    assert main(["scaling-fit", "--benchmarks", str(tables / "benchmarks.csv"),
                 "--out", str(tables / "scaling_fit.csv")]) == 0
    fits = pd.read_csv(tables / "scaling_fit.csv")
    assert len(fits) == 8
    has_model = fits["fit"] == FITTED
    assert set(fits[has_model]["tier"] + " " + fits[has_model]["operation"]) == {"disk write"}
    assert (fits[has_model]["n_points"] == 3).all() and (fits[~has_model]["fit"] == TOO_FEW).all()

    assert main(["bench-figures", "--table", str(tables / "benchmarks.csv"), "--fits", str(tables / "scaling_fit.csv"),
                 "--scaling", str(figures / "benchmark_scaling.png"),
                 "--fieldio", str(figures / "fieldio_vs_ior.png")]) == 0
    assert_png_drawn(figures / "benchmark_scaling.png", (17, 5.2))
    scaling = drawn_figures[0]
    assert "IOR 4.0.0" in scaling.texts[0].get_text() or "ior 4.0.0" in scaling._suptitle.get_text()

    assert main(["plan", "--benchmarks", str(tables / "benchmarks.csv"), "--resolution", "C48",
                 "--interval-hours", "6", "--out", str(tmp_path / "capacity.csv")]) == 0
    capacity = pd.read_csv(tmp_path / "capacity.csv")
    cycle = capacity[capacity["step"] == "cycle"]
    assert set(cycle["tier"]) == {"disk", "shm"} and set(cycle["pattern"]) == {"easy", "ssf"}
    planned = cycle[cycle["tier"] == "disk"]
    assert (planned["units_needed"] >= 1).all() and (planned["unit"] == "client nodes").all()
    assert (planned["measured_plateau_MiB_per_s"] > 1000).all()
    assert cycle[cycle["tier"] == "shm"]["units_needed"].isna().all()  # from too few timed points, no units


def test_a_command_line_no_real_run_had_finds_no_recording(tmp_path, recorded_tools, default_config):
    """The stand-in replays only what IOR was really run with: a drifted command fails as IOR does."""
    config = recorded_study(tmp_path, recorded_tools, default_config)
    config["benchmarks"]["patterns"]["easy"]["transfer_size"] = "2m"
    plan = tb.BenchmarkPlan.from_config(config)
    out = tmp_path / "easy.csv"
    log = tmp_path / "bench.log"
    assert main(["--log", str(log), "bench", "--settings", plan.point_json("io", "disk", "easy", 1), "--out", str(out),
                 "--raw", str(tmp_path / "raw")]) != 0
    assert "IOR failed (exit code 255): ERROR: no recorded real ior run has this command line" in log.read_text()
    assert not out.exists()
