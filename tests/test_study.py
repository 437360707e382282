"""The study as the Snakefile loads it once per parse (workflow.study.WorkflowStudy): what the rules read, the same
as building each part on its own."""

from __future__ import annotations

import io
import json
import re
import tokenize

import pytest
from conftest import REPO, with_changes

from cycleio.config.settings import ConfigError
from cycleio.workflow.study import WorkflowStudy, load_study

ARCHIVE_TIER = {"kind": "archive", "path": "results/tiers/archive", "persistent": True, "shared": True}


def study_config(default_config: dict, **changes) -> dict:
    """Six cycles, an ensemble, the archive, per-step and per-cycle staging, and faults aimed at a few jobs."""
    config = with_changes(default_config, cycles__end="2026010206", ensemble__members=5, ensemble__members_per_job=2,
                          archive__enabled=True, staging__granularity=["step", "cycle"],
                          faults={**default_config["faults"],
                                  "fail_step": [{"cycle": "2026010112", "step": "anal", "arm": "shm_per_cycle"}],
                                  "fail_rank": [{"cycle": "2026010118", "rank": 1, "attempt": 2}]})
    config["tiers"]["archive"] = dict(ARCHIVE_TIER)
    return with_changes(config, **changes)


@pytest.fixture
def study(default_config) -> WorkflowStudy:
    return WorkflowStudy.load(study_config(default_config))


def test_the_study_is_the_one_load_study_builds_with_its_benchmark_plan(default_config, study):
    filled, plain = load_study(study_config(default_config))
    assert study.config == filled and study.study == plain
    assert study.name == plain.name and study.cycles == plain.cycles and study.arms == plain.arms
    assert study.bench.enabled and study.bench.points
    assert len(study.jobs.step_jobs()) > len(plain.cycles) * len(plain.arms)


def test_each_jobs_settings_are_those_of_its_arm_made_once_per_kind_of_job(study):
    """The params of every job of the study, faults and paired replays included, as ArmSettings.job_json makes them."""
    jobs = [*study.jobs.step_jobs(), *study.jobs.archives(), *study.jobs.cleanups()]
    assert {job.name for job in jobs} >= {"prep", "anal", "fcst", "post", "efcs01", "efcs03", "cycle", "arch",
                                          "earc01", "cleanup"}
    for job in jobs:
        assert study.job_json(job.arm, job.name, job.cycle) == study.arms[job.arm].job_json(job.name, job.cycle), job
    for arm in study.arms:
        for job in ("coldstart", "dump", "inventory"):
            assert study.job_json(arm, job) == study.arms[arm].job_json(job)
    faulted = json.loads(study.job_json("shm_per_cycle", "cycle", "2026010112"))["faults"]
    assert faulted["fail_step"][0]["step"] == "anal"


def test_without_faults_a_jobs_settings_are_made_once_per_arm_job_and_pairing(default_config):
    study = WorkflowStudy.load(with_changes(default_config, cycles__end="2026010518"))
    jobs = study.jobs.step_jobs()
    for job in jobs:
        assert study.job_json(job.arm, job.name, job.cycle) == study.arms[job.arm].job_json(job.name, job.cycle), job
    assert len(study._job_json) == 3 * 4 * 2  # arms x steps x (paired or not)


def test_the_titles_name_the_study_its_grid_and_cycles(default_config, study):
    assert study.title() == "cycleio study 'default': C48 L127, 6 cycles"
    assert study.title("benchmarks on the tiers") == "cycleio study 'default': benchmarks on the tiers"
    assert study.grid == "C48 L127"
    only = WorkflowStudy({**study.config, "darshan": {**study.config["darshan"], "only": True}}, study.study, study.bench)
    assert only.title() == "cycleio study 'default': replay jobs from Darshan logs, 6 cycles"


def test_the_capacity_plans_target_is_the_first_arm_at_the_plans_resolution(default_config, study):
    _, target = load_study({**study.config, "resolution": study.config["plan"]["resolution"]})
    arm = next(iter(target.arms.values()))
    assert study.capacity_target_json == json.dumps({"cycles": target.cycles[:2], "arms": [arm.job_json("inventory")]})
    assert json.loads(json.loads(study.capacity_target_json)["arms"][0])["resolution"] == "C768"


def test_the_inventory_reads_every_arms_settings(study):
    inventory = json.loads(study.inventory_json())
    assert inventory["cycles"] == study.cycles
    assert [json.loads(arm)["arm"] for arm in inventory["arms"]] == list(study.arms)


def test_a_bad_benchmark_section_is_refused_when_the_study_loads(default_config):
    with pytest.raises(ConfigError, match="benchmarks"):
        WorkflowStudy.load(with_changes(default_config, benchmarks__io_patterns=["nope"]))


RULE_FILES = sorted((REPO / "rules").glob("*.smk"))


def _used(text: str) -> set[str]:
    """Names a rule file reads: not an attribute, a keyword argument or what an assignment binds, not in a string
    or comment."""
    tokens = [token for token in tokenize.generate_tokens(io.StringIO(text).readline)
              if token.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)]
    return {token.string for before, token, after in zip([None, *tokens], tokens, [*tokens[1:], None])
            if token.type == tokenize.NAME and not (before and before.string == ".")
            and not (after and after.string == "=")}


def _defined(text: str) -> set[str]:
    """Top-level names a rule file defines: functions, assignments and what it imports."""
    names = set(re.findall(r"^def (\w+)", text, re.M)) | set(re.findall(r"^([A-Z_][A-Za-z0-9_]*) =", text, re.M))
    for imported in re.findall(r"^(?:from [\w.]+ )?import ([\w, ]+)$", text, re.M):
        names |= {name.strip().split(" as ")[-1] for name in imported.split(",")}
    return names


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda path: path.name)
def test_each_rule_file_uses_only_its_own_names_the_snakefiles_and_common_smks(path):
    """No global crosses from one rule file into another (rules/common.smk's helpers and the Snakefile's STUDY are
    shared by all), and each file imports the modules it uses."""
    text = path.read_text()
    shared = _defined((REPO / "rules" / "common.smk").read_text()) | _defined((REPO / "Snakefile").read_text())
    own = _defined(text)
    for other in RULE_FILES:
        if other in (path, REPO / "rules" / "common.smk"):
            continue
        borrowed = (_defined(other.read_text()) - own - shared) & _used(text)
        assert not borrowed, f"{path.name} uses {sorted(borrowed)} from {other.name}"
    for module in {"json", "shlex", "os", "sys"} & _used(text):
        assert module in own, f"{path.name} uses {module} without importing it"
