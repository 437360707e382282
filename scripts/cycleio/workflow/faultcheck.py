"""The check of the config's ``faults`` section against the study, before any job: every entry aims at a
job, cycle, step, rank or file count the study has (cycleio.faults holds what the jobs do with them).

It sits with the workflow because it asks the study's jobs (workflow.dependencies) which jobs exist;
workflow.study.load_study runs it.
"""

from __future__ import annotations

from ..config.keys import ConfigError
from ..faults import KINDS, STEP_KINDS
from ..storage.slowfs import unavailable as slowfs_unavailable
from ..surrogates.forecast.layout import RankLayout
from ..config.forecast import cycle_steps
from ..surrogates.inventory import job_files
from ..units import size_or_none
from .dependencies import CycledJobs


def check_faults(config: dict, study) -> None:
    """Every entry of ``faults`` aims at a job the study runs; ConfigError naming the key otherwise.

    ``study`` is the config.settings.Study built from ``config`` (its arms already hold their faults).
    """
    jobs = CycledJobs.of_study(study)
    for kind in KINDS:
        for index, entry in enumerate(config["faults"][kind]):
            key = f"faults.{kind}[{index}]"
            arm_name, cycle = entry.get("arm"), str(entry["cycle"])
            if arm_name is not None and arm_name not in study.arms:
                raise ConfigError(f"config key '{key}.arm': {arm_name!r} is not an arm of the study; expected one "
                                  f"of: {', '.join(study.arms)}")
            if cycle not in study.cycles:
                raise ConfigError(f"config key '{key}.cycle': {cycle} is not a cycle of the study "
                                  f"({study.cycles[0]} to {study.cycles[-1]})")
            arms = [study.arms[arm_name]] if arm_name else list(study.arms.values())
            if kind in ("corrupt_staged_file", "fail_stage_out"):
                arms = [arm for arm in arms if arm.staged]
                if not arms:
                    who = f"arm {arm_name} does not stage" if arm_name else "no arm of the study stages"
                    raise ConfigError(f"config key '{key}': {who} its files (scratch tier = persistent tier); "
                                      "a staging fault needs an arm with staging")
            for arm in arms:
                steps = cycle_steps(cycle, arm.start, arm.forecast)
                if kind == "fill_tier" and size_or_none(entry["leave"]) is None:
                    raise ConfigError(f"config key '{key}.leave': {entry['leave']!r} is not a size; expected bytes "
                                      "or a number with k, m, g (e.g. 0, 64k, 1m)")
                if kind == "slow_tier" and (why := slowfs_unavailable()):
                    raise ConfigError(f"config key '{key}': a slow tier is mounted with FUSE, and here there is {why}")
                if kind in STEP_KINDS and entry["step"] not in steps:
                    raise ConfigError(f"config key '{key}.step': {entry['step']!r} does not run in cycle {cycle}; "
                                      f"expected one of: {', '.join(steps)}")
                if kind == "fail_rank":
                    ntasks = RankLayout.from_settings(arm.strategy, arm.write_component).ntasks
                    if entry["rank"] >= ntasks:
                        raise ConfigError(f"config key '{key}.rank': {entry['rank']} is not a rank of arm {arm.arm}'s "
                                          f"forecast, which has {ntasks} (ranks 0 to {ntasks - 1})")
                if kind in ("corrupt_staged_file", "fail_stage_out"):
                    names = jobs.jobs_of_cycle(arm.arm, cycle)
                    if entry["step"] not in names:
                        raise ConfigError(f"config key '{key}.step': arm {arm.arm} runs no job {entry['step']!r} in "
                                          f"cycle {cycle}; expected one of: {', '.join(names)}")
                if kind == "fail_stage_out":
                    job_steps = list(steps) if entry["step"] == "cycle" else [entry["step"]]
                    staged_out = len(job_files(arm, cycle, job_steps)[1])
                    if entry["after_files"] >= staged_out:
                        raise ConfigError(f"config key '{key}.after_files': {entry['after_files']} is not fewer than "
                                          f"the {staged_out} files {entry['step']} of cycle {cycle} stages out "
                                          f"(arm {arm.arm}), so the fault would never fire")
