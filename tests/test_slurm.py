"""The workflow on a real single-node Slurm on localhost (munge, slurmctld, slurmd from Debian packages).

The module brings the cluster up with ci/slurm/install.sh and ``start.sh --burst-buffer`` (root and
apt-get needed) and stops its daemons by PID with ci/slurm/stop.sh at the end. To stay short it starts
these runs at once and lets each test wait for its own:

- docs/cluster.md's recipe as written, in a copy of the workflow: ``make study
  PROFILE=profiles/slurm-localhost STUDY=config/studies/smoke.yaml``, which checks the cluster, runs
  every job through the Snakemake Slurm executor and ends as a local ``make study`` does (summary,
  report); no job may leave its scratch folder on any tier. Its jobs, tables and columns must be those
  the study plans and a local run writes (the columns test_workflow checks a local smoke study against);
- the cluster check's refusals against this cluster (no Slurm reachable, an unknown partition, a job
  larger than the node), each one line before any job;
- a one-cycle study whose scratch tier is a Lua burst buffer, run by an unprivileged user (Slurm refuses
  burst buffers to root): its jobs must carry the request and stage through the buffer's folder.

Without root or Slurm the module skips with the reason, except in CI (CI=true), where it fails.
"""

from __future__ import annotations

import functools
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import REPO, cannot_run_here, slurm_cluster_lock, slurm_installed, snapshot_columns
from cycleio.config.calendar import FULL_CYCLE_STEPS
from cycleio.config.tierspec import Tier

pytestmark = [pytest.mark.e2e, pytest.mark.tool]
BIN = Path(sys.executable).parent
SLURM_CI = REPO / "ci" / "slurm"
PROFILE = REPO / "profiles" / "slurm-localhost"
SMOKE = REPO / "config" / "studies" / "smoke.yaml"
TRY = REPO / "config" / "studies" / "cluster-try.yaml"  # laid over the smoke study: docs/cluster.md's first try
BB_USER = "cycleio-ci"
BB_DIRECTIVE = "#BB_LUA pool=localpool capacity=10"
BB_TRACE = Path("/tmp/bb_trace.log")  # appended to by ci/slurm/burst_buffer.lua
BB_STAGE = Path("/tmp/bb_stage")  # where ci/slurm/burst_buffer.lua makes each job's buffer
RUN_SECONDS = 600  # a run that takes longer is killed and its test fails
# The launcher of MPI programs under the Snakemake Slurm executor. --overlap: a 1-task job runs inside
# the plugin's `srun -n1` step, where a plain `srun` waits forever for CPUs that step holds.
SRUN = "srun --overlap -n {ntasks}"


def unavailable(reason: str):
    cannot_run_here(f"the localhost Slurm test cannot run: {reason}")


def run(*argv, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, **kwargs)


def tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


class Background:
    """A command running in its own process group, output to a log file; ``wait`` bounds its time."""

    def __init__(self, name: str, argv: list, cwd: Path, env: dict | None = None):
        self.name, self.cwd, self.log = name, cwd, cwd / f"{name}.out"
        self.started, self.seconds = time.monotonic(), None
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen([str(a) for a in argv], cwd=cwd, env=env, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        threading.Thread(target=self._time, daemon=True).start()

    def _time(self) -> None:
        self.proc.wait()
        self.seconds = time.monotonic() - self.started

    def wait(self) -> int:
        try:
            return self.proc.wait(timeout=max(1.0, self.started + RUN_SECONDS - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.stop()
            pytest.fail(f"{self.name} took more than {RUN_SECONDS} s and was stopped:\n{tail(self.output())}")

    def check(self) -> None:
        if self.wait() != 0:
            pytest.fail(f"{self.name} failed ({self.proc.returncode}):\n{tail(self.output(), 80)}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # its own group: snakemake and its children only
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture(scope="module")
def slurm():
    """A running localhost Slurm with the Lua burst buffer; stopped at the end if this module started it."""
    slurm_installed("runuser", "the burst-buffer test submits as an unprivileged user")
    with slurm_cluster_lock():  # test_slurm_multinode.py's three nodes are not up meanwhile
        # 8 CPUs on a machine of 2 (start.sh then has slurmd trust the configuration): the module's four studies
        # mostly wait (for Slurm to start a job and for Snakemake to see it end), so more of their jobs at once
        # finish them sooner; each study still meets a node of at most 8 CPUs (the cluster check's refusals)
        start = run("bash", SLURM_CI / "start.sh", "--burst-buffer", timeout=180, env={**os.environ, "SLURM_CPUS": "8"})
        if start.returncode != 0:
            unavailable(f"ci/slurm/start.sh --burst-buffer failed:\n{tail(start.stdout + start.stderr)}")
        already_up = "already up" in start.stdout
        yield start.stdout.strip()
        if not already_up:
            stop = run("bash", SLURM_CI / "stop.sh", timeout=120)
            assert stop.returncode == 0, stop.stdout + stop.stderr


DARSHAN = REPO / "config" / "studies" / "darshan.yaml"
REPLAY_TABLE = "results/dslurm/tables/replay_jobs.csv"


def start_replay_jobs(base: Path) -> Background:
    """The Darshan study's replay jobs (docs/darshan.md) as Slurm jobs, their ranks started with srun."""
    workdir = base / "replay"
    workdir.mkdir()
    shm = Path("/dev/shm") / f"cycleio-test-{os.getpid()}-replay"
    overrides = workdir / "overrides.yaml"
    overrides.write_text(yaml.safe_dump({
        "study": "dslurm", "launcher": SRUN, "darshan": {"jobs": {"ior": {"scale": 0.1}, "dxt": {"scale": 0.01}}},
        "tiers": {"shm": {"kind": "memory", "path": str(shm), "persistent": False, "shared": False}}}))
    argv = [BIN / "snakemake", REPLAY_TABLE, "-s", REPO / "Snakefile", "--workflow-profile", PROFILE,
            "--configfile", DARSHAN, overrides]
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return Background("replay-slurm", argv, workdir, env)


# docs/cluster.md's recipe, run as written in a copy of the workflow (its results/ apart from the checkout's)
RECIPE = ["make", "study", "PROFILE=profiles/slurm-localhost",
          "STUDY=config/studies/smoke.yaml config/studies/cluster-try.yaml"]
WORKFLOW_FILES = ("Makefile", "Snakefile", "rules", "scripts", "config", "envs", "profiles", "report",
                  "requirements.lock", "pyproject.toml")


def workflow_copy(target: Path) -> Path:
    """The workflow's files in ``target``, with this venv as its .venv (make setup then has nothing to do)."""
    target.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in WORKFLOW_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=ignore)
        elif source.exists():
            shutil.copy2(source, target / name)
    (target / ".venv").symlink_to(Path(sys.prefix))
    return target


def start_recipe(base: Path) -> Background:
    workdir = workflow_copy(base / "recipe")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    return Background("recipe", RECIPE, workdir, env)


def scratch_job_folders(user: str) -> set[Path]:
    """Per-job folders (a job id's name) under the default node-local and memory tiers' per-user folders."""
    roots = [Path(os.environ.get("TMPDIR") or "/tmp") / f"cycleio-{user}", Path("/dev/shm") / f"cycleio-{user}"]
    return {p for root in roots if root.is_dir() for p in root.iterdir() if p.name.isdigit()}


def user_can(user: str, *argv) -> bool:
    return run("runuser", "-u", user, "--", *argv, timeout=60).returncode == 0


def user_workflow(user: str, home: Path) -> Path:
    """The workflow folder as the user can read it: the repository, or a copy of its workflow files."""
    if user_can(user, "test", "-r", REPO / "Snakefile", "-a", "-r", PROFILE / "config.yaml"):
        return REPO
    copy = home / "workflow"  # e.g. a clone under /root, which other users cannot enter
    copy.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in ("Snakefile", "rules", "scripts", "config", "envs", "profiles", "report"):
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=ignore)
        elif source.exists():
            shutil.copy2(source, copy / name)
    return copy


def user_python(user: str, home: Path) -> Path:
    """A Python the user can run with this venv's packages: the venv itself when the user can use it,
    else a venv of its own (from an interpreter the user can run) that adds or copies these packages."""
    probe = "import snakemake, snakemake_executor_plugin_slurm, netCDF4; from mpi4py import MPI"
    if user_can(user, BIN / "python", "-c", probe):
        return BIN / "python"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    bases = [getattr(sys, "_base_executable", ""), f"/usr/bin/python{version}", shutil.which(f"python{version}") or ""]
    base = next((b for b in bases if b and user_can(user, b, "-c", "import venv")), None)
    if base is None:
        tried = ", ".join(filter(None, bases))
        raise RuntimeError(f"user {user} can run no Python {version} with venv (tried {tried})")
    venv = home / "venv"
    made = run(base, "-m", "venv", "--without-pip", venv)
    if made.returncode != 0:
        raise RuntimeError(f"cannot make a venv for {user}: {made.stderr}")
    site_packages = sysconfig.get_paths()["purelib"]
    own = Path(sysconfig.get_paths(vars={"base": str(venv)})["purelib"])
    readable = user_can(user, "test", "-r", Path(site_packages) / "snakemake" / "__init__.py")
    if readable:
        (own / "cycleio-test.pth").write_text(f"import site; site.addsitedir({site_packages!r})\n")
    else:  # this venv lives where the user cannot read: copy its packages
        shutil.copytree(site_packages, own, symlinks=True, dirs_exist_ok=True)
    # what the packages need beside site-packages: the mpich wheel's libmpi in lib/, mpiexec in bin/
    for folder in ("lib", "bin"):
        for entry in (Path(sys.prefix) / folder).iterdir():
            target = venv / folder / entry.name
            if entry.name.startswith(("python", "activate", "Activate", "pip")) or target.exists():
                continue
            if readable:
                target.symlink_to(entry)
            elif entry.is_dir():
                shutil.copytree(entry, target, symlinks=True)
            else:
                shutil.copy2(entry, target)
    if not user_can(user, venv / "bin" / "python", "-c", probe):
        raise RuntimeError(f"user {user} cannot import the workflow's packages with {venv / 'bin' / 'python'}")
    return venv / "bin" / "python"


def start_burst_buffer_study() -> tuple[Background | None, Path, str]:
    """A one-cycle study (cold start, fcst, post) with a Lua burst buffer as scratch, run by BB_USER."""
    home = Path(tempfile.mkdtemp(prefix="cycleio-bb-", dir="/tmp"))  # outside root's private folders
    try:
        if run("id", "-u", BB_USER).returncode != 0:
            made = run("useradd", "--create-home", "--shell", "/bin/bash", BB_USER)
            if made.returncode != 0:
                raise RuntimeError(f"useradd {BB_USER} failed: {made.stderr}")
        account = pwd.getpwnam(BB_USER)
        os.chown(home, account.pw_uid, account.pw_gid)
        workflow = user_workflow(BB_USER, home)
        python = user_python(BB_USER, home)
        run("chown", "-R", f"{account.pw_uid}:{account.pw_gid}", home)
    except RuntimeError as err:
        return None, home, str(err)
    study = {
        "study": "bbsmoke",
        "cycles": {"start": "2026123112", "end": "2026123112"},
        "tiers": {"bb": {"kind": "burst_buffer", "path": "$BB_STAGE_DIR", "persistent": False, "shared": True,
                         "burst_buffer": BB_DIRECTIVE}},
        "scratch_tiers": ["bb"],
        "launcher": SRUN,
    }
    (home / "bb.yaml").write_text(yaml.safe_dump(study))
    os.chown(home / "bb.yaml", account.pw_uid, account.pw_gid)
    env = {"PATH": f"{python.parent}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": str(home),
           "LANG": "C.UTF-8", "XDG_CACHE_HOME": str(home / ".cache")}
    targets = [f"results/bbsmoke/arms/bb/2026123112/{step}.manifest.json" for step in ("fcst", "post")]
    argv = ["runuser", "-u", BB_USER, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
            python, "-m", "snakemake", *targets, "-s", workflow / "Snakefile",
            "--workflow-profile", workflow / PROFILE.relative_to(REPO),
            "--configfile", workflow / SMOKE.relative_to(REPO), home / "bb.yaml"]
    return Background("bb-study", argv, home), home, ""


@pytest.fixture(scope="module")
def runs(slurm, tmp_path_factory):
    """Start every run of the module at once (they mostly wait on Slurm); tests wait for their own."""
    base = tmp_path_factory.mktemp("slurm-runs")
    trace_start = BB_TRACE.stat().st_size if BB_TRACE.exists() else 0
    before = scratch_job_folders(pwd.getpwuid(os.geteuid()).pw_name)
    started = {"slurm": start_recipe(base), "replay": start_replay_jobs(base)}
    bb, bb_home, bb_problem = start_burst_buffer_study()
    started["bb"] = bb
    yield {**started, "bb_home": bb_home, "bb_problem": bb_problem, "trace_start": trace_start,
           "scratch_before": before}
    for job in started.values():
        if job is not None:
            job.stop()
    shutil.rmtree(Path("/dev/shm") / f"cycleio-test-{os.getpid()}-replay", ignore_errors=True)
    shutil.rmtree(bb_home, ignore_errors=True)


def manifests(workdir: Path, study: str = "smoke") -> dict[str, dict]:
    root = workdir / "results" / study / "arms"
    return {p.relative_to(root).as_posix(): json.loads(p.read_text()) for p in sorted(root.rglob("*.manifest.json"))}


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@functools.cache
def planned_jobs() -> list:
    """The jobs the recipe's study plans (cold starts, dumps, steps), as the workflow plans them."""
    from cycleio.cli import load_config_files
    from cycleio.workflow.dependencies import CycledJobs

    _, study = load_config_files([str(REPO / "config" / "config.yaml"), str(SMOKE), str(TRY)])
    return CycledJobs.of_study(study).measured_jobs()


def test_smoke_study_runs_under_slurm_with_the_tables_of_a_local_run(runs):
    """Its tables have the columns a local run writes (tests/data/outputs-columns.json, which test_workflow holds
    a local smoke study to), a row per planned step, and the same events wherever the same thing happens: a step's
    run on every arm, its staging, cleanup and checks on both staged arms."""
    slurm = runs["slurm"]
    slurm.check()
    tables = slurm.cwd / "results" / "smoke" / "tables"
    events = pd.read_parquet(tables / "io_events.parquet").astype({"cycle": str})
    summary = pd.read_csv(tables / "step_summary.csv", dtype={"cycle": str})
    local = snapshot_columns()
    assert list(events.columns) == local["tables/io_events.parquet"]
    assert list(summary.columns) == local["tables/step_summary.csv"]
    steps = {(job.arm, job.cycle, job.name) for job in planned_jobs() if job.name in FULL_CYCLE_STEPS}
    assert {arm for arm, _, _ in steps} == {"lustre", "node_local", "shm"}
    assert set(map(tuple, summary[["arm", "cycle", "step"]].values.tolist())) == steps
    counts = events.groupby(["cycle", "step", "phase", "arm"]).size().unstack("arm")
    assert set(counts.columns) == {"lustre", "node_local", "shm"}
    run_events = counts.xs("run", level="phase")
    assert (run_events.nunique(axis=1) == 1).all() and run_events.notna().all().all(), run_events
    staged = counts.drop(index="replay", level="phase")[["node_local", "shm"]]  # replays differ: shm's reads warm
    assert staged.notna().all().all() and (staged["node_local"] == staged["shm"]).all(), staged
    print(f"\nsmoke study: {slurm.seconds:.0f} s under Slurm")


def test_every_step_job_was_a_slurm_job_with_its_own_node_local_scratch(runs):
    slurm = runs["slurm"]
    slurm.check()
    under_slurm = manifests(slurm.cwd)
    planned = ["/".join(filter(None, job)) + ".manifest.json" for job in planned_jobs()]  # arm/[cycle/]name
    assert sorted(under_slurm) == sorted(planned)  # cold starts, dumps and steps
    job_ids = {name: m["provenance"]["slurm_job_id"] for name, m in under_slurm.items()}
    assert all(job_id.isdigit() for job_id in job_ids.values()), job_ids
    assert len(set(job_ids.values())) == len(job_ids), "two steps ran in one Slurm job"
    # node-local and memory scratch followed $SLURM_JOB_ID: a folder per job (the default tiers' paths)
    tiers = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["tiers"]
    for name, manifest in under_slurm.items():
        arm = name.split("/")[0]
        if arm in ("node_local", "shm") and "scratch" in manifest["provenance"]["tiers"]:
            scratch = manifest["provenance"]["tiers"]["scratch"]["path"]
            expected = Tier(name=arm, **tiers[arm]).resolve("smoke", {**os.environ, "SLURM_JOB_ID": job_ids[name]})
            assert scratch == str(expected.resolve()) and job_ids[name] in scratch, (name, scratch)


def test_the_recipe_checks_the_cluster_and_ends_as_a_local_make_study_does(runs):
    slurm = runs["slurm"]
    slurm.check()
    out = slurm.output()
    lines = out.splitlines()
    assert lines[0].startswith("study smoke: 2 cycles"), lines[:3]
    assert "cluster checked for profile profiles/slurm-localhost" in out
    assert "--workflow-profile profiles/slurm-localhost" in out and "has been submitted with SLURM jobid" in out
    summary = slurm.cwd / "results" / "smoke" / "summary.md"
    assert summary.read_text().strip() and summary.read_text().strip().splitlines()[0] in out  # printed
    assert (slurm.cwd / "results" / "smoke" / "report.html").stat().st_size > 10_000
    assert "Study 'smoke' is done:" in out and "  report:  results/smoke/report.html" in out


def test_no_slurm_job_leaves_its_scratch_folder_on_any_tier(runs):
    slurm = runs["slurm"]
    slurm.check()
    job_ids = {m["provenance"]["slurm_job_id"] for m in manifests(slurm.cwd).values()}
    job_ids |= {log.stem for log in (slurm.cwd / ".snakemake" / "slurm_logs").rglob("*.log")}
    assert len(job_ids) >= 20, job_ids  # the first try's cold starts, dumps, steps and benchmark points (27)
    user = pwd.getpwuid(os.geteuid()).pw_name
    left = {p for p in scratch_job_folders(user) - runs["scratch_before"] if p.name in job_ids}
    assert not left, f"Slurm jobs left their scratch folders: {sorted(map(str, left))}"
    # nor a folder whose study claim names this run's checkout, whatever its name
    owner = str(slurm.cwd.resolve())
    for root in (Path("/tmp") / f"cycleio-{user}", Path("/dev/shm") / f"cycleio-{user}"):
        claims = [p for p in root.glob("*/smoke/.cycleio-owner") if p.read_text().strip() == owner] if root.is_dir() else []
        assert not claims, claims


def test_the_cluster_check_refuses_before_any_job(slurm, tmp_path):
    """No Slurm reachable, an unknown partition, a job larger than the node: one line each, exit 1."""
    configs = [REPO / "config" / "config.yaml", SMOKE]
    site = tmp_path / "mysite"
    shutil.copytree(PROFILE, site)

    def cluster_check(*extra, profile=site, env=None):
        return run(BIN / "python", "-m", "cycleio", "cluster-check", "--profile", profile, *configs, *extra,
                   cwd=REPO, env={**os.environ, **(env or {})}, timeout=120)

    assert cluster_check().returncode == 0
    started = time.monotonic()
    gone = cluster_check(env={"SLURM_CONF": str(tmp_path / "nonexistent.conf")})
    assert gone.returncode == 1 and time.monotonic() - started < 30
    assert gone.stderr.strip().splitlines() == [
        f"cycleio: cluster check: Slurm is not reachable: SLURM_CONF={tmp_path / 'nonexistent.conf'} names no file; "
        "unset it, or set it to the cluster's slurm.conf (or run on the cluster's login node)"]
    config = (site / "config.yaml").read_text()
    (site / "config.yaml").write_text(config.replace('slurm_partition: "debug"', 'slurm_partition: "compute"'))
    unknown = cluster_check()
    assert unknown.returncode == 1 and unknown.stderr.strip().splitlines() == [
        f"cycleio: cluster check: {site}/config.yaml default-resources: slurm_partition is 'compute', which this "
        "cluster does not know; set it to one of: debug"]
    (site / "config.yaml").write_text(config)
    ranks = tmp_path / "ranks.yaml"
    ranks.write_text("write_component: {ranks: 64}\n")
    configs.append(ranks)
    large = cluster_check()
    problems = large.stderr.strip().splitlines()
    assert large.returncode == 1 and all(p.startswith("cycleio: cluster check: arm ") for p in problems), large.stderr
    assert any("fcst asks for" in p and "(64 tasks)" in p or "64 tasks x" in p for p in problems), problems
    assert all("write_component.ranks" in p and "partition 'debug'" in p for p in problems), problems
    # the shipped profile refuses its placeholder
    configs.pop()
    shipped = cluster_check(profile=REPO / "profiles" / "slurm")
    assert shipped.returncode == 1 and "slurm_partition is the placeholder SITE_PARTITION" in shipped.stderr


def test_forecast_ranks_start_in_their_job(runs):
    slurm = runs["slurm"]
    slurm.check()
    arms = slurm.cwd / "results" / "smoke" / "arms"
    forecasts = sorted(arms.rglob("fcst.records.jsonl"))
    assert len(forecasts) == sum(job.name == "fcst" for job in planned_jobs())
    for path in forecasts:
        ranks = {(e["rank"], e["nranks"]) for e in records(path) if e["op"] == "write_effective"}
        assert ranks == {(0, 2), (1, 2)}, (path, ranks)  # both ranks of one 2-rank communicator wrote
        arm, cycle = path.parent.parent.name, path.parent.name
        log = (slurm.cwd / "results" / "smoke" / "logs" / arm / cycle / "fcst.log").read_text()
        assert "mpiexec -n 2 " in log, log  # the study's launcher (the default), inside the job's allocation
    # the last forecasts' jobs are still known to Slurm (MinJobAge=300 s): 2 tasks on one node
    last = max(path.parent.name for path in forecasts)
    for path in arms.glob(f"*/{last}/fcst.manifest.json"):
        job_id = json.loads(path.read_text())["provenance"]["slurm_job_id"]
        job = run("scontrol", "show", "job", job_id).stdout
        assert "NumNodes=1 " in job and "NumTasks=2 " in job, (path, job)
    log = slurm.output()
    assert "has been submitted with SLURM jobid" in log and "Error in rule" not in log, tail(log)


def test_darshan_replay_jobs_run_as_slurm_jobs_with_their_ranks_started_by_srun(runs):
    replay = runs["replay"]
    replay.check()
    done = manifests(replay.cwd, "dslurm")
    jobs = {name: m for name, m in done.items() if "/darshan_" in name and "/darshan_inputs" not in name}
    # two jobs (ior on 2 ranks, dxt on 1) in each of two cycles, on both arms
    assert len(jobs) == 8 and {name.rsplit("/", 1)[1] for name in jobs} == {
        "darshan_ior.manifest.json", "darshan_dxt.manifest.json"}, sorted(done)
    job_ids = {m["provenance"]["slurm_job_id"] for m in jobs.values()}
    assert all(job_id.isdigit() for job_id in job_ids) and len(job_ids) == len(jobs)  # a Slurm job each
    for name, manifest in jobs.items():
        darshan = manifest["provenance"]["darshan"]
        assert darshan["launcher"] == SRUN.format(ntasks=darshan["ranks"]), (name, darshan["launcher"])
        for direction, fidelity in darshan["fidelity"].items():  # scaled: within 1 % of scale x logged bytes
            assert abs(fidelity["replayed_bytes"] - fidelity["expected_bytes"]) <= 0.01 * fidelity["expected_bytes"], (
                name, direction, fidelity)
    table = pd.read_csv(replay.cwd / REPLAY_TABLE, dtype={"cycle": str})
    assert len(table) == 8 and (table["replay_io_s"] > 0).all() and set(table["ranks"]) == {1, 2}


def test_burst_buffer_scratch_is_requested_by_each_step_job_and_staged_through(runs):
    if runs["bb"] is None:
        unavailable(runs["bb_problem"])
    runs["bb"].check()
    done = manifests(runs["bb_home"], "bbsmoke")
    steps = {name: m for name, m in done.items() if not name.startswith("bb/coldstart")}
    assert sorted(steps) == ["bb/2026123112/fcst.manifest.json", "bb/2026123112/post.manifest.json"]
    trace = BB_TRACE.read_text()[runs["trace_start"]:] if BB_TRACE.exists() else ""
    for name, manifest in steps.items():
        job_id = manifest["provenance"]["slurm_job_id"]
        assert job_id.isdigit(), name
        # the Lua burst buffer set up, staged in, gave its path to, and tore down this job's buffer
        for stage in ("setup", "data_in", "paths", "pre_run", "post_run", "data_out", "teardown"):
            assert f"{stage} job={job_id}" in trace, (stage, job_id, trace)
        assert f"setup job={job_id} pool=localpool" in trace
        # the step ran on the buffer's folder: the path the burst buffer exported as $BB_STAGE_DIR
        scratch = manifest["provenance"]["tiers"]["scratch"]
        assert scratch["tier"] == "bb" and scratch["path"] == str(BB_STAGE / f"job_{job_id}"), scratch
        assert (BB_STAGE / f"out_{job_id}" / "in.txt").is_file()  # data_out copied the buffer out
        events = records(runs["bb_home"] / "results/bbsmoke/arms" / name.replace("manifest.json", "records.jsonl"))
        # inputs copied into the buffer, outputs written there and copied back to the persistent tier
        copies = {(e["phase"], e["tier"]) for e in events if e["op"] == "copy" and e["bytes"] > 0}
        assert copies == {("stage_in", "bb"), ("stage_out", "lustre")}, copies
        assert {e["tier"] for e in events if e["phase"] == "run" and e["op"] == "write"} == {"bb"}
        if name.endswith("fcst.manifest.json"):  # the ranks started with srun, inside the job's allocation
            log = runs["bb_home"] / "results/bbsmoke/logs/bb/2026123112/fcst.log"
            assert f"{SRUN.format(ntasks=2)} " in log.read_text()
    # the cold start writes only the persistent tier: it asked for no burst buffer
    cold = done["bb/coldstart.manifest.json"]["provenance"]["slurm_job_id"]
    assert "job_process" in trace and f"setup job={cold} " not in trace


@pytest.fixture(scope="module", autouse=True)
def cleanup_burst_buffer_copies():
    """burst_buffer.lua copies each buffer to /tmp/bb_stage/out_<job>; drop those of this module's jobs."""
    before = set(BB_STAGE.glob("out_*")) if BB_STAGE.exists() else set()
    yield
    for path in (set(BB_STAGE.glob("out_*")) if BB_STAGE.exists() else set()) - before:
        shutil.rmtree(path, ignore_errors=True)
