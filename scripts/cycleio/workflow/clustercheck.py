"""The cluster checked before any job of a study is submitted (``make study PROFILE=...``).

A workflow profile whose executor is ``slurm`` sends every job to Slurm. Before the first ``sbatch``,
this module asks the cluster itself what it offers and compares it with what the profile and the study
ask for:

- Slurm answers here (``sinfo``; a ``SLURM_CONF`` naming no file is refused at once, since Slurm's
  clients then retry for a minute);
- the profile's partition (``default-resources`` and every ``set-resources`` rule), and its account
  and QoS where set, are known to the cluster; the shipped placeholder ``SITE_PARTITION`` is refused
  until a site sets its own;
- the largest job the study makes (tasks x CPUs per task and memory, as workflow.slurm derives them
  for the steps, and the benchmarks' tasks) fits on a node of its partition, and the profile's
  default memory does too; a job spread over nodes (config ``job_layout``) fits with its tasks per
  node on a node, and its nodes in the partition;
- no forecast writes shared files (``parallel``, ``quilt_parallel``) on a scratch tier that is not shared
  across nodes while its ranks may span nodes (a profile's ``nodes`` above 1, or none given where
  workflow.slurm leaves the placement to Slurm);
- the burst-buffer pools the study's scratch tiers ask for (``pool=`` in ``tiers.<name>.burst_buffer``)
  exist (``scontrol show burst``);
- the MPI launcher (config key ``launcher``) is a program found here, and an ``srun`` launcher gets an
  MPI plugin (``--mpi=`` or the cluster's ``MpiDefault``), without which its ranks are singletons.

Each problem is one line naming the profile key or config key and what to set. Parsing is pure and
tested on recorded ``scontrol``/``sinfo`` output; :func:`check_cluster` runs the commands.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import yaml

from ..benchmarks.specs import parse_shape
from ..benchmarks.tierbench import BenchmarkPlan
from ..process import run_command
from .dependencies import CycledJobs
from .slurm import job_layout, shared_file_problem, slurm_resources

PARTITION_PLACEHOLDER = "SITE_PARTITION"
SLURM_TIMEOUT_S = 30.0
# the rule each job kind runs in (rules/*.smk): set-resources of the profile apply by rule name
STEP_RULE = {"coldstart": "coldstart", "dump": "obs_dump"}
BENCH_RULES = {"io": "bench_point", "metadata": "bench_point", "fieldio": "bench_fieldio"}

Runner = Callable[[list[str]], tuple[int, str]]  # argv -> (exit status, stdout and stderr)


class ClusterError(ValueError):
    """The cluster cannot run the study as the profile asks: one line per problem."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


# --------------------------------------------------------------------------- the profile


def _resource_map(value, where: str) -> dict[str, str]:
    """``default-resources`` as a mapping, or as a list of ``key=value`` words (both are Snakemake's)."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k): _unquote(v) for k, v in value.items()}
    if isinstance(value, list):
        out = {}
        for item in value:
            key, sep, text = str(item).partition("=")
            if not sep:
                raise ClusterError([f"{where}: {item!r} is not key=value"])
            out[key.strip()] = _unquote(text)
        return out
    raise ClusterError([f"{where}: expected a mapping or a list of key=value, got {type(value).__name__}"])


def _unquote(value) -> str:
    text = str(value).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    return text


@dataclass(frozen=True)
class Profile:
    """What a workflow profile asks of the cluster."""

    path: str
    executor: str = "local"
    defaults: dict[str, str] = field(default_factory=dict)  # default-resources
    rules: dict[str, dict[str, str]] = field(default_factory=dict)  # set-resources, by rule

    @classmethod
    def read(cls, folder: str | os.PathLike) -> "Profile":
        config = Path(folder) / "config.yaml"
        try:
            data = yaml.safe_load(config.read_text()) or {}
        except OSError as err:
            raise ClusterError([f"PROFILE={folder}: {config} cannot be read ({err.strerror}); "
                                "give a profile folder holding config.yaml, e.g. PROFILE=profiles/slurm"]) from None
        except yaml.YAMLError as err:
            raise ClusterError([f"PROFILE={folder}: {config} is not valid YAML ({err})"]) from None
        if not isinstance(data, dict):
            raise ClusterError([f"PROFILE={folder}: {config} holds no keys"])
        rules = {str(rule): _resource_map(values, f"{config}: set-resources: {rule}")
                 for rule, values in (data.get("set-resources") or {}).items()}
        return cls(str(folder), str(data.get("executor", "local")),
                   _resource_map(data.get("default-resources"), f"{config}: default-resources"), rules)

    def get(self, rule: str | None, key: str) -> tuple[str | None, str]:
        """The value a rule's jobs get for a resource and the profile key it comes from."""
        if rule and key in self.rules.get(rule, {}):
            return self.rules[rule][key], f"set-resources: {rule}: {key}"
        return self.defaults.get(key), f"default-resources: {key}"

    def key(self, where: str) -> str:
        return f"{self.path}/config.yaml {where}"

    def override(self, rule: str, key: str, derived):
        """A rule's set-resources value of a numeric resource, or the derived one."""
        value = self.rules.get(rule, {}).get(key)
        return int(float(value)) if value not in (None, "") else derived


# --------------------------------------------------------------------------- what the cluster says


def parse_records(text: str) -> list[dict[str, str]]:
    """``scontrol show ... -o`` output: one record per line, ``Key=Value`` words."""
    records = []
    for line in text.splitlines():
        words = dict(word.split("=", 1) for word in line.split() if "=" in word)
        if words:
            records.append(words)
    return records


@dataclass(frozen=True)
class Node:
    name: str
    cpus: int
    mem_mb: int


def parse_nodes(text: str) -> list[Node]:
    """``sinfo -h -N -o %N|%c|%m`` output (memory in MB; a trailing + as sinfo prints for ranges)."""
    nodes = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3:
            name, cpus, mem = (p.strip().rstrip("+") for p in parts)
            if cpus.isdigit() and mem.isdigit():
                nodes.append(Node(name, int(cpus), int(mem)))
    return nodes


def parse_pools(text: str) -> set[str]:
    """Burst-buffer pool names in ``scontrol show burst``: ``PoolName[i]=NAME`` (Lua, DataWarp) and
    a plugin's ``DefaultPool=NAME``."""
    pools = set(re.findall(r"PoolName\[\d+\]=(\S+)", text))
    pools |= {p for p in re.findall(r"DefaultPool=(\S+)", text) if p != "(null)"}
    return pools


def requested_pool(directive: str) -> str | None:
    """The pool a burst-buffer directive names (``pool=NAME``), or None."""
    match = re.search(r"\bpool=(\S+)", directive)
    return match.group(1) if match else None


def limit(value: str | None) -> int | None:
    """A partition limit (``MaxCPUsPerNode``, ``MaxMemPerNode``): None when unlimited."""
    return int(value) if value and value.isdigit() else None


# --------------------------------------------------------------------------- what the study asks


@dataclass(frozen=True)
class JobSize:
    """One job's request: where it comes from (for the message), its rule, tasks, CPUs, memory (per node), and its
    nodes with the tasks on each (``nodes`` None: Slurm's choice; ``tasks_per_node`` None: all on one node if
    ``nodes`` is 1, else Slurm's choice)."""

    what: str
    rule: str
    tasks: int
    cpus_per_task: int
    mem_mb: int
    nodes: int | None = 1
    tasks_per_node: int | None = None

    @property
    def one_node(self) -> bool:
        return self.nodes == 1

    @property
    def node_tasks(self) -> int:
        """Tasks on one node: all of them on one node, the layout's tasks per node over several."""
        return self.tasks if self.one_node else (self.tasks_per_node or 1)

    @property
    def cpus(self) -> int:
        return self.tasks * self.cpus_per_task

    @property
    def node_cpus(self) -> int:
        return self.node_tasks * self.cpus_per_task


def study_jobs(filled: dict, study, profile: Profile) -> list[JobSize]:
    """The requests of the study's jobs, one per distinct size: its steps (workflow.slurm, first attempt)
    and benchmarks, each with the profile's set-resources laid over it."""

    override = profile.override

    jobs: dict[tuple, JobSize] = {}

    def add(what: str, rule: str, tasks: int, cpus: int, mem: int, nodes: int | None,
            per_node: int | None = None) -> None:
        tasks, cpus, mem = override(rule, "tasks", tasks), override(rule, "cpus_per_task", cpus), override(rule, "mem_mb", mem)
        key = (rule, tasks, cpus, mem, nodes, per_node)
        if key not in jobs:
            jobs[key] = JobSize(what, rule, tasks, cpus, mem, nodes, per_node)

    cycled = CycledJobs.of_study(study)
    seen = set()
    for job in [*cycled.measured_jobs(), *cycled.step_jobs()]:
        settings = study.arms[job.arm]
        # a job's size depends on its step and arm, on the first (half) cycle and on paired cycles
        sig = (job.arm, job.name, job.cycle == study.cycles[0], job.cycle in (settings.paired_cycles or ()))
        if sig in seen or job.name == "cleanup":
            continue
        seen.add(sig)
        res = slurm_resources(settings, job.name, job.cycle)
        rule = STEP_RULE.get(job.name, "cycle_step")
        nodes = job_nodes(profile, rule, res["nodes"])[0]
        per_node = job_layout(settings, job.name, job.cycle)[1] if nodes == res["nodes"] else None
        add(f"arm {job.arm}, {job.name}", rule, res["tasks"], res["cpus_per_task"], res["mem_mb"], nodes, per_node)
    plan = BenchmarkPlan.from_config(filled)
    if plan.enabled:
        default_mem = int(float(profile.defaults.get("mem_mb") or 0))
        for kind, tier, pattern, shape in plan.points:
            nodes, tasks = parse_shape(shape)
            shared = plan.tiers[tier].shared
            # over several nodes: each of its nodes runs its tasks per node (benchmarks.tierbench.point_resources)
            add(f"benchmark {kind} {pattern} on tier {tier} with {plan.describe(shape)}",
                BENCH_RULES.get(kind, "bench_point"), tasks, 1, default_mem,
                1 if tasks == 1 or not shared or nodes > 1 else None)
    return list(jobs.values())


def job_nodes(profile: Profile, rule: str, derived: int | None) -> tuple[int | None, str]:
    """A rule's jobs' node count and the profile key it comes from ("" when derived): the rule's
    set-resources, else the derived count, else default-resources (Snakemake drops a None resource)."""
    if "nodes" in profile.rules.get(rule, {}):
        return profile.override(rule, "nodes", derived), profile.key(f"set-resources: {rule}: nodes")
    if derived is None and profile.defaults.get("nodes"):
        return int(float(profile.defaults["nodes"])), profile.key("default-resources: nodes")
    return derived, ""


def shared_file_problems(study, profile: Profile) -> list[str]:
    """Arms whose forecast writes shared files on scratch not shared across nodes, with ranks that may span
    nodes (workflow.slurm.shared_file_problem): one line per arm."""
    problems, seen, refused = [], set(), set()
    for job in CycledJobs.of_study(study).step_jobs():
        sig = (job.arm, job.name, job.cycle == study.cycles[0])
        if job.arm in refused or sig in seen:
            continue
        seen.add(sig)
        settings = study.arms[job.arm]
        rule = STEP_RULE.get(job.name, "cycle_step")
        nodes, source = job_nodes(profile, rule, slurm_resources(settings, job.name, job.cycle)["nodes"])
        problem = shared_file_problem(job.arm, settings, job.name, nodes, job.cycle, source)
        if problem:
            refused.add(job.arm)
            problems.append(problem)
    return problems


def burst_buffer_tiers(filled: dict, study) -> dict[str, str]:
    """Tier name -> burst-buffer directives of the tiers the study's jobs run on."""
    used = {arm.scratch.name for arm in study.arms.values() if arm.scratch is not None}
    plan = BenchmarkPlan.from_config(filled)
    if plan.enabled:
        used |= {tier for _, tier, _, _ in plan.points}
    tiers = filled.get("tiers") or {}
    return {name: tiers[name].get("burst_buffer") or "" for name in sorted(used)
            if name in tiers and tiers[name].get("burst_buffer")}


def launchers(study) -> dict[str, str]:
    """Config key -> launcher template of the arms that start MPI ranks."""
    found = {}
    for arm in study.arms.values():
        if arm.parallel_stack and arm.parallel_stack.get("launcher"):
            found["parallel_stack.launcher"] = arm.parallel_stack["launcher"]
        else:
            found["launcher"] = arm.launcher
    return found


# --------------------------------------------------------------------------- the checks


def default_runner(argv: list[str]) -> tuple[int, str]:
    try:
        done = run_command(argv, timeout=SLURM_TIMEOUT_S, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except subprocess.TimeoutExpired:
        return 124, f"{argv[0]} gave no answer within {SLURM_TIMEOUT_S:.0f} s"
    except OSError as err:
        return 127, f"{argv[0]}: {err.strerror}"
    return done.returncode, done.stdout


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    fatal = [line for line in lines if "fatal" in line or "error" in line]
    return (fatal or lines or ["no output"])[-1]


def reachable_problem(run: Runner, env: dict | None = None) -> str | None:
    """Why Slurm cannot be asked from here, or None."""
    env = os.environ if env is None else env
    conf = env.get("SLURM_CONF")
    if conf and not Path(conf).is_file():
        return (f"Slurm is not reachable: SLURM_CONF={conf} names no file; unset it, or set it to the "
                "cluster's slurm.conf (or run on the cluster's login node)")
    for program in ("sinfo", "sbatch", "scontrol"):
        if shutil.which(program) is None:
            return (f"Slurm is not reachable: {program} is not on PATH; run on the cluster's login node "
                    "(or load its Slurm module), or drop PROFILE to run here")
    status, output = run(["sinfo", "-h", "-o", "%P"])
    if status != 0:
        return (f"Slurm is not reachable: sinfo failed ({_first_line(output)}); run on the cluster's login node, "
                "set SLURM_CONF to its slurm.conf, or drop PROFILE to run here")
    return None


def check_cluster(profile: Profile, filled: dict, study, run: Runner = default_runner,
                  env: dict | None = None) -> list[str]:
    """Every problem of running ``study`` with ``profile`` on the cluster here; [] when it may start."""
    if profile.executor != "slurm":
        return []
    problem = reachable_problem(run, env)
    if problem:
        return [problem]
    problems: list[str] = []
    status, text = run(["scontrol", "show", "partition", "-o"])
    partitions = {p["PartitionName"]: p for p in parse_records(text) if "PartitionName" in p} if status == 0 else {}
    default = next((name for name, p in partitions.items() if p.get("Default") == "YES"), None)
    names = ", ".join(sorted(partitions)) or "none found (scontrol show partition)"

    # the partitions the profile names: the default and every rule's own
    rules_partition: dict[str | None, str | None] = {None: profile.defaults.get("slurm_partition")}
    rules_partition |= {rule: values["slurm_partition"] for rule, values in profile.rules.items()
                        if "slurm_partition" in values}
    usable: dict[str | None, str] = {}
    for rule, partition in rules_partition.items():
        key = profile.key(f"set-resources: {rule}: slurm_partition" if rule else "default-resources: slurm_partition")
        if partition == PARTITION_PLACEHOLDER:
            problems.append(f"{key} is the placeholder {PARTITION_PLACEHOLDER}; set it to one of this cluster's "
                            f"partitions: {names}")
        elif partition and partition not in partitions:
            problems.append(f"{key} is '{partition}', which this cluster does not know; set it to one of: {names}")
        elif not partition and default is None:
            problems.append(f"{key} is not set and this cluster has no default partition; set it to one of: {names}")
        else:
            usable[rule] = partition or default
    problems += _accounting_problems(profile, run)

    # the largest jobs against the nodes of their partition
    nodes_of: dict[str, list[Node]] = {}
    for name in set(usable.values()):
        status, text = run(["sinfo", "-h", "-N", "-p", name, "-o", "%N|%c|%m"])
        nodes_of[name] = parse_nodes(text) if status == 0 else []
    jobs = study_jobs(filled, study, profile)
    for size_problem in _size_problems(profile, jobs, usable, partitions, nodes_of):
        problems.append(size_problem)

    problems += shared_file_problems(study, profile)
    problems += _burst_buffer_problems(filled, study, run)
    problems += _launcher_problems(study, jobs, run)
    return problems


def _accounting_problems(profile: Profile, run: Runner) -> list[str]:
    problems = []
    for key, entity, what in (("slurm_account", "account", "account"), ("qos", "qos", "QoS")):
        value = profile.defaults.get(key)
        if not value:
            continue
        argv = ["sacctmgr", "-nP", "show", entity, "format=name"]
        status, text = run(argv)
        if status != 0:
            problems.append(f"{profile.key('default-resources: ' + key)} is '{value}', but this cluster keeps no "
                            f"accounts to check it against ({_first_line(text)}); remove {key} from the profile")
            continue
        known = {line.strip().split("|")[0] for line in text.splitlines() if line.strip()}
        if value not in known:
            problems.append(f"{profile.key('default-resources: ' + key)} is '{value}', which this cluster does not "
                            f"know; set it to one of: {', '.join(sorted(known)) or 'none'} (sacctmgr show {entity})")
    return problems


def _size_problems(profile: Profile, jobs: list[JobSize], usable: dict, partitions: dict,
                   nodes_of: dict[str, list[Node]]) -> list[str]:
    problems = []
    reported = set()
    default_mem = profile.defaults.get("mem_mb")
    checks = list(jobs)
    if default_mem:
        checks.append(JobSize("the other rules (aggregate, figures, report tables)", "", 1, 1,
                              int(float(default_mem)), 1))
    for job in sorted(checks, key=lambda j: (-j.node_cpus, not j.one_node, -j.mem_mb)):
        partition = usable.get(job.rule, usable.get(None))
        if partition is None or not nodes_of.get(partition):
            continue
        info, nodes = partitions.get(partition, {}), nodes_of[partition]
        max_cpus = min(max(n.cpus for n in nodes), limit(info.get("MaxCPUsPerNode")) or 10**9)
        max_mem = min(max(n.mem_mb for n in nodes), limit(info.get("MaxMemPerNode")) or 10**12)
        spread = job.nodes is not None and not job.one_node and job.tasks_per_node is not None
        fits = [n for n in nodes if n.mem_mb >= job.mem_mb and (not job.one_node or n.cpus >= job.cpus)]
        mem_key = profile.key(f"set-resources: {job.rule}: mem_mb" if job.rule else "default-resources: mem_mb")
        larger = f"set {profile.key('default-resources: slurm_partition')} to a partition with larger nodes"
        if job.mem_mb > max_mem and ("mem", partition) not in reported:
            reported.add(("mem", partition))
            where = (f"lower {mem_key}" if not job.rule else
                     f"lower config key write_component.ranks or resolution, or set {mem_key} to at most {max_mem}")
            per = f"{job.node_tasks} tasks on a node" if spread else f"{job.tasks} tasks"
            problems.append(f"{job.what} asks for {job.mem_mb} MB of memory ({per}), but a node of "
                            f"partition '{partition}' has at most {max_mem} MB; {where}")
        elif job.one_node and job.cpus > max_cpus and ("cpu", partition) not in reported:
            reported.add(("cpu", partition))
            problems.append(f"{job.what} asks for {job.tasks} tasks x {job.cpus_per_task} CPUs on one node, but a "
                            f"node of partition '{partition}' has at most {max_cpus} CPUs; lower config key "
                            "write_component.ranks (quilt adds its writer ranks) or staging.streams, spread the job "
                            f"over nodes (config key job_layout), or {larger}")
        elif spread and job.node_cpus > max_cpus and ("cpu", partition) not in reported:
            reported.add(("cpu", partition))
            problems.append(f"{job.what} asks for {job.node_tasks} tasks x {job.cpus_per_task} CPUs on each of its "
                            f"{job.nodes} nodes, but a node of partition '{partition}' has at most {max_cpus} CPUs; "
                            "lower config key job_layout's tasks_per_node (more nodes) or staging.streams, or "
                            f"{larger}")
        elif spread and job.nodes > len(nodes) and ("nodes", partition) not in reported:
            reported.add(("nodes", partition))
            problems.append(f"{job.what} asks for {job.nodes} nodes, but partition '{partition}' has "
                            f"{len(nodes)}; lower config key job_layout's nodes (more tasks per node), or set "
                            f"{profile.key('default-resources: slurm_partition')} to a larger partition")
        elif not fits and not job.one_node and job.cpus > sum(n.cpus for n in nodes) and ("cpu", partition) not in reported:
            reported.add(("cpu", partition))
            problems.append(f"{job.what} asks for {job.cpus} CPUs, more than partition '{partition}' has "
                            f"({sum(n.cpus for n in nodes)}); lower config key write_component.ranks, or set "
                            f"{profile.key('default-resources: slurm_partition')} to a larger partition")
    return problems


def _burst_buffer_problems(filled: dict, study, run: Runner) -> list[str]:
    wanted = burst_buffer_tiers(filled, study)
    if not wanted:
        return []
    status, text = run(["scontrol", "show", "burst"])
    if status != 0 or not text.strip():
        return [f"config key tiers.{name}.burst_buffer asks for a burst buffer, but this cluster has none "
                "(scontrol show burst is empty); use another scratch tier (scratch_tiers)" for name in wanted]
    pools = parse_pools(text)
    problems = []
    for name, directives in wanted.items():
        for directive in directives.splitlines():
            pool = requested_pool(directive)
            if pool and pool not in pools:
                problems.append(f"config key tiers.{name}.burst_buffer asks for pool '{pool}', which this cluster "
                                f"does not have; set pool= to one of: {', '.join(sorted(pools)) or 'none'}")
    return problems


def _launcher_problems(study, jobs: list[JobSize], run: Runner) -> list[str]:
    if not any(job.tasks > 1 for job in jobs):
        return []
    problems = []
    mpi_default = None
    for key, template in launchers(study).items():
        try:
            words = shlex.split(template.format(ntasks=2))
        except (KeyError, IndexError, ValueError):
            continue  # the config's own check names it
        program = words[0] if words else ""
        if not program or shutil.which(program) is None:
            problems.append(f"config key {key} starts '{program}', which is not found here; install it, or set "
                            f"{key} to a launcher the jobs can run, e.g. 'srun -n {{ntasks}}'")
            continue
        if Path(program).name == "srun" and not any(w.startswith("--mpi") for w in words):
            if mpi_default is None:
                status, text = run(["scontrol", "show", "config"])
                found = re.search(r"^MpiDefault\s*=\s*(\S+)", text, re.M) if status == 0 else None
                mpi_default = found.group(1) if found else ""
            if mpi_default == "none":
                problems.append(f"config key {key} is '{template}' and this cluster's MpiDefault is none: the ranks "
                                f"would start as separate one-rank programs; set {key} to "
                                "'srun --mpi=pmi2 -n {ntasks}' (srun --mpi=list shows the plugins)")
    return problems
