"""surrogates.forecast.plan: each file's pieces across the compute ranks and the hours that group the files."""

from __future__ import annotations

import netCDF4
import pytest

from conftest import fcst_writes, forecast_arm, forecast_context
from cycleio.surrogates import h5chunks
from cycleio.surrogates.forecast.layout import ForecastError
from cycleio.surrogates.forecast.plan import file_plan, hour_groups


def test_history_pieces_split_rows_and_small_files_stay_whole():
    ctx = forecast_context(forecast_arm("per_rank"))
    specs = {spec.kind: spec for spec in fcst_writes()}
    atm = file_plan(specs["atm_history"], ctx, 4)
    assert [p.rows["grid_yt"] for p in atm.pieces] == [(0, 6), (6, 12), (12, 18), (18, 24)] and atm.split
    assert not file_plan(specs["coupler"], ctx, 4).split and file_plan(specs["coupler"], ctx, 4).undecomposed
    assert file_plan(specs["fv_core_axes"], ctx, 4).undecomposed  # no planes to split: written whole
    assert h5chunks.netCDF4 is netCDF4  # the recording stand-in is gone again
    with pytest.raises(ForecastError, match="too many"):
        file_plan(specs["fv_core.res"], ctx, 14)  # 14 blocks of a 12-row tile


def test_hours_group_restarts_with_their_output_hour():
    groups = hour_groups(fcst_writes())
    assert [hour for hour, _ in groups] == [0, 3, 6]
    assert len(groups[0][1]) == 3 and len(groups[2][1]) == 3 + 38
