"""The chunk codec: HDF5's filters (BitRound, shuffle, deflate) done here, for direct chunk writes and reads."""

from __future__ import annotations

import zlib

import numpy as np


def bitround(data: np.ndarray, bits: int) -> np.ndarray:
    """netCDF-C's BitRound: keep ``bits`` significant mantissa bits, rounding half away (bit for bit)."""
    if data.dtype == np.float32:
        uint, width, mantissa = np.uint32, 32, 23
    else:
        uint, width, mantissa = np.uint64, 64, 52
    full = (1 << width) - 1
    keep = uint((full << (mantissa - bits)) & full)
    half = uint((~int(keep) & full) & (int(keep) >> 1))
    raw = data.view(uint) + half
    raw &= keep
    return raw.view(data.dtype)


SHUFFLE_FILTER, DEFLATE_FILTER = 2, 1


def encode_chunk(data: np.ndarray, pipeline: list[tuple[int, tuple]]) -> bytes | np.ndarray:
    """A chunk through the dataset's filters (shuffle, deflate), as HDF5 would, for a direct write."""
    out = data
    for code, values in pipeline:
        if code == SHUFFLE_FILTER:
            out = np.ascontiguousarray(np.frombuffer(out, np.uint8).reshape(-1, data.dtype.itemsize).T)
        elif code == DEFLATE_FILTER:
            out = zlib.compress(out, values[0] if values else 6)
        else:
            raise ValueError(f"HDF5 filter {code} is not one cycleio encodes")
    return out


def decode_chunk(raw, pipeline: list[tuple[int, tuple]], itemsize: int):
    out = raw
    for code, _ in reversed(pipeline):
        if code == DEFLATE_FILTER:
            out = zlib.decompress(out)
        elif code == SHUFFLE_FILTER:
            out = np.ascontiguousarray(np.frombuffer(out, np.uint8).reshape(itemsize, -1).T)
        else:
            raise ValueError(f"HDF5 filter {code} is not one cycleio decodes")
    return out
