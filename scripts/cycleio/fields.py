"""Seeded synthetic fields: smooth large-scale structure plus small noise.

Smooth fields compress like real ones; the noise keeps them from compressing unrealistically well.
The same key gives the same numbers on every machine (numpy's PCG64 is portable).
"""

from __future__ import annotations

import numpy as np
import xxhash


def seed_for(*parts) -> int:
    return xxhash.xxh3_64_intdigest("/".join(str(p) for p in parts).encode())


# The noise is drawn per band of this many rows, each band from its own seed, so that any rows of
# a plane can be made without the others (an MPI rank makes only the rows it owns).
NOISE_BAND_ROWS = 16


def smooth_plane(key: int, ny: int, nx: int, mean: float, spread: float, noise: float, dtype) -> np.ndarray:
    """One 2-D plane: a few random low wavenumbers in x and y, plus Gaussian noise."""
    return smooth_rows(key, ny, nx, mean, spread, noise, dtype, 0, ny)


def smooth_rows(key: int, ny: int, nx: int, mean: float, spread: float, noise: float, dtype,
                start: int, stop: int) -> np.ndarray:
    """Rows [start, stop) of ``smooth_plane(key, ny, nx, ...)``, the same numbers, made alone."""
    rng = np.random.default_rng(key)
    x = np.linspace(0.0, 2.0 * np.pi, nx, endpoint=False, dtype=np.float32)
    y = np.linspace(-0.5 * np.pi, 0.5 * np.pi, ny, dtype=np.float32)[start:stop]
    rows = np.zeros((len(y), nx), dtype=np.float32)
    for wave_x, wave_y in ((1, 1), (2, 3), (4, 2), (7, 5)):
        ax, ay, px, py = rng.uniform(0.2, 1.0), rng.uniform(0.2, 1.0), *rng.uniform(0, 2 * np.pi, 2)
        rows += np.outer(ay * np.cos(wave_y * y + py), ax * np.sin(wave_x * x + px)) / wave_x
    rows *= np.float32(spread / 2.0)
    rows += np.float32(mean)
    if noise and stop > start:
        first, last = start // NOISE_BAND_ROWS, (stop - 1) // NOISE_BAND_ROWS
        bands = [np.random.default_rng([key, band]).standard_normal(
                     (min(NOISE_BAND_ROWS, ny - band * NOISE_BAND_ROWS), nx), dtype=np.float32)
                 for band in range(first, last + 1)]
        offset = first * NOISE_BAND_ROWS
        rows += np.concatenate(bands)[start - offset:stop - offset] * np.float32(noise * spread)
    return rows.astype(dtype, copy=False)


def level_profile(level: int, levels: int) -> float:
    """A gentle vertical dependence so levels differ."""
    return 1.0 - 0.5 * level / max(levels - 1, 1)
