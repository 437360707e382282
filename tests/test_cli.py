"""cli: the study's name from the command line or its files, and study files laid over the base config."""

from __future__ import annotations


def test_the_study_name_follows_a_command_line_config_over_the_files(tmp_path, capsys):
    from cycleio.cli import command_line_config, main

    assert command_line_config(["--cores", "2", "--config", "study=x", "seed=3", "-n"]) == {"study": "x", "seed": 3}
    assert command_line_config(["-C", "study=y"]) == {"study": "y"}
    assert command_line_config(["--cores", "2", "study=not-a-config"]) == {}
    study = tmp_path / "s.yaml"
    study.write_text("study: from_file\n")
    assert main(["study-name", str(study)]) == 0 and capsys.readouterr().out.strip() == "from_file"
    assert main(["study-name", str(study), "--snakemake-args", "--config study=from_args"]) == 0
    assert capsys.readouterr().out.strip() == "from_args"


def test_a_study_file_is_laid_over_the_base_config_key_by_key(tmp_path):
    """As Snakemake lays --configfile files (snakemake.utils.update_config): nested keys one by one."""
    from cycleio.cli import _read_configs

    base, study = tmp_path / "base.yaml", tmp_path / "study.yaml"
    base.write_text("cycles: {start: '2026010100', end: '2026010118'}\ntiers: {lustre: {kind: lustre, path: a}}\n")
    study.write_text("cycles: {end: '2026010106'}\ntiers: {shm: {kind: memory, path: b}}\nseed: 3\n")
    assert _read_configs([str(base), str(study)]) == {
        "cycles": {"start": "2026010100", "end": "2026010106"}, "seed": 3,
        "tiers": {"lustre": {"kind": "lustre", "path": "a"}, "shm": {"kind": "memory", "path": "b"}}}


def test_the_config_a_check_judges_is_the_one_the_run_will_use(repo):
    """Every --config item of the study's Snakemake arguments, nested ones key by key, as Snakemake lays them: the
    cluster check and check-config judge what the run will get."""
    from cycleio.cli import load_config_files

    config, _ = load_config_files([str(repo / "config" / "config.yaml")],
                                  "--cores 2 --config 'staging={streams: 1}' resolution=C96")
    assert config["staging"]["streams"] == 1 and config["staging"]["method"] == "cycleio"  # the rest kept
    assert config["resolution"] == "C96"
