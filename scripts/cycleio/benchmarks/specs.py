"""What a benchmark point measures: the patterns and specs of each benchmark, and the settings one
benchmark job gets (as JSON) from the plan.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field

from ..config.schema import schema_default
from ..config.sizes import parse_size
from ..config.tierspec import Tier
from ..units import MiB


# The defaults below are the schema's (benchmarks.patterns.<name>.*, benchmarks.metadata.<name>.*, ...), for
# patterns built without a config (tests); the plan builds them from the validated config.
def _pattern_default(key: str):
    return schema_default(f"benchmarks.patterns.<name>.{key}")


def _metadata_default(key: str):
    return schema_default(f"benchmarks.metadata.<name>.{key}")


@dataclass(frozen=True)
class IOPattern:
    """An IOR-style bandwidth pattern; bytes per task = block_size_bytes x segments."""

    name: str
    api: str = _pattern_default("api")
    file_per_proc: bool = _pattern_default("file_per_proc")
    transfer_size_bytes: int = parse_size(_pattern_default("transfer_size"), "benchmarks.patterns.<name>.transfer_size")
    block_size_bytes: int = parse_size(_pattern_default("block_size"), "benchmarks.patterns.<name>.block_size")
    segments: int = _pattern_default("segments")
    fsync: bool = _pattern_default("fsync")
    direct_io: bool = _pattern_default("direct_io")
    reorder: str = _pattern_default("reorder")
    stonewall_s: float = _pattern_default("stonewall_s")
    random: bool = _pattern_default("random")

    @property
    def bytes_per_task(self) -> int:
        return self.block_size_bytes * self.segments


def segments_behind_time_bound(block_size_bytes: int, segments: int, stonewall_s: float,
                               max_MiB_per_s_per_task: float) -> int:
    """The segments a pattern bounded by time (``stonewall_s`` > 0) needs so that its time, not its bytes, ends
    each phase for a task moving up to ``max_MiB_per_s_per_task`` (config benchmarks.stonewall_max_MiB_per_s_per_task),
    and never fewer than configured; a pattern bounded by bytes (0 s) keeps its segments.

    Why a cap and not "as many as the tier holds": the bytes behind the bound are what each task may write, and on
    a memory tier that is RAM; they are reserved on the tier before the point runs (TierSite.require_space). A
    tier faster than the cap ends the phase by bytes, after stonewall_s x cap / rate seconds, which is still long
    enough to time (benchmarks.threshold) up to several times the cap."""
    if stonewall_s <= 0:
        return segments
    needed = math.ceil(stonewall_s * max_MiB_per_s_per_task * MiB / block_size_bytes)
    return max(segments, needed)


@dataclass(frozen=True)
class MetadataPattern:
    """An mdtest-style pattern: files per task, bytes written and read per file, own folder per task."""

    name: str
    files_per_task: int = _metadata_default("files_per_task")
    file_size_bytes: int = _metadata_default("file_size")  # a number of bytes (0) in the schema
    unique_dir: bool = _metadata_default("unique_dir")


@dataclass(frozen=True)
class FieldIOSpec:
    patterns: tuple = tuple(str(p) for p in schema_default("benchmarks.fieldio.patterns"))
    layouts: tuple = tuple(schema_default("benchmarks.fieldio.layouts"))
    fields_per_task: int = schema_default("benchmarks.fieldio.fields_per_task")
    field_size_bytes: int = parse_size(schema_default("benchmarks.fieldio.field_size"), "benchmarks.fieldio.field_size")
    fsync: bool = schema_default("benchmarks.fieldio.fsync")


@dataclass(frozen=True)
class ReplaySpec:
    transfer_size_bytes: int = 0  # 0: the surrogates' own mean transfer per step and operation (the schema's auto)
    max_files: int = schema_default("benchmarks.replay.max_files")


@dataclass
class PointSettings:
    """Everything one benchmark job needs; rules pass it to ``cycleio bench`` as JSON."""

    study: str
    benchmark: str
    tier: Tier
    pattern: str
    spec: dict
    tasks: int
    repetitions: int
    tool: str = schema_default("benchmarks.tool")
    paths: dict = field(default_factory=dict)
    launcher: str = schema_default("launcher")
    nodes: int = 1  # client nodes; ``tasks`` counts the ranks (or fio jobs) on all of them

    @property
    def tasks_per_node(self) -> int:
        return self.tasks // self.nodes

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "PointSettings":
        raw = json.loads(text)
        raw["tier"] = Tier(**raw["tier"])
        return cls(**raw)

    def io_pattern(self) -> IOPattern:
        return IOPattern(**self.spec)

    def metadata_pattern(self) -> MetadataPattern:
        return MetadataPattern(**self.spec)

    def fieldio_spec(self) -> FieldIOSpec:
        spec = dict(self.spec)
        spec["patterns"], spec["layouts"] = tuple(spec["patterns"]), tuple(spec["layouts"])
        return FieldIOSpec(**spec)


# A point's shape: its task count on one node (an int, or "n4" as its files are named), or "N3.n2": 3 nodes of
# 2 tasks each (files easy.N3.n2.csv). One node keeps the names of the points from before nodes were swept.
SHAPE = re.compile(r"^(?:N(?P<nodes>[0-9]+)\.)?n?(?P<tasks>[0-9]+)$")


def shape_of(nodes: int, tasks_per_node: int) -> int | str:
    return int(tasks_per_node) if nodes == 1 else f"N{nodes}.n{tasks_per_node}"


def parse_shape(shape: int | str) -> tuple[int, int]:
    """(nodes, tasks per node) of a point's shape: 4, "4", "n4" (one node) or "N3.n2"."""
    match = SHAPE.match(str(shape))
    if not match or int(match["tasks"]) < 1 or (match["nodes"] is not None and int(match["nodes"]) < 1):
        raise ValueError(f"{shape!r} is not a benchmark point's shape; expected a task count (4, n4) or "
                         "N<nodes>.n<tasks per node> (N3.n2)")
    return int(match["nodes"] or 1), int(match["tasks"])


def shape_name(shape: int | str) -> str:
    """The shape as point files name it: n4, N3.n2."""
    nodes, tasks = parse_shape(shape)
    return f"n{tasks}" if nodes == 1 else f"N{nodes}.n{tasks}"
