"""The darshan study end to end through Snakemake (config/studies/darshan.yaml): cycles of replay jobs from two of
pydarshan's logs on the lustre baseline and on /dev/shm, staged, recorded, verified and in the tables; and the DAG of
a study that adds a replay job to the GDAS cycle (a dry run)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import COLUMNS_NOT_IN_SMOKE, mismatches, snakemake

from cycleio.cli import main
from cycleio.storage import checksums

pytestmark = pytest.mark.e2e
CYCLES = ("2026010100", "2026010106")
# what each job moves at its scale: the fidelity the standalone replay shows (docs/darshan.md; dxt.darshan's 128
# named pipes set apart)
SMALL = {"ior": {"scale": 0.1}, "dxt": {"scale": 0.01}}
MOVED = {"darshan_ior": {"read": 420250, "write": 419580}, "darshan_dxt": {"read": 225186, "write": 130169}}


@pytest.fixture(scope="module")
def study(tmp_path_factory, request):
    repo = Path(__file__).resolve().parents[1]
    workdir = tmp_path_factory.mktemp("darshan")
    shm = Path("/dev/shm") / f"cycleio-test-darshan-{os.getpid()}"
    # the jobs at a small scale: what they move is checked to the byte, not timed
    (workdir / "tiers.yaml").write_text(yaml.safe_dump({"tiers": {"shm": {"kind": "memory", "path": str(shm)}},
                                                        "darshan": {"jobs": SMALL}}))
    request.addfinalizer(lambda: shutil.rmtree(shm, ignore_errors=True))
    snakemake(repo, workdir, study="darshan")
    return repo, workdir


def test_every_replay_job_is_staged_replayed_verified_and_in_the_tables(study):
    repo, workdir = study
    results = workdir / "results" / "darshan"
    summary = pd.read_csv(results / "tables" / "step_summary.csv", dtype={"cycle": str})
    events = pd.read_parquet(results / "tables" / "io_events.parquet")
    for arm in ("lustre", "shm"):
        persistent = workdir / "results" / "tiers" / "lustre" / "darshan" / arm
        for cycle in CYCLES:
            for step, moved in MOVED.items():
                manifest = json.loads((results / "arms" / arm / cycle / f"{step}.manifest.json").read_text())
                assert manifest["outputs"] and manifest["provenance"]["darshan"]["scale"] in (0.1, 0.01)
                for output in manifest["outputs"]:  # staged out (or written in place) and verified
                    path = persistent / output["path"]
                    assert output["path"].startswith(f"gdas.{cycle[:8]}/{cycle[8:]}/darshan/")
                    assert path.stat().st_size == output["bytes"]
                    assert checksums.checksum_file(path) == output["xxh3_64"]
                row = summary[(summary["arm"] == arm) & (summary["cycle"] == cycle) & (summary["step"] == step)]
                assert len(row) == 1 and row["run_s"].iloc[0] > 0
                assert (row["bytes_read"].iloc[0], row["bytes_written"].iloc[0]) == (moved["read"], moved["write"])
                mine = events[(events["arm"] == arm) & (events["cycle"] == cycle) & (events["step"] == step)]
                run = mine[(mine["phase"] == "run") & (mine["tool"] == "darshan-replay")]
                assert set(run["op"]) >= {"read", "write", "meta"}
                phases = set(mine["phase"])
                assert {"stage_in", "run", "cleanup"} <= phases
                assert ("stage_out" in phases) == (arm == "shm") and ("verify" in phases)
    # every manifest's files are where it says, as `cycleio verify` checks them
    assert main(["verify", str(results / "arms")]) == 0
    # the input files were laid out once per arm, and are no cycle's I/O
    inputs = json.loads((results / "arms" / "shm" / "darshan_inputs.manifest.json").read_text())
    assert {o["path"].split("/")[1] for o in inputs["outputs"]} == {"ior", "dxt"}
    assert "darshan_inputs" not in set(summary["step"])
    # the kernel's count of each replay's run: the replayer's own plan and the ranks' start-up left out
    accounting = pd.read_csv(results / "tables" / "io_accounting.csv", dtype={"cycle": str})
    runs = accounting[(accounting["phase"] == "run") & accounting["step"].str.startswith("darshan_")]
    assert len(runs) == 8
    for _, row in runs.iterrows():
        moved = MOVED[row["step"]]
        assert (row["records_read_bytes"], row["records_write_bytes"]) == (moved["read"], moved["write"])
        assert 0 <= row["kernel_write_bytes"] - moved["write"] < 64 * 1024, row.to_dict()


def test_the_summary_and_timeline_show_the_replay_jobs(study):
    _, workdir = study
    results = workdir / "results" / "darshan"
    text = (results / "summary.md").read_text()
    assert text.startswith("# cycleio study 'darshan': replay jobs from Darshan logs, 2 cycles")
    # each replay job's answer: the logged job's I/O time beside the replay's on each arm, and no efficiency
    for step, log in (("darshan_ior", "ior_hdf5_example.darshan, 4 ranks"), ("darshan_dxt", "dxt.darshan, 1 rank")):
        line = next(line for line in text.splitlines() if line.startswith(f"- {step} "))
        assert f"({log}): its I/O took " in line and "on arm lustre (tier lustre" in line and "on arm shm (tier shm" in line
        assert line.endswith("it has no efficiency: no paired replay ran with it (benchmarks or benchmarks.replay off, "
                             "or not one of benchmarks.replay.cycles).")
    replays = pd.read_csv(results / "tables" / "replay_jobs.csv", dtype={"cycle": str})
    assert len(replays) == 8 and (replays["replay_io_s"] > 0).all() and (replays["logged_io_s"] > 0).all()
    assert set(zip(replays["step"], replays["scale"], replays["ranks"])) == {("darshan_ior", 0.1, 2),
                                                                              ("darshan_dxt", 0.01, 1)}
    # the fidelity: every call replayed, the bytes within 1% of S times the logged (a byte per file and rank)
    for step, moved in MOVED.items():
        mine = replays[replays["step"] == step]
        for direction in ("read", "write"):
            assert (mine[f"replayed_{direction}_bytes"] == moved[direction]).all()
            assert (mine[f"replayed_{direction}_ops"] == mine[f"logged_{direction}_ops"]).all()
            assert ((mine[f"replayed_{direction}_bytes"] - mine[f"expected_{direction}_bytes"]).abs()
                    <= 0.01 * mine[f"expected_{direction}_bytes"]).all()
    timeline = pd.read_csv(results / "tables" / "cycle_timeline.csv", dtype={"cycle": str})
    assert {"darshan_ior", "darshan_dxt"} <= set(timeline["step"])


def test_its_tables_have_the_columns_docs_outputs_md_lists(study):
    """replay_jobs.csv, which the smoke study does not write, and every other table of this study, as the page lists
    them (test_workflow checks the smoke study's)."""
    _, workdir = study
    no_benchmarks = "config/studies/darshan.yaml turns the benchmarks off"
    lacks = {name: no_benchmarks for name in ("capacity.csv", "tables/benchmarks.csv", "tables/benchmarks.parquet",
                                               "tables/scaling_fit.csv", "tables/efficiency.csv", "tables/io_gap.csv")}
    lacks["tables/surrogate_vs_log.csv"] = "no replay job stands_for a step (and no instruments.darshan)"
    problems = mismatches(workdir / "results" / "darshan", lacks, COLUMNS_NOT_IN_SMOKE)
    assert not problems, "docs/outputs.md and the darshan study's tables differ:\n" + "\n".join(problems)


def test_a_rerun_does_nothing(study):
    repo, workdir = study
    assert "Nothing to be done" in snakemake(repo, workdir, "-n", study="darshan").stdout


def test_a_replay_job_in_the_gdas_cycle_dry_run(repo, tmp_path):
    """The smoke study with a replay job after fcst: one input job per arm, and a replay job per cycle and arm; a
    second job's list of ranks sweeps it, a job per count."""
    (tmp_path / "tiers.yaml").write_text(yaml.safe_dump({
        "scratch_tiers": ["lustre", "shm"], "benchmarks": {"enabled": False},
        "darshan": {"jobs": {"ior": {"log": "example:ior_hdf5_example.darshan", "after": "fcst", "scale": 0.1},
                             "swept": {"log": "example:ior_hdf5_example.darshan", "ranks": [1, 2], "scale": 0.1,
                                       "oversubscribe": True}}},
    }))
    out = snakemake(repo, tmp_path, "-n", "--quiet", "rules").stdout
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", out, flags=re.M))
    # 3 cycles (a half and two full ones: 2 + 4 + 4 steps) and three replay jobs each, on two arms
    assert int(counts["darshan_inputs"]) == 2 and int(counts["cycle_step"]) == 2 * (10 + 3 * 3)
    # each replay job waits for its cycle's forecast and the input files, and the next cycle's prep for it
    out = snakemake(repo, tmp_path, "-n").stdout
    waits = {job: set(files.split(", ")) for job, files in
             re.findall(r"^Job \d+: (.+)\nReason: .*Input files updated by another job: (.+)$", out, flags=re.M)}
    arm = "results/smoke/arms/shm"
    assert waits["darshan_ior of cycle 2026123118, arm shm"] == {f"{arm}/darshan_inputs.manifest.json",
                                                                f"{arm}/2026123118/fcst.manifest.json"}
    assert f"{arm}/2026123118/darshan_ior.manifest.json" in waits["prep of cycle 2027010100, arm shm"]
    assert {"darshan_swept_n1 of cycle 2026123118, arm shm", "darshan_swept_n2 of cycle 2026123118, arm shm"} <= set(waits)
