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

import functools

import numpy as np
import xxhash


def seed_for(*parts) -> int:
    return xxhash.xxh3_64_intdigest("/".join(str(p) for p in parts).encode())


POOL_SEGMENT = 2**20  # values per pool segment, and the range of a field's first noise offset
LEVEL_STRIDE = (4096, 8192)  # range of a field's offset step from one level to the next
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


def _uniforms(key: int, count: int) -> np.ndarray:
    """``count`` numbers in [0, 1) from a key (16 bits each): cheaper than seeding a generator."""
    raw = b"".join(xxhash.xxh3_128_digest(f"{key}/{i}".encode()) for i in range(-(-count // 8)))
    return np.frombuffer(raw, np.uint16)[:count] / 65536.0


WAVES = np.array([(1, 1), (2, 3), (4, 2), (7, 5)], dtype=np.float64)  # (x, y) wavenumbers of the smooth part


@functools.lru_cache(maxsize=64)
def _axes(ny: int, nx: int) -> tuple[np.ndarray, np.ndarray]:
    return np.linspace(0.0, 2.0 * np.pi, nx, endpoint=False), np.linspace(-0.5 * np.pi, 0.5 * np.pi, ny)


def smooth_rows(key: int, ny: int, nx: int, spread: float, start: int, stop: int, dtype=np.float32) -> np.ndarray:
    """Rows [start, stop) of a smooth plane: a few random low wavenumbers in x and y, zero mean."""
    ax, ay, px, py = _uniforms(key, 16).reshape(4, 4).T
    x, y = _axes(ny, nx)
    columns = ((0.2 + 0.8 * ay)[:, None] * np.cos(WAVES[:, 1, None] * y[None, start:stop] + 2 * np.pi * py[:, None]))
    rows_ = ((0.2 + 0.8 * ax)[:, None] * np.sin(WAVES[:, 0, None] * x[None, :] + 2 * np.pi * px[:, None])
             / WAVES[:, 0, None])
    columns, rows_ = columns.astype(dtype), rows_.astype(dtype)
    out = np.multiply.outer(columns[0], rows_[0])
    for k in range(1, 4):
        out += np.multiply.outer(columns[k], rows_[k])
    out *= np.dtype(dtype).type(spread / 2.0)
    return out


def level_profile(level, levels: int):
    """A gentle vertical dependence so levels differ."""
    return 1.0 - 0.5 * level / max(levels - 1, 1)


def fill_block(out: np.ndarray, key: tuple, ny: int, nx: int, mean: float, spread: float, noise: float,
               levels: range | None, nlevels: int, rows: tuple[int, int]) -> np.ndarray:
    """Fill ``out`` with rows ``rows`` of the field ``key`` at ``levels`` (None: a 2-D field).

    ``out`` has shape (len(levels), stop - start, nx), or (stop - start, nx) for a 2-D field.
    Level ``l`` is ``mean * level_profile(l) + smooth + noise * spread * N(0, 1)``, its noise the
    pool's numbers from ``first + l * step`` on (a field's own first offset and step): any rows and
    levels are made with a few whole-block operations, the same numbers whatever the split.
    """
    start, stop = rows
    dtype = out.dtype
    amplitude = dtype.type(noise * spread)
    seed = seed_for(*key)
    first, step = (int(v) for v in _uniforms(seed ^ 0x9E3779B9, 2) * (POOL_SEGMENT, LEVEL_STRIDE[1] - LEVEL_STRIDE[0]))
    step += LEVEL_STRIDE[0]
    pool = noise_pool(POOL_SEGMENT + nlevels * LEVEL_STRIDE[1] + ny * nx, dtype)
    base = smooth_rows(seed, ny, nx, spread, start, stop, dtype)
    band = (stop - start) * nx
    if levels is None:
        draws = pool[first + start * nx:first + start * nx + band].reshape(stop - start, nx)
        means = dtype.type(mean)
    else:
        origin = first + levels.start * step + start * nx
        draws = np.lib.stride_tricks.as_strided(pool[origin:], (len(levels), band), (step * dtype.itemsize,
                                                                                      dtype.itemsize))
        draws = draws.reshape(out.shape)
        means = (mean * level_profile(np.arange(levels.start, levels.stop), nlevels)).astype(dtype)[:, None, None]
    np.multiply(draws, amplitude, out=out)
    out += base
    out += means
    return out


def plane(key: tuple, ny: int, nx: int, mean: float, spread: float, noise: float, dtype) -> np.ndarray:
    """One whole 2-D field."""
    return fill_block(np.empty((ny, nx), dtype), key, ny, nx, mean, spread, noise, None, 1, (0, ny))
