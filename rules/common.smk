# Helpers shared by the rules: the one place that builds output paths.
import json

from cycleio.config.calendar import previous_cycle
from cycleio.surrogates.inventory import cycle_steps


def out(*parts):
    """Every output of the study lives under results/<study>/."""
    return os.path.join("results", STUDY.name, *parts)


def step_file(arm, cycle, step, suffix):
    return out("arms", arm, cycle, f"{step}.{suffix}")


def coldstart_file(arm, suffix):
    return out("arms", arm, f"coldstart.{suffix}")


def arm_settings(wildcards):
    return STUDY.arms[wildcards.arm].to_json()


def step_dependencies(wildcards):
    """Manifests of the steps a step waits on (GDAS order, previous cycle's forecast included)."""
    arm, cycle, step = wildcards.arm, wildcards.cycle, wildcards.step
    if cycle not in STUDY.cycles:
        raise ValueError(f"cycle {cycle} is not a cycle of study {STUDY.name}")
    if step not in jobs_of_cycle(arm, cycle):
        raise ValueError(f"arm {arm} has no job {step} in cycle {cycle}")
    prev = previous_cycle(cycle, config["cycles"]["interval_hours"])
    if step == "cycle":
        if cycle == STUDY.cycles[0]:
            return [coldstart_file(arm, "manifest.json")]
        return [
            step_file(arm, prev, "cycle", "manifest.json"),
            step_file(arm, cycle, "dump", "manifest.json"),
        ]
    if step.startswith("efcs"):
        return [step_file(arm, cycle, "anal", "manifest.json")]
    needs = {
        "prep": [(prev, "post"), (cycle, "dump")],
        "anal": [(cycle, "prep"), (prev, "fcst")],
        "fcst": [(cycle, "anal"), (prev, "fcst")],
        "post": [(cycle, "fcst")],
    }[step]
    if step == "fcst" and cycle == STUDY.cycles[0]:
        return [coldstart_file(arm, "manifest.json")]
    return [step_file(arm, c, s, "manifest.json") for c, s in needs]


def jobs_of_cycle(arm, cycle):
    """The jobs of one cycle of an arm: its steps, or one job for the whole cycle."""
    if STUDY.arms[arm].granularity == "cycle":
        return ["cycle"]
    return list(cycle_steps(cycle, STUDY.cycles[0], STUDY.arms[arm].forecast))


def all_steps():
    """(arm, cycle, job) in chronological order, so the DAG is built from the first cycle on."""
    return [
        (arm, cycle, step)
        for cycle in STUDY.cycles
        for arm in STUDY.arms
        for step in jobs_of_cycle(arm, cycle)
    ]


def all_step_manifests():
    return [
        step_file(arm, cycle, step, "manifest.json") for arm, cycle, step in all_steps()
    ]


def cleanup_dependencies(wildcards):
    """A cycle's data go once its own jobs are done, and every later job that reads them."""
    arm, cycle, keep = wildcards.arm, wildcards.cycle, config["cycles"]["keep"]
    later = STUDY.cycles[STUDY.cycles.index(cycle) + 1 :][:keep]
    done = [
        step_file(arm, c, job, "manifest.json")
        for c in [cycle, *later[:-1]]
        for job in jobs_of_cycle(arm, c)
    ]
    readers = [
        j for j in jobs_of_cycle(arm, later[-1]) if j in ("anal", "fcst", "cycle")
    ]
    return done + [step_file(arm, later[-1], job, "manifest.json") for job in readers]


def all_cleanups():
    """Every cycle but the last ``cycles.keep`` is removed from each arm's persistent tier."""
    keep = config["cycles"]["keep"]
    if not keep:
        return []
    return [
        step_file(arm, cycle, "cleanup", "manifest.json")
        for cycle in STUDY.cycles[:-keep]
        for arm in STUDY.arms
    ]


def all_job_files(suffix):
    """The records or manifests of every job of the study, observation dumps included."""
    dumps = [
        step_file(arm, cycle, "dump", suffix)
        for cycle in STUDY.cycles[1:]
        for arm in STUDY.arms
    ]
    return (
        [coldstart_file(arm, suffix) for arm in STUDY.arms]
        + dumps
        + [step_file(arm, cycle, step, suffix) for arm, cycle, step in all_steps()]
    )


def study_json(wildcards):
    """The study's cycles and every arm's settings, for the inventory table."""
    return json.dumps(
        {"cycles": STUDY.cycles, "arms": [arm.to_json() for arm in STUDY.arms.values()]}
    )


TABLES = [
    "inventory.csv",
    "io_events.parquet",
    "io_events.csv",
    "step_summary.csv",
    "phase_throughput.csv",
]


def study_tables():
    return [out("tables", name) for name in TABLES]


def study_figures():
    return [out("figures", "throughput_by_arm_and_phase.png")]
