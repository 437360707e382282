"""What a benchmark point measures: the patterns and specs of each benchmark, and the settings one
benchmark job gets (as JSON) from the plan.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from ..storage.tiers import Tier
from .rows import MiB


@dataclass(frozen=True)
class IOPattern:
    """An IOR-style bandwidth pattern; bytes per task = block_size_bytes x segments."""

    name: str
    api: str = "POSIX"
    file_per_proc: bool = True
    transfer_size_bytes: int = 2 * MiB
    block_size_bytes: int = 64 * MiB
    segments: int = 1
    fsync: bool = True
    direct_io: bool = False
    reorder: str = "constant"
    stonewall_s: float = 0.0
    random: bool = False

    @property
    def bytes_per_task(self) -> int:
        return self.block_size_bytes * self.segments


@dataclass(frozen=True)
class MetadataPattern:
    """An mdtest-style pattern: files per task, bytes written and read per file, own folder per task."""

    name: str
    files_per_task: int = 1000
    file_size_bytes: int = 0
    unique_dir: bool = True


@dataclass(frozen=True)
class FieldIOSpec:
    patterns: tuple = ("0A", "0B", "1", "2B")
    layouts: tuple = ("file_per_field", "appended")
    fields_per_task: int = 100
    field_size_bytes: int = MiB
    fsync: bool = True


@dataclass(frozen=True)
class ReplaySpec:
    transfer_size_bytes: int = 0  # 0: the surrogates' own mean transfer per step and operation
    max_files: int = 100


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
    tool: str = "auto"
    paths: dict = field(default_factory=dict)
    launcher: str = "mpiexec -n {ntasks}"

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

    def replay_spec(self) -> ReplaySpec:
        return ReplaySpec(**self.spec)
