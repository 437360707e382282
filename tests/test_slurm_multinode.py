"""Several Slurm nodes on one machine: ``ci/slurm/start.sh --nodes 3`` (docs/cluster.md).

Each node is a slurmd in its own UTS and mount namespace, so the three nodes n1, n2, n3 have their own
hostnames and their own ``/tmp`` and ``/dev/shm``, as the nodes of a cluster have their own local disk and
memory: ``srun`` across them runs a task on each, a file one node writes to its ``/tmp`` is not on
another's, ``sbcast`` puts a file in every node's ``/tmp``, and MPI ranks (mpi4py on the PyPI mpich wheel,
Slurm's pmi2) form one communicator across them. The module holds the localhost Slurm's lock
(conftest.slurm_cluster_lock) while its nodes are up, so tests/test_slurm.py's one node is not started
meanwhile; it stops its nodes at the end and starts again a one-node cluster that was up before it. On them it runs
docs/cluster.md's multi-node recipe as a user does, ``make study PROFILE=profiles/slurm-localhost
STUDY="config/studies/smoke.yaml config/studies/multinode.yaml"``, from a copy of the workflow that every node sees.

Without root, Slurm, unshare or mpi4py the module skips with the reason, except in CI (CI=true), where it fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pandas as pd
import pytest

from conftest import REPO, cannot_run_here, slurm_cluster_lock, slurm_installed

pytestmark = [pytest.mark.e2e, pytest.mark.tool]
SLURM_CI = REPO / "ci" / "slurm"
NODES = ["n1", "n2", "n3"]
# the mpich wheel's ranks on these nodes talk over TCP through libfabric (see the fixture `nodes`)
MPI_OVER_TCP = {"MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp"}
SLURM_CONF = Path("/etc/slurm/slurm.conf")


def run(*argv, timeout: float = 120) -> subprocess.CompletedProcess:
    # from / : a job step starts in the submitter's folder, and one under /tmp is not on the nodes
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, cwd="/")


def ok(*argv, timeout: float = 120) -> str:
    done = run(*argv, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, argv))} failed ({done.returncode}):\n{done.stdout}{done.stderr}"
    return done.stdout


def one_node_cluster_up() -> list[str] | None:
    """How to start again the one-node cluster of start.sh that is up now (its options), or None."""
    pid_file = Path("/run/slurm/slurmd.pid")
    try:
        os.kill(int(pid_file.read_text()), 0)
        conf = SLURM_CONF.read_text()
    except (OSError, ValueError):
        return None
    cpus = re.search(r"^NodeName=\S+ NodeAddr=\S+ CPUs=(\d+)", conf, re.M)
    options = ["--burst-buffer"] if "BurstBufferType=burst_buffer/lua" in conf else []
    return options + ([f"SLURM_CPUS={cpus.group(1)}"] if cpus else [])


@pytest.fixture(scope="module")
def nodes():
    """Three nodes up for the module, stopped at its end; a one-node cluster that was up before comes back."""
    slurm_installed("unshare", "each node is a slurmd in namespaces of its own (util-linux)")
    # MPI between these nodes over TCP through libfabric (OFI), not the wheel's default UCX. UCX sees one machine and
    # joined ranks of two nodes through shared memory, but each node has its own /dev/shm ("Shared memory error");
    # without shared memory, its 4 KiB address per node went through PMI-1 in lines of up to ~1,080 bytes, and
    # Slurm's pmi2 plugin reads a PMI-1 request in one read of at most 1,024 bytes ("mpi/pmi2: value not properly
    # terminated in client request", then "invalid bandwidth" or "Destination is unreachable" in MPI_Init), now and
    # then: the lines' length varies with the address's bytes. OFI's address is a 64-byte line. Every srun, sbatch
    # and make inherits it.
    saved = {name: os.environ.get(name) for name in MPI_OVER_TCP}
    os.environ.update(MPI_OVER_TCP)
    with slurm_cluster_lock():
        before = one_node_cluster_up()
        # the checkout (and its venv) is on every node, as on a cluster's shared file system, even under /tmp
        start = subprocess.run(["bash", str(SLURM_CI / "start.sh"), "--nodes", str(len(NODES))], capture_output=True,
                               text=True, timeout=180, cwd="/", env={**os.environ, "SLURM_NODE_SHARED": str(REPO)})
        try:
            assert start.returncode == 0, (f"ci/slurm/start.sh --nodes {len(NODES)} failed:\n"
                                           f"{start.stdout}{start.stderr}")
            yield start.stdout.strip().splitlines()[-1]  # after what it stopped, if another cluster was up
        finally:
            stop = run("bash", SLURM_CI / "stop.sh", timeout=120)
            if before is not None:
                options = [o for o in before if not o.startswith("SLURM_CPUS=")]
                env = dict(o.split("=", 1) for o in before if o.startswith("SLURM_CPUS="))
                subprocess.run(["bash", SLURM_CI / "start.sh", *options], env={**os.environ, **env},
                               capture_output=True, text=True, timeout=180, check=True)
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert "# cycleio ci/slurm/start.sh --nodes" not in Path("/etc/hosts").read_text()
        assert not list(Path("/run/slurm").glob("slurmd-*.pid"))
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def test_the_nodes_are_idle_and_listed_in_etc_hosts(nodes):
    assert nodes.startswith("slurm ready: debug* up 3 idle n[1-3]")
    assert ok("sinfo", "-h", "-N", "-o", "%N %T").split() == ["n1", "idle", "n2", "idle", "n3", "idle"]
    assert f"127.0.0.1 {' '.join(NODES)} # cycleio ci/slurm/start.sh --nodes" in Path("/etc/hosts").read_text()


def test_srun_runs_one_task_on_each_node_under_its_own_hostname(nodes):
    out = ok("srun", "-N3", "--ntasks-per-node=1", "hostname")
    assert sorted(out.split()) == NODES


@pytest.mark.parametrize("folder", ["/tmp", "/dev/shm"])
def test_each_node_has_its_own_tmp_and_dev_shm(nodes, folder):
    name = f"{folder}/cycleio-multinode-{uuid.uuid4().hex}"
    ok("srun", "-w", "n1", "-N1", "-n1", "sh", "-c", f"echo from-n1 > {name}")
    assert ok("srun", "-w", "n1", "-N1", "-n1", "cat", name).strip() == "from-n1"
    for node in NODES[1:]:
        seen = ok("srun", "-w", node, "-N1", "-n1", "sh", "-c", f"test -e {name} && echo seen || echo absent")
        assert seen.strip() == "absent", f"{node} sees the file n1 wrote to its {folder}"
    assert not Path(name).exists()  # nor does the machine itself
    stat = ok("srun", "-w", "n1", "-N1", "-n1", "stat", "-f", "-c", "%T", folder).strip()
    assert stat == "tmpfs"


def test_sbcast_puts_a_file_in_every_nodes_tmp(nodes):
    source = Path("/var/tmp") / f"cycleio-sbcast-{uuid.uuid4().hex}"  # the submitting side's, outside /tmp
    source.write_text("broadcast\n")
    target = f"/tmp/{source.name}"
    try:
        out = ok("salloc", "-N3", "sh", "-c",
                 f"sbcast {source} {target} && srun --ntasks-per-node=1 sh -c 'echo $(hostname) $(cat {target})'")
    finally:
        source.unlink()
    assert sorted(out.splitlines()) == [f"{node} broadcast" for node in NODES]


MPI_PROGRAM = """
import socket
from mpi4py import MPI
comm = MPI.COMM_WORLD
names = comm.gather(socket.gethostname())
total = comm.allreduce(comm.Get_rank() + 1)
if comm.Get_rank() == 0:
    print(comm.Get_size(), total, " ".join(sorted(names)))
"""


def test_mpi_ranks_form_one_communicator_across_the_nodes(nodes):
    check = run(sys.executable, "-c", "from mpi4py import MPI")
    if check.returncode != 0:
        cannot_run_here(f"mpi4py (on the PyPI mpich wheel) is not in this venv: {check.stderr.strip()}")
    out = ok("srun", "-N3", "--ntasks-per-node=1", "--mpi=pmi2", sys.executable, "-c", MPI_PROGRAM)
    assert out.split() == ["3", "6", *NODES]


# --------------------------------------------------------------------------- a smoke-sized study over the nodes

MULTINODE_STUDY = "config/studies/smoke.yaml config/studies/multinode.yaml"  # docs/cluster.md's multi-node recipe
RECIPE = ["make", "study", "PROFILE=profiles/slurm-localhost", f"STUDY={MULTINODE_STUDY}"]
# a run that takes longer is stopped and the test fails with its log: 75 s alone, 130 s beside two busy loops
STUDY_SECONDS = 480


def scratch_on_nodes() -> dict[str, list[str]]:
    """What each node holds in its /tmp and /dev/shm per-user folders (job folders, files), by node."""
    out = ok("srun", "-N3", "--ntasks-per-node=1", "sh", "-c",
             'for f in /tmp/cycleio-* /dev/shm/cycleio-*; do [ -e "$f" ] && find "$f" -mindepth 1 | sed "s|^|$(hostname) |"; '
             'done; true')
    found: dict[str, list[str]] = {node: [] for node in NODES}
    for line in out.splitlines():
        node, _, path = line.partition(" ")
        found[node].append(path)
    return found


@pytest.fixture(scope="module")
def study_run(nodes):
    """docs/cluster.md's multi-node recipe run once as a user runs it, ``make study PROFILE=... STUDY=...`` (the
    config check, the cluster check, the study through the Snakemake Slurm executor, its report), in a copy of the
    workflow (test_slurm.workflow_copy: this venv as its .venv, so make setup has nothing to do) in a folder every
    node sees (under the checkout: SLURM_NODE_SHARED)."""
    from test_slurm import workflow_copy

    base = REPO / "results" / f"test-multinode-{os.getpid()}"
    base.mkdir(parents=True)
    workdir = workflow_copy(base / "workflow")
    env = {key: value for key, value in os.environ.items() if key not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    env["PYTHONPATH"] = os.pathsep.join([str(workdir / "scripts"), *filter(None, [os.environ.get("PYTHONPATH")])])
    before = scratch_on_nodes()
    log = base / "make-study.out"
    with open(log, "w") as out:
        proc = subprocess.Popen(RECIPE, stdout=out, stderr=subprocess.STDOUT, cwd=workdir, env=env,
                                start_new_session=True)
        stopped = ""
        try:
            proc.wait(timeout=STUDY_SECONDS)
        except subprocess.TimeoutExpired:
            stopped = f"\n--- stopped: make study had not ended after {STUDY_SECONDS} s\n"
            os.killpg(proc.pid, signal.SIGTERM)  # Snakemake cancels its Slurm jobs
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                stopped += "--- and was killed: it had not ended 60 s after SIGTERM\n"
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    jobs = "".join(f"\n--- {path.name}\n{path.read_text(errors='replace')[-1500:]}"
                   for path in sorted((workdir / ".snakemake" / "slurm_logs").rglob("*.log")))
    # the step's own log says why a job failed; the Slurm log only that its command did
    failed_steps = "".join(f"\n--- {path.relative_to(workdir)}\n{path.read_text(errors='replace')[-3000:]}"
                           for path in sorted((workdir / "results" / "multinode" / "logs").rglob("*.log"))
                           if re.search(r"Traceback|ERROR|Error", path.read_text(errors="replace")))
    made = log.read_text(errors="replace")
    done = {"workdir": workdir, "make": made, "returncode": proc.returncode, "before": before,
            "output": failed_steps[-8000:] + made[-3000:] + jobs[-4000:] + stopped, "after": scratch_on_nodes()}
    try:
        yield done
    finally:
        if proc.returncode == 0:
            shutil.rmtree(base, ignore_errors=True)


def study_records(workdir: Path, arm: str, job: str) -> list[dict]:
    path = workdir / "results" / "multinode" / "arms" / arm / "2026123112" / f"{job}.records.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_smoke_study_runs_its_forecast_over_the_three_nodes(study_run):
    # the cluster check (make study runs it first) takes the forecast over three 2-CPU nodes: no refusal
    assert "cluster check:" not in study_run["make"], study_run["make"][-3000:]
    assert study_run["returncode"] == 0, study_run["output"]
    workdir = study_run["workdir"]
    # it ended as make study ends: the summary printed, the report made, where things are
    assert "Study 'multinode' is done:" in study_run["make"], study_run["make"][-3000:]
    assert (workdir / "results" / "multinode" / "report.html").stat().st_size > 0
    arms = workdir / "results" / "multinode" / "arms"
    staging = pd.read_csv(workdir / "results" / "multinode" / "tables" / "staging.csv", dtype={"cycle": str})
    timeline = pd.read_csv(workdir / "results" / "multinode" / "tables" / "cycle_timeline.csv", dtype={"cycle": str})
    for arm in ("node_local", "shm", "lustre"):
        manifest = json.loads((arms / arm / "2026123112" / "fcst.manifest.json").read_text())
        job = ok("scontrol", "show", "job", manifest["provenance"]["slurm_job_id"])
        assert "NumNodes=3 " in job and "NumTasks=3 " in job, job
        records = study_records(workdir, arm, "fcst")
        # the MPI ranks ran on the three nodes
        assert {r["host"] for r in records if r["op"] == "write_effective"} == {"n1", "n2"}  # the compute ranks
        assert {r["host"] for r in records if r["phase"] == "run" and r["op"] == "write"} == {"n3"}  # the writer
        # every output landed, verified on the persistent tier, and the manifest says which node held it
        assert manifest["outputs"]
        for entry in manifest["outputs"]:
            assert (Path(manifest["root"]) / entry["path"]).stat().st_size == entry["bytes"] > 0
        if arm == "lustre":  # written by the ranks straight onto the shared tier: no staging
            assert not [r for r in records if r["phase"] in ("stage_in", "stage_out")]
            continue
        assert manifest["provenance"]["nodes"] == NODES
        assert {entry["node"] for entry in manifest["outputs"]} == {"n3"}  # the quilt writer's node
        copies = [r for r in records if r["op"] == "copy"]
        # the first node, whose process (the job's) reads the inputs, received every input, each copy verified
        # there; the other nodes' ranks read none, so they received none
        assert {r["file"] for r in copies if r["phase"] == "stage_in"} == set(manifest["inputs"]), arm
        assert {r["host"] for r in copies if r["phase"] == "stage_in"} == {"n1"}, arm
        verified = {r["file"] for r in records if r["phase"] == "verify" and r["op"] == "checksum"
                    and r["tier"] == "lustre"}
        assert verified == {entry["path"] for entry in manifest["outputs"]}
        rows = staging[(staging["arm"] == arm) & (staging["step"] == "fcst")]
        assert list(rows.loc[rows["phase"] == "stage_in", "node"]) == ["n1"]
        # the timeline has each node's phases of the job: its cleanup on every node, the stage-out from n3
        phases = timeline[(timeline["arm"] == arm) & (timeline["step"] == "fcst") & (timeline["kind"] == "phase")]
        assert sorted(phases.loc[phases["what"] == "cleanup", "host"]) == NODES, arm
        assert list(phases.loc[phases["what"] == "stage_out", "host"]) == ["n3"], arm
        assert list(rows.loc[rows["phase"] == "stage_out", "node"]) == ["n3"]


def test_the_study_leaves_nothing_on_any_node(study_run):
    assert study_run["returncode"] == 0, study_run["output"]
    before, after = study_run["before"], study_run["after"]
    for node in NODES:
        left = sorted(set(after[node]) - set(before[node]))
        assert not left, f"{node} kept {left[:5]}"
