"""The conda environment, the lock file and pyproject's pins stay in step."""

import re

import yaml


def pins(lines):
    out = {}
    for line in lines:
        match = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s;#]+).*", line)
        if match:
            out[match.group(1).lower().replace("_", "-")] = match.group(2)
    return out


def pyproject_pins(repo):
    import tomllib

    project = tomllib.loads((repo / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + [d for extra in project["optional-dependencies"].values() for d in extra]
    return pins(deps)


def test_conda_env_pins_match_pyproject(repo):
    env = yaml.safe_load((repo / "envs" / "cycleio.yaml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    conda_pins = pins(pip_section)
    wanted = pyproject_pins(repo)
    assert conda_pins, "envs/cycleio.yaml has no pinned pip packages"
    for name, version in conda_pins.items():
        assert wanted.get(name) == version, f"envs/cycleio.yaml pins {name}=={version}, pyproject {wanted.get(name)}"
    jobs_need = {"xarray", "netcdf4", "dask", "numpy", "pandas", "pyarrow", "seaborn", "xxhash", "mpi4py", "pyyaml"}
    assert jobs_need <= set(conda_pins)


def test_lock_file_agrees_with_pyproject(repo):
    lock = pins((repo / "requirements.lock").read_text().splitlines())
    for name, version in pyproject_pins(repo).items():
        assert lock.get(name) == version, f"requirements.lock has {name}=={lock.get(name)}, pyproject wants {version}"
