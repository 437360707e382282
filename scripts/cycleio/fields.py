"""Seeded synthetic fields: smooth large-scale structure plus small noise.

Smooth fields compress like real ones; the noise keeps them from compressing unrealistically well.
The same key gives the same numbers on every machine (numpy's PCG64 is portable).
"""

from __future__ import annotations

import numpy as np
import xxhash


def seed_for(*parts) -> int:
    return xxhash.xxh3_64_intdigest("/".join(str(p) for p in parts).encode())


def smooth_plane(key: int, ny: int, nx: int, mean: float, spread: float, noise: float, dtype) -> np.ndarray:
    """One 2-D plane: a few random low wavenumbers in x and y, plus Gaussian noise."""
    rng = np.random.default_rng(key)
    x = np.linspace(0.0, 2.0 * np.pi, nx, endpoint=False, dtype=np.float32)
    y = np.linspace(-0.5 * np.pi, 0.5 * np.pi, ny, dtype=np.float32)
    plane = np.zeros((ny, nx), dtype=np.float32)
    for wave_x, wave_y in ((1, 1), (2, 3), (4, 2), (7, 5)):
        ax, ay, px, py = rng.uniform(0.2, 1.0), rng.uniform(0.2, 1.0), *rng.uniform(0, 2 * np.pi, 2)
        plane += np.outer(ay * np.cos(wave_y * y + py), ax * np.sin(wave_x * x + px)) / wave_x
    plane *= np.float32(spread / 2.0)
    plane += np.float32(mean)
    if noise:
        plane += rng.standard_normal((ny, nx), dtype=np.float32) * np.float32(noise * spread)
    return plane.astype(dtype, copy=False)


def level_profile(level: int, levels: int) -> float:
    """A gentle vertical dependence so levels differ."""
    return 1.0 - 0.5 * level / max(levels - 1, 1)
