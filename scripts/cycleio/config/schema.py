"""The study config's JSON Schema (config.schema.yaml, package data beside this module): the one place where each
key's type, description and default are written. The Snakefile, the jobs and ``cycleio check-config`` read this one
file, from a checkout or an installed package alike.

Validation fills the defaults into a config (:func:`cycleio.config.settings.validate_config`); an object built
without a config (in tests, or from a job's settings that leave out what the job does not read) takes its
defaults from here, never from a copy in code.
"""

from __future__ import annotations

import copy
import functools
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import yaml

SCHEMA = resources.files(__package__).joinpath("config.schema.yaml")


def load_schema(path: str | Path | Traversable | None = None) -> dict:
    """The schema at ``path``, by default the package's own (SCHEMA)."""
    if path is None and not SCHEMA.is_file():
        raise FileNotFoundError(f"cycleio's config schema {SCHEMA} is missing: the package was installed without its "
                                "data (pyproject.toml's package-data); install it again with pip from the checkout")
    source = SCHEMA if path is None else Path(path) if isinstance(path, str) else path
    with source.open() as handle:  # libyaml's safe loader where built: jobs read the schema too
        return yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@functools.cache
def study_schema() -> dict:
    """The package's schema, read once per process (30 ms each read) and shared: read it, never change it
    (load_schema gives a copy of one's own)."""
    return load_schema()


def _sub_schema(key: str) -> dict:
    sub = study_schema()
    for part in key.split("."):
        sub = sub["additionalProperties"] if part == "<name>" else sub["properties"][part]
    return sub


def schema_default(key: str):
    """The schema's default of a config key such as ``staging.streams``, or ``tiers.<name>.shared`` for a key
    of every named entry (a copy, which the caller may change)."""
    return copy.deepcopy(_sub_schema(key)["default"])


def object_defaults(key: str) -> dict:
    """The schema's default of every key of the object ``key`` (e.g. ``write_component``), as validation fills
    them into a config that leaves the object out."""
    return {name: copy.deepcopy(sub["default"])
            for name, sub in _sub_schema(key)["properties"].items() if "default" in sub}
