"""A non-editable install: the wheel `pip install .` builds, in a fresh venv, works from any folder.

The wheel is built from the package alone (pyproject.toml, README.md, scripts/cycleio: none of the repository's other
folders) and installed into a fresh venv. Its dependencies come from the project's environment as a layer under it,
as a site's modules would give them: a .pth line naming the environment's site-packages (whose own .pth files, among
them the editable install of the checkout, are not read), its MPI (the mpich wheel's libraries, linked into the venv's
lib/ where mpi4py looks for them, and its mpiexec on PATH). Nothing points at the checkout: no PYTHONPATH, and every
command runs in a folder of its own.
Then `cycleio check-config` checks a study, and the first jobs of the smoke study run as the rules start them (cold
start, then the half cycle's forecast, whose ranks start under mpiexec, or under Open MPI's launcher with the parallel
stack's Python for a shared-file strategy): their files match their manifests.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

from conftest import REPO, require_tool
from test_parallel_io import parallel_python  # noqa: F401 (a fixture: the parallel stack's Python)

pytestmark = [pytest.mark.job, pytest.mark.mpi]  # the forecast starts MPI ranks
PACKAGE_PARTS = ("pyproject.toml", "README.md", "scripts/cycleio")
CYCLE = "2026123112"  # the smoke study's first cycle: the half cycle after the cold start (fcst, post)
# The study: the smoke study's first cycle on its lustre tier (no staging), without the benchmarks.
LAYER = {"cycles": {"end": CYCLE}, "scratch_tiers": ["lustre"], "benchmarks": {"enabled": False}}
SETTINGS = """
import json, sys
import yaml
from snakemake.utils import update_config
from cycleio.workflow.study import load_study
config = {}
for path in sys.argv[1:]:  # laid over each other as Snakemake lays its --configfile files
    update_config(config, yaml.safe_load(open(path)))
_, study = load_study(config)
arm = study.arms["lustre"]
print(json.dumps({"coldstart": arm.job_json("coldstart"), "fcst": arm.job_json("fcst", study.cycles[0])}))
"""


def build_wheel(folder: Path) -> Path:
    """The wheel of the package alone, built as `pip install .` builds it (in an isolated build environment)."""
    source = folder / "source"
    for part in PACKAGE_PARTS:
        target = source / part
        target.parent.mkdir(parents=True, exist_ok=True)
        if (REPO / part).is_dir():
            shutil.copytree(REPO / part, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(REPO / part, target)
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(folder / "dist"), str(source)], folder)
    return next((folder / "dist").glob("cycleio-*.whl"))


def fresh_venv(folder: Path, wheel: Path) -> Path:
    """A venv with the wheel installed, over the project's environment's packages; its bin folder."""
    venv = folder / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], folder)
    python = venv / "bin" / "python"
    purelib = run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], folder).stdout
    (Path(purelib.strip()) / "project-environment.pth").write_text(sysconfig.get_path("purelib") + "\n")
    for library in (Path(sys.prefix) / "lib").iterdir():  # the mpich wheel's libmpi, where mpi4py looks for it
        if not library.name.startswith("python") and not (venv / "lib" / library.name).exists():
            (venv / "lib" / library.name).symlink_to(library)
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        folder)
    return venv / "bin"


def run(argv: list, cwd: Path, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, f"{argv} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict]:
    """The fresh venv's bin folder and the environment its commands run with."""
    require_tool("mpiexec", "the mpich wheel (pip install mpich) provides it")
    folder = tmp_path_factory.mktemp("install")
    bin_dir = fresh_venv(folder, build_wheel(folder))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("SLURM_")}
    project_bin = str(Path(sys.executable).parent)  # the project's tools: the mpich wheel's mpiexec
    env["PATH"] = os.pathsep.join([str(bin_dir), project_bin, *(p for p in env["PATH"].split(os.pathsep)
                                                                if p != project_bin)])
    return bin_dir, env


def test_the_installed_package_is_the_one_imported_and_carries_its_schema(installed, tmp_path):
    bin_dir, env = installed
    probe = ("import cycleio, cycleio.config.schema as s; print(cycleio.__file__); "
             "print(s.load_schema()['properties']['study']['default'])")
    where, default = run([bin_dir / "python", "-c", probe], tmp_path, env).stdout.split()
    assert Path(where).is_relative_to(bin_dir.parent) and default == "default"


def first_jobs(bin_dir: Path, env: dict, folder: Path, layer: dict) -> str:
    """`cycleio check-config` of the smoke study with ``layer`` over it, then its cold start and first forecast as the
    rules start them, in ``folder``; check-config's words (the jobs' files are checked against their manifests)."""
    shutil.copy2(REPO / "config" / "studies" / "smoke.yaml", folder / "smoke.yaml")
    (folder / "layer.yaml").write_text(yaml.safe_dump(layer))
    checked = run([bin_dir / "cycleio", "check-config", "smoke.yaml", "layer.yaml"], folder, env).stdout
    settings = json.loads(run(["python", "-c", SETTINGS, "smoke.yaml", "layer.yaml"], folder, env).stdout)
    arm = Path("results/smoke/arms/lustre")  # as the rules name the jobs' files, from the folder the jobs run in
    run(["python", "-m", "cycleio", "--log", arm / "coldstart.log", "coldstart", "--arm-settings",
         settings["coldstart"], "--records", arm / "coldstart.records.jsonl", "--manifest",
         arm / "coldstart.manifest.json"], folder, env)
    step = arm / CYCLE
    run(["python", "-m", "cycleio", "--log", step / "fcst.log", "step", "--arm-settings", settings["fcst"], "--cycle",
         CYCLE, "--step", "fcst", "--attempt", "1", "--records", step / "fcst.records.jsonl", "--manifest",
         step / "fcst.manifest.json", "--failed-attempts", step / "fcst.failed-attempts"], folder, env)
    log = (folder / step / "fcst.log").read_text()
    assert "fcst writes under MPI" in log, log[-2000:]
    verified = run(["cycleio", "verify", "results"], folder, env).stdout
    assert "2 manifests" in verified and "0 missing or differ" in verified, verified
    return checked + log


def test_the_installed_cycleio_checks_a_study_and_runs_its_first_jobs_from_another_folder(installed, tmp_path):
    bin_dir, env = installed
    said = first_jobs(bin_dir, env, tmp_path, LAYER)
    assert said.startswith(f"study smoke: 1 cycles ({CYCLE} to {CYCLE}), arms: lustre"), said
    assert f"{bin_dir / 'python'} -m cycleio.surrogates.forecast.rank" in said  # the ranks: the fresh venv's Python


def test_the_parallel_stacks_ranks_import_the_installed_cycleio_alone(installed, parallel_python, tmp_path):
    """The shared-file strategies' ranks run the parallel stack's Python, a venv of its own without cycleio: they
    import the installed package through a folder holding a link to it alone (process.rank_program)."""
    bin_dir, env = installed
    layer = {**LAYER, "write_strategies": ["parallel"], "parallel_stack": {"python": parallel_python}}
    said = first_jobs(bin_dir, env, tmp_path, layer)
    assert f"{parallel_python} -m cycleio.surrogates.forecast.rank" in said, said[-2000:]
