"""A tier as the config names it: its kind, path template and properties, and the path expanded.

A tier path may hold environment variables (``$TMPDIR``, ``${SLURM_JOB_ID}``,
``${TMPDIR:-/tmp}`` with a default) and the placeholders ``{user}``, ``{study}`` and ``{workdir}``
(8 hex digits naming the working directory the study runs from). Paths are expanded where the job
runs, since variables such as ``$TMPDIR`` or ``$SLURM_JOB_ID`` differ per job; validation before the
run tolerates the batch job's own variables (``JOB_TIME_VARIABLES``). What a job does on a tier
(opening it, claiming the study's folder, probing, striping) is storage.tiers.
"""

from __future__ import annotations

import getpass
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .schema import schema_default

# Variables that exist only inside a batch job: a study may name them although the submitting
# shell lacks them, so validation before the run tolerates them.
JOB_TIME_VARIABLES = re.compile(r"^(SLURM_\w+|DW_\w+|BB_\w+|PBS_\w+|LSB_\w+)$")

_VARIABLE = re.compile(r"\$(?:\{(?P<braced>\w+)(?::-(?P<default>[^}]*))?\}|(?P<bare>\w+))")


class TierError(ValueError):
    """A tier that cannot be used, with the tier's name and what is wrong."""


@dataclass(frozen=True)
class Tier:
    name: str
    kind: str
    path: str  # template, unexpanded
    # the defaults are the schema's (tiers.<name>.*)
    persistent: bool = schema_default("tiers.<name>.persistent")
    shared: bool = schema_default("tiers.<name>.shared")
    # the batch directive that requests it, e.g. "#DW jobdw ..." or "#BB_LUA ..."
    burst_buffer: str = schema_default("tiers.<name>.burst_buffer")
    # Lustre striping set with lfs setstripe before writing (0 and "" leave it as is)
    stripe_count: int = schema_default("tiers.<name>.stripe_count")
    stripe_size: str = schema_default("tiers.<name>.stripe_size")

    def resolve(self, study: str, env: dict[str, str] | None = None) -> Path:
        return expand_tier_path(self.name, self.path, study, env)


def workdir_tag(path: str | os.PathLike = ".") -> str:
    """8 hex digits naming a working directory: the ``{workdir}`` placeholder of tier paths."""
    return hashlib.sha1(os.path.realpath(path).encode()).hexdigest()[:8]


def current_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def expand_variables(tier_name: str, template: str, env: dict[str, str], tolerate=None) -> str:
    def replace(match: re.Match) -> str:
        name = match.group("braced") or match.group("bare")
        if name in env and env[name] != "":
            return env[name]
        if match.group("default") is not None:
            return match.group("default")
        if tolerate is not None and tolerate.match(name):
            return match.group(0)
        raise TierError(
            f"tier '{tier_name}': path {template!r} uses ${name}, which is not set; "
            f"set it, or give a default as ${{{name}:-/some/path}}"
        )

    return _VARIABLE.sub(replace, template)


def expand_tier_path(
    tier_name: str, template: str, study: str, env: dict[str, str] | None = None, tolerate=None
) -> Path:
    """Expand variables and placeholders; relative paths stay relative to the working directory."""
    env = dict(os.environ if env is None else env)
    # placeholders first: a variable's default may hold one, as in ${SLURM_JOB_ID:-local-{workdir}}
    text = template.replace("{user}", current_user()).replace("{study}", study).replace("{workdir}", workdir_tag())
    return Path(os.path.expanduser(expand_variables(tier_name, text, env, tolerate)))
