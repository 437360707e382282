"""The archive job end to end: the smoke study with archive on two arms (lustre and node_local scratch), cleanup
keeping one cycle, through Snakemake."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import snakemake

from cycleio.config.settings import ArmSettings
from cycleio.storage import archive as arc
from cycleio.surrogates.archive_lists import tarball_members

pytestmark = pytest.mark.e2e
ARMS = ("lustre", "node_local")
CYCLES = ("2026123112", "2026123118", "2027010100")


@pytest.fixture(scope="module")
def archived(tmp_path_factory):
    repo = Path(__file__).resolve().parents[1]
    workdir = tmp_path_factory.mktemp("archive")
    overrides = {
        "tiers": {"node_local": {"kind": "node_local", "path": str(workdir / "node_local")},
                  "archive": {"kind": "archive", "path": str(workdir / "archive")}},
        "scratch_tiers": ["lustre", "node_local"],
        "cycles": {"keep": 1},
        "archive": {"enabled": True},
        "benchmarks": {"enabled": False},
    }
    (workdir / "tiers.yaml").write_text(yaml.safe_dump(overrides))
    snakemake(repo, workdir)
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


def test_the_archive_is_timed_in_step_summary_the_timeline_and_the_summary_and_runs_before_cleanup(archived):
    results = archived / "results" / "smoke"
    summary = pd.read_csv(results / "tables" / "step_summary.csv", dtype={"cycle": str})
    arch = summary[summary["step"] == "arch"]
    assert len(arch) == len(ARMS) * len(CYCLES)
    assert (arch["bytes_archived"] > 0).all() and (arch["archive_s"] > 0).all()
    events = pd.read_parquet(results / "tables" / "io_events.parquet")
    archive = events[events["phase"] == "archive"]
    assert set(archive[archive["op"] == "read"]["tier"]) == {"lustre"}
    assert set(archive[archive["op"] == "write"]["tier_kind"]) == {"archive"}
    timeline = pd.read_csv(results / "tables" / "cycle_timeline.csv", dtype={"cycle": str})
    assert set(timeline[timeline["step"] == "arch"]["what"]) == {"archive"}
    # the critical path: the cycle's steps back from its post; the archive job is off it
    assert not timeline[timeline["step"] == "arch"]["critical"].any()
    assert timeline[(timeline["cycle"] == CYCLES[1]) & timeline["step"].isin(["prep", "anal", "fcst", "post"])]["critical"].all()
    text = (results / "summary.md").read_text()
    assert "Does the archive keep up?" in text and "| lustre |" in text.split("Does the archive keep up?")[1]
    # a cycle's cleanup removes its files only after its archive job read them
    for arm in ARMS:
        for cycle in CYCLES[:-1]:
            mine = events[(events["arm"] == arm) & (events["cycle"] == cycle)]
            arch_end = (mine[mine["step"] == "arch"]["t_start"] + mine[mine["step"] == "arch"]["seconds"]).max()
            assert mine[mine["step"] == "cleanup"]["t_start"].min() >= arch_end
