"""A real job's Darshan log beside the surrogate step it stands for (tables/surrogate_vs_log.csv), from the logs of a
forecast job that darshan-runtime 3.5.0 wrote on a study's unstaged arm (tests/data/darshan/README.md, job-unstaged)
and a real IOR job's log from pydarshan's wheel."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from cycleio.config.keys import ConfigError
from cycleio.config.settings import validate_config
from cycleio.darshan.jobfiles import find_log
from cycleio.report.surrogatelog import COLUMNS, comparison, write_comparisons

DATA = Path(__file__).parent / "data" / "darshan" / "job-unstaged"


@pytest.fixture
def job(tmp_path):
    folder = tmp_path / "arms" / "lustre" / "2027010100"
    shutil.copytree(DATA, folder)
    return folder / "fcst.manifest.json"


def test_the_surrogates_run_is_what_its_records_moved_and_the_real_log_is_all_its_files(job):
    real = find_log("example:ior_hdf5_example.darshan")
    table = comparison("ior", real, "fcst", job).set_index("measure")
    records = pd.read_json(job.with_name("fcst.records.jsonl"), lines=True)
    run = records[records["phase"] == "run"]
    for direction in ("read", "write"):
        mine = run[run["op"] == direction]
        assert table.loc[f"bytes_{direction}", "surrogate"] == mine["bytes"].sum()  # staging and verify left out
        assert table.loc[f"files_{direction}", "surrogate"] == mine["file"].nunique()
    # the IOR job: one shared HDF5 file, 4 ranks, 4 MiB each way (the wheel's example)
    assert table.loc["files_write", "real"] == 1 and table.loc["bytes_write", "real"] == pytest.approx(4.2e6, rel=0.01)
    shares = table[table.index.str.startswith("write_calls_")]["surrogate"]
    assert shares.sum() == pytest.approx(1.0)
    assert 0 < table.loc["metadata_share", "surrogate"] < 1
    ratio = table.loc["bytes_read"]
    assert ratio["surrogate_over_real"] == pytest.approx(ratio["surrogate"] / ratio["real"])


def test_the_table_has_a_row_per_measure_for_each_real_job(job, tmp_path):
    real = str(find_log("example:ior_hdf5_example.darshan"))
    out = tmp_path / "surrogate_vs_log.csv"
    write_comparisons([{"job": "ior", "log": real, "step": "fcst", "manifest": str(job)},
                       {"job": "ior2", "log": real, "step": "fcst", "manifest": str(job)}], out)
    table = pd.read_csv(out)
    assert list(table.columns) == COLUMNS
    assert table.groupby("job").size().tolist() == [29, 29]


def test_a_step_without_its_own_log_is_refused_naming_the_key(job):
    for log in job.parent.glob("*.darshan"):
        log.unlink()
    with pytest.raises(ValueError, match="instruments.darshan"):
        comparison("ior", find_log("example:ior_hdf5_example.darshan"), "fcst", job)


def _with(default_config, **keys):
    config = json.loads(json.dumps(default_config))
    config["darshan"]["jobs"] = {"ior": {"log": "example:ior_hdf5_example.darshan", "stands_for": "fcst"}}
    for key, value in keys.items():
        config[key] = value
    return config


def test_stands_for_needs_the_darshan_instrument_and_an_unstaged_arm(default_config, tmp_path):
    with pytest.raises(ConfigError, match=r"darshan\.jobs\.ior\.stands_for.*instruments\.darshan"):
        validate_config(_with(default_config))
    library = tmp_path / "libdarshan.so"
    library.write_bytes(b"")
    with pytest.raises(ConfigError, match=r"stands_for.*no arm runs on the persistent tier"):
        validate_config(_with(default_config, instruments={"darshan": str(library)}, scratch_tiers=["shm"]))
    validate_config(_with(default_config, instruments={"darshan": str(library)}))
