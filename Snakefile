# cycleio: I/O studies of cycled weather-forecast systems.
# Setup only; rules live in rules/*.smk and logic in scripts/cycleio.
import gc
import os
import sys

from snakemake.utils import min_version

min_version("9.0")
# A long chain of cycles recurses deeply when Snakemake builds the DAG.
sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))
# Building a long study's DAG makes many objects that live until the run ends; at the default thresholds
# the garbage collector rescans them over and over (a fifth of a month's dry run). Relaxed until the DAG is
# built: onstart restores them for the run.
GC_THRESHOLD = gc.get_threshold()
gc.set_threshold(200_000, 100, 1000)
# The cycleio package is imported here and by every job's `python -m cycleio`.
sys.path.insert(0, os.path.join(workflow.basedir, "scripts"))
shell.prefix(
    f"set -euo pipefail; export PYTHONPATH={os.path.join(workflow.basedir, 'scripts')!r}"
    "${{PYTHONPATH:+:$PYTHONPATH}}; "
)

from cycleio.config.calendar import STEP_WILDCARD
from cycleio.config.settings import ConfigError
from cycleio.workflow.study import WorkflowStudy
from cycleio.workflow.preflight import check_study, dry_run_requested
from cycleio.workflow import environment


configfile: os.path.join(workflow.basedir, "config", "config.yaml")


try:
    # The one study of this parse: the rules read its config, jobs, benchmark plan and titles.
    STUDY = WorkflowStudy.load(config)
    # Jobs parse this file again (on cluster nodes too): check the tiers once, up front.
    if workflow.is_main_process:
        for note in check_study(STUDY.study, dry_run=dry_run_requested(sys.argv)):
            print(f"cycleio: {note}", file=sys.stderr)
        if "CONDA" not in str(workflow.deployment_settings.deployment_method).upper():
            problem = environment.job_python_problem()
            problem = problem or environment.parallel_stack_problem(STUDY.study)
            if problem:
                raise ConfigError(problem)
except ConfigError as err:
    sys.exit(f"cycleio: cannot start the study: {err}")


onstart:
    gc.set_threshold(*GC_THRESHOLD)
    # Where the jobs run is known once the workflow starts: a local run's jobs run here, with this
    # environment and MPI launcher, so those are checked now, before the first job. The study's
    # folders on the tiers seen here are claimed for this checkout (a second checkout is refused).
    # A run that would redo jobs reading a cycle the cleanup removed is refused first.
    try:
        problem = STUDY.redone_after_cleanup(job_file)
        if problem:
            raise ConfigError(problem)
        check_study(
            STUDY.study,
            local_exec=workflow.local_exec,
            jobs_here=workflow.local_exec,
            claim=True,
        )
        if workflow.local_exec:
            problem = environment.launcher_problem(STUDY.config["launcher"])
            problem = problem or environment.parallel_launcher_problem(STUDY.study)
            problem = problem or STUDY.bench.local_run_problem()
            if problem:
                raise ConfigError(problem)
    except ConfigError as err:
        sys.exit(f"cycleio: cannot start the study: {err}")


report: "report/workflow.rst"


wildcard_constraints:
    arm=r"[A-Za-z][A-Za-z0-9_]*",
    cycle=r"\d{10}",
    step=STEP_WILDCARD,
    tier=r"[A-Za-z][A-Za-z0-9_]*",
    ntasks=r"\d+",


include: "rules/common.smk"
include: "rules/cycle.smk"
include: "rules/archive.smk"
include: "rules/report.smk"
include: "rules/bench.smk"
include: "rules/answers.smk"


# The tables, figures and answer read only the study's results folder and take seconds each: on a cluster
# they run where Snakemake runs, not as batch jobs of their own waiting in the queue one after another.
localrules:
    all,
    inventory,
    aggregate,
    io_accounting,
    surrogate_vs_log,
    figures,
    write_strategy_figure,
    benchmark_tables,
    scaling_fit,
    benchmark_figures,
    fieldio_figure,
    capacity_plan,
    summary,
    summary_md,
    replay_jobs,
    timeline,
    staging_figure,
    efficiency_heatmap,
    io_gap_figure,


rule all:
    default_target: True
    input:
        # every job's manifest is a target: a job whose manifest is gone is redone, though the tables are newer
        measured_files("manifest.json"),
        rules.aggregate.output,
        rules.io_accounting.output,
        rules.inventory.output,
        rules.figures.output,
        rules.write_strategy_figure.output,
        benchmark_outputs(),
        answer_outputs(),
        rules.surrogate_vs_log.output if SURROGATE_LOGS else [],  # rules/common.smk
