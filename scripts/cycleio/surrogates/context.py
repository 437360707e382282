"""What a writer is given: the grid, the seeds, the cycle, the compression, and where its overheads go."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from . import fields
from .grid import Grid
from .kinds import Compression
from .transfers import IO_BUFFER_BYTES, Overheads


# Noise of the synthetic fields, as a fraction of their spread: 0.05 makes a C768 atmf file compress
# (zlib 1, BitRound to 5 bits) to 0.20 of its raw size, as the operational 6.7 of 33 GB.
FIELD_NOISE = 0.05


@dataclass(frozen=True)
class WriteContext:
    grid: Grid
    seed: int
    cycle: str
    compression: Compression = Compression()
    times: Overheads = field(default_factory=Overheads, compare=False)
    buffer_bytes: int = IO_BUFFER_BYTES

    def plane(self, key: tuple, ny: int, nx: int, mean: float, spread: float, dtype, noise: float = FIELD_NOISE):
        t0 = time.perf_counter()
        data = fields.plane(key, ny, nx, mean, spread, noise, dtype)
        self.times.generate += time.perf_counter() - t0
        return data
