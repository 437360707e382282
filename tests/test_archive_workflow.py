"""The archive jobs end to end: the smoke study with archive on two arms (lustre and node_local scratch), cleanup
keeping one cycle, and a 2-member ensemble (one efcs job, one earc job per full cycle), through Snakemake; the
cleanup of what the cycles no longer read, and the refusal to redo a job that would read a removed cycle."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import markdown_rows, snakemake

from cycleio.config.settings import ArmSettings
from cycleio.storage import archive as arc
from cycleio.surrogates.archive_lists import job_tarballs, tarball_members

pytestmark = pytest.mark.e2e
ARMS = ("lustre", "node_local")
CYCLES = ("2026123112", "2026123118", "2027010100")
# what the tests read (the jobs, their tables and the summary): not the figures
TARGETS = [f"results/smoke/{name}" for name in ("summary.md", "tables/cycle_timeline.csv", "tables/io_events.parquet")]


@pytest.fixture(scope="module")
def archived(tmp_path_factory):
    repo = Path(__file__).resolve().parents[1]
    workdir = tmp_path_factory.mktemp("archive")
    overrides = {
        "tiers": {"node_local": {"kind": "node_local", "path": str(workdir / "node_local")},
                  "archive": {"kind": "archive", "path": str(workdir / "archive")}},
        "scratch_tiers": ["lustre", "node_local"],
        "cycles": {"keep": 1},
        "archive": {"enabled": True},  # members_per_group: C12 takes global-workflow's 80, so one group
        "ensemble": {"members": 2, "members_per_job": 2},
        "benchmarks": {"enabled": False},
    }
    (workdir / "tiers.yaml").write_text(yaml.safe_dump(overrides))
    snakemake(repo, workdir, targets=TARGETS)
    return workdir


def test_every_cycle_of_both_arms_has_its_tarballs_indexed_and_reading_back(archived):
    results = archived / "results" / "smoke"
    for arm in ARMS:
        for cycle in CYCLES:
            manifest = json.loads((results / "arms" / arm / cycle / "arch.manifest.json").read_text())
            settings_json = manifest["provenance"]
            assert settings_json["tiers"]["archive"]["tier_kind"] == "archive"
            folder = archived / "archive" / "smoke" / arm / cycle
            names = {t["tarball"] for t in manifest["tarballs"]}
            assert names == ({"gdas.tar", "gdas_restartb.tar"} if cycle == CYCLES[0]
                             else {"gdas.tar", "gdas_restarta.tar", "gdas_restartb.tar"})
            for name in names:
                index = arc.TarballIndex.read(arc.index_path(folder / name))
                arc.verify_tarball(folder / name, index)
                with tarfile.open(folder / name) as tar:
                    assert tar.getnames() == [m.name for m in index.members]
            assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # no temporary, no list left
    # the members are what the lists name of the files the study wrote
    settings = ArmSettings.from_json(json.dumps({"study": "smoke", "arm": "lustre", "start": CYCLES[0], "seed": 1,
                                                 "resolution": "C12", "levels": 8,
                                                 "persistent": {"name": "lustre", "kind": "lustre", "path": "x"},
                                                 "forecast": {"restart_hours": [6], "product_grids": ["1p00"]}}))
    expected = [spec.path for spec in tarball_members(CYCLES[1], CYCLES[0], settings.forecast)["gdas_restartb"]]
    index = arc.TarballIndex.read(archived / "archive" / "smoke" / "lustre" / CYCLES[1] / "gdas_restartb.tar.index.json")
    assert [m.name for m in index.members] == expected


def test_each_full_cycle_s_earc_job_archives_the_members_history_the_enkf_grp_list_names(archived):
    results = archived / "results" / "smoke"
    for arm in ARMS:
        assert not (results / "arms" / arm / CYCLES[0] / "earc01.manifest.json").exists()  # the half cycle: none
        for cycle in CYCLES[1:]:
            manifest = json.loads((results / "arms" / arm / cycle / "earc01.manifest.json").read_text())
            assert manifest["step"] == "earc01" and [t["tarball"] for t in manifest["tarballs"]] == ["enkfgdas_grp01.tar"]
            tarball = archived / "archive" / "smoke" / arm / cycle / "enkfgdas_grp01.tar"
            index = arc.TarballIndex.read(arc.index_path(tarball))
            arc.verify_tarball(tarball, index)
            assert len(index.members) == 2 * 4  # per member atmf003, atmf006, atmf009, sfcf006
    settings = ArmSettings.from_json(json.dumps({
        "study": "smoke", "arm": "lustre", "start": CYCLES[0], "seed": 1, "resolution": "C12", "levels": 8,
        "persistent": {"name": "lustre", "kind": "lustre", "path": "x"}, "archive": {"members_per_group": 80},
        "forecast": {"restart_hours": [6], "product_grids": ["1p00"], "members": 2, "members_per_job": 2}}))
    expected = [spec.path for spec in job_tarballs("earc01", CYCLES[1], settings)["enkfgdas_grp01"]]
    index = arc.TarballIndex.read(archived / "archive" / "smoke" / "lustre" / CYCLES[1] / "enkfgdas_grp01.tar.index.json")
    assert [m.name for m in index.members] == expected


def test_the_archive_is_timed_in_step_summary_the_timeline_and_the_summary_and_runs_before_cleanup(archived):
    results = archived / "results" / "smoke"
    summary = pd.read_csv(results / "tables" / "step_summary.csv", dtype={"cycle": str})
    arch = summary[summary["step"] == "arch"]
    assert len(arch) == len(ARMS) * len(CYCLES)
    assert (arch["bytes_archived"] > 0).all() and (arch["archive_s"] > 0).all()
    earc = summary[summary["step"] == "earc01"]
    assert len(earc) == len(ARMS) * (len(CYCLES) - 1)
    assert (earc["bytes_archived"] > 0).all() and (earc["archive_s"] > 0).all()
    events = pd.read_parquet(results / "tables" / "io_events.parquet")
    archive = events[events["phase"] == "archive"]
    assert set(archive[archive["op"] == "read"]["tier"]) == {"lustre"}
    assert set(archive[archive["op"] == "write"]["tier_kind"]) == {"archive"}
    timeline = pd.read_csv(results / "tables" / "cycle_timeline.csv", dtype={"cycle": str})
    assert set(timeline[timeline["step"].isin(["arch", "earc01"])]["what"]) == {"archive"}
    # the critical path: the cycle's steps back from its post; the archive jobs are off it
    assert not timeline[timeline["step"].isin(["arch", "earc01"])]["critical"].any()
    # (the efcs job, which starts from the analysis, is on it instead of fcst and post when it finished last)
    assert timeline[(timeline["cycle"] == CYCLES[1]) & timeline["step"].isin(["prep", "anal"])]["critical"].all()
    text = (results / "summary.md").read_text()
    assert "Does the archive keep up?" in text
    assert "lustre" in [row[0] for row in markdown_rows(text.split("Does the archive keep up?")[1])]
    # a cycle's cleanup removes its files only after its archive job read them
    for arm in ARMS:
        for cycle in CYCLES[:-1]:
            mine = events[(events["arm"] == arm) & (events["cycle"] == cycle)]
            archives = mine[mine["step"].isin(["arch", "earc01"])]
            arch_end = (archives["t_start"] + archives["seconds"]).max()
            assert mine[mine["step"] == "cleanup"]["t_start"].min() >= arch_end


def test_cleanup_keeps_only_the_cycles_still_read_and_redoing_a_reader_of_a_removed_cycle_is_refused(archived):
    """cycles.keep: 1 removes each cycle once the next cycle's anal and fcst (its readers) are done, and its archive
    (runs last in this file: it deletes a manifest; before, test_workflow ran it on a study of its own)."""
    persistent = archived / "results/tiers/lustre/smoke/node_local"
    assert sorted(p.relative_to(persistent).as_posix() for p in persistent.glob("gdas.*/*")) == ["gdas.20270101/00"]
    results = archived / "results" / "smoke"
    events = pd.read_parquet(results / "tables" / "io_events.parquet")
    summary = pd.read_csv(results / "tables" / "step_summary.csv", dtype={"cycle": str})
    for cycle in CYCLES[:2]:
        manifest = json.loads((results / f"arms/node_local/{cycle}/cleanup.manifest.json").read_text())
        assert manifest["removed"] and all(r["files"] > 0 and r["bytes"] > 0 for r in manifest["removed"])
        # the cleanup's records reach the tables: its removals in io_events, its cleanup phase in step_summary
        removed = events[(events["arm"] == "node_local") & (events["cycle"] == cycle) & (events["step"] == "cleanup")]
        assert sorted(removed["file"]) == sorted(r["folder"] for r in manifest["removed"])
        assert removed["n_files"].sum() == sum(r["files"] for r in manifest["removed"])
        row = summary[(summary["arm"] == "node_local") & (summary["cycle"] == cycle) & (summary["step"] == "cleanup")]
        assert len(row) == 1 and row["cleanup_s"].iloc[0] > 0
    fcst = json.loads((results / f"arms/node_local/{CYCLES[2]}/fcst.manifest.json").read_text())
    assert all((persistent / o["path"]).stat().st_size == o["bytes"] for o in fcst["outputs"])
    repo = Path(__file__).resolve().parents[1]
    assert "Nothing to be done" in snakemake(repo, archived, "-n", targets=TARGETS).stdout
    # anal of the next cycle reads 2026123112's files, which are gone: redoing it alone is refused up front
    anal = results / "arms/node_local/2026123118/anal.manifest.json"
    anal.unlink()
    refused = snakemake(repo, archived, check=False)  # rule all: every job's manifest, this one's too
    assert refused.returncode != 0
    assert ("cannot start the study: the cleanup already removed the files these jobs read from the "
            "persistent tier (cycles.keep)") in refused.stderr, refused.stderr[-3000:]
    assert "arm node_local, cycle 2026123112: this run would redo anal of 2026123118" in refused.stderr
    assert "anal of 2026123118 in arm node_local (its manifest is missing)" in refused.stderr
    assert not anal.exists() and not list(archived.glob("results/smoke/arms/node_local/*/*.tmp*"))
