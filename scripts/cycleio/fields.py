"""Seeded synthetic fields: smooth large-scale structure plus small noise, made a block at a time.

Smooth fields compress like real ones; the noise keeps them from compressing unrealistically well.
The same key gives the same numbers on every machine (numpy's PCG64 is portable), whichever rows or
levels are asked for: an MPI rank makes only the rows it owns and gets the same numbers as a
single process making the whole plane.

Making the data must cost far less than writing it, or the study measures itself: a field's
smooth part is made once per block (four outer products over its rows), and each level adds its
own noise as a slice of a shared pool of Gaussian numbers, at a seeded offset. The pool grows in
segments that are each seeded on their own, so its numbers never depend on how far it has grown.
"""

from __future__ import annotations

import numpy as np
import xxhash


def seed_for(*parts) -> int:
    return xxhash.xxh3_64_intdigest("/".join(str(p) for p in parts).encode())


POOL_SEGMENT = 2**20  # values per pool segment, and the range of a plane's noise offset
_POOLS: dict[np.dtype, np.ndarray] = {}


def noise_pool(length: int, dtype) -> np.ndarray:
    """At least ``length`` standard-normal numbers; the first N are the same whatever ``length``."""
    dtype = np.dtype(dtype)
    pool = _POOLS.get(dtype, np.empty(0, dtype))
    if len(pool) < length:
        segments = [pool]
        for index in range(len(pool) // POOL_SEGMENT, -(-length // POOL_SEGMENT)):
            segment = np.random.default_rng([0x5EED, index]).standard_normal(POOL_SEGMENT, dtype=np.float64)
            segments.append(segment.astype(dtype))
        pool = _POOLS[dtype] = np.concatenate(segments)
    return pool


def smooth_rows(key: int, ny: int, nx: int, spread: float, start: int, stop: int, dtype=np.float32) -> np.ndarray:
    """Rows [start, stop) of a smooth plane: a few random low wavenumbers in x and y, zero mean."""
    rng = np.random.default_rng(key)
    x = np.linspace(0.0, 2.0 * np.pi, nx, endpoint=False)
    y = np.linspace(-0.5 * np.pi, 0.5 * np.pi, ny)[start:stop]
    rows = np.zeros((len(y), nx), dtype=dtype)
    for wave_x, wave_y in ((1, 1), (2, 3), (4, 2), (7, 5)):
        ax, ay, px, py = rng.uniform(0.2, 1.0), rng.uniform(0.2, 1.0), *rng.uniform(0, 2 * np.pi, 2)
        rows += np.outer(ay * np.cos(wave_y * y + py), ax * np.sin(wave_x * x + px) / wave_x).astype(dtype)
    rows *= np.dtype(dtype).type(spread / 2.0)
    return rows


def level_profile(level: int, levels: int) -> float:
    """A gentle vertical dependence so levels differ."""
    return 1.0 - 0.5 * level / max(levels - 1, 1)


def fill_block(out: np.ndarray, key: tuple, ny: int, nx: int, mean: float, spread: float, noise: float,
               levels: range | None, nlevels: int, rows: tuple[int, int]) -> np.ndarray:
    """Fill ``out`` with rows ``rows`` of the field ``key`` at ``levels`` (None: a 2-D field).

    ``out`` has shape (len(levels), stop - start, nx), or (stop - start, nx) for a 2-D field.
    Level ``l`` is ``mean * level_profile(l) + smooth + noise * spread * N(0, 1)``.
    """
    start, stop = rows
    dtype = out.dtype
    base = smooth_rows(seed_for(*key), ny, nx, spread, start, stop, dtype)
    pool = noise_pool(POOL_SEGMENT + ny * nx, dtype)
    amplitude = dtype.type(noise * spread)
    planes = [(out, None)] if levels is None else [(out[i], level) for i, level in enumerate(levels)]
    for plane, level in planes:
        offset = seed_for(*key, level) % POOL_SEGMENT if level is not None else seed_for(*key, "2d") % POOL_SEGMENT
        np.multiply(pool[offset + start * nx:offset + stop * nx].reshape(stop - start, nx), amplitude, out=plane)
        plane += base
        plane += dtype.type(mean if level is None else mean * level_profile(level, nlevels))
    return out


def plane(key: tuple, ny: int, nx: int, mean: float, spread: float, noise: float, dtype) -> np.ndarray:
    """One whole 2-D field."""
    return fill_block(np.empty((ny, nx), dtype), key, ny, nx, mean, spread, noise, None, 1, (0, ny))
