"""The checks before any job: room on every tier (with a margin, tiers sharing a filesystem added up), an
unwritable tier refused as unwritable whatever its filesystem, a batch-system variable in a local run."""

from __future__ import annotations

import os

import pytest
import yaml
from conftest import cannot_run_here, tmpfs

from cycleio.config.settings import ConfigError, build_study, validate_config
from cycleio.storage.tiers import filesystem_type
from cycleio.workflow.preflight import check_study, study_needs


@pytest.mark.parametrize("root, fs_type", [("/proc", "proc"), ("/sys", "sysfs")])
def test_a_tier_under_a_kernel_filesystem_is_refused_as_unwritable_not_full(repo, root, fs_type):
    """Before the fix /proc was refused with 'has 0 B free, but the study needs ...' (a space message)."""
    if filesystem_type(root) != fs_type:
        cannot_run_here(f"{root} is not {fs_type} here")
    config = yaml.safe_load((repo / "config" / "config.yaml").read_text())
    config["tiers"]["shm"]["path"] = f"{root}/cycleio-{{user}}"
    study = build_study(validate_config(config))
    with pytest.raises(ConfigError) as caught:
        check_study(study)
    message = str(caught.value)
    assert message.startswith(f"tier 'shm': path '{root}/cycleio-")
    assert f"cannot be written: a file cannot be created in {root} ({fs_type}" in message
    assert message.endswith("set tiers.shm.path to a folder this user can write")
    assert "free" not in message and "\n" not in message


def test_preflight_refuses_a_tier_without_room_with_the_numbers(tmp_path, repo):
    import yaml

    config = yaml.safe_load((repo / "config" / "config.yaml").read_text())
    config.update(yaml.safe_load((repo / "config" / "studies" / "smoke.yaml").read_text()))
    with tmpfs(tmp_path / "tiny", "1m") as tiny:
        config["tiers"]["shm"]["path"] = str(tiny)
        config["tiers"]["lustre"]["path"] = str(tmp_path / "lustre")
        study = build_study(validate_config(config))
        with pytest.raises(ConfigError, match=r"tier 'shm' \(.*tiny, tmpfs\) has 1\.0 MiB free, but the study needs about [0-9.]+ MiB more"):
            check_study(study, claim=True)
        # refused as the workflow starts: no tier's folder claimed (nor made) for a run that never ran
        assert not (tmp_path / "lustre" / study.name).exists() and not list(tiny.rglob(study.name))
        # a dry run shows the jobs: what a real run would be refused for is a note
        [note] = [n for n in check_study(study, dry_run=True) if "would not start" in n]
        assert note.startswith("a real run would not start: tier 'shm' (") and "1.0 MiB free" in note


def test_a_dry_run_is_recognised_on_snakemakes_command_line():
    from cycleio.workflow.preflight import dry_run_requested

    assert all(dry_run_requested(["snakemake", *args]) for args in (["-n"], ["--dry-run"], ["--dryrun"], ["-np"],
                                                                      ["--cores", "2", "-pn"]))
    assert not any(dry_run_requested(["snakemake", *args]) for args in ([], ["--cores", "2"], ["-p"], ["-j2"],
                                                                         ["--config", "name=-n"], ["--notemp"]))


def test_preflight_asks_for_a_stated_margin_beyond_the_estimate(tmp_path, repo):
    import yaml

    config = yaml.safe_load((repo / "config" / "config.yaml").read_text())
    config.update(yaml.safe_load((repo / "config" / "studies" / "smoke.yaml").read_text()))
    config["tiers"]["lustre"]["path"] = str(tmp_path / "lustre")
    with tmpfs(tmp_path / "snug", "40m") as snug:
        config["tiers"]["shm"]["path"] = str(snug)
        study = build_study(validate_config(config))
        assert study_needs(study)["shm"]["scratch_bytes"] < 30 * 2**20  # the estimate alone would fit
        with pytest.raises(ConfigError, match=r"tier 'shm' .* and a margin of 32\.0 MiB \(10%, at least 32\.0 MiB\) "
                                               r"for records, temporaries and file-system overhead"):
            check_study(study)


def test_preflight_counts_only_the_cycles_cleanup_leaves_on_the_persistent_tier(repo):
    import yaml

    from cycleio.workflow.preflight import held_bytes

    assert held_bytes([1, 2, 3, 4, 5], None) == 15
    assert held_bytes([1, 2, 3, 4, 5], 1) == 3 + 4 + 5  # three cycles at once: kept, being read, being written
    assert held_bytes([7], 1) == 7
    config = yaml.safe_load((repo / "config" / "config.yaml").read_text())
    config["cycles"] = {**config["cycles"], "end": "2026013118"}
    month = study_needs(build_study(validate_config(config)))
    config["cycles"]["keep"] = None
    kept = study_needs(build_study(validate_config(config)))
    assert kept["lustre"]["persistent_bytes"] > 30 * month["lustre"]["persistent_bytes"]


def test_preflight_adds_up_the_needs_of_tiers_on_one_filesystem(tmp_path, repo):
    import yaml

    config = yaml.safe_load((repo / "config" / "config.yaml").read_text())
    config.update(yaml.safe_load((repo / "config" / "studies" / "smoke.yaml").read_text()))
    config["benchmarks"]["enabled"] = False
    with tmpfs(tmp_path / "shared", "256m") as shared:
        config["tiers"]["lustre"]["path"] = str(shared / "lustre")
        config["tiers"]["lustre2"] = {"kind": "posix", "path": str(shared / "lustre2")}
        config["persistent_tier"] = ["lustre", "lustre2"]
        config["scratch_tiers"] = ["lustre", "lustre2"]
        study = build_study(validate_config(config))
        each = {name: need["persistent_bytes"] for name, need in study_needs(study).items()}
        free = os.statvfs(shared).f_bavail * os.statvfs(shared).f_frsize
        filler = shared / "filler"
        filler.write_bytes(b"\0" * (free - int(1.5 * each["lustre"])))  # room for one study, not for two
        with pytest.raises(ConfigError, match=r"tiers 'lustre', 'lustre2' share one filesystem \(tmpfs, .* free\), "
                                               r"but together the study needs about .* more on it"):
            check_study(study)
        filler.unlink()
        check_study(study)


def test_a_batch_system_variable_in_a_tier_path_is_refused_for_a_local_run(repo, monkeypatch):
    import yaml

    monkeypatch.delenv("SLURM_TMPDIR", raising=False)
    config = yaml.safe_load((repo / "config" / "config.yaml").read_text())
    config["tiers"]["node_local"]["path"] = "${SLURM_TMPDIR}/scratch"
    study = build_study(validate_config(config))  # valid: under Slurm each job has it
    with pytest.raises(ConfigError, match=r"uses \$SLURM_TMPDIR, which is not set.*executes its jobs here"):
        check_study(study, jobs_here=True)
    notes = check_study(study, local_exec=False)
    assert any("tier 'node_local' is checked inside each job" in note for note in notes)


def test_a_scratch_folder_another_user_could_reach_is_refused_before_any_job(tmp_path, repo, monkeypatch):
    """The Snakefile's check: the default node-local path in a /tmp where this user's folder is
    writable by all is refused, naming the folder, its owner and mode; a claim makes a missing one 0700."""
    import stat

    import yaml

    from cycleio.config.tierspec import current_user

    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    monkeypatch.setenv("TMPDIR", str(shared))
    monkeypatch.chdir(tmp_path)
    config = yaml.safe_load((repo / "config" / "config.yaml").read_text())
    config.update(yaml.safe_load((repo / "config" / "studies" / "smoke.yaml").read_text()))
    config["tiers"]["lustre"]["path"] = str(tmp_path / "lustre")
    config["tiers"]["shm"]["path"] = str(shared / "shm-{user}")
    study = build_study(validate_config(config))
    mine = shared / f"cycleio-{current_user()}"
    check_study(study)  # nothing there yet: nothing to refuse, nothing made
    assert not mine.exists()
    check_study(study, claim=True)
    assert stat.S_IMODE(mine.stat().st_mode) == 0o700
    mine.chmod(0o777)
    with pytest.raises(ConfigError, match=rf"^tier 'node_local': {mine} is writable by other users \(owner "
                                           rf"{current_user()}, mode drwxrwxrwx \(0777\)\), inside {shared}"):
        check_study(study)


@pytest.mark.parametrize("changes", [{}, {"cycles__keep": None}, {"cycles__keep": 2},
                                     {"ensemble__members": 5, "ensemble__members_per_job": 2, "archive__enabled": True},
                                     {"staging__granularity": ["step", "cycle"]}, {"cycles__end": "2026010100"}])
def test_the_needs_sized_from_the_first_two_cycles_are_those_of_every_cycle(default_config, changes):
    """Every later cycle writes the same files as the first full one under its own date: the sums over every cycle
    (what preflight added up before) come out the same."""
    from collections import Counter

    from conftest import with_changes

    from cycleio.storage.archive import tar_bytes
    from cycleio.surrogates.archive_lists import cycle_expected_members
    from cycleio.workflow.catalog import inventory_rows
    from cycleio.workflow.preflight import held_bytes

    config = with_changes(default_config, **{"cycles__end": "2026010318", **changes})
    config["tiers"]["archive"] = {"kind": "archive", "path": "results/tiers/archive", "persistent": True,
                                  "shared": True}
    study = build_study(validate_config(config))
    needs = study_needs(study)
    persistent, archived = Counter(), Counter()
    for arm in study.arms.values():
        by_cycle = Counter()
        for row in inventory_rows(arm, study.cycles):
            by_cycle[row["cycle"]] += row["expected_bytes"]
        persistent[arm.persistent.name] += held_bytes([by_cycle[cycle] for cycle in study.cycles], study.keep)
        if arm.archive:  # every arm archives its cycles, staged or not
            archived[arm.archive["tier"]["name"]] += sum(tar_bytes(members) for cycle in study.cycles
                                                         for members in cycle_expected_members(cycle, arm).values())
    assert {name: need["persistent_bytes"] for name, need in needs.items() if need["persistent_bytes"]} == {
        **persistent, **archived}
