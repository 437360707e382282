"""A batch job's own scratch folder on each tier goes when the job ends (storage.jobscratch); the Slurm run of
tests/test_slurm.py finds no job's folder left."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from cycleio.config.tierspec import Tier, TierError, current_user
from cycleio.storage.jobscratch import job_folders, job_scratch, split_template

DEFAULT_PATH = "${TMPDIR:-/tmp}/cycleio-{user}/${SLURM_JOB_ID:-local-{workdir}}"


def tier(path: str, persistent: bool = False, kind: str = "memory") -> Tier:
    return Tier(name="shm", kind=kind, path=path, persistent=persistent, shared=False)


def test_templates_split_outside_variables():
    assert split_template(DEFAULT_PATH) == ["${TMPDIR:-/tmp}", "cycleio-{user}", "${SLURM_JOB_ID:-local-{workdir}}"]
    assert split_template("/dev/shm/a") == ["", "dev", "shm", "a"]


def test_the_job_folder_and_the_parents_the_path_makes_per_user(tmp_path):
    user = current_user()
    env = {"TMPDIR": str(tmp_path), "SLURM_JOB_ID": "77"}
    assert job_folders(tier(DEFAULT_PATH), "smoke", env) == (tmp_path / f"cycleio-{user}" / "77",
                                                             [tmp_path / f"cycleio-{user}"])
    # a literal parent (/dev/shm, a site's scratch) is never the job's
    assert job_folders(tier(f"{tmp_path}/scratch/job-${{SLURM_JOB_ID}}/x"), "smoke", env) == (
        tmp_path / "scratch" / "job-77", [])
    # no job id here, a persistent tier, or a folder a variable names (a burst buffer's): not the job's to remove
    assert job_folders(tier(DEFAULT_PATH), "smoke", {"TMPDIR": str(tmp_path)}) is None
    assert job_folders(tier(DEFAULT_PATH, persistent=True), "smoke", env) is None
    assert job_folders(tier("$BB_STAGE_DIR", kind="burst_buffer"), "smoke", {**env, "BB_STAGE_DIR": "/x"}) is None
    assert job_folders(tier("/scratch/${PBS_JOBID}"), "s", {"PBS_JOBID": "12.server"}) == (Path("/scratch/12.server"), [])


def skeleton(folder: Path) -> None:
    (folder / "smoke" / "bench").mkdir(parents=True)
    (folder / "smoke" / ".cycleio-owner").write_text("/some/checkout\n")


@pytest.mark.parametrize("fails", [False, True])
def test_the_job_folder_goes_at_the_end_of_the_job_success_or_failure(tmp_path, monkeypatch, fails):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    other = tmp_path / f"cycleio-{current_user()}" / "76"
    with pytest.raises(RuntimeError) if fails else _nothing():
        with job_scratch([tier(DEFAULT_PATH), None], "smoke") as folders:
            assert folders == [tmp_path / f"cycleio-{current_user()}" / "77"] and folders[0].is_dir()
            skeleton(folders[0])
            if fails:
                raise RuntimeError("the step failed")
    assert list(tmp_path.iterdir()) == []  # the per-user parent too, once empty
    # another job's folder keeps the parent
    other.mkdir(parents=True)
    with job_scratch([tier(DEFAULT_PATH)], "smoke") as folders:
        skeleton(folders[0])
    assert [p.name for p in other.parent.iterdir()] == ["76"]


def test_several_commands_of_one_job_leave_it_to_the_last(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    with job_scratch([tier(DEFAULT_PATH)], "smoke") as outer:
        skeleton(outer[0])
        with job_scratch([tier(DEFAULT_PATH)], "smoke"):
            pass
        assert (outer[0] / "smoke" / ".cycleio-owner").is_file()  # still in use by the outer command
    assert not outer[0].exists()


def test_outside_a_batch_job_nothing_is_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv("PBS_JOBID", raising=False)
    monkeypatch.delenv("LSB_JOBID", raising=False)
    with job_scratch([tier(DEFAULT_PATH)], "smoke") as folders:
        assert folders == []
    local = tmp_path / f"cycleio-{current_user()}" / "local-x"
    local.mkdir(parents=True)
    with job_scratch([tier(DEFAULT_PATH)], "smoke"):
        pass
    assert local.is_dir()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_job_refuses_a_per_user_folder_another_user_could_reach(tmp_path, monkeypatch):
    """On a cluster the per-user folder is made on the node, by the job: made private there, and refused
    (before the step runs, nothing made inside it) when another user could write it."""
    shared = tmp_path / "shm"
    shared.mkdir()
    shared.chmod(0o1777)
    monkeypatch.setenv("TMPDIR", str(shared))
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    mine = shared / f"cycleio-{current_user()}"
    with job_scratch([tier(DEFAULT_PATH)], "smoke") as folders:
        assert folders == [mine / "77"] and stat.S_IMODE(mine.stat().st_mode) == 0o700
    mine.mkdir(mode=0o777)
    mine.chmod(0o777)
    ran = []
    with pytest.raises(TierError, match=rf"^tier 'shm': {mine} is writable by other users"):
        with job_scratch([tier(DEFAULT_PATH)], "smoke"):
            ran.append(True)
    assert ran == [] and list(mine.iterdir()) == [] and mine.is_dir()
