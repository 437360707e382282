"""Staging on every node of a job spread over several nodes (config ``job_layout``) on a tier no other node sees.

Node-local disk and memory are each node's own: a forecast whose ranks run on three nodes needs its inputs on the
node that reads them and a folder on each of the three, and each node holds the files its own ranks wrote. Inside
such a Slurm allocation (more than one node, the arm's scratch tier ``shared: false``) the job's stage-in, stage-out
and cleanup each run as one task per node, ``srun --nodes=N --ntasks-per-node=1 python -m cycleio stage-node --plan
PLAN``, with the copy engine of a one-node job (runner.stagefiles.stage_files): the node that reads the inputs (the
batch script's, where the job's own process reads them; the forecast's ranks only write) copies them onto its
scratch and verifies them there, and every node makes the job's folder; after the run every node copies back the
outputs it holds, verified on the persistent tier; cleanup empties every node's folder, and on the nodes other than
the batch script's also the job's own folder (storage.jobscratch), whether the job ended well or not.
docs/staging.md says why a copy task per node and not ``sbcast``.

Each node's task writes its result beside the job's records (a folder on the shared results tree): its records,
whose ``host`` is the node (tables/staging.csv has a row per node and direction), the files it landed, or its
error, which fails the job naming the node and the file. A job on one node never comes here (runner.job).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from ..config.settings import ArmSettings
from ..config.tierspec import expand_tier_path
from ..fsutil import remove_tree, write_json_atomic
from ..faults import fill
from ..process import run_command
from ..records import Record, RecordLog
from ..storage.jobscratch import make_job_folder, remove_job_folder
from ..storage.stagingtypes import StagingError, StagingFaults
from ..storage.tiers import TierSite
from ..surrogates.inventory import FileSpec
from .stagefiles import stage_files, staging_options

log = logging.getLogger("cycleio")

NODE_COMMAND = "stage-node"
SRUN_TIMEOUT_S = 6 * 3600.0


def node_name(env: dict | None = None) -> str:
    """This node's name as Slurm knows it (``SLURMD_NODENAME`` in a job), else the host name."""
    env = os.environ if env is None else env
    return env.get("SLURMD_NODENAME") or socket.gethostname()


@dataclass(frozen=True)
class Allocation:
    """The nodes of the Slurm job this process runs in, and the one it runs on (the batch script's)."""

    job_id: str
    nodes: tuple[str, ...]
    here: str

    @classmethod
    def of_job(cls, env: dict | None = None) -> "Allocation | None":
        """The allocation when it spans more than one node, else None (no Slurm job, or one node)."""
        env = os.environ if env is None else env
        count = env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES") or "1"
        if not env.get("SLURM_JOB_ID") or not count.isdigit() or int(count) <= 1:
            return None
        listed = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or ""
        done = run_command(["scontrol", "show", "hostnames", listed], timeout=60, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        nodes = tuple(done.stdout.split())
        if done.returncode != 0 or len(nodes) != int(count):
            raise StagingError(f"the job's {count} nodes ({listed}) could not be listed (scontrol show hostnames): "
                               f"{done.stdout.strip()[-300:]}")
        return cls(env["SLURM_JOB_ID"], nodes, node_name(env))


def allocation_env(env: dict | None = None) -> dict[str, str]:
    """Slurm's variables that name a job's nodes (``SLURM_JOB_NUM_NODES``, ``SLURM_NNODES``, ``SLURM_JOB_NODELIST``,
    ``SLURM_NODELIST``, ``SLURM_NTASKS_PER_NODE``), from ``scontrol show job``, for a job over several nodes whose
    environment lacks them: the Snakemake Slurm executor's job step drops every ``SLURM_*`` variable but the job id
    before it runs a job's command, and without them the forecast's ``srun -n N`` would not spread its ranks over
    the job's nodes, nor would the job know them. Empty outside Slurm, on one node, or where they are set."""
    env = os.environ if env is None else env
    job_id = env.get("SLURM_JOB_ID")
    if not job_id or env.get("SLURM_JOB_NUM_NODES"):
        return {}
    try:
        done = run_command(["scontrol", "show", "job", "-o", job_id], timeout=60, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    words = dict(word.split("=", 1) for word in done.stdout.split() if "=" in word)
    count = words.get("NumNodes", "1").split("-")[0]
    if done.returncode != 0 or not count.isdigit() or int(count) <= 1 or not words.get("NodeList"):
        return {}
    found = {"SLURM_JOB_NUM_NODES": count, "SLURM_NNODES": count, "SLURM_JOB_NODELIST": words["NodeList"],
             "SLURM_NODELIST": words["NodeList"]}
    per_node = words.get("NtasksPerN(B:S:C)", "").split(":")[0]
    if per_node.isdigit() and int(per_node) > 0:
        found["SLURM_NTASKS_PER_NODE"] = per_node
    return found


def per_node_allocation(settings: ArmSettings, env: dict | None = None) -> Allocation | None:
    """The allocation a staged job stages on node by node: its scratch tier is not shared across nodes and the
    job has several; else None (the job stages where it runs, as on one node)."""
    if not settings.staged or getattr(settings.scratch, "shared", True):
        return None
    return Allocation.of_job(env)


def _specs(paths: list[str]) -> list[FileSpec]:
    return [FileSpec(path, "") for path in paths]


class NodeStaging:
    """A job's stage-in, stage-out and cleanup as one task on each node of its allocation (the module's docstring).

    ``control``: a folder every node sees (beside the job's records), for the plans and the nodes' results; the
    forecast's MPI program keeps its spec and records there too (surrogates.forecast.launcher).
    """

    def __init__(self, settings: ArmSettings, allocation: Allocation, control: Path, records: RecordLog, label: str):
        self.settings, self.allocation, self.control = settings, allocation, control
        self.records, self.label = records, label
        remove_tree(control)
        control.mkdir(parents=True)

    def _on_scratch(self, path: Path) -> str:
        """A path in the job's scratch folder as every node finds it: relative to the arm's folder of the scratch
        tier, which each node expands itself (its own ``$TMPDIR``)."""
        return str(Path(path).resolve().relative_to(arm_scratch(self.settings).resolve()))

    def _plan(self, action: str, step: str, **values) -> Path:
        context = {key: self.records.context[key] for key in ("study", "arm", "cycle", "step", "strategy", "attempt")
                   if key in self.records.context}
        plan = {"action": action, "step": step, "settings": self.settings.to_json(), "context": context,
                "label": self.label, "results": str(self.control), "batch_node": self.allocation.here, **values}
        path = self.control / f"{action}.plan.json"
        write_json_atomic(path, plan)
        return path

    def _run(self, action: str, step: str, **values) -> dict[str, dict]:
        """Run ``action`` as one task per node; its records join the job's; raise naming the first node that
        failed (its own error, or what srun said when a node gave no result)."""
        plan = self._plan(action, step, **values)
        for stale in self.control.glob(f"{action}.*.result.json"):
            stale.unlink()
        count = len(self.allocation.nodes)
        srun = shutil.which("srun") or "srun"
        argv = [srun, f"--nodes={count}", f"--ntasks={count}", "--ntasks-per-node=1", "--overlap",
                "--kill-on-bad-exit=0", sys.executable, "-m", "cycleio", NODE_COMMAND, "--plan", str(plan)]
        try:
            done = run_command(argv, timeout=SRUN_TIMEOUT_S, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
            status, output = done.returncode, done.stdout
        except (OSError, subprocess.TimeoutExpired) as err:
            status, output = -1, str(err)
        results = {}
        for node in self.allocation.nodes:
            path = self.control / f"{action}.{node}.result.json"
            if path.is_file():
                results[node] = json.loads(path.read_text())
                self.records.records.extend(Record(**record) for record in results[node].pop("records"))
        missing = [node for node in self.allocation.nodes if node not in results]
        if missing:
            raise StagingError(f"{self.label} {action} on node {missing[0]}: the node gave no result "
                               f"(srun exited {status}): {output.strip()[-500:] or '(no output)'}")
        failed = [(node, result["error"]) for node, result in results.items() if result.get("error")]
        if failed:
            node, error = failed[0]
            also = f" (and on {', '.join(n for n, _ in failed[1:])})" if len(failed) > 1 else ""
            raise StagingError(f"{self.label} {action} failed on node {node}{also}: {error}")
        return results

    def stage_in(self, inputs: list[FileSpec], source: Path, workdir: Path, step: str,
                 faults: StagingFaults) -> None:
        """The inputs go to the node that reads them, each copy verified there; every node gets the job's folder.

        The job's own process reads a step's inputs (surrogates.steps.run_gdas_step, before the forecast's MPI
        program starts) on the batch script's node; the forecast's ranks only write (and per_rank's combine reads
        back its own pieces), whatever the strategy. So the other nodes receive no input: their ranks write into
        the folder their stage-in made."""
        files = [spec.path for spec in inputs]
        self._run("stage_in", step, files=files, files_on={self.allocation.here: files}, source=str(source),
                  dest="", workdir=self._on_scratch(workdir), faults=_faults(faults, workdir))
        others = [node for node in self.allocation.nodes if node != self.allocation.here]
        log.info("%s stage_in: %d files on %s (which reads them), verified; the job's folder made on %s", self.label,
                 len(inputs), self.allocation.here, ", ".join(others) or "no other node")

    def stage_out(self, outputs: list[FileSpec], workdir: Path, dest: Path, step: str,
                  faults: StagingFaults) -> tuple[dict[str, tuple[int, str]], dict[str, str]]:
        """Each node copies back the outputs it holds; returns the landed files and the node that held each.
        An output on no node, or on two with different contents, fails the job naming it."""
        results = self._run("stage_out", step, files=[spec.path for spec in outputs], source="", dest=str(dest),
                            workdir=self._on_scratch(workdir), faults=_faults(faults, dest))
        landed: dict[str, tuple[int, str]] = {}
        held_on: dict[str, str] = {}
        for node, result in results.items():
            for path, (size, checksum) in result["landed"].items():
                if path in landed and landed[path] != (size, checksum):
                    raise StagingError(f"{self.label} stage_out: {dest / path} was on nodes {held_on[path]} and {node} "
                                       "with different contents")
                landed[path], held_on[path] = (size, checksum), held_on.get(path, node)
        missing = [spec.path for spec in outputs if spec.path not in landed]
        if missing:
            raise StagingError(f"{self.label} stage_out: {workdir / missing[0]} is on none of the job's nodes "
                               f"({', '.join(self.allocation.nodes)})"
                               + (f" (and {len(missing) - 1} more files)" if len(missing) > 1 else ""))
        landed = {spec.path: landed[spec.path] for spec in outputs}
        per_node = {node: sum(1 for held in held_on.values() if held == node) for node in self.allocation.nodes}
        log.info("%s stage_out: %s files from the nodes, verified", self.label,
                 ", ".join(f"{count} from {node}" for node, count in per_node.items()))
        return landed, {path: held_on[path] for path in landed}

    def cleanup(self, workdir: Path, step: str) -> None:
        """Every node's folder of the job emptied; on the nodes besides this one the job's own folder removed too."""
        self._run("cleanup", step, files=[], source="", dest="", workdir=self._on_scratch(workdir), faults={})

    def close(self) -> None:
        remove_tree(self.control)


def arm_scratch(settings: ArmSettings) -> Path:
    """The arm's folder on its scratch tier as this node expands the tier's path (TierSite.root, unopened)."""
    return expand_tier_path(settings.scratch.name, settings.scratch.path, settings.study) / settings.study / settings.arm


def _faults(faults: StagingFaults, dest: Path) -> dict:
    """A stage's faults for the nodes: the file to corrupt named below the stage's destination, which each node
    has its own of on scratch."""
    corrupt = str(Path(faults.corrupt).relative_to(dest)) if faults.corrupt else None
    return {"corrupt": corrupt, "fail_after_files": faults.fail_after_files,
            "fill_node": list(faults.fill_node) if faults.fill_node else None}


def stage_on_node(plan_path: Path) -> None:
    """One node's part of a plan (``cycleio stage-node``): its result file is written whatever happens."""
    plan = json.loads(Path(plan_path).read_text())
    node = node_name()
    settings = ArmSettings.from_json(plan["settings"])
    records = RecordLog(**plan["context"], host=node)
    result: dict = {"node": node, "landed": {}, "error": None}
    action, step, label = plan["action"], plan["step"], f"{plan['label']} [{node}]"
    workdir = arm_scratch(settings) / plan["workdir"]
    dest = workdir if action == "stage_in" else Path(plan["dest"] or ".")
    faults = StagingFaults(corrupt=dest / plan["faults"]["corrupt"] if plan["faults"].get("corrupt") else None,
                           fail_after_files=plan["faults"].get("fail_after_files"))
    try:
        if action == "cleanup":
            scratch_fields = {"tier": settings.scratch.name, "tier_kind": settings.scratch.kind, "fs_type": ""}
            with records.timed(step=step, phase="cleanup", op="remove", **scratch_fields) as event:
                event["n_files"] = remove_tree(workdir)
            if node != plan["batch_node"]:  # the batch node's job_scratch removes its own at the job's end
                remove_job_folder(settings.scratch, settings.study)
        else:
            if action == "stage_in":
                make_job_folder(settings.scratch, settings.study)
            persistent = TierSite(settings.persistent, settings.study, settings.arm)
            scratch = TierSite(settings.scratch, settings.study, settings.arm)
            options = staging_options(settings)
            files = _specs(plan["files_on"].get(node, []) if "files_on" in plan else plan["files"])
            if action == "stage_in":
                remove_tree(workdir)
                workdir.mkdir(parents=True)
                src, dst = persistent, scratch
                full = plan["faults"].get("fill_node")
                if full and full[0] == node:  # config faults.fill_tier's node: full until the cleanup empties it
                    fill(workdir / f".cycleio-fill.{node}", full[1])
            else:
                files = [spec for spec in files if (workdir / spec.path).is_file()]  # what this node's ranks wrote
                src, dst = scratch, persistent
            source = Path(plan["source"]) if action == "stage_in" else workdir
            result["landed"] = stage_files(files, source, dest, action, step, src, dst, records, options, label,
                                           faults) if files else {}
    except Exception as err:  # noqa: BLE001: whatever fails on a node is its result, for the job to report
        log.error("%s %s failed: %s", label, action, err)
        result["error"] = f"{type(err).__name__}: {err}" if not isinstance(err, StagingError) else str(err)
    result["records"] = [asdict(record) for record in records.records]
    write_json_atomic(Path(plan["results"]) / f"{action}.{node}.result.json", result)
