"""Grid arithmetic of the cubed-sphere model and its Gaussian history grid."""

from __future__ import annotations

from dataclasses import dataclass

# C12 is not an operational resolution: it is the tiny size the tests use.
RESOLUTIONS = ("C12", "C48", "C96", "C192", "C384", "C768", "C1152")


@dataclass(frozen=True)
class Grid:
    resolution: str
    levels: int

    @property
    def n(self) -> int:
        """Columns per tile edge: C768 -> 768."""
        return int(self.resolution[1:])

    @property
    def nx(self) -> int:
        """Gaussian history grid, 4N x 2N points (C768 -> 3072 x 1536)."""
        return 4 * self.n

    @property
    def ny(self) -> int:
        return 2 * self.n
