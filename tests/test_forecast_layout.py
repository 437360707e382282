"""surrogates.forecast.layout: how the ranks split the grid and the writer ranks a strategy adds."""

from __future__ import annotations

import pytest

from cycleio.surrogates.forecast.layout import (ForecastError, RankLayout, check_layout, row_bounds, tile_blocks,
                                               tile_owner)
from cycleio.surrogates.grid import Grid


def test_row_blocks_cover_every_row_once():
    for rows, parts in ((24, 1), (24, 4), (13, 4), (12, 12)):
        blocks = [row_bounds(rows, parts, i) for i in range(parts)]
        assert blocks[0][0] == 0 and blocks[-1][1] == rows
        assert all(a[1] == b[0] for a, b in zip(blocks, blocks[1:]))


def test_tiles_take_the_models_layout_with_multiples_of_six_ranks():
    assert tile_blocks(12) == 2 and [tile_owner(3, b, 12) for b in range(2)] == [4, 5]
    assert tile_blocks(6) == 1 and tile_owner(6, 0, 6) == 5
    assert tile_blocks(4) == 4 and [tile_owner(2, b, 4) for b in range(4)] == [0, 1, 2, 3]


def test_quilt_layout_adds_writer_ranks_and_bad_strategy_is_refused():
    layout = RankLayout.from_settings("quilt", {"ranks": 2, "write_groups": 2, "write_tasks_per_group": 2})
    assert layout.ntasks == 6 and layout.writer_rank(1, 0) == 4
    assert RankLayout.from_settings("serial", {"ranks": 3, "write_groups": 2}).ntasks == 3
    with pytest.raises(ForecastError, match="not one of"):
        RankLayout.from_settings("pnetcdf", {})


def test_bad_mpiio_and_too_many_tasks_per_group_are_refused_naming_the_key():
    with pytest.raises(ForecastError, match="write_component.mpiio"):
        RankLayout.from_settings("parallel", {"mpiio": "sometimes"})
    with pytest.raises(ForecastError, match="write_component.write_tasks_per_group=3 is more than the 2 compute"):
        check_layout(RankLayout.from_settings("quilt_parallel", {"ranks": 2, "write_tasks_per_group": 3}), Grid("C12", 3))
