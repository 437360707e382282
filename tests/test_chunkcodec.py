"""surrogates.chunkcodec: BitRound, shuffle and deflate done as HDF5 and netCDF-C do them, and undone."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from cycleio.surrogates.chunkcodec import DEFLATE_FILTER, SHUFFLE_FILTER, bitround, decode_chunk, encode_chunk


def test_bitround_keeps_the_bits_asked_for_and_rounds_half_away():
    data = np.array([1.0, 1.0 + 2**-23, 1.0 + 2**-11, 1.0 + 3 * 2**-12, -1.0 - 3 * 2**-12, 280.123], np.float32)
    rounded = bitround(data.copy(), 10)
    assert rounded.dtype == np.float32
    assert (rounded.view(np.uint32) & (2**13 - 1) == 0).all()  # the 13 mantissa bits below the 10 kept are zero
    assert rounded[1] == 1.0 and rounded[2] == 1.0 + 2**-10  # half a kept unit rounds away from zero
    assert rounded[3] == 1.0 + 2**-10 and rounded[4] == -(1.0 + 2**-10)
    assert abs(rounded[5] - 280.123) < 280.123 * 2**-10
    doubles = bitround(np.array([np.pi]), 20)
    assert doubles.dtype == np.float64 and abs(doubles[0] - np.pi) < np.pi * 2**-20 and doubles[0] != np.pi


def test_a_chunk_through_shuffle_and_deflate_decodes_to_itself():
    data = np.linspace(200, 300, 1000, dtype=np.float32)
    pipeline = [(SHUFFLE_FILTER, ()), (DEFLATE_FILTER, (1,))]
    encoded = encode_chunk(data, pipeline)
    shuffled = np.ascontiguousarray(np.frombuffer(data, np.uint8).reshape(-1, 4).T)
    assert encoded == zlib.compress(shuffled, 1)  # the shuffle groups byte 0 of every value, then byte 1, ...
    decoded = decode_chunk(encoded, pipeline, data.dtype.itemsize)
    assert np.array_equal(np.frombuffer(decoded, np.float32), data)
    assert encode_chunk(data, []) is data and decode_chunk(b"raw", [], 4) == b"raw"


def test_a_filter_cycleio_does_not_do_is_refused_by_its_code():
    with pytest.raises(ValueError, match="HDF5 filter 32015 is not one cycleio encodes"):
        encode_chunk(np.zeros(4, np.float32), [(32015, ())])
    with pytest.raises(ValueError, match="HDF5 filter 4 is not one cycleio decodes"):
        decode_chunk(b"", [(4, ())], 4)
