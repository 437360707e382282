"""The benchmark tools, keyed by the names the config uses (``benchmarks.tool``, ``benchmarks.<name>_path``).

Each module holds one tool's command builders, its output parser (``parse``), its version probe
(``version``), ``guess_can_open(path, text)`` for ``cycleio parse``, and ``unsupported(text)``, which
says what a file of that tool without results is. Which tool runs a benchmark is decided here, in one
function, when the config is loaded and again where the job runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import ModuleType

from ..common import BenchmarkError, which
from ..specs import IOPattern
from . import fio, ior, mdtest

TOOLS: dict[str, ModuleType] = {"ior": ior, "mdtest": mdtest, "fio": fio}
CHOICES = ("auto", "ior", "fio")  # benchmarks.tool
NATIVE = {"io": "ior", "replay": "ior", "metadata": "mdtest"}  # what each benchmark runs where it can


@dataclass(frozen=True)
class Tool:
    name: str  # a key of TOOLS
    path: str

    @property
    def module(self) -> ModuleType:
        return TOOLS[self.name]

    @property
    def label(self) -> str:
        return self.module.LABEL

    def version(self) -> str | None:
        return self.module.version(self.path)


def find_tool(name: str, configured: str = "") -> str | None:
    """A tool's executable: the configured path (or command name), else ``name`` on PATH."""
    if configured:
        candidate = os.path.expandvars(os.path.expanduser(configured))
        if os.sep in candidate:
            if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
                raise BenchmarkError(f"config key 'benchmarks.{name}_path': {configured!r} is not an executable file")
            return candidate
        found = which(candidate)
        if not found:
            raise BenchmarkError(f"config key 'benchmarks.{name}_path': {configured!r} is not found on PATH")
        return found
    return which(name)


def choose_tool(choice: str, benchmark: str, paths: dict, pattern: IOPattern | None = None) -> Tool:
    """IOR (io, replay) or mdtest (metadata) when found and allowed, else fio, which must then be able
    to stand for ``pattern``'s API. Errors name the config key to change."""
    native = NATIVE[benchmark]
    if choice in ("auto", "ior"):
        path = find_tool(native, paths.get(native, ""))
        if path:
            return Tool(native, path)
        if choice == "ior":
            raise BenchmarkError(
                f"config key 'benchmarks.{native}_path': benchmarks.tool is 'ior' but {native} was not found "
                f"(benchmarks.{native}_path is {paths.get(native, '')!r}, and {native} is not on PATH). IOR and "
                "mdtest cannot be installed from the package registries here: build them (https://github.com/hpc/ior) "
                f"and set benchmarks.{native}_path, or set benchmarks.tool to auto or fio"
            )
    if pattern is not None and pattern.api not in fio.ENGINES:
        why = "benchmarks.tool is fio" if choice == "fio" else "IOR was not found (set benchmarks.ior_path)"
        raise BenchmarkError(f"config key 'benchmarks.patterns.{pattern.name}.api': {pattern.api} needs IOR, but {why} "
                             f"(fio stands for {', '.join(fio.ENGINES)} only)")
    path = find_tool("fio", paths.get("fio", ""))
    if not path:
        raise BenchmarkError("config key 'benchmarks.fio_path': fio was not found on PATH (and benchmarks.fio_path is "
                             "empty); install it (Debian: apt-get install fio) or set benchmarks.fio_path")
    return Tool("fio", path)
