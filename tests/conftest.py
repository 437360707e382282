"""Shared fixtures. In CI (CI=true) a test whose tool is missing fails instead of skipping."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
try:
    import cycleio  # noqa: F401
except ImportError:  # running without `pip install -e .`
    sys.path.insert(0, str(REPO / "scripts"))

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# IOR cannot be installed from a package registry: its live test exists only where an ior is found.
collect_ignore = [] if shutil.which("ior") else ["test_ior_live.py"]


def require_tool(name: str, why: str) -> str:
    """Path of a tool the test needs; skip outside CI when it is missing, fail in CI."""
    path = shutil.which(name) or (shutil.which(name, path=str(Path(sys.executable).parent)))
    if path:
        return path
    message = f"{name} not found on PATH; {why}"
    if IN_CI:
        pytest.fail(f"CI=true and {message}")
    pytest.skip(message)


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def default_config() -> dict:
    import yaml

    return yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def with_changes(config: dict, **changes) -> dict:
    """A deep copy of config with keys replaced; nested keys are joined by __ (cycles__end=...)."""
    import copy

    out = copy.deepcopy(config)
    for dotted, value in changes.items():
        target = out
        *parents, last = dotted.split("__")
        for key in parents:
            target = target[key]
        target[last] = value
    return out
