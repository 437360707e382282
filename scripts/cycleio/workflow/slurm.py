"""Slurm resources of the cycled jobs, derived from an arm's settings.

The Snakemake Slurm executor plugin turns a rule's resources into ``sbatch`` options: ``nodes``,
``tasks``, ``cpus_per_task``, ``mem_mb`` (``--mem``), ``runtime`` (minutes, ``-t``), ``mpi`` (the
job's shell runs directly in the allocation, so it can start its ranks with ``srun``) and
``slurm_extra`` (appended verbatim; it may not carry options the plugin sets itself, such as -p,
-A, --mem, -n, -c, -t, -J or -o). This module computes them from what the arm does:

- **runtime** scales with the bytes the job reads and writes (from the step's file inventory and
  the resolution), staging copies included, plus the configured compute stand-in;
- **mem_mb** scales with one 2-D plane of the history grid per rank, since the writers hold about
  one plane at a time whatever the resolution;
- **tasks** are the forecast's MPI ranks (compute ranks plus quilt writer ranks, from the arm's
  strategy and ``write_component``); the other steps are one task. A job with more than one task
  gets ``mpi``, so the plugin runs its shell in the allocation and the arm's launcher
  (``srun -n {ntasks}`` on Slurm) starts the ranks;
- **cpus_per_task** follows the staging of a staged job: one CPU per copy stream
  (``staging.streams``), spread over the job's tasks (the copies run before and after the
  forecast's ranks, never beside them); Snakemake's ``threads`` of the job are the same number;
- **nodes** and tasks per node come from config ``job_layout`` (:func:`job_layout`): a step's own
  ``nodes`` or ``tasks_per_node`` spread its ranks over nodes, whatever the tier (the runner then stages
  on every node of a tier not shared across them: runner.nodes); left null, a job whose scratch tier is
  not shared (node-local disk, memory) runs on one node, and one on a shared tier where Slurm places it.
  ``mem_mb`` is per node (``sbatch --mem``): the ranks of one node. A forecast whose ranks may span
  nodes cannot write shared files (``parallel``, ``quilt_parallel``) on a tier not shared across nodes:
  :func:`shared_file_problem` says so, and the cluster check refuses the study before any job;
- **slurm_extra** carries ``--ntasks-per-node`` for a job over several nodes (the plugin takes ``tasks``
  or ``tasks_per_node``, not both, and no ``tasks_per_node`` of 1), and ``--bb '<directive>'`` when the
  scratch tier is a job burst buffer (DataWarp ``#DW jobdw ...`` or Slurm's Lua plugin ``#BB_LUA ...``).

Jobs that write only the persistent tier (``coldstart``, the observation ``dump``) use no scratch
and ask for no burst buffer. The cycle's archive job (``arch``) uses no scratch either: one task on
one node, one CPU (it reads, hashes and writes one stream), the base memory (it holds 8 MiB
transfers, never a field), and a runtime from its tarballs' bytes at the study's resolution (read
off the persistent tier, written to the archive tier, read back), plus its paired replay; so does each
ensemble archive job (``earcNN``), with the bytes of its group's tarball.

Everything here is a pure function of the settings; the rules call :func:`rule_resources` and a
site overrides any value in its profile (``set-resources``). Local runs ignore these resources.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

from ..config.calendar import FULL_CYCLE_STEPS, is_archive_job
from ..config.settings import SHARED_FILE_STRATEGIES
from ..surrogates.forecast.layout import RankLayout, forecast_ntasks
from ..surrogates.grid import Grid
from ..config.forecast import Compression, cycle_steps
from ..surrogates.archive_lists import plan_cycle
from ..surrogates.inventory import FileSpec, coldstart_files, step_io
from ..surrogates.kinds import expected_bytes
from ..storage.archive import tar_bytes
from ..storage.bbrequest import burst_buffer_request
from ..units import MiB
from ..config.keys import DARSHAN_INPUTS, DARSHAN_PREFIX, is_replay_job
from .darshanjobs import replay_job_files

RESOURCE_KEYS = ("nodes", "tasks", "cpus_per_task", "mem_mb", "runtime", "mpi", "slurm_extra")
PERSISTENT_ONLY = ("coldstart", "dump", DARSHAN_INPUTS)  # jobs that write the persistent tier and stage nothing
ARCHIVE = "arch"  # the cycle's archive job: persistent tier -> archive tier, no scratch (so are the earcNN jobs)
NO_SCRATCH = (*PERSISTENT_ONLY, ARCHIVE)


def uses_scratch(step: str) -> bool:
    """Whether a job of this kind may stage on scratch: not the cold start, the dumps or an archive job."""
    return step not in NO_SCRATCH and not is_archive_job(step)


@dataclass(frozen=True)
class Scale:
    """The assumptions behind the estimates; conservative so a job is not killed at its time limit.

    Measured on a 2-core VM with local disk, counting bytes as :func:`runtime_minutes` does
    (uncompressed reads and writes, staging copies and verification): 240-600 MiB/s per job from C48
    to C768 (45-55 MiB/s of netCDF written, synthetic data generation included); peak RSS 100 MB (C12)
    to 700 MB (C768). The rate assumed here is a few times lower, for slower shared filesystems.
    """

    mib_per_s: float = 100.0  # bytes moved per second by one job (reads, writes, copies, verification)
    overhead_s: float = 120.0  # job start, Python and Snakemake start-up, tier probing
    safety: float = 1.5  # margin on the estimated seconds
    min_runtime_min: int = 10
    base_mem_mb: int = 400  # Python, numpy, netCDF4/HDF5 in one rank
    planes_in_memory: int = 40  # 2-D float32 planes of the history grid one rank may hold at once
    min_mem_mb: int = 1000


DEFAULT_SCALE = Scale()


def estimated_file_bytes(spec: FileSpec, grid: Grid) -> int:
    """Uncompressed size of one inventory file: the work of generating it, whatever the compression."""
    return expected_bytes(spec, grid, Compression())


def job_steps(settings, step: str, cycle: str | None = None) -> list[str]:
    """The steps one job runs: one step, or all steps of a cycle (granularity ``cycle``)."""
    if step != "cycle":
        return [step]
    return list(cycle_steps(cycle, settings.start, settings.forecast)) if cycle else list(FULL_CYCLE_STEPS)


def archive_bytes(settings, cycle: str | None = None, job: str = ARCHIVE) -> int:
    """The tarball bytes of one cycle's archive job, ``arch`` or ``earcNN`` (the inventory's expected members, tar
    headers included)."""
    if not settings.archive:
        return 0
    plans = plan_cycle(settings, cycle or settings.start, job)
    return sum(tar_bytes(members) for parts in plans.values() for _, members in parts)


def job_bytes(settings, step: str, cycle: str | None = None) -> tuple[int, int]:
    """Estimated (bytes read, bytes written) of one job of an arm."""
    grid = Grid(settings.resolution, settings.levels)
    if is_archive_job(step):  # the members off the persistent tier, the tarballs to the archive tier
        tarred = archive_bytes(settings, cycle, step)
        return tarred, tarred
    if step == "coldstart":
        return 0, sum(estimated_file_bytes(spec, grid) for spec in coldstart_files(settings.start))
    if is_replay_job(step):  # a replay job from a Darshan log: its log's bytes at its scale
        files = replay_job_files(settings, step)
        return files.read_bytes, files.write_bytes
    if step == DARSHAN_INPUTS:
        return 0, sum(size for name in settings.darshan["jobs"]
                      for _, size in replay_job_files(settings, DARSHAN_PREFIX + name).inputs)
    cycle = cycle or settings.start
    reads = writes = 0
    for name in job_steps(settings, step, cycle):
        io = step_io(name, cycle, settings.start, settings.forecast)
        reads += sum(estimated_file_bytes(spec, grid) for spec in io.reads)
        writes += sum(estimated_file_bytes(spec, grid) for spec in io.writes)
    return reads, writes


def job_tasks(settings, step: str, cycle: str | None = None) -> int:
    """Slurm tasks of one job: the forecast's MPI ranks when the job runs the forecast, a replay job's ranks, else 1."""
    if is_replay_job(step):
        return settings.darshan["jobs"][step.removeprefix(DARSHAN_PREFIX)]["ranks"]
    if not uses_scratch(step) or "fcst" not in job_steps(settings, step, cycle):
        return 1
    return forecast_ntasks(settings)


def compute_seconds(settings, step: str, cycle: str | None = None) -> float:
    """The configured compute stand-in of the job's steps."""
    if not uses_scratch(step):
        return 0.0
    total = 0.0
    for name in job_steps(settings, step, cycle):
        if name == "fcst":
            total += settings.compute_seconds_per_hour * settings.forecast.forecast_hours
        else:
            total += (settings.step_compute_seconds or {}).get(name, 0.0)
    return total


def job_threads(settings, step: str) -> int:
    """CPUs one job keeps busy at once on each of its nodes: a staged job's copy streams (each reads, hashes and
    writes; the write-behind thread and the job's main thread mostly wait on storage), else one."""
    if not uses_scratch(step) or not settings.staged:
        return 1
    return max(1, settings.staging.streams)


def cpus_per_task(settings, step: str, cycle: str | None = None) -> int:
    """``cpus_per_task`` of one job: its threads spread over the tasks of one node, so each node the job stages
    on holds at least as many CPUs as it has copy streams."""
    nodes, per_node = job_layout(settings, step, cycle)
    tasks = job_tasks(settings, step, cycle)
    return math.ceil(job_threads(settings, step) / (per_node or tasks))


def runtime_minutes(settings, step: str, cycle: str | None = None, attempt: int = 1,
                    scale: Scale = DEFAULT_SCALE) -> int:
    """Wall-clock limit (minutes) of one job; a retry gets ``attempt`` times as long."""
    reads, writes = job_bytes(settings, step, cycle)
    staged = uses_scratch(step) and settings.staged
    # baseline: read inputs, write outputs, read them back to verify; staged: copy both ways too
    moved = (reads + writes) * (3 if staged else 1) + writes
    if settings.replay and step not in PERSISTENT_ONLY and cycle in settings.paired_cycles:
        # the paired replay, inside the job: each repetition lays out, reads twice and writes the step's bytes again
        moved += (3 * reads + writes) * settings.replay.get("repetitions", 2)
    seconds = scale.overhead_s + moved / MiB / scale.mib_per_s + compute_seconds(settings, step, cycle)
    return max(scale.min_runtime_min, math.ceil(scale.safety * seconds / 60)) * max(1, attempt)


def mem_mb_per_task(settings, scale: Scale = DEFAULT_SCALE) -> int:
    """Memory of one rank: a few planes of the history grid over a fixed base, rounded up to 100 MB."""
    grid = Grid(settings.resolution, settings.levels)
    plane_mb = grid.nx * grid.ny * 4 / 1e6
    return max(scale.min_mem_mb, 100 * math.ceil((scale.base_mem_mb + scale.planes_in_memory * plane_mb) / 100))


def mem_mb(settings, step: str, cycle: str | None = None, attempt: int = 1, scale: Scale = DEFAULT_SCALE) -> int:
    """Memory of one job on each of its nodes (``sbatch --mem``): per-rank memory times the ranks of a node (all of
    them where Slurm places the ranks); a retry gets more."""
    nodes, per_node = job_layout(settings, step, cycle)
    return mem_mb_per_task(settings, scale) * (per_node or job_tasks(settings, step, cycle)) * max(1, attempt)


LAYOUT_STEPS = ("fcst", "prep", "anal", "post")  # config job_layout's steps


def layout_entry(settings, step: str, cycle: str | None = None) -> tuple[str, dict]:
    """The config ``job_layout`` entry a job follows and its step: its own step's, fcst's for a cycle's job that
    runs the forecast; ("", {}) for the jobs it does not cover."""
    own = settings.job_layout if getattr(settings, "job_layout", None) else {}
    if step == "cycle" and "fcst" in job_steps(settings, step, cycle):
        step = "fcst"
    entry = {key: value for key, value in (own.get(step) or {}).items() if value is not None}
    return (step, entry) if step in LAYOUT_STEPS else ("", {})


def job_layout(settings, step: str, cycle: str | None = None) -> tuple[int | None, int | None]:
    """(nodes, tasks per node) of one job; None: Slurm's choice.

    Config ``job_layout`` gives a step's nodes, its tasks per node, or both; one given, the other follows from the
    job's tasks. Neither given: one node for one task, and for a staged job whose scratch tier is not shared
    (it stages on the node where it starts); otherwise the nodes are Slurm's choice, tasks per node too.
    """
    tasks = job_tasks(settings, step, cycle)
    _, entry = layout_entry(settings, step, cycle)
    nodes, per_node = entry.get("nodes"), entry.get("tasks_per_node")
    if nodes is None and per_node is None:
        scratch_used = uses_scratch(step) and settings.staged
        shared_scratch = getattr(settings.scratch, "shared", True) if scratch_used else True
        return (1, None) if tasks == 1 or not shared_scratch else (None, None)
    if per_node is None:
        per_node = math.ceil(tasks / nodes)
    if nodes is None:
        nodes = math.ceil(tasks / per_node)
    return nodes, per_node


def layout_problem(arm: str, settings, step: str, cycle: str | None = None) -> str | None:
    """Why a job's ``job_layout`` cannot hold its tasks, or None: more nodes than tasks, fewer task slots than
    tasks, or more slots than tasks (a node left without a rank)."""
    key, entry = layout_entry(settings, step, cycle)
    if not entry:
        return None
    tasks = job_tasks(settings, step, cycle)
    nodes, per_node = job_layout(settings, step, cycle)
    given = ", ".join(f"job_layout.{key}.{name}={value}" for name, value in entry.items())
    what = ("the forecast's ranks: write_component.ranks plus the quilt strategies' writer ranks" if key == "fcst"
            else f"the {key} job's one task")
    if nodes > tasks:
        return f"arm {arm}: {given} asks for {nodes} nodes, but the {step} job has {tasks} tasks ({what}); give at most {tasks} nodes"
    if nodes * per_node < tasks:
        return (f"arm {arm}: {given} gives {nodes} nodes x {per_node} tasks, fewer than the {step} job's {tasks} tasks "
                f"({what}); raise job_layout.{key}.nodes or job_layout.{key}.tasks_per_node")
    if (nodes - 1) * per_node >= tasks:
        return (f"arm {arm}: {given} leaves a node without tasks: the {step} job has {tasks} tasks ({what}), which "
                f"fill {math.ceil(tasks / per_node)} nodes of {per_node}; lower job_layout.{key}.nodes")
    return None


def job_nodes(settings, step: str, cycle: str | None = None) -> int | None:
    """Nodes of one job (:func:`job_layout`); None: Slurm's choice. A profile's ``set-resources`` may set
    another number."""
    return job_layout(settings, step, cycle)[0]


def may_span_nodes(nodes: int | None, tasks: int) -> bool:
    """Whether a job's ranks may run on more than one node: several tasks and a node count above one,
    or none given (Slurm's choice)."""
    return tasks > 1 and (nodes is None or nodes > 1)


def shared_file_problem(arm: str, settings, step: str, nodes: int | None, cycle: str | None = None,
                        nodes_from: str = "") -> str | None:
    """Why a job of an arm cannot run on ``nodes`` nodes (None: Slurm's choice), or None when it can.

    On a staged scratch tier that is not shared across nodes (``shared: false``: node-local disk, memory) each
    node holds only what its own ranks wrote. A shared-file strategy (``parallel``, ``quilt_parallel``) has many
    ranks write parts of one file: no node would hold a whole file to stage out. ``per_rank`` combines each
    file's pieces, written by every rank, into the file (the later steps read whole files), after each output hour
    or at the end (``write_component.combine_per_rank``): the rank combining it would not see the other nodes'
    pieces, whichever the key says. A granularity-cycle job runs post after the forecast on its first node, which
    does not hold the files written on the others. ``nodes_from`` names where a node count comes from (a key), for the message.
    """
    if not (uses_scratch(step) and settings.staged):
        return None
    tier = settings.scratch
    if getattr(tier, "shared", True) or "fcst" not in job_steps(settings, step, cycle):
        return None
    tasks = job_tasks(settings, step, cycle)
    if not may_span_nodes(nodes, tasks):
        return None
    spread = f"{nodes} nodes ({nodes_from})" if nodes is not None else "as many nodes as Slurm chooses"
    fix = f", or set {nodes_from} to 1" if nodes_from else ""
    where = (f"the {step} job's {tasks} ranks may run on {spread}, but its scratch tier '{tier.name}' is not shared "
             f"across nodes (tiers.{tier.name}.shared: false)")
    if settings.strategy in SHARED_FILE_STRATEGIES:
        return (f"arm {arm}: write strategy '{settings.strategy}' writes each file from many ranks at once, and {where}: "
                "each node would hold only its ranks' parts of a file. Use a strategy that writes whole files (serial, "
                f"quilt; config key write_strategies) or a scratch tier shared across nodes (config key scratch_tiers){fix}")
    if settings.strategy == "per_rank":
        at_end = combine_at_end(settings)
        when = "at the end of the forecast" if at_end else "after each output hour"
        return (f"arm {arm}: write strategy 'per_rank' combines each file from the pieces every rank wrote ({when}, "
                f"config key write_component.combine_per_rank: {str(at_end).lower()}; the later "
                f"steps read whole files, so the pieces are combined either way), and {where}: "
                "the rank combining a file would not see the other nodes' pieces. Use serial or quilt (config key "
                f"write_strategies) or a scratch tier shared across nodes (config key scratch_tiers){fix}")
    if step == "cycle" and nodes is not None:
        return (f"arm {arm}: a granularity-cycle job runs post after the forecast on its first node, and {where}: "
                "post would not find the files written on the other nodes. Use staging.granularity: step (each step "
                f"its own job) or a scratch tier shared across nodes (config key scratch_tiers){fix}")
    return None


def combine_at_end(settings) -> bool:
    """Whether a per_rank arm combines its pieces at the end of the forecast (``write_component.combine_per_rank``)."""
    return RankLayout.from_settings(settings.strategy, settings.write_component).combine_at_end


def layout_problems(study) -> list[str]:
    """Every arm's steps whose config ``job_layout`` cannot hold their tasks (:func:`layout_problem`), and arms
    whose forecast the layout spreads over nodes where it cannot run (:func:`shared_file_problem`); one line each."""
    problems = []
    for arm, settings in study.arms.items():
        for step in ("cycle",) if settings.granularity == "cycle" else LAYOUT_STEPS:
            problem = layout_problem(arm, settings, step)
            key, entry = layout_entry(settings, step)
            if problem is None and entry:
                problem = shared_file_problem(arm, settings, step, job_nodes(settings, step), None,
                                              f"job_layout.{key}.nodes")
            if problem:
                problems.append(problem)
    return problems


def slurm_resources(settings, step: str, cycle: str | None = None, attempt: int = 1,
                    scale: Scale = DEFAULT_SCALE) -> dict:
    """Every Slurm resource of one job of an arm (``step``: coldstart, dump, prep, anal, fcst, post, cycle, arch,
    earcNN).

    ``None`` means "leave it to Slurm" (Snakemake drops resources whose value is None).
    """
    tasks = job_tasks(settings, step, cycle)
    scratch_used = uses_scratch(step) and settings.staged
    nodes, per_node = job_layout(settings, step, cycle)
    extra = [f"--ntasks-per-node={per_node}"] if nodes is not None and nodes > 1 else []
    if scratch_used and burst_buffer_request(settings.scratch):
        extra.append(burst_buffer_request(settings.scratch))
    return {
        "nodes": nodes,
        "tasks": tasks,
        "cpus_per_task": cpus_per_task(settings, step, cycle),
        "mem_mb": mem_mb(settings, step, cycle, attempt, scale),
        "runtime": runtime_minutes(settings, step, cycle, attempt, scale),
        "mpi": "srun" if tasks > 1 else None,
        "slurm_extra": " ".join(extra),
    }


def rule_resources(arms: Mapping[str, object], step: str | None = None) -> dict[str, Callable]:
    """Resource functions for a rule with an ``{arm}`` wildcard (and ``{cycle}``, ``{step}`` unless
    ``step`` is given): ``resources: **rule_resources(STUDY.arms)``.
    """
    computed: dict[tuple, dict] = {}  # one estimate per job, however many resources ask for it

    def resource(key: str) -> Callable:
        def value(wildcards, attempt):
            job = (wildcards.arm, step or wildcards.step, getattr(wildcards, "cycle", None), attempt)
            if job not in computed:
                computed[job] = slurm_resources(arms[job[0]], *job[1:])
            return computed[job][key]

        return value

    return {key: resource(key) for key in RESOURCE_KEYS}


def rule_threads(arms: Mapping[str, object], step: str | None = None) -> Callable:
    """``threads`` of a rule with an ``{arm}`` wildcard (and ``{step}`` unless ``step`` is given):
    ``threads: rule_threads(STUDY.arms)``. Local runs give a job at most ``--cores``."""

    def threads(wildcards) -> int:
        return job_threads(arms[wildcards.arm], step or wildcards.step)

    return threads
