# Helpers shared by the rules: the one place that builds output paths. STUDY (the Snakefile's
# cycleio.workflow.study.WorkflowStudy) carries what they read.
import inspect
import os

from cycleio.report.captions import answer_numbers, table_numbers
from cycleio.report.surrogatelog import requests as surrogate_log_requests


def signed(function):
    """``function`` with its signature worked out once: Snakemake inspects an input or params function's signature
    each time it calls it, once per job, which costs a study of thousands of jobs more than the function itself.
    """
    function.__signature__ = inspect.signature(function)
    return function


def out(*parts):
    """Every output of the study lives under results/<study>/."""
    return os.path.join("results", STUDY.name, *parts)


ARMS = out("arms")  # joined once: the DAG asks for tens of thousands of job files


def step_file(arm, cycle, step, suffix):
    return f"{ARMS}/{arm}/{cycle}/{step}.{suffix}"


def arm_file(arm, job, suffix):
    """A job made once per arm: the cold start, the replay jobs' input files (darshan_inputs)."""
    return f"{ARMS}/{arm}/{job}.{suffix}"


def job_file(job, suffix="manifest.json"):
    """A job's manifest or records (a cycleio.workflow.dependencies.Job)."""
    if job.cycle is None:
        return arm_file(job.arm, job.name, suffix)
    return step_file(job.arm, job.cycle, job.name, suffix)


def job_files(jobs, suffix="manifest.json"):
    return [job_file(job, suffix) for job in jobs]


def measured_files(suffix):
    """Every measured job's records or manifest, as an input function: a list of tens of thousands of files
    given to Snakemake at parse time costs it more than one returned when the job asking for it is built.
    """
    return lambda wildcards: job_files(STUDY.jobs.measured_jobs(), suffix)


def job_settings(job=None):
    """params: the settings an arm's job reads (its step from the wildcards unless named here), with
    the faults aimed at its cycle's job, so that a changed setting marks only the jobs that read it
    for a rerun."""

    @signed
    def settings(wildcards):
        return STUDY.job_json(
            wildcards.arm, job or wildcards.step, wildcards.get("cycle")
        )

    return settings


@signed
def step_dependencies(wildcards):
    """Manifests of the jobs a step's job waits on (GDAS order, previous cycle's forecast included)."""
    return job_files(
        STUDY.jobs.dependencies(wildcards.arm, wildcards.cycle, wildcards.step)
    )


@signed
def archive_dependencies(wildcards):
    """Manifests of the jobs whose files an archive job reads (and checks against their checksums)."""
    return job_files(
        STUDY.jobs.archive_dependencies(wildcards.arm, wildcards.cycle, wildcards.step)
    )


@signed
def cleanup_dependencies(wildcards):
    """A cycle's data go once its own jobs are done, and every later job that reads them."""
    return job_files(STUDY.jobs.cleanup_dependencies(wildcards.arm, wildcards.cycle))


# Real jobs' Darshan logs beside the steps they stand for (config darshan.jobs.<name>.stands_for), each with the
# step's manifest: tables/surrogate_vs_log.csv (rules/report.smk), asked for by the default target when there are any.
SURROGATE_LOGS = [
    {
        **request,
        "manifest": step_file(
            request["arm"], request["cycle"], request["step"], "manifest.json"
        ),
    }
    for request in surrogate_log_requests(STUDY.study)
]


# The report's categories: the questions a study answers, in the order a reader asks them.
REPORT = {
    "answer": "1. The answer",
    "time": "2. Where does a cycle's time go?",
    "staging": "3. What does staging buy?",
    "efficiency": "4. How close do the steps come to the tier?",
    "strategy": "5. Which write strategy hides the most I/O?",
    "scale": "6. Does it scale, and what would the target need?",
    "data": "7. Provenance and every record",
}


def numbers(wildcards, input, output):
    """params.numbers: a sentence of this study's numbers per table the job reads or writes (read when the
    report is made; derived from files, so no reason to run the job again)."""
    return table_numbers(*input, *output)


# The benchmarks' and the answer layer's files (rules/bench.smk, rules/answers.smk)
def answer(wildcards, input):
    """params.answer: the study's numbers for the captions (read when the report is made)."""
    return answer_numbers(
        input.get("answers"), input.get("fits"), input.get("capacity")
    )


def bench_tables(name):
    """A benchmark table as an input, or nothing when the benchmarks are off."""
    return getattr(rules.benchmark_tables.output, name) if STUDY.bench.enabled else []


def scaling_fits():
    return rules.scaling_fit.output[0] if STUDY.bench.enabled else []


def capacity_table():
    return rules.capacity_plan.output[0] if STUDY.bench.enabled else []


def replay_job_files():
    """The replay jobs' manifests (config darshan.jobs), which tables/replay_jobs.csv reads."""
    return job_files(
        job for job in STUDY.jobs.step_jobs() if job.name.startswith("darshan_")
    )


def replay_jobs_table():
    """tables/replay_jobs.csv as an input, or nothing in a study without replay jobs."""
    return rules.replay_jobs.output[0] if replay_job_files() else []


def benchmark_outputs():
    """The benchmarks' tables and figures, which the default target asks for."""
    if not STUDY.bench.enabled:
        return []
    files = [*rules.benchmark_tables.output, *rules.benchmark_figures.output]
    if STUDY.bench.point_list("fieldio"):
        files += rules.fieldio_figure.output
    return files


def answer_outputs():
    """The answer layer's files, which the default target asks for."""
    files = [
        *rules.summary.output,
        *rules.summary_md.output,
        *rules.timeline.output,
        *rules.staging_figure.output,
    ]
    if STUDY.bench.enabled:
        files += [
            *rules.scaling_fit.output,
            *rules.capacity_plan.output,
            *rules.efficiency_heatmap.output,
            *rules.io_gap_figure.output,
        ]
    return files
