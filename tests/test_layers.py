"""The package's shape: no import cycle among cycleio's modules, and light imports at DAG time.

The graph is built from the source with ``ast``, so imports inside functions count as much as
those at the top of a module. The Snakefile and rules/*.smk import parts of the package when
Snakemake builds the DAG (on the login node, for every job's re-parse too): those imports, and the
planning they do, must not load the writers' libraries or the staging engine.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "scripts" / "cycleio"
# Modules that DAG-time code must not load: the file writers' libraries, numpy, MPI, the staging engine and
# the step runner.
HEAVY = ("netCDF4", "h5py", "mpi4py", "eccodes", "numpy", "cycleio.storage.staging", "cycleio.storage.copyengine", "cycleio.surrogates.writers",
         "cycleio.surrogates.readers", "cycleio.surrogates.h5chunks",
         "cycleio.runner.job", "cycleio.surrogates.steps", "cycleio.surrogates.forecast.rank",
         "cycleio.surrogates.forecast.launcher")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """cycleio module -> the cycleio modules it imports anywhere in its source (relative imports resolved)."""
    files = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                # `from package import module` imports the module; `from module import name` the module
                targets = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in files else source
                           for alias in node.names]
            for target in targets:
                while target and target not in files:  # `import cycleio.a.b` as cycleio.a.b, names to their module
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_graph_sees_imports_inside_functions():
    graph = import_graph()
    assert len(graph) > 30
    # cli imports the step runner only inside its subcommands' functions
    assert "cycleio.runner.job" in graph["cycleio.cli"]
    assert "cycleio.surrogates.forecast.launcher" in graph["cycleio.surrogates.steps"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_cycle_among_cycleio_modules():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def dag_time_imports() -> list[str]:
    """The cycleio import statements of the Snakefile and rules/*.smk, as written there."""
    lines = []
    for path in [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]:
        lines += [line.strip() for line in path.read_text().splitlines()
                  if re.match(r"\s*(from cycleio[\w.]* import |import cycleio)", line)]
    return lines


def test_the_snakefile_imports_stay_light():
    imports = dag_time_imports()
    assert any("check_study" in line for line in imports) and any("rule_resources" in line for line in imports)
    # What the Snakefile and rules do with them at DAG time: plan the default study, its jobs and what
    # each waits for, size its jobs for Slurm, give each its settings, and plan its benchmarks.
    program = "\n".join([
        "import json, sys, yaml",
        *imports,
        "from cycleio.workflow.preflight import study_needs",
        "from cycleio.workflow.slurm import slurm_resources",
        f"study = WorkflowStudy.load(yaml.safe_load(open({str(REPO / 'config' / 'config.yaml')!r})))",
        "study_needs(study.study)",
        "for job in study.jobs.step_jobs():",
        "    study.jobs.dependencies(*job)",
        "    study.job_json(job.arm, job.name, job.cycle)",
        "for arm in study.arms.values():",
        "    for step in ('prep', 'anal', 'fcst', 'post'):",
        "        slurm_resources(arm, step, study.cycles[-1])",
        "study.bench.point_files(lambda *parts: '/'.join(parts))",
        "study.capacity_target_json",
        "print(json.dumps(sorted(sys.modules)))",
    ])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "scripts"),
                                                                     os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, cwd=REPO)
    assert result.returncode == 0, result.stderr
    loaded = set(json.loads(result.stdout.splitlines()[-1]))
    assert "cycleio.workflow.preflight" in loaded and "cycleio.workflow.slurm" in loaded
    assert not [name for name in HEAVY if name in loaded], f"DAG-time imports load {sorted(set(HEAVY) & loaded)}"


def test_commands_run_only_through_the_projects_runner():
    """process.run_command ends a timed-out command's whole tree (an MPI probe's ranks too); subprocess.run would
    leave them running."""
    calls = [f"{path.relative_to(PACKAGE)}:{node.lineno}" for path in sorted(PACKAGE.rglob("*.py"))
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "run"
             and isinstance(node.func.value, ast.Name) and node.func.value.id == "subprocess"]
    assert not calls, f"subprocess.run outside process.run_command: {calls}"


def test_the_layers_point_down():
    """pyproject's import-linter contract: cli, report, workflow, benchmarks, surrogates, storage, config, then
    the top-level modules; a lower layer imports no higher one, imports inside functions included."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "scripts"),
                                                                     os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
                            capture_output=True, text=True, env=env, cwd=REPO)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_the_layer_contract_covers_every_subpackage_and_module():
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = config["contracts"]
    assert config["root_package"] == "cycleio" and contract["type"] == "layers"
    assert "ignore_imports" not in contract and contract["containers"] == ["cycleio"]
    named = {name.strip() for layer in contract["layers"] for name in re.split(r"[|:]", layer)}
    modules = {path.stem for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    packages = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    assert named == modules | packages


def test_the_forecast_rank_program_imports_only_what_the_parallel_stack_has():
    """The shared-file strategies run the rank program on .venv-parallel (requirements-parallel.lock): no module it
    loads, however far down, may import a package that stack lacks (pyarrow through cycleio.records did once)."""
    graph = import_graph()
    closure, todo = set(), ["cycleio.surrogates.forecast.rank"]
    while todo:
        name = todo.pop()
        if name not in closure:
            closure.add(name)
            todo += graph[name]
    lock = (REPO / "requirements-parallel.lock").read_text().lower()
    installed = {line.split("==")[0].replace("-", "_") for line in lock.splitlines() if "==" in line}
    installed |= {"yaml"}  # PyYAML's import name
    installed |= {"eccodes"}  # imported inside writers.write_grib only: the ranks write netCDF and text, no GRIB2
    found = {}
    for name in closure:
        path = PACKAGE.parent / (name.replace(".", "/") + ".py")
        path = path if path.exists() else path.with_suffix("") / "__init__.py"
        for node in ast.walk(ast.parse(path.read_text())):
            roots = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and not node.level and node.module else [])
            for root in (r.split(".")[0] for r in roots):
                if root != "cycleio" and root not in sys.stdlib_module_names and root.lower() not in installed:
                    found.setdefault(root, set()).add(name)
    assert not found, f"the rank program's modules import packages .venv-parallel lacks: {found}"
