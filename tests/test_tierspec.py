"""A tier as the config names it (config.tierspec): its path's variables, defaults and placeholders expanded, and
the variables a job sets left for the job. Opening a tier where the job runs is test_tiers'."""

from pathlib import Path

import pytest

from cycleio.config.tierspec import JOB_TIME_VARIABLES, TierError, current_user, expand_tier_path


def test_expands_variables_defaults_and_placeholders():
    env = {"TMPDIR": "/scratch/job1", "SLURM_JOB_ID": "42"}
    assert expand_tier_path("t", "$TMPDIR/x", "s", env) == Path("/scratch/job1/x")
    assert expand_tier_path("t", "${TMPDIR}/j${SLURM_JOB_ID}", "s", env) == Path("/scratch/job1/j42")
    assert expand_tier_path("t", "${NOPE:-/tmp}/cycleio-{user}/{study}", "smoke", env) == Path(
        f"/tmp/cycleio-{current_user()}/smoke"
    )
    # an empty variable counts as unset, so the default applies
    assert expand_tier_path("t", "${TMPDIR:-/tmp}", "s", {"TMPDIR": ""}) == Path("/tmp")


def test_scratch_of_two_checkouts_on_one_node_never_meets(tmp_path, monkeypatch):
    """Two checkouts running a study of the same name outside Slurm: each job deletes its scratch
    folder when it starts, so a shared default path would mix the two runs' files."""
    template = "/dev/shm/cycleio-{user}/${SLURM_JOB_ID:-local-{workdir}}/{study}"
    paths = []
    for checkout in ("a", "b", "a"):
        (tmp_path / checkout).mkdir(exist_ok=True)
        monkeypatch.chdir(tmp_path / checkout)
        paths.append(expand_tier_path("shm", template, "default", {}))
    assert paths[0] != paths[1] and paths[0] == paths[2]
    assert paths[0].name == "default" and paths[0].parent.name.startswith("local-")
    # under Slurm the job id makes it private already; the default inside the default is not left over
    assert expand_tier_path("shm", template, "default", {"SLURM_JOB_ID": "42"}) == Path(
        f"/dev/shm/cycleio-{current_user()}/42/default")


def test_relative_paths_stay_relative():
    assert expand_tier_path("lustre", "results/tiers/lustre", "s", {}) == Path("results/tiers/lustre")


def test_missing_variable_names_tier_and_variable():
    with pytest.raises(TierError, match=r"tier 'bb': path .*\$DATAWARP_X.* not set"):
        expand_tier_path("bb", "$DATAWARP_X/stripe", "s", {})


def test_job_time_variables_are_tolerated_before_the_job():
    path = expand_tier_path("bb", "$DW_JOB_STRIPED/{study}", "s", {}, tolerate=JOB_TIME_VARIABLES)
    assert str(path) == "$DW_JOB_STRIPED/s"
