"""A study from its config, every check made before any job: the keys (config.settings), the benchmark
plan (benchmarks.tierbench), the faults against the study's jobs (workflow.faultcheck), the replay jobs' Darshan
logs (workflow.replayjobs) and the archive's limits against the tarballs' sizes (surrogates.archive_lists).

The Snakefile, the rules and the command load a study here; config.settings alone validates the keys
and builds the arms, without the layers above it.
"""

from __future__ import annotations

from ..benchmarks.tierbench import BenchmarkPlan
from ..config.keys import ConfigError
from ..config.settings import Study, build_study, validate_config
from ..storage.archive import ArchiveLimitError
from ..surrogates.archive_lists import check_archive_limits
from .faultcheck import check_faults
from .replayjobs import check_replay_jobs


def validate_study_config(config: dict, schema: dict | None = None) -> dict:
    """validate_config, then the benchmark plan's checks of its section (patterns, IOR's size rules, the
    tools found): the filled config, or ConfigError naming the first problem."""
    filled = validate_config(config, schema)
    BenchmarkPlan.from_config(filled)
    return filled


def load_study(config: dict, schema: dict | None = None) -> tuple[dict, Study]:
    """The filled config and its Study, every check passed (ConfigError naming the key otherwise); the schema is the
    package's (config.schema)."""
    filled = validate_study_config(config, schema)
    study = build_study(filled)
    check_faults(filled, study)
    check_replay_jobs(study)  # the replay jobs' logs read and planned (none: nothing imported)
    try:
        check_archive_limits(study)  # the archive's limits against the inventory's sizes, before any job
    except ArchiveLimitError as err:
        raise ConfigError(str(err)) from None
    return filled, study
