"""The forecast's plan: each output file's layout and the ranks' pieces of it, and the output hours."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .. import nclayout
from ..inventory import FileSpec
from ..context import WriteContext
from .layout import ForecastError, row_bounds, tile_blocks, tile_owner


@dataclass
class Piece:
    """One rank's block of a file: global rows [start, stop) of each row dimension."""

    rank: int
    index: int
    rows: dict[str, tuple[int, int]]


@dataclass
class FilePlan:
    """A file of the hour: its layout (None: written whole by one rank with its writer (writers.py)) and pieces."""

    spec: FileSpec
    layout: nclayout.NetcdfLayout | None = None
    pieces: list[Piece] = field(default_factory=list)

    @property
    def undecomposed(self) -> bool:
        return self.layout is None or not self.layout.fields

    @property
    def split(self) -> bool:
        return len(self.pieces) > 1

    def piece_of(self, rank: int) -> Piece | None:
        return next((piece for piece in self.pieces if piece.rank == rank), None)

    def piece_path(self, workdir: Path, piece: Piece) -> Path:
        return workdir / f"{self.spec.path}.{piece.index:04d}"

    def piece_layout(self, piece: Piece) -> nclayout.NetcdfLayout:
        rows = " ".join(f"{dim}={start}:{stop}" for dim, (start, stop) in piece.rows.items())
        return self.layout.piece(piece.rows, {"cycleio_piece": f"{piece.index} of {len(self.pieces)}",
                                              "cycleio_piece_rows": rows})


def file_plan(spec: FileSpec, ctx: WriteContext, compute: int) -> FilePlan:
    """How ``spec`` is written: its layout and the ranks' pieces (bands of rows).

    Tile files (a ``tile`` parameter) take the tile layout; other gridded files split their rows over
    all compute ranks. Files without synthetic fields are written whole by one rank.
    """
    build = nclayout.LAYOUTS.get(spec.kind)
    layout = build(spec, ctx) if build else None
    if layout is None or not layout.fields:
        return FilePlan(spec, layout, [Piece(0, 0, {})])
    row_dims = sorted(layout.row_dims())
    tile = spec.param("tile")
    if tile is not None:
        k = tile_blocks(compute)
        owners = [(tile_owner(tile, block, compute), block) for block in range(k)]
    else:
        k, owners = compute, [(rank, rank) for rank in range(compute)]
    pieces = [Piece(rank, block, {dim: row_bounds(layout.size(dim), k, block) for dim in row_dims})
              for rank, block in owners]
    for piece in pieces:
        empty = [dim for dim, (start, stop) in piece.rows.items() if stop <= start]
        if empty:
            raise ForecastError(
                f"write_component.ranks={compute} is too many for {spec.path} at {ctx.grid.resolution}: "
                f"block {piece.index} gets no rows of {empty[0]} ({layout.size(empty[0])} rows); use fewer ranks"
            )
    return FilePlan(spec, layout, pieces)


def hour_groups(writes: list[FileSpec]) -> list[tuple[int, list[FileSpec]]]:
    """The forecast's writes grouped by output hour, in the inventory's order (restarts follow their hour)."""
    groups: list[tuple[int, list[FileSpec]]] = []
    for spec in writes:
        hour = spec.param("fhour")
        if hour is not None and (not groups or groups[-1][0] != hour):
            groups.append((hour, []))
        if not groups:
            raise ForecastError(f"the forecast's first output {spec.path} has no forecast hour")
        groups[-1][1].append(spec)
    return groups
