"""surrogates.fields: a field's numbers do not depend on how its rows and levels are split."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.parametrize("ny, splits", [(96, [0, 24, 48, 72, 96]), (37, [0, 5, 16, 17, 33, 37]), (8, [0, 3, 8])])
def test_any_rows_and_levels_of_a_field_are_the_same_numbers_made_alone(ny, splits):
    from cycleio.surrogates.fields import fill_block

    def block(key, levels, rows):
        out = np.empty((len(levels), rows[1] - rows[0], 50), np.float32)
        return fill_block(out, key, ny, 50, 280.0, 20.0, 0.05, levels, 6, rows)

    full = block((1234,), range(6), (0, ny))
    parts = [block((1234,), range(6), (a, b)) for a, b in zip(splits, splits[1:])]
    assert np.array_equal(np.concatenate(parts, axis=1), full)  # bit for bit: MPI ranks make only their rows
    assert np.array_equal(np.concatenate([block((1234,), range(0, 2), (0, ny)), block((1234,), range(2, 6), (0, ny))]),
                          full)  # and any blocks of levels
    assert not np.array_equal(full, block((1235,), range(6), (0, ny)))
    assert not np.array_equal(full[0], full[1])  # levels differ
    assert abs(float(full.mean()) - 280.0 * 0.8) < 20 and 0.5 < float(full[0].std()) < 20
