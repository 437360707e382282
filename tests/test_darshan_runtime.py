"""darshan-runtime on a job's processes (instruments.darshan): the logs' names, the runtime's configuration, the
re-execution under LD_PRELOAD, and the accounting of a real job's logs against its records.

The job in tests/data/darshan/job ran under darshan-runtime 3.5.0 (an MPI build, preloaded as the workflow does it) in
a smoke study whose tiers were /tmp/cyf/lustre and /tmp/cyf/node_local (tests/data/darshan/README.md): its fcst (the
job's process and its two forecast ranks, three logs) and its post, with their records and manifests as the job left
them. A darshan-runtime is not in any registry, so CI reads the logs it wrote; the mechanics of the preload are
tested with another real shared library (libacl), whose loading is all they depend on.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cycleio.darshan import runtime
from cycleio.report.accounting import JOB_PHASE, accounting_table, darshan_counts
from cycleio.report.aggregate import load_events

DATA = Path(__file__).parent / "data" / "darshan" / "job"
SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


@pytest.fixture
def job(tmp_path):
    folder = tmp_path / "arms" / "node_local" / "2026123118"
    shutil.copytree(DATA, folder)
    return folder


def test_a_jobs_logs_are_named_after_its_records(job):
    records = job / "fcst.records.jsonl"
    assert runtime.log_beside(records) == job / "fcst.darshan"
    assert [p.name for p in runtime.job_logs(records)] == ["fcst.darshan", "fcst.fcst.rank0.darshan",
                                                          "fcst.fcst.rank1.darshan"]
    assert [p.name for p in runtime.job_logs(job / "post.records.jsonl")] == ["post.darshan"]
    assert runtime.job_logs(job / "anal.records.jsonl") == []


def test_records_and_darshan_agree_within_one_percent_per_job_and_direction(job):
    manifests = [job / "fcst.manifest.json", job / "post.manifest.json"]
    counts = darshan_counts(manifests)
    assert list(counts["step"]) == ["fcst", "post"]
    fcst = counts.set_index("step").loc["fcst"]
    assert len(fcst["darshan_logs"].split()) == 3
    events = load_events([job / "fcst.records.jsonl", job / "post.records.jsonl"])
    table = accounting_table(events, counts)
    jobs = table[table["phase"] == JOB_PHASE].set_index("step")
    assert set(jobs.index) == {"fcst", "post"}
    for step, row in jobs.iterrows():
        for direction in ("read", "write"):
            assert 0.99 <= row[f"records_over_darshan_{direction}"] <= 1.01, (step, direction)
        assert not row["flagged"]
    # the forecast's writes are its ranks': without the ranks' logs Darshan would see only the staging copies
    own = darshan_counts([job / "post.manifest.json"])
    assert own["darshan_write_bytes"].iat[0] > 0
    # the ranks write their logs as they exit, after their work: the run's window leaves that out with their start-up
    run = table[(table["step"] == "fcst") & (table["phase"] == "run")].iloc[0]
    assert run["records_over_kernel_write"] > 0.99


def test_a_job_without_darshan_logs_has_no_job_row(job):
    for log in job.glob("post*.darshan"):
        log.unlink()
    counts = darshan_counts([job / "post.manifest.json"])
    assert counts.empty
    table = accounting_table(load_events([job / "post.records.jsonl"]), counts)
    assert JOB_PHASE not in set(table["phase"])


def test_files_off_the_tiers_are_not_counted(job):
    manifest = json.loads((job / "post.manifest.json").read_text())
    manifest["provenance"]["tiers"]["persistent"]["path"] = "/nowhere/lustre"
    manifest["provenance"]["tiers"]["scratch"]["path"] = "/nowhere/node_local"
    (job / "post.manifest.json").write_text(json.dumps(manifest))
    counts = darshan_counts([job / "post.manifest.json"])
    assert (counts[["darshan_read_bytes", "darshan_write_bytes"]] == 0).all(axis=None)


def test_the_config_records_every_file_on_the_tiers_and_keeps_the_sites(tmp_path):
    site = tmp_path / "site.conf"
    site.write_text("MODMEM 8\n")
    roots = [Path("/dev/shm/cycleio-me/local-ab,c d"), Path("/scratch/a.b+c")]
    config = runtime.write_config(tmp_path / "job.darshan-config", roots, str(site))
    lines = config.read_text().splitlines()
    assert lines[0] == "MODMEM 8"
    key, patterns, modules = lines[1].split("\t")
    assert (key, modules) == ("NAME_INCLUDE", "*")
    first, second = patterns.split(",")  # darshan-runtime splits the list on commas: none inside a pattern
    assert re.match(first, "/dev/shm/cycleio-me/local-ab,c d/study/x.nc")
    assert not re.match(first, "/dev/shm/cycleio-me/local-aXc d/study/x.nc")
    assert re.match(second, "/scratch/a.b+c/f") and not re.match(second, "/scratch/aXb+c/f")


def test_a_library_that_cannot_load_is_refused_naming_the_key(tmp_path):
    with pytest.raises(ValueError, match=r"instruments\.darshan: .*missing\.so.* cannot be loaded"):
        runtime.check_library(str(tmp_path / "missing.so"))
    text = tmp_path / "libdarshan.so"
    text.write_text("not a library")
    with pytest.raises(ValueError, match=r"instruments\.darshan: .*cannot be loaded .*LD_LIBRARY_PATH"):
        runtime.check_library(str(text))


def _stand_in() -> str:
    """A real shared library that Python never loads by itself: libacl (Debian's libacl1, which coreutils needs)."""
    found = [p for p in ("/lib/x86_64-linux-gnu/libacl.so.1", "/usr/lib/x86_64-linux-gnu/libacl.so.1")
             if os.path.exists(p)]
    assert found, "libacl.so.1 (Debian's libacl1) stands for libdarshan.so in this test"
    return found[0]


PROBE = """
import json, os, sys
from pathlib import Path
from cycleio.darshan.runtime import preload_job, preload_rank
mode, records = sys.argv[1], Path(sys.argv[2])
if mode == "job":
    preload_job(os.environ["LIB"], records, [Path("/tmp/tier")])
else:
    preload_rank("fcst")
maps = Path("/proc/self/maps").read_text()
env = os.environ.get
print(json.dumps({"loaded": "/" + os.path.basename(env("LIB")) in maps, "ld_preload": env("LD_PRELOAD", ""),
                  "logfile": env("DARSHAN_LOGFILE", ""), "nonmpi": env("DARSHAN_ENABLE_NONMPI"),
                  "config": env("DARSHAN_CONFIG_PATH", ""), "job_log": env("CYCLEIO_DARSHAN_LOG")}))
"""


def _probe(tmp_path, mode: str, env: dict) -> dict:
    records = tmp_path / "fcst.records.jsonl"
    full = {k: v for k, v in os.environ.items() if not k.startswith(("DARSHAN_", "CYCLEIO_DARSHAN"))}
    full.pop("LD_PRELOAD", None)
    full.update(env, PYTHONPATH=str(SCRIPTS))
    out = subprocess.run([sys.executable, "-c", PROBE, mode, str(records)], env=full, capture_output=True, text=True,
                         check=True, timeout=60)
    return json.loads(out.stdout)


def test_a_job_reexecutes_once_under_the_library_which_its_children_do_not_inherit(tmp_path):
    lib = _stand_in()
    (tmp_path / "fcst.darshan").write_text("an earlier attempt's log")
    seen = _probe(tmp_path, "job", {"LIB": lib})
    assert seen["loaded"] and lib not in seen["ld_preload"]  # preloaded, and gone from what it starts
    assert seen["logfile"] == str(tmp_path / "fcst.darshan") == seen["job_log"]
    assert seen["nonmpi"] == "1"
    assert Path(seen["config"]).read_text().startswith("NAME_INCLUDE\t^/tmp/tier/")
    assert not (tmp_path / "fcst.darshan").exists()  # darshan-runtime would not overwrite it


def test_a_rank_of_a_logged_job_runs_under_the_library_with_a_log_of_its_own(tmp_path):
    lib = _stand_in()
    seen = _probe(tmp_path, "rank", {"LIB": lib, "CYCLEIO_DARSHAN_LIBRARY": lib, "PMI_RANK": "3",
                                     "CYCLEIO_DARSHAN_LOG": str(tmp_path / "fcst.darshan")})
    assert seen["loaded"] and lib not in seen["ld_preload"]
    assert seen["logfile"] == str(tmp_path / "fcst.fcst.rank3.darshan")


def test_without_the_library_nothing_changes(tmp_path):
    seen = _probe(tmp_path, "rank", {"LIB": _stand_in()})
    assert not seen["loaded"] and seen["logfile"] == ""


def test_a_library_path_that_is_no_file_is_refused_before_any_job(default_config, tmp_path):
    from cycleio.config.keys import ConfigError
    from cycleio.config.settings import validate_config

    with pytest.raises(ConfigError, match=r"'instruments\.darshan': .*nowhere\.so.* is not a readable file"):
        validate_config({**default_config, "instruments": {"darshan": str(tmp_path / "nowhere.so")}})


# With a darshan-runtime installed (CYCLEIO_DARSHAN_LIBRARY: its libdarshan.so; an MPI build needs its libmpi on
# LD_LIBRARY_PATH), the smoke study runs under it: every job's records within 1 % of Darshan's count. darshan-runtime
# is in no registry, so CI has none: there the test above runs the logs such a run wrote, and this one is not defined.
LIBRARY = os.environ.get("CYCLEIO_DARSHAN_LIBRARY", "")
if LIBRARY:
    @pytest.mark.e2e
    def test_the_smoke_study_under_darshan_runtime_agrees_with_its_records(tmp_path):
        import yaml
        from conftest import snakemake

        import pandas as pd

        repo = Path(__file__).resolve().parents[1]
        tiers = {"tiers": {name: {"kind": kind, "path": str(tmp_path / "tiers" / name), "persistent": name == "lustre",
                                  "shared": name == "lustre"}
                           for name, kind in (("lustre", "lustre"), ("node_local", "node_local"), ("shm", "memory"))},
                 "scratch_tiers": ["lustre", "node_local"], "benchmarks": {"enabled": False},
                 "instruments": {"darshan": LIBRARY},
                 "darshan": {"jobs": {"ior": {"log": "example:ior_hdf5_example.darshan", "stands_for": "fcst",
                                              "scale": 0.1}}}}
        (tmp_path / "tiers.yaml").write_text(yaml.safe_dump(tiers))
        snakemake(repo, tmp_path, "--config", "study=darshanlive")
        results = tmp_path / "results" / "darshanlive"
        table = pd.read_csv(results / "tables" / "io_accounting.csv")
        jobs = table[table["phase"] == JOB_PHASE]
        assert set(jobs["step"]) >= {"prep", "anal", "fcst", "post"}
        assert not table["flagged"].any(), table[table["flagged"]][["arm", "cycle", "step", "phase", "note"]]
        assert len(list((results / "arms").rglob("fcst.fcst.rank*.darshan"))) >= 2
        assert (results / "tables" / "surrogate_vs_log.csv").is_file()
